"""The exact PACT optimum as a configuration MILP (netsim's formulation), with its proven bound.

PACT's planning problem in the MILP's linear cost model (:mod:`policies.pact.optimum`): epochs
are interchangeable once the last variant v_L is fixed, so a plan is a multiset of epochs. An
epoch's *configuration* is its variant u and participant set S. Per configuration c the
program counts its epochs ``n_c`` (integer) and aggregates them: ``Dsum_ci`` the samples
device i trains over those epochs (integer), ``Tsum_c`` their total duration (s). Every plan
maps onto these variables with the same energy, and the constraints hold for it:

    n_c <= Dsum_ci <= D_i n_c                            (1 <= d_i <= D_i in every epoch)
    Tsum_c >= (T_i + t_agg |S|) n_c + g_i Dsum_ci        (tau >= T_i + g_i d_i + t_agg |S|)
    sum_c n_c <= K,  sum_c Tsum_c <= time left,  sum_c w_u sum_i Dsum_ci >= N*_L - n_0,
    sum over configurations of v_L of n_c >= 1,
    energy = sum_c sum_i (a_i Dsum_ci + b_i n_c) + P_idle Tsum_c.

So its optimum is a proven lower bound of the true optimum (and its LP relaxation is the
perspective one: each configuration's convex hull, far tighter than the per-epoch big-M
MILP's). A plan is then built from it: n_c epochs per configuration, device i's total split as
evenly as integers allow (the extra samples in the same epochs), and re-optimised over the
integer samples per epoch with the participants fixed (a small MILP). That plan's energy is an
upper bound; the two bounds prove the optimum to their relative distance. The split can cost
at most one sample's compute time per epoch over the even split, so the distance is small
(measured in ``benchmarks/pact.py`` section 5) and always reported.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from policies.pact.candidates import Coefficients, coefficients
from policies.pact.problem import PlanningProblem

MAX_CONFIGURATIONS = 4096  # variants x non-empty participant sets the formulation enumerates
OPTIMAL_GAP = 1e-4  # "optimal": a plan within this relative gap of the proven lower bound
POLISH_S = 10.0     # at most this long (s) re-optimising a plan's integer samples


@dataclass(frozen=True)
class Configuration:
    """One epoch configuration: variant and participants (positions in the variant's
    coefficient arrays)."""

    variant: int
    members: tuple[int, ...]


@dataclass(frozen=True)
class ConfigurationResult:
    """What the configuration MILP proved: ``epochs`` (variant, device index -> samples) of its
    best plan or None, ``lower_j`` a proven lower bound of every plan's MILP energy ending in
    the variant (J; inf when it proved that none is cheaper than the cutoff), ``status``
    "optimal" or "time_limit"."""

    epochs: list[tuple[int, dict[int, int]]] | None
    lower_j: float
    status: str


def linear_epoch(c: Coefficients, at: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    """One epoch in the linear cost model: (duration s, energy J) of participants at
    positions ``at`` of ``c.idx`` training ``d`` samples each: the slowest transfer and
    compute plus the aggregation of every update; fixed and per-sample energy plus every
    device's idle power over the duration."""
    duration = float(np.max(c.transfer_s[at] + c.s_per_sample[at] * d)) + c.agg_s * len(at)
    return duration, float(np.sum(c.fixed_j[at] + c.j_per_sample[at] * d)) + c.idle_w * duration


def n_configurations(problem: PlanningProblem, used: list[int]) -> int:
    """How many configurations the formulation enumerates for variants ``used``."""
    return sum(2 ** len(coefficients(problem, u).idx) - 1 for u in used)


def solve_configurations(problem: PlanningProblem, used: list[int], v_last: int,
                         weight: dict[int, float], need: float, time_limit_s: float,
                         cutoff_j: float = np.inf) -> ConfigurationResult:
    """Minimum MILP energy of plans with variants ``used`` whose last variant is ``v_last``.

    ``weight[u]``: effective samples per sample of variant u at the end (the progress model's
    efficiency and switch losses); ``need``: effective samples the plan must add (N*_L - n_0);
    ``cutoff_j``: only plans cheaper than this (J) are searched.
    """
    coef = {u: coefficients(problem, u) for u in used}
    configs = [Configuration(u, members) for u in used
               for k in range(1, len(coef[u].idx) + 1)
               for members in itertools.combinations(range(len(coef[u].idx)), k)]
    if not configs:
        return ConfigurationResult(None, math.inf, "optimal")
    K = problem.epochs_left
    # variables per configuration: n, Tsum, then Dsum per member
    start, nvar = [], 0
    for c in configs:
        start.append(nvar)
        nvar += 2 + len(c.members)
    cost, lo, hi = np.zeros(nvar), np.zeros(nvar), np.zeros(nvar)
    integrality = np.ones(nvar)
    rows: list[tuple[dict[int, float], float, float]] = []
    count, total_time, progress, last = {}, {}, {}, {}
    idle_w = coef[used[0]].idle_w
    for c, s in zip(configs, start, strict=True):
        cf = coef[c.variant]
        m = len(c.members)
        hi[s], cost[s] = K, float(sum(cf.fixed_j[p] for p in c.members))
        hi[s + 1], integrality[s + 1], cost[s + 1] = problem.time_left_s, 0, idle_w
        count[s] = 1.0
        total_time[s + 1] = 1.0
        if c.variant == v_last:
            last[s] = 1.0
        for j, p in enumerate(c.members):
            col = s + 2 + j
            hi[col], cost[col] = K * cf.samples[p], cf.j_per_sample[p]
            progress[col] = weight[c.variant]
            rows.append(({col: 1.0, s: -float(cf.samples[p])}, -np.inf, 0.0))
            rows.append(({col: 1.0, s: -1.0}, 0.0, np.inf))
            rows.append(({s + 1: 1.0, s: -(cf.transfer_s[p] + cf.agg_s * m),
                          col: -cf.s_per_sample[p]}, 0.0, np.inf))
    rows += [(count, -np.inf, float(K)), (total_time, -np.inf, problem.time_left_s),
             (last, 1.0, np.inf), (progress, need, np.inf)]
    if np.isfinite(cutoff_j):
        rows.append(({j: float(cost[j]) for j in np.flatnonzero(cost).tolist()}, -np.inf,
                     cutoff_j))
    res = milp(cost, integrality=integrality, bounds=Bounds(lo, hi),
               constraints=_constraints(rows, nvar),
               options={"mip_rel_gap": OPTIMAL_GAP / 100, "time_limit": time_limit_s})
    if res.status == 2:  # proven: nothing cheaper than the cutoff ends in v_last
        return ConfigurationResult(None, math.inf, "optimal")
    bound = getattr(res, "mip_dual_bound", None)
    if res.status == 1:
        lower = float(bound) if bound is not None and np.isfinite(bound) else 0.0
        status = "time_limit"
    elif res.x is None:
        raise ValueError(f"pact-optimum: HiGHS failed ({res.message})")
    else:
        lower = float(bound) if bound is not None and np.isfinite(bound) else float(res.fun)
        status = "optimal"
    if res.x is None:
        return ConfigurationResult(None, lower, status)
    x = np.round(res.x)
    split: list[tuple[Configuration, list[np.ndarray]]] = []
    for c, s in zip(configs, start, strict=True):
        n = int(x[s])
        if n == 0:
            continue
        totals = x[s + 2:s + 2 + len(c.members)].astype(np.int64)
        base, extra = np.divmod(totals, n)
        split.append((c, [base + (k < extra) for k in range(n)]))
    epochs = _polish(problem, coef, split, weight, need, lower, time_limit_s)
    return ConfigurationResult(epochs, min(lower, cutoff_j), status)


def _polish(problem: PlanningProblem, coef: dict[int, Coefficients],
            split: list[tuple[Configuration, list[np.ndarray]]], weight: dict[int, float],
            need: float, lower_j: float,
            time_limit_s: float) -> list[tuple[int, dict[int, int]]] | None:
    """A plan of the configurations chosen: the even split (each device's extra samples in
    the same epochs, which minimises the sum of the epochs' durations for those totals), kept
    when it meets the deadline within ``OPTIMAL_GAP`` of ``lower_j``; otherwise the integer
    samples per epoch re-optimised with the participants fixed (a small MILP, at most
    ``POLISH_S``), the cheaper of the two. None when neither meets the deadline. Epochs
    ordered by variant."""
    epochs = [(c, d) for c, ds in split for d in ds]
    epochs.sort(key=lambda e: e[0].variant)
    even_j, even_s = 0.0, 0.0
    for c, d in epochs:
        tau, joules = linear_epoch(coef[c.variant], np.array(c.members), d)
        even_s += tau
        even_j += joules
    even_ok = even_s <= problem.time_left_s
    d_best = np.concatenate([d for _, d in epochs]).astype(float) if even_ok else None
    if not even_ok or even_j - lower_j > OPTIMAL_GAP * even_j:
        polished = _reoptimise(problem, coef, epochs, weight, need,
                               min(time_limit_s, POLISH_S))
        if polished is not None and (d_best is None or polished[1] < even_j):
            d_best = polished[0]
    if d_best is None:
        return None
    out, first = [], 0
    for c, _ in epochs:
        idx = coef[c.variant].idx
        out.append((c.variant, {int(idx[p]): int(d_best[first + j])
                                for j, p in enumerate(c.members)}))
        first += len(c.members)
    return out


def _reoptimise(problem: PlanningProblem, coef: dict[int, Coefficients],
                epochs: list[tuple[Configuration, np.ndarray]], weight: dict[int, float],
                need: float, time_limit_s: float) -> tuple[np.ndarray, float] | None:
    """The cheapest integer samples per epoch with the participants of ``epochs`` fixed
    (samples in epoch order, energy J), or None if HiGHS found none in ``time_limit_s``."""
    cols = [(k, p) for k, (c, _) in enumerate(epochs) for p in c.members]
    ne, nd = len(epochs), len(cols)
    cost, lo, hi = np.zeros(nd + ne), np.zeros(nd + ne), np.full(nd + ne, np.inf)
    integrality = np.concatenate([np.ones(nd), np.zeros(ne)])
    rows: list[tuple[dict[int, float], float, float]] = []
    progress: dict[int, float] = {}
    fixed_j, col = 0.0, 0
    for k, (c, _) in enumerate(epochs):
        cf = coef[c.variant]
        cost[nd + k] = cf.idle_w
        for p in c.members:
            lo[col], hi[col], cost[col] = 1, cf.samples[p], cf.j_per_sample[p]
            fixed_j += float(cf.fixed_j[p])
            progress[col] = weight[c.variant]
            rows.append(({nd + k: 1.0, col: -cf.s_per_sample[p]},
                         cf.transfer_s[p] + cf.agg_s * len(c.members), np.inf))
            col += 1
    rows += [({nd + k: 1.0 for k in range(ne)}, -np.inf, problem.time_left_s),
             (progress, need, np.inf)]
    res = milp(cost, integrality=integrality, bounds=Bounds(lo, hi),
               constraints=_constraints(rows, nd + ne),
               options={"mip_rel_gap": OPTIMAL_GAP / 10, "time_limit": time_limit_s})
    if res.x is None:
        return None
    return np.round(res.x[:nd]), float(res.fun) + fixed_j


def _constraints(rows: list[tuple[dict[int, float], float, float]], nvar: int) -> LinearConstraint:
    r_idx, c_idx, vals, lb, ub = [], [], [], [], []
    for r, (row, lo_r, hi_r) in enumerate(rows):
        for col, val in row.items():
            r_idx.append(r)
            c_idx.append(col)
            vals.append(val)
        lb.append(lo_r)
        ub.append(hi_r)
    a_mat = coo_matrix((vals, (r_idx, c_idx)), shape=(len(rows), nvar)).tocsr()
    return LinearConstraint(a_mat, lb, ub)
