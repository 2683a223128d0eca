"""One self-contained HTML page for a results folder: run counts, failures, comparison tables
and every figure (embedded as base64 PNG; no external file, script or style sheet)."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from netsim.sweep.compare import GROUP, compare_table, display_table, point_heading, point_note
from netsim.sweep.results import Results

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; } h3 { font-size: 1em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
figure { display: inline-block; margin: 0.5em; vertical-align: top; }
figcaption { font-size: 0.8em; color: #555; text-align: center; }
img { max-width: 34em; } .fail { color: #a00; } pre { white-space: pre-wrap; font-size: 0.8em; }
"""


def png_base64(fig, dpi: int = 150) -> str:
    """A Matplotlib figure as a base64 PNG (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    from netsim.figures import extra_artists

    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight",
                bbox_extra_artists=extra_artists(fig))
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _status_table(runs: pd.DataFrame) -> str:
    counts = runs.groupby(["sweep", "status"]).size().unstack(fill_value=0)
    counts.index = [s or "(outside sweeps)" for s in counts.index]
    counts["total"] = counts.sum(axis=1)
    return counts.to_html(border=0)


def _failures(runs: pd.DataFrame) -> str:
    failed = runs[runs["status"] == "failed"]
    if failed.empty:
        return "<p>No run failed.</p>"
    items = []
    for r in failed.itertuples():
        first = (str(r.error).strip().splitlines() or ["(no message)"])[0]
        items.append(f"<li><code>{html.escape(r.run_id)}</code> {html.escape(r.point_label)} / "
                     f"{html.escape(r.policy_label)} / seed {r.seed}: "
                     f"<span class='fail'>{html.escape(first)}</span></li>")
    return f"<p>{len(failed)} failed run(s):</p><ul>{''.join(items)}</ul>"


def _comparison(results: Results) -> str:
    table = compare_table(results.runs)
    parts = [f"<p class='fail'>warning: {html.escape(c)}</p>" for c in results.name_clashes()]
    for (sweep, point, label), part in table.groupby(GROUP, sort=True):
        heading = point_heading(str(sweep), int(point), str(label), int(np.max(part["seeds"])))
        parts.append(f"<h3>{html.escape(heading)}</h3>")
        parts.append(display_table(part).to_html(index=False, border=0))
        parts.append(f"<p>{html.escape(point_note(part))}</p>")
    return "\n".join(parts)


def render_report(results: Results, figures: Iterable[tuple[str, object]],
                  title: str = "netsim results", notes: Iterable[str] = ()) -> str:
    """The HTML page: status counts, failures, comparison per point, then the figures.

    Parameters
    ----------
    results: the folder's results (:func:`netsim.sweep.results.load_results`).
    figures: (name, Matplotlib figure) pairs, embedded in order (each figure is closed).
    title: the page title.
    notes: lines listed under the figures (e.g. figures skipped and why).
    """
    runs = results.runs
    figs = [f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,"
            f"{png_base64(fig)}'><figcaption>{html.escape(name)}</figcaption></figure>"
            for name, fig in figures]
    note_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{len(runs)} runs, {runs['point_label'].nunique()} scenario point(s), "
        f"{runs['policy_label'].nunique()} polic{'y' if runs['policy_label'].nunique() == 1 else 'ies'}"
        f"; generated {stamp}. Means over seeds with Student-t 95% intervals; success rates with "
        "Wilson 95% intervals; failed runs are left out of the means and count as misses; runs "
        "are grouped by the scenario's content hash.</p>",
        "<h2>Runs by status</h2>", _status_table(runs),
        "<h2>Failures</h2>", _failures(runs),
        "<h2>Comparison per scenario point</h2>", _comparison(results),
        "<h2>Figures</h2>", "\n".join(figs) or "<p>No figure.</p>",
        f"<ul>{note_html}</ul>" if note_html else "",
        "</body></html>",
    ])
