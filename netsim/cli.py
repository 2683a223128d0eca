"""The ``netsim`` command line. Each command lives in a module exposing ``register(subparsers)``;
the parser it adds sets ``func`` (args -> exit code). netsim's own are in netsim/commands/;
packages add theirs under the entry-point group ``netsim.commands`` (the ``place`` command of
policies/baechi is one).

Exit codes: 0 success; 2 invalid input (the message names the field path and what is allowed,
no traceback); 1 any other failure.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence
from typing import NoReturn

from netsim.plugins import COMMANDS, group
from netsim.scenario.errors import ScenarioError
from netsim.scenario.loading import ScenarioWarning

COMMAND_MODULES = [
    "netsim.commands.run",
    "netsim.commands.info",
    "netsim.commands.calibrate",
    "netsim.commands.sweep",
    "netsim.commands.compare",
    "netsim.commands.figures",
    "netsim.commands.report",
    "netsim.commands.schema",
]


DESCRIPTION = ("netsim: a discrete-event simulator of machine-learning training on "
               "heterogeneous edge networks.")
EPILOG = """\
Start with `netsim run` (the built-in default scenario), `netsim scenarios show default` (a
scenario to copy), `netsim schema` (every scenario field with its unit and range) and
`netsim policies NAME` (a policy's parameters). `netsim COMMAND --help` describes a command.
Exit codes: 0 success, 2 invalid input (the field and what is allowed), 1 any other failure.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's own usage errors: exit 2 too
        self.print_usage(sys.stderr)
        print(f"netsim: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, every command registered."""
    from netsim import __version__

    parser = _Parser(prog="netsim", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"netsim {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of failures")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for ep in group(COMMANDS).values():
        ep.load().register(sub)
    for action in sub._choices_actions:  # a command without its own description shows its help
        command = sub.choices[action.dest]
        if not command.description and action.help:
            command.description = action.help[0].upper() + action.help[1:].rstrip(".") + "."
        assert command.description is not None  # every command has a description or a help line
        command.description = command.description.replace("``", "`")  # docstrings' reST quotes
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (also used as the process's)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # the commands print scenario warnings themselves (netsim: warning: PATH: ...)
    warnings.filterwarnings("ignore", category=ScenarioWarning)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ScenarioError as exc:
        print(f"netsim: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("netsim: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        print(f"netsim: error: {type(exc).__name__}: {exc} (run with --debug for details)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
