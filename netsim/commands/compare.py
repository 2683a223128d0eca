"""``netsim compare DIR [--csv FILE]``: each policy per scenario point, with 95 % intervals.

Prints, per point, each policy's mean energy (J), time (s) and final loss with Student-t 95 %
intervals, its success rate (target reached) with a Wilson 95 % interval, and the ratio of its
mean energy and time to the best policy's and to the optimum's (policies named ``*-optimum``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from netsim.outputs import file_problems
from netsim.scenario.errors import ScenarioError


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim compare``."""
    p = sub.add_parser("compare", help="compare policies per scenario point (95%% intervals)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="DIR", help="results folder (netsim sweep/run --out)")
    p.add_argument("--csv", default=None, metavar="FILE", help="also write the full table as CSV")
    p.set_defaults(func=compare_command)


def compare_command(args: argparse.Namespace) -> int:
    """Print the comparison; exit code 2 if DIR holds no results."""
    from netsim.sweep.compare import compare_table, format_compare
    from netsim.sweep.results import load_results

    problems = file_problems(args.csv, "--csv") if args.csv else []
    if problems:
        raise ScenarioError(problems, "command line")
    results = load_results(args.results)
    table = compare_table(results.runs)
    print(format_compare(table), end="")
    if args.csv:
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    return 0
