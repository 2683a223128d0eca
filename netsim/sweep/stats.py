"""Confidence intervals for sweep summaries: Student-t for means, Wilson for rates (95 %)."""

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
