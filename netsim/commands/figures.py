"""``netsim figures --results DIR --out FIGDIR [--only NAME ...] [--log | --linear]``;
``netsim figures`` alone lists the registered figures (netsim's and any installed package's)
with what each shows.

Redraws every figure registered under the entry-point group ``netsim.figures`` from the stored
results in DIR (nothing is simulated) as PNG and PDF in FIGDIR, replacing only figures netsim
wrote there (a file of yours at a figure's name stops it, exit code 2, before anything is
drawn). Energy, time and loss axes are logarithmic where the values drawn span more than a
decade (--log or --linear: every such axis). Figures whose runs are absent
are skipped, listed on one line per reason; a figure whose plot function fails is reported and
the exit code is 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from netsim.outputs import dir_problems
from netsim.scenario.errors import ScenarioError

if TYPE_CHECKING:
    from netsim.figures import Drawn


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim figures``."""
    p = sub.add_parser("figures", help="redraw the registered paper figures from stored results",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", metavar="DIR", help="results folder (without it: list the figures)")
    p.add_argument("--out", metavar="FIGDIR", help="folder for PNG and PDF files (with --results)")
    p.add_argument("--only", action="append", metavar="NAME", help="draw only this figure "
                   "(repeatable; `netsim figures` lists the names)")
    add_scale_options(p)
    p.set_defaults(func=figures_command)


def add_scale_options(p: argparse.ArgumentParser) -> None:
    """``--log`` / ``--linear``: every value axis (energy, time, loss) logarithmic or linear;
    without either, logarithmic where the values drawn span more than a decade (``auto``,
    :data:`netsim.figures.SCALES`). Sets ``args.value_axes``."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--log", dest="value_axes", action="store_const", const="log",
                       help="energy, time and loss axes logarithmic (default: where the values "
                            "drawn span more than a decade)")
    group.add_argument("--linear", dest="value_axes", action="store_const", const="linear",
                       help="energy, time and loss axes linear")
    p.set_defaults(value_axes="auto")


def skipped_lines(drawn: Iterable[Drawn]) -> list[str]:
    """One line per reason for the figures skipped (not failed), naming them:
    ``skipped 10 figure(s) (no runs match its selector): a, b, ...``."""
    by_reason: dict[str, list[str]] = {}
    for d in drawn:
        if d.figure is None and not d.error:
            by_reason.setdefault(d.note, []).append(d.name)
    return [f"skipped {len(names)} figure(s) ({reason}): {', '.join(names)}"
            for reason, names in by_reason.items()]


def figures_command(args: argparse.Namespace) -> int:
    """Draw and save the figures; exit code 2 for a missing folder or unknown name."""
    from netsim.figures import draw, registered_figures, replace_figure_problems, save
    from netsim.sweep.results import load_results

    entries = registered_figures()
    if args.results is None:
        width = max(len(n) for n in entries)
        for name, entry in entries.items():
            print(f"{name:<{width}}  {entry.description}")
        return 0
    if args.out is None:
        print("netsim: figures: --out FIGDIR is required with --results", file=sys.stderr)
        return 2
    known = list(entries)
    unknown = [n for n in args.only or [] if n not in known]
    if unknown:
        print(f"netsim: --only: unknown figure(s) {', '.join(unknown)} (registered: "
              f"{', '.join(known)})", file=sys.stderr)
        return 2
    # (a user's own file at a figure's name is never replaced: refused before anything runs)
    problems = dir_problems(args.out) or replace_figure_problems(args.out, args.only or known)
    if problems:
        raise ScenarioError(problems, "command line")
    results = load_results(args.results)
    out, failed, written, skipped = Path(args.out), 0, 0, []
    for drawn in draw(results, only=args.only, value_axes=args.value_axes):
        if drawn.figure is None:
            failed += drawn.error
            if drawn.error:
                print(f"FAILED {drawn.name}: {drawn.note}")
            else:
                skipped.append(drawn)  # listed together below, one line per reason
            continue
        paths = save(drawn.figure, out / drawn.name)
        written += 1
        print(f"wrote {', '.join(str(p) for p in paths)}")
    for line in skipped_lines(skipped):
        print(line)
    print(f"{written} figure(s) in {out}" + (f"; {failed} failed" if failed else ""))
    return 1 if failed else 0
