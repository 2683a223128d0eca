"""Confidence intervals for sweep summaries and figures: Student-t for means, Wilson for rates
(95 %). :func:`t_intervals` is the one interval of a mean in netsim: ``netsim compare`` prints
it (:func:`t_interval`, one column) and every figure draws it (``plots.common.band``), so a
figure's error bar and the table's bracket over the same runs are the same numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Z95 = 1.959963984540054


def t_intervals(values: np.ndarray, level: float = 0.95
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column-wise (mean, low, high) of the mean of a (runs x columns) array, Student-t
    interval, NaNs ignored per column.

    A column with one value has NaN bounds (no spread to estimate); with none, NaN
    throughout. A quantity that cannot be negative may get a negative low bound with few
    runs (two seeds 1 J and 100 J: about [-578, 679] J); figures clip it at 0 when drawing.
    """
    ys = np.asarray(values, dtype=float)
    ys = ys.reshape(-1, 1) if ys.ndim < 2 else ys
    n = np.sum(~np.isnan(ys), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, np.nansum(ys, axis=0) / np.maximum(n, 1), np.nan)
        sq = np.nansum((ys - mean) ** 2, axis=0)
        sd = np.sqrt(sq / np.maximum(n - 1, 1))
    half = np.full(mean.shape, np.nan)
    many = n > 1
    if many.any():
        from scipy import stats  # (lazily: scipy.stats takes ~0.5 s to import)

        half[many] = stats.t.ppf(0.5 + level / 2, n[many] - 1) * sd[many] / np.sqrt(n[many])
    return mean, mean - half, mean + half


def t_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of the mean of ``values`` (NaNs dropped), Student-t interval: one
    column of :func:`t_intervals`.

    One value gives NaN bounds (no spread to estimate); no value gives NaN throughout.

    Examples
    --------
    >>> t_interval([1.0, 2.0, 3.0])  # doctest: +ELLIPSIS
    (2.0, -0.48..., 4.48...)
    """
    mean, lo, hi = t_intervals(np.asarray(values, dtype=float).reshape(-1, 1), level)
    return float(mean[0]), float(lo[0]), float(hi[0])


def wilson_interval(successes: int, trials: int, level: float = 0.95) -> tuple[float, float, float]:
    """(rate, low, high) of a success rate, Wilson score interval; NaN for zero trials.

    Examples
    --------
    >>> [round(v, 3) for v in wilson_interval(0, 10)]
    [0.0, 0.0, 0.278]
    """
    if trials <= 0:
        return math.nan, math.nan, math.nan
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be in 0..{trials} (got {successes})")
    if level == 0.95:
        z = Z95
    else:
        from scipy import stats

        z = float(stats.norm.ppf(0.5 + level / 2))
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return p, max(0.0, centre - half), min(1.0, centre + half)


def ratio_of_means(num: np.ndarray, den: np.ndarray, rng: np.random.Generator,
                   draws: int = 4000) -> tuple[float, float, float]:
    """(mean(num) / mean(den), low, high): the ratio of two policies' means (of any one unit:
    s over s, J over J) with its 95 % percentile-bootstrap interval, the runs of each side
    resampled independently (``draws`` resamples from ``rng``). NaN throughout where a side
    has no run."""
    if not len(num) or not len(den):
        return (math.nan, math.nan, math.nan)
    a = rng.choice(num, size=(draws, len(num))).mean(axis=1)
    b = rng.choice(den, size=(draws, len(den))).mean(axis=1)
    lo, hi = np.percentile(a / b, [2.5, 97.5])
    return float(num.mean() / den.mean()), float(lo), float(hi)
