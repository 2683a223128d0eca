"""What lets the exact search of DepL's plans prune: dominance slack and lower bounds.

:func:`dominance_slack`: per quadrature node, how much larger a future epoch's log failure can
be for a state with more effective samples than for one with fewer (0 where more samples never
hurt), so that the search's dominance stays exact. :func:`cost_to_go` and :func:`loss_bound`:
a lower bound on the energy (J) of completing a state to a plan that meets pi, from a shortest
path on a loss grid. Both are used by :func:`policies.depl.plan_search.search_plans` (the proofs
are in their docstrings); the arithmetic of a plan's success is
:mod:`policies.depl.plan_success`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr

from netsim.training.loss import LossPredictor
from policies.depl.plan_success import EpochOption


def dominance_slack(base: LossPredictor, x: np.ndarray, options: Sequence[EpochOption],
                    horizon: int, target_loss: float) -> np.ndarray | None:
    """Per quadrature node, how much larger a future epoch's log failure can be for a state
    with more effective samples than for one with fewer (same last variant); 0 where more
    samples never hurt. None where "more samples" cannot be compared (a variant's floor above
    the initial loss): :func:`search_plans` then compares only equal samples.

    Given the last variant, a state's future depends on its effective samples ``n`` only
    through the carry rule (:meth:`~netsim.training.loss.LossPredictor.carry`,
    ``min(equiv(loss_a(n)), n) * keep``: non-decreasing in ``n`` when every curve falls,
    floor <= initial loss), the mean curve (then non-increasing in ``n``) and, at each node
    ``x``, the epoch's log failure ``log Phi((g(m) - log L*) / s_epoch)`` with ``g(m) = log m
    + s(m) x``, ``s(m) = S_u (m / m0) ** -e`` the run spread (``e`` the noise level exponent).
    In ``t = log m``, ``g`` is convex (``g'' = e^2 S_u x e^(-e t) >= 0`` for ``x >= 0``;
    linear-increasing for ``x <= 0``), with its minimum at ``t* = log(e S_u x) / e`` (in units
    of ``m0``). Where ``t*`` lies at or below the lowest reachable mean (``n <= horizon`` times
    the largest gain: the carry never adds samples), ``g`` increases over the whole reachable
    range and a lower mean never fails more at that node: slack 0. Elsewhere (large positive
    nodes with a level-dependent spread), a lower mean can fail more, by at most the epoch's
    largest possible log failure, ``-log Phi((min g - log L*) / s_epoch)`` (the minimum of the
    convex ``g`` over the range, in closed form): the slack, per further epoch.
    """
    init = float(base.initial_loss)
    floors = np.asarray(base._floor, dtype=float)
    if np.any(floors > init):
        return None
    slack = np.zeros(len(x))
    e = float(base.noise_level_exponent)
    if e == 0 or base.sigma_run == 0:
        return slack
    n_max = horizon * max((float(np.max(o.gain[np.isfinite(o.cost_j)], initial=0.0))
                           for o in options), default=0.0)
    pos = x > 0
    for u in range(len(floors)):
        m_lo = float(base.mean_of(u, n_max))
        t_lo = math.log(m_lo / init)
        s_u = float(base.run_sigma_at(init, u))  # S_u: the spread at the initial loss
        if s_u <= 0:
            continue
        with np.errstate(divide="ignore"):
            t_star = np.where(pos, np.log(e * s_u * np.where(pos, x, 1.0)) / e, -np.inf)
        bends = pos & (t_star > t_lo)  # g falls somewhere in the reachable range
        if not bends.any():
            continue
        t_min = np.clip(t_star[bends], t_lo, 0.0)
        g_min = math.log(init) + t_min + s_u * x[bends] * np.exp(-e * t_min)
        if base.sigma_epoch > 0:
            worst = -log_ndtr((g_min - math.log(target_loss)) / base.sigma_epoch)
        else:
            worst = np.where(g_min <= math.log(target_loss), np.inf, 0.0)
        slack[bends] = np.maximum(slack[bends], worst)
    return slack


@dataclass(frozen=True)
class _CostToGo:
    """A lower bound on the cost of reaching ``pi`` from a state of one option (see
    :func:`cost_to_go`): the loss grid, the lowest per-node log failure of an epoch whose mean
    is at least each grid loss, and the cheapest cost from each grid loss to below each."""

    grid: np.ndarray        # G losses, ascending (geometric)
    fail_low: np.ndarray    # G x nodes
    cost: np.ndarray        # G x G: [a, b] from loss grid[a] to a mean below grid[b]
    cmin: float


def cost_to_go(base: LossPredictor, x: np.ndarray, option: EpochOption, horizon: int,
                target_loss: float, size: int = 400) -> _CostToGo | None:
    """The tables of the search's loss-space bound for one option (None: not applicable, when
    a variant's floor is above the initial loss or an epoch costs nothing).

    In loss space an epoch of ``u`` from a mean ``l`` ends at a mean of at least ``T_u(l) =
    m_u(equiv_u(l) + gain_u)`` (``floor_u`` if ``l <= floor_u``): the carry rule keeps at most
    the samples at which ``u``'s curve reaches ``l``. ``T_u`` is non-decreasing, so on a
    geometric grid, rounding down, ``cost[a, b]`` (the cheapest sequence of at most
    ``horizon`` epochs, at least one, from ``grid[a]`` to a mean below ``grid[b]``) is a lower
    bound. ``fail_low[g]``: the lowest per-node log failure of any epoch whose mean is at least
    ``grid[g]`` (the run spread at either end of the mean's range), non-decreasing in ``g``.
    """
    use = np.flatnonzero(np.isfinite(option.cost_j))
    floors = np.asarray(base._floor, dtype=float)
    init = float(base.initial_loss)
    if len(use) == 0 or np.any(floors[use] > init) or np.any(option.cost_j[use] <= 0):
        return None
    lo = max(float(floors[use].min()), 1e-9)
    grid = np.geomspace(lo, init, size)
    s_top = np.asarray(base.run_sigma_at(np.full(len(floors), init), np.arange(len(floors))),
                       dtype=float)
    fail_low = np.zeros((size, len(x)))
    nxt = np.empty((len(use), size), dtype=np.int64)
    for k, u in enumerate(use.tolist()):
        vu = np.full(size, u)
        s_lo = np.asarray(base.run_sigma_at(grid, vu), dtype=float)
        g = np.log(grid)[:, None] + np.minimum(s_lo[:, None] * x[None, :], s_top[u] * x[None, :])
        if base.sigma_epoch > 0:
            inc = log_ndtr((g - math.log(target_loss)) / base.sigma_epoch)
        else:
            inc = np.where(g <= math.log(target_loss), -np.inf, 0.0)
        fail_low = np.minimum(fail_low, inc)
        # T_u on the grid, rounded down to the grid (-1: below it)
        curve = base.curves[u]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (grid - floors[u]) / (init - floors[u])
            equiv = np.where(ratio <= 0, np.inf, curve.samples_half * (
                np.minimum(ratio, 1.0) ** (-1.0 / curve.exponent) - 1.0))
        after = np.where(np.isfinite(equiv),
                         np.asarray(base.mean_of(vu, np.where(np.isfinite(equiv), equiv, 0.0)
                                                 + float(option.gain[u])), dtype=float),
                         floors[u])
        nxt[k] = np.searchsorted(grid, after, side="right") - 1
    cost_u = option.cost_j[use].astype(float)
    b_idx = np.arange(size)[None, :]
    value = np.full((size, size), np.inf)
    for _ in range(horizon):
        new = np.full((size, size), np.inf)
        for k in range(len(use)):
            t = nxt[k]
            reached = t[:, None] < b_idx
            rest = value[np.maximum(t, 0)]
            new = np.minimum(new, cost_u[k] + np.where(reached, 0.0, rest))
        if np.array_equal(new, value):
            break
        value = new
    return _CostToGo(grid, fail_low, value, float(cost_u.min()))


def loss_bound(table: _CostToGo, w: np.ndarray, pi: float, mean: np.ndarray,
                log_fail: np.ndarray, left: np.ndarray) -> np.ndarray:
    """Lower bounds on the cost of completing states (their mean, log failure, epochs left)
    to a plan meeting ``pi`` (inf: none can).

    A completion of ``k <= left`` epochs whose lowest mean is ``mu`` ends with a log failure
    at least ``log_fail + left * fail_low(mu)`` at each node, so it meets ``pi`` only if ``mu``
    is below the first grid loss at which that bound fails (searched by bisection); reaching a
    mean below it from ``mean`` costs at least ``table.cost``."""
    grid, size = table.grid, len(table.grid)

    def meets(rows: np.ndarray, g: np.ndarray) -> np.ndarray:
        lf = log_fail[rows] + left[rows, None] * table.fail_low[g]
        return (1.0 - np.exp(lf) @ w) >= pi

    # the largest grid index whose loss still meets pi (-1: none), by bisection
    lo = np.full(len(mean), -1, dtype=np.int64)
    hi = np.full(len(mean), size, dtype=np.int64)
    while True:
        rows = np.flatnonzero(hi - lo > 1)
        if len(rows) == 0:
            break
        mid = (lo[rows] + hi[rows]) // 2
        ok = meets(rows, mid)
        lo[rows[ok]] = mid[ok]
        hi[rows[~ok]] = mid[~ok]
    out = np.full(len(mean), np.inf)
    start = np.searchsorted(grid, mean, side="right") - 1
    some = lo >= 0
    everywhere = some & (lo + 1 >= size)  # any mean meets the bound: one epoch at least
    out[everywhere | (some & (start < 0))] = table.cmin
    rest = some & ~everywhere & (start >= 0)
    out[rest] = table.cost[start[rest], lo[rest] + 1]
    return out
