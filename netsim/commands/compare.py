"""``netsim compare DIR [--baseline NAME] [--csv FILE] [--wide]``: each policy per scenario
point, within 100 columns (``--wide``: every column).

Runs are grouped by the scenario's content hash, never by its name alone: two different
scenarios that share a name are shown apart, with a warning. Per point and policy: the success
rate (target reached; failed runs count as misses) with its Wilson 95 % interval, and whether
it meets the required share (the scenario's training.target_probability pi, else the pi a
policy's parameters set, such as DepL's target_probability, else every run; the note under each
table says which); mean
energy (J) and time (s) with Student-t 95 % intervals over the runs that reached the target
and over all runs; the final loss; the ratio of the all-runs means to the best policy's, "best"
(marked *) being the cheapest among those that meet the requirement; and, with --baseline,
the mean paired difference to the baseline over the seeds both ran, with its 95 % interval.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from netsim.outputs import file_problems
from netsim.scenario.errors import Problem, ScenarioError


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim compare``."""
    p = sub.add_parser("compare", help="compare policies per scenario point: success, energy, "
                       "time (95%% intervals), paired differences to a baseline",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="DIR", help="results folder (netsim sweep/run --out)")
    p.add_argument("--baseline", default=None, metavar="NAME",
                   help="policy label to pair every other policy with, seed by seed")
    p.add_argument("--csv", default=None, metavar="FILE", help="also write the full table as CSV")
    p.add_argument("--wide", action="store_true",
                   help="every column (the runs that reached the target, final loss, time/best, "
                        "paired time, ratios to an optimum), lines as long as they come "
                        "(default: the main columns within 100 characters)")
    p.set_defaults(func=compare_command)


def compare_command(args: argparse.Namespace) -> int:
    """Print the comparison; exit code 2 if DIR holds no results."""
    from netsim.sweep.compare import compare_table, format_compare
    from netsim.sweep.results import load_results

    problems = file_problems(args.csv, "--csv") if args.csv else []
    if problems:
        raise ScenarioError(problems, "command line")
    results = load_results(args.results)
    try:
        table = compare_table(results.runs, baseline=args.baseline)
    except ValueError as exc:
        raise ScenarioError([Problem("--baseline", str(exc))], "command line") from None
    print(format_compare(table, results.name_clashes(), wide=args.wide), end="")
    if args.csv:
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    return 0
