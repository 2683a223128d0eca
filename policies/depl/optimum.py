"""The exact reference for DepL's problem (registered as depl-optimum).

The decision space is DepL's (netsim's formalization): a data fraction phi from the same grid,
and a variant for each epoch (every sequence of every length up to the horizon), each epoch on
the same cluster DepL's placement gives for (phi, variant). A plan's success probability,
P(the run reaches L* at some epoch) (the event the simulator scores and DepL plans for), is
computed with the same predictor and its state-dependent spread, the same Gauss-Hermite
quadrature for every plan; the cheapest plan whose probability is >= pi wins.

:func:`search_plans` finds it by an exact best-first search over the states of sequences
(option, last variant, effective samples, per-node log failure so far, depth, cost) with
dominance and bound pruning (netsim's formulation, see its docstring); :func:`enumerate_plans`
(every sequence, layer by layer; ``variants ^ horizon`` of them) is kept for small instances
and the tests. When the search stops at its time or state limit it returns its best plan with
the proven lower bound: ``Plan.info`` carries ``status`` ("optimal", "time_limit",
"state_limit"), ``bound_j`` and ``gap``, which the policy records as ``plan_status``,
``plan_gap`` and ``plan_bound_j``; with no plan found it raises, so the run is recorded as
failed with the bound, never as a result.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal, cast

import numpy as np
from pydantic import Field
from scipy.special import log_ndtr, ndtri

from netsim.devices import DeviceTable, build_device_table
from netsim.policy import Decision, Observation, register
from netsim.scenario.schema import ModelSpec, Scenario, TrainingSpec
from netsim.training.loss import LossPredictor
from policies.depl.placement import Cluster
from policies.depl.planner import Plan, epoch_gains, epoch_options
from policies.depl.policy import DepL, DepLParams, target_probability
from policies.depl.predictor import (
    QUADRATURE_NODES,
    DistributionalPredictor,
    gauss_hermite,
    montecarlo_spread,
)


def enumerate_plans(pred: DistributionalPredictor, epoch_cost_j: Sequence[float],
                    epoch_gain: Sequence[float], horizon: int, max_sequences: int = 2_000_000,
                    target_loss: float | None = None):
    """Every variant sequence up to ``horizon`` epochs, layer by layer.

    Yields, for each length ``k`` = 1..horizon, ``(seqs, final_mean, cost_j, success)``: the
    sequences (array k x count of variant indices), their predicted mean final loss, energy
    (J) and, given ``target_loss``, the probability that a run following the sequence reaches
    it at some epoch (the event the simulator scores; the same formula as
    :func:`~policies.depl.predictor.first_passage_probability`, accumulated epoch by epoch over
    the quadrature nodes of the run's noise draw; NaN without a target). Variants with an
    infinite cost are left out. ``epoch_gain``: effective samples an epoch of each variant
    adds (the progress model's gain, :func:`policies.depl.planner.epoch_gains`).
    """
    usable = np.flatnonzero(np.isfinite(np.asarray(epoch_cost_j, dtype=float)))
    total = sum(len(usable) ** k for k in range(1, horizon + 1))
    if total > max_sequences:
        raise ValueError(f"instance too large for enumeration: {total} sequences "
                         f"(> max_sequences={max_sequences})")
    base = pred.base
    cost_m = np.asarray(epoch_cost_j, dtype=float)
    gain = np.asarray(epoch_gain, dtype=float)
    seqs = usable[None, :].copy()
    n = gain[usable].copy()
    cost = cost_m[usable]
    x, w = gauss_hermite(QUADRATURE_NODES)
    log_fail = np.zeros((len(n), len(x)))
    for k in range(1, horizon + 1):
        last = seqs[-1]
        means = np.asarray(base.mean_of(last, n))
        success = np.full(len(n), np.nan)
        if target_loss is not None:
            sigma = np.asarray(base.run_sigma_at(means, last))
            gap = (math.log(target_loss) - np.log(means))[:, None] - sigma[:, None] * x[None, :]
            if base.sigma_epoch > 0:
                log_fail = log_fail + log_ndtr(-gap / base.sigma_epoch)
            else:
                log_fail = np.where(gap >= 0, -np.inf, log_fail)
            success = 1.0 - np.exp(log_fail) @ w
        yield seqs, means, cost, success
        if k == horizon:
            break
        count = len(n)
        src = np.repeat(np.arange(count), len(usable))
        dst = np.tile(usable, count)
        log_fail = log_fail[src]
        n = base.carry(n[src], last[src], dst) + gain[dst]
        cost = cost[src] + cost_m[dst]
        seqs = np.vstack([seqs[:, src], dst[None, :]])


STATUS_OPTIMAL, STATUS_TIME, STATUS_STATES = "optimal", "time_limit", "state_limit"


@dataclass(frozen=True)
class EpochOption:
    """One data fraction's epoch choices: the energy (J; inf = no cluster) and the effective
    samples gained (:func:`~policies.depl.planner.epoch_gains`) of one epoch of each variant."""

    cost_j: np.ndarray
    gain: np.ndarray


@dataclass
class SearchResult:
    """What :func:`search_plans` found and proved.

    status: "optimal" (the search finished: ``cost_j`` is the minimum, or, with ``option``
        -1, no plan exists), "time_limit" or "state_limit" (stopped: ``cost_j`` is the best
        plan found, inf if none, and ``bound_j`` a proven lower bound on the minimum).
    option / variants / final_mean / success: the best plan (``option`` -1: none).
    best_success: the highest success probability among the sequences the search generated.
    found_j: the cheapest plan found per option (inf: none found; not a per-option optimum,
        since one incumbent prunes every option).
    dominance: "monotone" (n at least as large dominates), "monotone+slack" (with the slack
        of :func:`dominance_slack` at some nodes) or "equal-n" (the fallback where samples
        cannot be compared).
    expanded / stored: states expanded and stored; elapsed_s: wall time (s).
    """

    status: str
    cost_j: float = math.inf
    bound_j: float = 0.0
    option: int = -1
    variants: tuple[int, ...] = ()
    final_mean: float = math.nan
    success: float = math.nan
    best_success: float = 0.0
    found_j: list[float] = field(default_factory=list)
    dominance: str = "monotone"
    expanded: int = 0
    stored: int = 0
    elapsed_s: float = 0.0

    @property
    def gap(self) -> float:
        """(best plan - bound) / best plan: 0 when optimal; 1 with no plan at a limit."""
        if self.status == STATUS_OPTIMAL:
            return 0.0
        if not math.isfinite(self.cost_j):
            return 1.0
        return max(0.0, (self.cost_j - self.bound_j) / self.cost_j) if self.cost_j > 0 else 0.0


def _quadrature() -> tuple[np.ndarray, np.ndarray]:
    """The Gauss-Hermite nodes and normalised weights of :func:`enumerate_plans`."""
    return gauss_hermite(QUADRATURE_NODES)


def _increment(base: LossPredictor, x: np.ndarray, target_loss: float, variants: np.ndarray,
               n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean loss, per-node log failure) of epochs ending in ``(variants, n)``: the same
    arithmetic as :func:`enumerate_plans`."""
    means = np.asarray(base.mean_of(variants, n), dtype=float)
    sigma = np.asarray(base.run_sigma_at(means, variants), dtype=float)
    gap = (math.log(target_loss) - np.log(means))[:, None] - sigma[:, None] * x[None, :]
    if base.sigma_epoch > 0:
        return means, log_ndtr(-gap / base.sigma_epoch)
    return means, np.where(gap >= 0, -np.inf, 0.0)


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


class _Bucket:
    """The stored states of one (option, last variant): n, cost, depth, id, liveness and
    log-failure vector, in growing arrays."""

    def __init__(self, nodes: int) -> None:
        self.size = 0
        self.n = np.empty(64)
        self.cost = np.empty(64)
        self.depth = np.empty(64, dtype=np.int64)
        self.alive = np.zeros(64, dtype=bool)
        self.log_fail = np.empty((64, nodes))

    def add(self, n: float, cost: float, depth: int, log_fail: np.ndarray) -> int:
        """Store a state; its slot."""
        if self.size == len(self.n):
            cap = 2 * len(self.n)
            for name in ("n", "cost", "depth", "alive", "log_fail"):
                old = getattr(self, name)
                new = np.zeros((cap,) + old.shape[1:], dtype=old.dtype)
                new[:self.size] = old[:self.size]
                setattr(self, name, new)
        i = self.size
        self.n[i], self.cost[i], self.depth[i], self.alive[i] = n, cost, depth, True
        self.log_fail[i] = log_fail
        self.size += 1
        return i

    def dominated(self, n: float, cost: float, depth: int, log_fail: np.ndarray,
                  slack: np.ndarray | None, horizon: int) -> bool:
        """Whether a live stored state dominates this one; if not, the live stored states this
        one dominates are marked dead. ``slack`` (per node and further epoch, see
        :func:`dominance_slack`): the dominating state's log failure plus the slack times the
        dominated one's epochs left must be no larger; None: equal samples only."""
        m = self.size
        if m == 0:
            return False
        bn, bc, bd, ba = self.n[:m], self.cost[:m], self.depth[:m], self.alive[:m]
        more = (bn >= n) if slack is not None else (bn == n)
        cand = np.flatnonzero(ba & more & (bc <= cost) & (bd <= depth))
        pad = 0.0 if slack is None else (horizon - depth) * slack
        if len(cand) and bool(np.any(np.all(self.log_fail[cand] + pad <= log_fail, axis=1))):
            return True
        less = (bn <= n) if slack is not None else (bn == n)
        cand = np.flatnonzero(ba & less & (bc >= cost) & (bd >= depth))
        if len(cand):
            pads = 0.0 if slack is None else (horizon - bd[cand])[:, None] * slack[None, :]
            self.alive[cand[np.all(log_fail + pads <= self.log_fail[cand], axis=1)]] = False
        return False


def _two_phase(base: LossPredictor, x: np.ndarray, w: np.ndarray, options: Sequence[EpochOption],
               horizon: int, target_loss: float, pi: float
               ) -> tuple[float, tuple[int, ...], int, float, float] | None:
    """The cheapest plan of the form ``a^k b^j`` (one variant, or one switch), over every
    option: (cost, variants, option, final mean, success) or None; the search's first
    incumbent, evaluated with the same arithmetic."""
    best = None
    for o, opt in enumerate(options):
        use = np.flatnonzero(np.isfinite(opt.cost_j))
        for a in use.tolist():
            # rows r = 0..horizon-1: after r + 1 epochs of a
            n = np.empty(horizon)
            lf = np.empty((horizon, len(x)))
            acc_n, acc_lf = 0.0, np.zeros(len(x))
            for r in range(horizon):
                acc_n += float(opt.gain[a])
                _, inc = _increment(base, x, target_loss, np.array([a]), np.array([acc_n]))
                acc_lf = acc_lf + inc[0]
                n[r], lf[r] = acc_n, acc_lf
            for b in use.tolist():
                if b == a:
                    rows_n, rows_lf, k0 = n, lf, np.arange(1, horizon + 1)
                    t_max = 0
                else:
                    rows_n, rows_lf, k0 = n[:-1], lf[:-1], np.arange(1, horizon)
                    t_max = horizon - 1
                # t = 0: the rows themselves (pure a); then t epochs of b
                cur_n, cur_lf = rows_n.copy(), rows_lf.copy()
                last = np.full(len(cur_n), a)
                for t in range(0, t_max + 1):
                    if t > 0:
                        fits = k0 + t <= horizon
                        if not fits.any():
                            break
                        cur_n = np.asarray(base.carry(cur_n, last, np.full(len(cur_n), b)),
                                           dtype=float) + float(opt.gain[b])
                        last = np.full(len(cur_n), b)
                        means, inc = _increment(base, x, target_loss, last, cur_n)
                        cur_lf = cur_lf + inc
                    else:
                        fits = np.ones(len(cur_n), dtype=bool)
                        means = np.asarray(base.mean_of(np.full(len(cur_n), a), cur_n),
                                           dtype=float)
                    p = 1.0 - np.exp(cur_lf) @ w
                    cost = k0 * float(opt.cost_j[a]) + t * float(opt.cost_j[b])
                    ok = np.flatnonzero(fits & (p >= pi))
                    if len(ok):
                        i = ok[np.argmin(cost[ok])]
                        if best is None or cost[i] < best[0]:
                            best = (float(cost[i]), (a,) * int(k0[i]) + (b,) * t, o,
                                    float(means[i]), float(p[i]))
                    if t_max == 0:
                        break
    return best


@dataclass(frozen=True)
class _CostToGo:
    """A lower bound on the cost of reaching ``pi`` from a state of one option (see
    :func:`_cost_to_go`): the loss grid, the lowest per-node log failure of an epoch whose mean
    is at least each grid loss, and the cheapest cost from each grid loss to below each."""

    grid: np.ndarray        # G losses, ascending (geometric)
    fail_low: np.ndarray    # G x nodes
    cost: np.ndarray        # G x G: [a, b] from loss grid[a] to a mean below grid[b]
    cmin: float


def _cost_to_go(base: LossPredictor, x: np.ndarray, option: EpochOption, horizon: int,
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


def _loss_bound(table: _CostToGo, w: np.ndarray, pi: float, mean: np.ndarray,
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


def search_plans(base: LossPredictor, options: Sequence[EpochOption], horizon: int,
                 target_loss: float, pi: float, time_limit_s: float = 60.0,
                 max_states: int = 200_000, batch: int = 32) -> SearchResult:
    """The cheapest variant sequence, over every option and of 1..``horizon`` epochs, whose
    success probability (as :func:`enumerate_plans` computes it) is >= ``pi``: an exact
    best-first search over states (netsim's formulation).

    A state is all a sequence's future depends on: option, last variant, effective samples
    ``n``, per-quadrature-node log failure so far, depth (epochs) and cost. A state is dropped
    when a stored live state with the same option and last variant has ``n`` at least as
    large, a log-failure vector elementwise no larger (after adding the slack of
    :func:`dominance_slack` times the dropped state's epochs left; equal ``n`` only where it
    is None), depth and cost no larger: the same continuation of that state then keeps ``n``
    at least as large (the carry is non-decreasing in ``n``), every epoch's mean no higher,
    every node's failure no larger than the other's plus the slack (the success is
    non-increasing in each node's log failure), and costs no more, within the horizon. A
    sequence meeting ``pi`` is a plan and is not extended (an extension only adds cost).

    States are expanded in order of a lower bound on their cheapest completion, their cost
    plus the larger of: the option's cheapest epoch times the fewest further epochs that
    could reach ``pi`` (each further epoch's log failure bounded below at every node: the
    lowest mean reachable with the largest gain per epoch, the run spread at either end of
    the mean's range), and the loss-space bound of :func:`_cost_to_go` (the cheapest way to
    bring the mean below the highest level at which the epochs left could still reach
    ``pi``). A state whose bound is infinite (it cannot reach ``pi`` within the horizon) or no
    lower than the best plan's cost is dropped. The first best plan is the cheapest of one
    variant or one switch (:func:`_two_phase`). The search ends when no open state's bound is
    below the best plan ("optimal"), or at ``time_limit_s`` / ``max_states`` stored states:
    then the proven lower bound on the minimum is min(best plan, smallest bound of the open
    states), every plan being a completion of an open state or dominated by one, or pruned
    by a bound no lower than the best plan. ``batch``: states expanded together (vectorised).
    """
    t0 = time.perf_counter()
    x, w = _quadrature()
    nodes = len(x)
    n_opt, n_var = len(options), len(base._floor)
    cost_t = np.array([np.asarray(o.cost_j, dtype=float) for o in options]).reshape(n_opt, n_var)
    gain_t = np.array([np.asarray(o.gain, dtype=float) for o in options]).reshape(n_opt, n_var)
    usable = np.isfinite(cost_t)
    cmin = np.array([c[u].min() if u.any() else np.inf for c, u in zip(cost_t, usable,
                                                                        strict=True)])
    gmax = np.array([g[u].max() if u.any() else 0.0 for g, u in zip(gain_t, usable,
                                                                     strict=True)])
    slack = dominance_slack(base, x, options, horizon, target_loss)
    tables = [_cost_to_go(base, x, o, horizon, target_loss) for o in options]
    res = SearchResult(STATUS_OPTIMAL, found_j=[math.inf] * n_opt,
                       dominance=("equal-n" if slack is None else "monotone"
                                  if not slack.any() else "monotone+slack"))
    log_t = math.log(target_loss)
    init = float(base.initial_loss)
    all_v = np.arange(n_var)
    s_top = np.asarray(base.run_sigma_at(np.maximum(init, np.asarray(base._floor)), all_v),
                       dtype=float)

    # the lowest log failure, per node, of an epoch of any usable variant of each option after
    # at most grid_n[g] effective samples (the mean is then at least that variant's mean at
    # grid_n[g]; the run spread between its values at the ends of the mean's range); the
    # samples are rounded up to the grid, so the table stays a lower bound
    n_top = horizon * float(gmax.max(initial=0.0)) * (1.0 + 1e-9)
    grid_n = np.concatenate([[0.0], np.geomspace(max(n_top * 1e-7, 1e-9), max(n_top, 1e-9),
                                                 3000)])
    fail_n = np.zeros((n_opt, len(grid_n), nodes))
    for var in all_v.tolist():
        vu = np.full(len(grid_n), var)
        m_lo = np.minimum(init, np.asarray(base.mean_of(vu, grid_n), dtype=float))
        s_lo = np.asarray(base.run_sigma_at(m_lo, vu), dtype=float)
        g = np.log(m_lo)[:, None] + np.minimum(s_lo[:, None] * x[None, :], s_top[var] * x[None, :])
        if base.sigma_epoch > 0:
            inc_u = log_ndtr((g - log_t) / base.sigma_epoch)
        else:
            inc_u = np.where(g <= log_t, -np.inf, 0.0)
        for row in np.flatnonzero(usable[:, var]).tolist():
            fail_n[row] = np.minimum(fail_n[row], inc_u)

    def further(opt: np.ndarray, n: np.ndarray, lf: np.ndarray,
                depth: np.ndarray) -> np.ndarray:
        """The fewest further epochs that could reach pi (horizon + 1: none within it): the
        ``i``-th further epoch ends with at most ``n + i * gmax`` effective samples in any
        variant (the carry never adds samples), so its log failure is at least
        ``fail_n`` there."""
        left = horizon - depth
        out = np.full(len(n), horizon + 1, dtype=np.int64)
        todo = np.flatnonzero(left > 0)
        acc = lf.copy()
        for i in range(1, int(left.max(initial=0)) + 1):
            todo = todo[left[todo] >= i]
            if len(todo) == 0:
                break
            o = opt[todo]
            at = np.minimum(np.searchsorted(grid_n, n[todo] + i * gmax[o], side="left"),
                            len(grid_n) - 1)
            acc[todo] += fail_n[o, at]
            hit = (1.0 - np.exp(acc[todo]) @ w) >= pi
            out[todo[hit]] = i
            todo = todo[~hit]
        return out

    # the state table (scalars; log-failure vectors live in the buckets)
    cols = {"opt": np.int64, "var": np.int64, "depth": np.int64, "n": float, "cost": float,
            "parent": np.int64, "slot": np.int64, "lb": float}
    st = {k: np.empty(1024, dtype=t) for k, t in cols.items()}
    count = 0
    buckets: dict[tuple[int, int], _Bucket] = {}
    heap: list[tuple[float, int]] = []
    # the best plan: cost, variants, option, final mean, success; first the best of one
    # variant or one switch
    best = _two_phase(base, x, w, options, horizon, target_loss, pi)
    if best is not None:
        res.found_j[best[2]] = best[0]

    def path(sid: int) -> list[int]:
        seq = []
        while sid >= 0:
            seq.append(int(st["var"][sid]))
            sid = int(st["parent"][sid])
        return seq[::-1]

    # the root's children: the first epoch of every option and usable variant
    opt, u = np.nonzero(usable)
    parent = np.full(len(opt), -1, dtype=np.int64)
    n_new, c_new = gain_t[opt, u], cost_t[opt, u]
    lf_parent, d_parent = np.zeros((len(opt), nodes)), np.zeros(len(opt), dtype=np.int64)
    popped: list[int] = []
    while True:
        means, inc = _increment(base, x, target_loss, u, n_new)
        lf = lf_parent + inc
        depth = d_parent + 1
        success = 1.0 - np.exp(lf) @ w
        res.best_success = max(res.best_success, float(success.max(initial=0.0)))
        ok = success >= pi
        for k in np.flatnonzero(ok).tolist():
            o = int(opt[k])
            res.found_j[o] = min(res.found_j[o], float(c_new[k]))
            if best is None or c_new[k] < best[0]:
                best = (float(c_new[k]), tuple(path(int(parent[k])) + [int(u[k])]), o,
                        float(means[k]), float(success[k]))
        keep = np.flatnonzero(~ok & (depth < horizon))
        lb = np.empty(0)
        if len(keep):
            j = further(opt[keep], n_new[keep], lf[keep], depth[keep])
            lb = c_new[keep] + j * cmin[opt[keep]]
            for o, table in enumerate(tables):
                rows = np.flatnonzero(opt[keep] == o)
                if table is None or len(rows) == 0:
                    continue
                k = keep[rows]
                lb[rows] = np.maximum(lb[rows], c_new[k] + _loss_bound(
                    table, w, pi, means[k], lf[k], horizon - depth[k]))
            sel = (j <= horizon) & np.isfinite(lb) \
                & (lb < (best[0] if best is not None else np.inf))
            keep, lb = keep[sel], lb[sel]
        for k, bound in zip(keep.tolist(), lb.tolist(), strict=True):
            key = (int(opt[k]), int(u[k]))
            b = buckets.get(key)
            if b is None:
                b = buckets[key] = _Bucket(nodes)
            nk, ck, dk = float(n_new[k]), float(c_new[k]), int(depth[k])
            if b.dominated(nk, ck, dk, lf[k], slack, horizon):
                continue
            if count == len(st["n"]):
                st = {name: np.resize(a, 2 * len(a)) for name, a in st.items()}
            for name, val in (("opt", key[0]), ("var", key[1]), ("depth", dk), ("n", nk),
                              ("cost", ck), ("parent", parent[k]), ("lb", bound)):
                st[name][count] = val
            st["slot"][count] = b.add(nk, ck, dk, lf[k])
            heapq.heappush(heap, (bound, count))
            count += 1
        res.stored = count
        # the next batch: the live open states of lowest bound
        limit = best[0] if best is not None else np.inf
        popped = []
        while heap and len(popped) < batch:
            bound, sid = heap[0]
            if bound >= limit:
                heap.clear()  # no open state can beat the best plan
                break
            heapq.heappop(heap)
            if buckets[(int(st["opt"][sid]), int(st["var"][sid]))].alive[st["slot"][sid]]:
                popped.append(sid)
        if not popped:
            break
        if time.perf_counter() - t0 > time_limit_s or count >= max_states:
            res.status = STATUS_TIME if time.perf_counter() - t0 > time_limit_s \
                else STATUS_STATES
            break
        src = np.repeat(np.asarray(popped, dtype=np.int64), n_var)
        dst = np.tile(all_v, len(popped))
        live = usable[st["opt"][src], dst]
        src, u = src[live], dst[live]
        opt = st["opt"][src]
        parent = src
        n_new = np.asarray(base.carry(st["n"][src], st["var"][src], u), dtype=float) \
            + gain_t[opt, u]
        c_new = st["cost"][src] + cost_t[opt, u]
        d_parent = st["depth"][src]
        lf_parent = np.stack([buckets[(int(st["opt"][s]), int(st["var"][s]))]
                              .log_fail[st["slot"][s]] for s in src.tolist()])
        res.expanded += len(popped)
    if best is not None:
        res.cost_j, res.variants, res.option, res.final_mean, res.success = best
    res.bound_j = res.cost_j
    if res.status != STATUS_OPTIMAL:
        open_lb = [b for b, sid in heap
                   if buckets[(int(st["opt"][sid]), int(st["var"][sid]))].alive[st["slot"][sid]]]
        open_lb += [float(st["lb"][sid]) for sid in popped]
        res.bound_j = min([res.cost_j, *open_lb])
    res.elapsed_s = time.perf_counter() - t0
    return res


def optimum_plan(table: DeviceTable, model: ModelSpec, training: TrainingSpec, pi: float,
                 pred: DistributionalPredictor, fractions: Sequence[float],
                 horizon: int | None = None, epoch_budget_s: float | None = None,
                 placement: str = "auto", time_limit_s: float = 60.0,
                 max_states: int = 200_000) -> Plan:
    """The cheapest plan whose success probability (reaching L* at some epoch: the event
    the simulator scores and DepL plans for, under the predictor's state-dependent spread) is
    >= ``pi``, by :func:`search_plans` over every data fraction at once.

    ``plan.info``: ``status`` ("optimal", "time_limit", "state_limit"), ``bound_j`` (proven
    lower bound on the optimum's energy, J), ``gap`` ((plan - bound) / plan), ``dominance``,
    ``expanded`` and ``stored`` states. ``costs_by_fraction``: the cheapest plan found per
    phi (not each phi's optimum: one incumbent prunes them all).

    Raises
    ------
    ValueError
        When the search stops at a limit without any plan (the message gives the bound).
    """
    t0 = time.perf_counter()
    horizon = horizon or training.max_epochs
    budget = epoch_budget_s or training.deadline_s / training.max_epochs
    variants = list(range(len(model.variants)))
    phis = sorted(fractions)
    options, clusters_of = [], []
    for phi in phis:
        _, clusters = epoch_options(table, model, training, phi, variants, budget, placement)
        cost_m = np.array([c.energy_j if c is not None else np.inf for c in clusters])
        options.append(EpochOption(cost_m, np.asarray(epoch_gains(pred.base, clusters))))
        clusters_of.append(clusters)
    res = search_plans(pred.base, options, horizon, training.target_loss, pi, time_limit_s,
                       max_states)
    elapsed = time.perf_counter() - t0
    costs = dict(zip(phis, res.found_j, strict=True))
    if res.option < 0:
        if res.status == STATUS_OPTIMAL:
            return Plan(False, reason=(f"infeasible before training: no plan within {horizon} "
                                       f"epochs reaches {training.target_loss:g} with "
                                       f"probability {pi:g} (best found "
                                       f"{res.best_success:.3f})"),
                        planning_s=elapsed, costs_by_fraction=costs,
                        info={"status": res.status, "bound_j": math.inf, "gap": 0.0})
        raise ValueError(f"depl-optimum: no plan found before the search's "
                         f"{res.status.replace('_', ' ')} ({elapsed:.3g} s, {res.stored} "
                         f"states); proven lower bound {res.bound_j:.6g} J")
    seq, phi, mean = res.variants, phis[res.option], res.final_mean
    clusters = clusters_of[res.option]
    feasible = [p for p, c in costs.items() if np.isfinite(c)]
    level = float(pred.base.quantile_of(seq[-1], pred.base.samples_for(seq[-1], mean),
                                        float(ndtri(pi))))
    info = {"status": res.status, "bound_j": res.bound_j, "gap": res.gap,
            "success": res.success, "dominance": res.dominance, "expanded": res.expanded,
            "stored": res.stored}
    # a sequence only takes variants of finite cost, which have a cluster
    return Plan(True, seq, tuple(cast(Cluster, clusters[v]) for v in seq), phi, min(feasible),
                res.cost_j, level, mean, "", elapsed, costs, info)


class OptimumParams(DepLParams):
    """DepL's parameters plus: max_plan_epochs (the search's horizon, default max_epochs),
    time_limit_s (the search stops there with its best plan and a proven bound) and
    max_states (it stops there too: the states it keeps in memory, about 1 kB each). The
    spread defaults to Monte Carlo."""

    spread: Literal["analytic", "montecarlo"] = "montecarlo"
    max_plan_epochs: Annotated[int, Field(ge=1)] | None = None
    time_limit_s: Annotated[float, Field(gt=0)] = 60.0
    max_states: Annotated[int, Field(ge=1)] = 200_000


@register("depl-optimum", "exact reference for DepL's problem: best-first search over plan "
          "states with dominance, cheapest meeting pi; at its time limit, its best plan and a "
          "proven bound", OptimumParams)
class DepLOptimum(DepL):
    name = "depl-optimum"
    params: OptimumParams

    def make_plan(self, scenario: Scenario) -> Plan:
        p = self.params
        pred = self.predictor(scenario)
        if pred.spread.draws is None:
            pred.spread = montecarlo_spread(pred.sigma_run, pred.sigma_epoch,
                                            np.random.default_rng(p.mc_seed), p.mc_draws)
        return optimum_plan(build_device_table(scenario), scenario.model, scenario.training,  # type: ignore[arg-type]
                            target_probability(p, scenario), pred, p.data_fractions,
                            p.max_plan_epochs, p.epoch_budget_s, p.placement, p.time_limit_s,
                            p.max_states)

    def decide(self, obs: Observation) -> Decision:
        """DepL's decision, with what the search proved about the plan: ``plan_status``,
        ``plan_gap`` and ``plan_bound_j`` (J) in ``info``, as pact-optimum records them."""
        d = super().decide(obs)
        if self.plan is None or not self.plan.feasible:
            return d
        info = self.plan.info
        return dataclasses.replace(d, info={
            **d.info, "plan_status": info.get("status", ""), "plan_gap": info.get("gap", 0.0),
            "plan_bound_j": info.get("bound_j", math.nan)})
