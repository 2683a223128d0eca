"""``netsim report DIR [--out FILE]``: one self-contained HTML page of a results folder.

The page holds the run counts by status, the failures, the comparison table per scenario point
(``netsim compare``) and every registered figure (``netsim figures``), embedded as base64 PNG,
so the single file can be mailed or archived. Default FILE: DIR/report.html.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from netsim.outputs import file_problems, write_atomic
from netsim.scenario.errors import ScenarioError


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim report``."""
    p = sub.add_parser("report", help="write one self-contained HTML page of a results folder",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="DIR", help="results folder")
    p.add_argument("--out", default=None, metavar="FILE", help="HTML file (default DIR/report.html)")
    p.add_argument("--title", default=None, help="page title (default: netsim results: DIR)")
    p.set_defaults(func=report_command)


def report_command(args: argparse.Namespace) -> int:
    """Write the page (atomically); exit code 2 if DIR holds no results, 1 if a figure failed."""
    from netsim.figures import draw
    from netsim.sweep.report import render_report
    from netsim.sweep.results import load_results

    out = Path(args.out) if args.out else Path(args.results) / "report.html"
    problems = file_problems(out)
    if problems:
        raise ScenarioError(problems, "command line")
    results = load_results(args.results)
    drawn = list(draw(results))
    notes = [f"{'FAILED' if d.error else 'skipped'} {d.name}: {d.note}"
             for d in drawn if d.figure is None]
    page = render_report(results, [(d.name, d.figure) for d in drawn if d.figure is not None],
                         title=args.title or f"netsim results: {args.results}", notes=notes)
    write_atomic(out, lambda tmp: Path(tmp).write_text(page, encoding="utf-8"), ".html.tmp")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, "
          f"{sum(d.figure is not None for d in drawn)} figures)")
    for note in notes:
        print(note)
    return 1 if any(d.error for d in drawn) else 0
