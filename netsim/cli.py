"""The ``netsim`` command line. Each command lives in a module exposing ``register(subparsers)``;
the parser it adds sets ``func`` (args -> exit code). netsim's own are in netsim/commands/;
packages add theirs under the entry-point group ``netsim.commands`` (the ``place`` command of
policies/baechi is one).

Exit codes: 0 success; 2 invalid input (the message names the field path and what is allowed,
no traceback); 1 any other failure; 141 (128 + SIGPIPE) when the reader of the output went
away (``netsim report DIR | head``), quietly.

A plug-in that fails to load (a missing module, an error on import) is skipped with
``netsim: warning: plug-in ...`` naming its entry point and the error
(:mod:`netsim.plugins`); ``netsim --debug`` raises it instead, with its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from netsim.plugins import COMMANDS, PluginWarning, debugging, load_group
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
`--debug` goes before the command: `netsim --debug run ...`.
"""

#: The hint that ends an unexpected failure's message (``--debug`` is the top-level parser's).
DEBUG_HINT = "run `netsim --debug COMMAND ...` for the traceback: --debug goes before the command"

#: The exit code when the output's reader went away (128 + SIGPIPE, as a shell reports it).
BROKEN_PIPE_EXIT = 141


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's own usage errors: exit 2 too
        self.print_usage(sys.stderr)
        if "unrecognized arguments" in message and "--debug" in message.split(":", 1)[-1].split():
            message += " (--debug goes before the command: netsim --debug COMMAND ...)"
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
    commands: dict[str, Any] = load_group(COMMANDS)  # (one that fails to load: skipped)
    for name, module in commands.items():
        try:
            module.register(sub)
        except Exception as exc:  # a third party's register(): named, never fatal
            if debugging():
                raise
            warnings.warn(f"plug-in command {name!r} (group {COMMANDS}) cannot register and "
                          f"is skipped: {type(exc).__name__}: {exc}", PluginWarning,
                          stacklevel=1)
    for action in sub._choices_actions:  # a command without its own description shows its help
        command = sub.choices[action.dest]
        if not command.description and action.help:
            command.description = action.help[0].upper() + action.help[1:].rstrip(".") + "."
        assert command.description is not None  # every command has a description or a help line
        command.description = command.description.replace("``", "`")  # docstrings' reST quotes
    return parser


#: The lines around the generated flag table of docs/cli.md (:func:`flags_markdown`).
FLAGS_BEGIN = "<!-- flags: generated from the parser (netsim.cli.flags_markdown); do not edit -->"
FLAGS_END = "<!-- end of flags -->"


def _commands(parser: argparse.ArgumentParser,
              prefix: str) -> list[tuple[str, argparse.ArgumentParser]]:
    """(``netsim run``, its parser) for the parser and every (sub)command under it."""
    out = [(prefix, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _commands(sub, f"{prefix} {name}")
    return out


def command_flags(parser: argparse.ArgumentParser | None = None) -> list[tuple[str, str, str]]:
    """(command, flag with its metavar, help) of every option of every command: what
    docs/cli.md's flag table lists (``--help`` and ``--version`` left out)."""
    parser = parser or build_parser()
    rows = []
    for command, sub in _commands(parser, "netsim"):
        for action in sub._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            flag = ", ".join(action.option_strings)
            if action.nargs != 0:
                metavar = action.metavar or action.dest.upper()
                flag += f" {metavar if isinstance(metavar, str) else ' '.join(metavar)}"
            text = " ".join((action.help or "").split())
            if "%(default)" in text:
                text = text % {"default": action.default}
            rows.append((command, flag, text))
    return rows


def flags_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """docs/cli.md's table of every flag, generated from the parser (between
    :data:`FLAGS_BEGIN` and :data:`FLAGS_END`; a test fails when the page is stale)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [FLAGS_BEGIN, "", "| command | flag | what it does |", "| --- | --- | --- |"]
    lines += [f"| `{c}` | `{cell(f)}` | {cell(h)} |" for c, f, h in command_flags(parser)]
    return "\n".join([*lines, "", FLAGS_END]) + "\n"


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: TextIO | None = None, line: str | None = None) -> None:
    """A plug-in's warning as ``netsim: warning: ...``; any other as Python shows it."""
    if issubclass(category, PluginWarning):
        print(f"netsim: warning: {message}", file=sys.stderr)
    else:
        _PYTHON_SHOW(message, category, filename, lineno, file, line)


_PYTHON_SHOW = warnings.showwarning


def _debug_flag(argv: Sequence[str]) -> bool:
    """Whether ``--debug`` comes before the command in ``argv`` (the top-level options)."""
    for item in argv:
        if not item.startswith("-"):
            return False
        if item == "--debug":
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (also used as the process's)."""
    given = list(sys.argv[1:] if argv is None else argv)
    debug = debugging()
    with warnings.catch_warnings():
        warnings.simplefilter("always", PluginWarning)  # (each broken plug-in, each time)
        warnings.showwarning = _show_warning
        debugging(_debug_flag(given))
        try:
            code = _main(given)
            sys.stdout.flush()  # (here, not at exit: a reader gone is a BrokenPipeError here)
            return code
        except BrokenPipeError:
            return _reader_gone()
        finally:
            debugging(debug)


def _main(argv: list[str]) -> int:
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
    except BrokenPipeError:
        raise  # (the reader went away: main's quiet exit)
    except Exception as exc:
        if args.debug:
            raise
        print(f"netsim: error: {type(exc).__name__}: {exc} ({DEBUG_HINT})", file=sys.stderr)
        return 1


def _reader_gone(stream: Any = None) -> int:
    """The exit after the output's reader went away (``| head``): stdout pointed at
    /dev/null so that Python's flush at exit raises no second BrokenPipeError, nothing
    printed (as ``cat FILE | head`` prints nothing); :data:`BROKEN_PIPE_EXIT`."""
    stream = sys.stdout if stream is None else stream
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # (a stream without a file: pytest's)
        pass
    return BROKEN_PIPE_EXIT


if __name__ == "__main__":
    if sys.argv[1:] == ["--flags-markdown"]:  # (docs/cli.md's table: python -m netsim.cli ...)
        print(flags_markdown(), end="")
        sys.exit(0)
    sys.exit(main())
