"""Helpers shared by figure functions: axis labels with units, means with 95 % bands
(Student-t, the interval ``netsim compare`` prints).

Figure functions read result tables (never simulate), style through :mod:`plots.style`, and
label every axis with its unit, which :func:`axis_label` derives from the column name's unit
suffix (``energy_j`` -> ``energy (J)``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from netsim.sweep.stats import t_intervals

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
    Student-t interval ``netsim compare`` prints (:func:`netsim.sweep.stats.t_intervals`, the
    one interval of a mean in netsim), so a figure's error bar and the table's bracket over
    the same runs agree.

    As drawn: where no value of a column is negative (energy, time, loss: a quantity that
    cannot be), a low bound below 0 is clipped at 0; a column with one value has a
    zero-width band (no spread to estimate); with none, NaN.
    """
    ys = np.atleast_2d(np.asarray(values, dtype=float))
    mean, lo, hi = t_intervals(ys, level)
    lo, hi = np.where(np.isnan(lo), mean, lo), np.where(np.isnan(hi), mean, hi)
    with np.errstate(invalid="ignore"):
        nonnegative = ~(ys < 0).any(axis=0)
    return mean, np.where(nonnegative, np.maximum(lo, 0.0), lo), hi


def interval(values: np.ndarray | pd.Series, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of one set of values as :func:`band` draws it (Student-t, a
    non-negative quantity's low bound clipped at 0; one value: zero width)."""
    mean, lo, hi = band(np.asarray(values, dtype=float).reshape(-1, 1), level)
    return float(mean[0]), float(lo[0]), float(hi[0])


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


TIME_UNITS = (("s", 1.0), ("min", 60.0), ("h", 3600.0), ("days", 86400.0))
"""The units a time axis reads in, by its span (:func:`time_unit`)."""


def time_unit(span_s: float) -> tuple[str, float]:
    """The unit a time axis spanning ``span_s`` seconds reads in and its length (s): seconds
    up to 10 min, minutes up to 3 h, hours up to 3 days, then days.

    Examples
    --------
    >>> time_unit(90.0), time_unit(1800.0), time_unit(250_000.0), time_unit(1e6)
    (('s', 1.0), ('min', 60.0), ('h', 3600.0), ('days', 86400.0))
    """
    span = float(span_s) if np.isfinite(span_s) else 0.0
    for (name, length), limit in zip(TIME_UNITS, (600.0, 3 * 3600.0, 3 * 86400.0, np.inf),
                                     strict=True):
        if span <= limit:
            return name, length
    return TIME_UNITS[-1]


def time_label(what: str, unit: str) -> str:
    """An axis label of a time in ``unit``: ``simulated time (min)``."""
    return f"{what} ({unit})"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 cell``, ``3 cells`` (``many``: the plural where it is not ``noun + "s"``)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"
