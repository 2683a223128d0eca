"""What the experiment runners share: an interval as table text, and drawing a runner's
registered figures into a folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from netsim import figures as registry
from netsim.sweep.results import Results


def interval_text(mean: float, lo: float, hi: float, digits: int = 3) -> str:
    """``mean [lo, hi]`` to ``digits`` significant digits; the mean alone without an interval,
    ``-`` without a mean."""
    if pd.isna(mean):
        return "-"
    if pd.isna(lo) or pd.isna(hi):
        return f"{mean:.{digits}g}"
    return f"{mean:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


def draw_figures(results: Results, folder: Path, names: list[str]) -> list[Path]:
    """Draw the registered figures ``names`` from ``results`` into ``folder`` (PNG and PDF);
    the files written (a figure with nothing to draw is reported, not written)."""
    written = []
    for drawn in registry.draw(results, only=names):
        if drawn.figure is None:
            print(f"{drawn.name}: {drawn.note}")
            continue
        written += list(registry.save(drawn.figure, folder / drawn.name))
    return written
