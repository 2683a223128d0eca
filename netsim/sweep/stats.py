"""Confidence intervals for sweep summaries: Student-t for means, Wilson for rates (95 %), and a
percentile bootstrap for the means of non-negative quantities in figures (energy, time, loss),
whose interval stays inside the values' range and so never crosses zero, however few seeds."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Z95 = 1.959963984540054


def t_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of the mean of ``values`` (NaNs dropped), Student-t interval.

    One value gives NaN bounds (no spread to estimate); no value gives NaN throughout.

    Examples
    --------
    >>> t_interval([1.0, 2.0, 3.0])  # doctest: +ELLIPSIS
    (2.0, -0.48..., 4.48...)
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size == 1:
        return mean, math.nan, math.nan
    from scipy import stats  # (lazily: scipy.stats takes ~0.5 s to import)

    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return mean, mean - half, mean + half


BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def bootstrap_means(values: np.ndarray, level: float = 0.95
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column-wise (mean, low, high) of a (runs x columns) array: percentile bootstrap of the
    mean (scipy.stats.bootstrap, 2,000 resamples, seeded: the same figure twice is the same).

    NaNs are ignored per column; a column with one value has a zero-width interval, with none
    NaN. The bounds are means of resamples, so they lie within the column's smallest and
    largest values: the interval of a positive quantity never crosses zero.
    """
    from scipy import stats

    ys = np.atleast_2d(np.asarray(values, dtype=float))
    n = np.sum(~np.isnan(ys), axis=0)
    with np.errstate(invalid="ignore"):
        mean = np.where(n > 0, np.nansum(ys, axis=0) / np.maximum(n, 1), np.nan)
    lo, hi = mean.copy(), mean.copy()
    full = (n == ys.shape[0]) & (n > 1)
    spread = full & (np.nanmax(ys, axis=0, initial=-np.inf) > np.nanmin(ys, axis=0,
                                                                         initial=np.inf))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    if spread.any():  # the columns without NaN at once, sharing the resamples
        res = stats.bootstrap((ys[:, spread],), np.mean, axis=0, vectorized=True,
                              n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=level,
                              method="percentile", random_state=rng)
        lo[spread], hi[spread] = res.confidence_interval
    for j in np.flatnonzero((n > 1) & ~full):  # columns with some NaN, one by one
        col = ys[~np.isnan(ys[:, j]), j]
        if col.max() > col.min():
            res = stats.bootstrap((col,), np.mean, vectorized=True,
                                  n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=level,
                                  method="percentile", random_state=rng)
            lo[j], hi[j] = res.confidence_interval
    return mean, lo, hi


def mean_interval(values: Sequence[float] | np.ndarray, level: float = 0.95
                  ) -> tuple[float, float, float]:
    """(mean, low, high) of the mean of ``values`` for a figure: the percentile bootstrap
    (:func:`bootstrap_means`) when every value is >= 0 (energy, time, loss: the interval never
    crosses zero), else the Student-t interval (:func:`t_interval`). One value gives NaN
    bounds, as :func:`t_interval`."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size < 2 or (x < 0).any():
        return t_interval(x, level)
    mean, lo, hi = bootstrap_means(x[:, None], level)
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
