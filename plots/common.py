"""Helpers shared by figure functions: axis labels with units, means with 95 % bands.

Figure functions read result tables (never simulate), style through :mod:`plots.style`, and
label every axis with its unit, which :func:`axis_label` derives from the column name's unit
suffix (``energy_j`` -> ``energy (J)``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from netsim.sweep.stats import bootstrap_means

UNIT_SUFFIXES = {  # longest first: "_per_s" before "_s"
    "_j_per_bit": "J/bit", "_flop_per_s": "FLOP/s", "_bytes": "bytes", "_bps": "bit/s",
    "_flop": "FLOP", "_j": "J", "_w": "W", "_s": "s",
}
NAMED = {"final_loss": "final loss (nats)", "loss": "loss (nats)",
         "success": "success rate", "n_devices": "devices"}


def axis_label(column: str) -> str:
    """A readable axis label with the unit from the column's suffix.

    Examples
    --------
    >>> axis_label("energy_j"), axis_label("generate.n_devices"), axis_label("links[0].bandwidth_bps")
    ('energy (J)', 'devices', 'bandwidth (bit/s)')
    """
    leaf = column.replace("[", ".").split(".")[-1].rstrip("]") if column else column
    if leaf in NAMED:
        return NAMED[leaf]
    for suffix in sorted(UNIT_SUFFIXES, key=len, reverse=True):
        if leaf.endswith(suffix):
            return f"{leaf[: -len(suffix)].replace('_', ' ')} ({UNIT_SUFFIXES[suffix]})"
    return leaf.replace("_", " ")


def band(values: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column-wise mean and 95 % interval of a (runs x points) array, NaNs ignored: the
    percentile bootstrap of the mean where no value is negative (energy, time, loss: the band
    never crosses zero, :func:`netsim.sweep.stats.bootstrap_means`), else Student-t.

    A column with one value has a zero-width band; with none, NaN.
    """
    ys = np.atleast_2d(np.asarray(values, dtype=float))
    if not (ys < 0).any():
        return bootstrap_means(ys, level)
    n = np.sum(~np.isnan(ys), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, np.nansum(ys, axis=0) / np.maximum(n, 1), np.nan)
        sq = np.nansum((ys - mean) ** 2, axis=0)
        sd = np.sqrt(np.where(n > 1, sq / np.maximum(n - 1, 1), 0.0))
        half = stats.t.ppf(0.5 + level / 2, np.maximum(n - 1, 1)) * sd / np.sqrt(np.maximum(n, 1))
    return mean, mean - half, mean + half


def mean_band_by(runs: pd.DataFrame, x: str, y: str, series: str = "policy_label") -> pd.DataFrame:
    """Mean of ``y`` and its 95 % interval over seeds for each (series, x); failed runs dropped.

    Returns columns: series, x, mean, lo, hi, n (sorted by series then x).
    """
    ok = runs[runs["status"] != "failed"] if "status" in runs else runs
    rows = []
    for (name, xv), grp in ok.groupby([series, x], sort=True):
        mean, lo, hi = band(grp[y].to_numpy()[:, None])
        rows.append({series: name, x: xv, "mean": mean[0], "lo": lo[0], "hi": hi[0],
                     "n": len(grp)})
    return pd.DataFrame(rows, columns=[series, x, "mean", "lo", "hi", "n"])


def curves_on_grid(curves: list[tuple[np.ndarray, np.ndarray]], points: int = 200,
                   hold: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Curves (t, y) resampled on a common time grid (0 .. the longest end).

    ``hold``: each curve keeps its final value after it ends (a run that has stopped spends no
    more energy and its model keeps its last loss), so the mean over runs never drops because a
    run ended; else NaN past a curve's end. Returns (grid, runs x points array).
    """
    end = max((float(t[-1]) for t, _ in curves if len(t)), default=1.0) or 1.0
    grid = np.linspace(0.0, end, points)
    ys = np.array([np.interp(grid, t, y, right=y[-1] if hold else np.nan) for t, y in curves])
    return grid, ys


def still_running(curves: list[tuple[np.ndarray, np.ndarray]], grid: np.ndarray) -> np.ndarray:
    """How many of the curves (runs) have not ended yet at each grid time (s)."""
    ends = np.array([float(t[-1]) if len(t) else 0.0 for t, _ in curves])
    return (ends[:, None] >= grid[None, :]).sum(axis=0)


def numeric_axes(runs: pd.DataFrame, axes: tuple[str, ...]) -> list[str]:
    """Sweep axes whose values are all numbers and that take at least two values."""
    out = []
    for axis in axes:
        values = runs[axis].dropna()
        if len(values) and values.map(lambda v: isinstance(v, int | float)
                                      and not isinstance(v, bool)).all() \
                and values.nunique() >= 2:
            out.append(axis)
    return out
