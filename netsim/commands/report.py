"""``netsim report DIR [--out FILE]``: one self-contained HTML page of a results folder.

The page holds the run counts by status, the failures, the comparison table per scenario point
(``netsim compare``) and every registered figure (``netsim figures``), embedded as base64 PNG,
so the single file can be mailed or archived. Default FILE: DIR/report.html. An existing FILE is
replaced only if it is a page netsim report wrote (exit code 2 otherwise).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from netsim.outputs import head_text, replace_problems, write_atomic
from netsim.scenario.errors import ScenarioError

#: The mark in a report page's <head> that makes it netsim's own: ``--out`` replaces only such
#: a file (or a page written before the mark, :func:`is_report`), never a user's.
GENERATOR = "<meta name='generator' content='netsim report'>"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim report``."""
    p = sub.add_parser("report", help="write one self-contained HTML page of a results folder",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="DIR", help="results folder")
    p.add_argument("--out", default=None, metavar="FILE", help="HTML file (default DIR/report.html)")
    p.add_argument("--title", default=None, help="page title (default: netsim results: DIR)")
    from netsim.commands.figures import add_scale_options

    add_scale_options(p)
    p.set_defaults(func=report_command)


def is_report(path: Path) -> bool:
    """Whether the file at ``path`` is a page ``netsim report`` wrote (its :data:`GENERATOR`
    mark, or the start of a page written before the mark)."""
    head = head_text(path)
    return GENERATOR in head or (head.startswith("<!DOCTYPE html>")
                                 and "<h2>Runs by status</h2>" in head)


def report_command(args: argparse.Namespace) -> int:
    """Write the page (atomically); exit code 2 if DIR holds no results, 1 if a figure failed."""
    from netsim.commands.figures import skipped_lines
    from netsim.figures import draw
    from netsim.sweep.report import render_report
    from netsim.sweep.results import load_results

    out = Path(args.out) if args.out else Path(args.results) / "report.html"
    problems = replace_problems(out, is_report, "netsim report")
    if problems:
        raise ScenarioError(problems, "command line")
    results = load_results(args.results)
    drawn = list(draw(results, value_axes=args.value_axes))
    notes = [f"FAILED {d.name}: {d.note}" for d in drawn if d.error]
    notes += skipped_lines(drawn)  # one line per reason
    page = render_report(results, [(d.name, d.figure) for d in drawn if d.figure is not None],
                         title=args.title or f"netsim results: {args.results}", notes=notes)
    anchor = "<meta charset='utf-8'>" if "<meta charset='utf-8'>" in page else "<head>"
    page = page.replace(anchor, anchor + GENERATOR, 1)
    write_atomic(out, lambda tmp: Path(tmp).write_text(page, encoding="utf-8"), ".html.tmp")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, "
          f"{sum(d.figure is not None for d in drawn)} figures)")
    for note in notes:
        print(note)
    return 1 if any(d.error for d in drawn) else 0
