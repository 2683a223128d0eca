"""``netsim figures --results DIR --out FIGDIR [--only NAME ...]``; ``netsim figures`` alone
lists the registered figures (netsim's and any installed package's) with what each shows.

Redraws every figure registered under the entry-point group ``netsim.figures`` from the stored results in DIR
(nothing is simulated) as PNG and PDF in FIGDIR. A figure whose runs are absent is skipped
with a note; a figure whose plot function fails is reported and the exit code is 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from netsim.outputs import dir_problems
from netsim.scenario.errors import ScenarioError


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim figures``."""
    p = sub.add_parser("figures", help="redraw the registered paper figures from stored results",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", metavar="DIR", help="results folder (without it: list the figures)")
    p.add_argument("--out", metavar="FIGDIR", help="folder for PNG and PDF files (with --results)")
    p.add_argument("--only", action="append", metavar="NAME", help="draw only this figure "
                   "(repeatable; `netsim figures` lists the names)")
    p.set_defaults(func=figures_command)


def figures_command(args: argparse.Namespace) -> int:
    """Draw and save the figures; exit code 2 for a missing folder or unknown name."""
    from netsim.figures import draw, registered_figures, save
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
    problems = dir_problems(args.out)
    if problems:
        raise ScenarioError(problems, "command line")
    results = load_results(args.results)
    out, failed, written = Path(args.out), 0, 0
    for drawn in draw(results, only=args.only):
        if drawn.figure is None:
            failed += drawn.error
            print(f"{'FAILED' if drawn.error else 'skipped'} {drawn.name}: {drawn.note}")
            continue
        paths = save(drawn.figure, out / drawn.name)
        written += 1
        print(f"wrote {', '.join(str(p) for p in paths)}")
    print(f"{written} figure(s) in {out}" + (f"; {failed} failed" if failed else ""))
    return 1 if failed else 0
