"""Candidate epochs: per variant, the cheapest participant set for a sample amount and a
per-epoch time budget (netsim's formalization of PACT's edge set).

Energy of one epoch (the engine's contention-free formulas, :mod:`netsim.costs`, rewritten in
the separable form they take)::

    E = sum_i a_i d_i + sum_i b_i + P_idle * tau,     tau = max_i (T_i + g_i d_i) + t_agg * |S|

with, for participant i and variant v: g_i compute seconds per sample, T_i its download and
upload time (s), a_i = g_i (P_busy_i - P_idle_i) the marginal energy of a sample over idling
(J), b_i its transfer energy plus the aggregator's extra busy energy for its update (J),
P_idle the idle power of every device (W; all stay on), t_agg the aggregation time per update.

Approximation (stated, measured against ``pact-optimum``): choosing S and d for a given total
D under a time budget is a fixed-charge knapsack (NP-hard). For each budget tau_b, each device
can train cap_i = min(D_i, (tau_b - T_i) / g_i) samples; devices are ranked by marginal energy
per sample *including* their fixed transfer cost and the idle energy their aggregation adds,
(a_i cap_i + b_i + P_idle t_agg) / cap_i, and a candidate fills D greedily in that order (the
last device partially). Because that greedy can take a small device whose fixed cost a larger
one's spare capacity would avoid (the knapsack greedy's failure), two more rankings fill too:
largest capacity first (fewest participants) and marginal energy a_i alone. Sample amounts D lie on a grid of relative step eps (plus every
"first k devices, all they can" amount); budgets on a grid of relative step eps plus every
device's full-data finish time. Each candidate's progress is the progress model's gain for its
samples and participant count (:meth:`netsim.training.loss.LossPredictor.gain`); candidates
dominated in (time, energy) at about the same gain are dropped. The (time, energy) here are the
separable form used for the search, with contention priced by one bound: an epoch lasts at
least as long as any constraint its participants share (a Wi-Fi or cellular cell's air time,
a backhaul) is busy with their transfers, the sum of their ``bits x coefficient / capacity``
(:func:`netsim.costs.constraint_seconds`; netsim's). So a candidate that puts many devices in
one cell pays for the air time it takes, in time and in idle energy. The planner re-costs the
epochs it keeps with :func:`netsim.costs.estimate_epochs` (sharing, media and radio energy
exactly as the engine plays them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from netsim.costs import constraint_seconds, device_epoch_times
from policies.pact.problem import PlanningProblem


@dataclass(frozen=True)
class Coefficients:
    """Per-device coefficients of one variant (arrays over the eligible devices ``idx``)."""

    idx: np.ndarray          # device indices
    samples: np.ndarray      # D_i, samples held
    transfer_s: np.ndarray   # T_i (s)
    s_per_sample: np.ndarray  # g_i (s)
    j_per_sample: np.ndarray  # a_i (J)
    fixed_j: np.ndarray      # b_i (J)
    idle_w: float            # P_idle, all devices (W)
    agg_s: float             # t_agg, aggregation time per participant (s)
    shared_owner: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    """Seconds each device's transfers take of the constraints devices share (a cell's air
    time, a backhaul): entries (position in ``idx``, constraint, seconds);
    :func:`netsim.costs.constraint_seconds`."""
    shared_hop: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    shared_s: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True)
class VariantCandidates:
    """Candidate epochs of one variant: total samples, predicted duration (s), energy (J)."""

    variant: int
    coef: Coefficients
    budgets_s: np.ndarray
    samples: np.ndarray
    time_s: np.ndarray
    energy_j: np.ndarray
    budget: np.ndarray       # index into budgets_s
    rule: np.ndarray         # index into RULES: the ranking the fill followed
    n_participants: np.ndarray  # devices the fill uses
    gain: np.ndarray         # effective samples one epoch adds (the progress model's gain)

    def __len__(self) -> int:
        return len(self.samples)

    def participants(self, c: int) -> dict[int, int]:
        """Device index -> samples of candidate ``c`` (the greedy fill it was built from)."""
        order, caps = _ranking(self.coef, float(self.budgets_s[self.budget[c]]),
                               int(self.rule[c]))
        out, left = {}, int(self.samples[c])
        for j, cap in zip(order, caps, strict=True):
            if left <= 0:
                break
            take = int(min(cap, left))
            out[int(self.coef.idx[j])] = take
            left -= take
        return out


def coefficients(problem: PlanningProblem, variant: int) -> Coefficients:
    """The separable cost coefficients of ``variant`` over the devices that can train it."""
    table, model = problem.table, problem.model
    idx = np.flatnonzero(problem.fits(variant) & (table.samples > 0))
    idx = idx[idx != table.aggregator]
    transfer, compute, comm = device_epoch_times(table, model, variant, table.samples.astype(float))
    held = table.samples[idx].astype(float)
    g = compute[idx] / held
    agg = table.aggregator
    agg_s = model.aggregation_flop(variant, 1) / table.flop_per_s[agg]
    agg_extra_w = table.power_busy_w[agg] - table.power_idle_w[agg]
    return Coefficients(idx, held, transfer[idx], g,
                        g * (table.power_busy_w[idx] - table.power_idle_w[idx]),
                        comm[idx] + agg_s * agg_extra_w, float(table.power_idle_w.sum()), agg_s,
                        *constraint_seconds(table, model, variant, idx))


RULES = ("energy per sample incl. fixed cost", "largest capacity", "marginal energy")


def _ranking(coef: Coefficients, budget_s: float, rule: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Devices that can train within ``budget_s`` in the order of ranking ``rule`` (RULES), and
    their caps (samples)."""
    caps = np.floor((budget_s * (1 + 1e-12) - coef.transfer_s) / coef.s_per_sample)
    caps = np.clip(caps, 0, coef.samples)
    ok = np.flatnonzero(caps >= 1)
    caps = caps[ok]
    key = (coef.j_per_sample[ok] * caps + coef.fixed_j[ok] + coef.idle_w * coef.agg_s) / caps
    if rule == 1:
        key = np.lexsort((key, -caps))
        return ok[key], caps[key]
    if rule == 2:
        key = coef.j_per_sample[ok]
    order = np.argsort(key, kind="stable")
    return ok[order], caps[order]


def _grid(lo: float, hi: float, eps: float) -> np.ndarray:
    """Geometric grid hi * exp(-eps k) down to ``lo`` (both ends included). Anchored at the
    top with ratio exp(eps), so the grid of eps/2 contains the grid of eps."""
    if hi <= lo:
        return np.array([lo])
    k = int(np.floor(np.log(hi / lo) / eps + 1e-9))
    return np.unique(np.append(hi * np.exp(-eps * np.arange(k + 1)), lo))


def _shared_time(coef: Coefficients, order: np.ndarray) -> np.ndarray:
    """Per prefix of ``order`` (the first k + 1 devices), the longest time a constraint they
    share is busy with their transfers (s): the epoch lasts at least that long."""
    out = np.zeros(len(order))
    if not len(coef.shared_s):
        return out
    step = np.full(len(coef.idx), -1)
    step[order] = np.arange(len(order))
    on = step[coef.shared_owner] >= 0
    k, hop, sec = step[coef.shared_owner][on], coef.shared_hop[on], coef.shared_s[on]
    by = np.lexsort((k, hop))
    k, hop, sec = k[by], hop[by], sec[by]
    total = np.cumsum(sec)
    first = np.ones(len(hop), dtype=bool)
    first[1:] = hop[1:] != hop[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(len(hop)), 0))
    busy = total - np.where(start > 0, total[start - 1], 0.0)  # cumulative within the hop
    np.maximum.at(out, k, busy)
    return np.maximum.accumulate(out)


def _fills(coef: Coefficients, order: np.ndarray, caps: np.ndarray,
           amounts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time_s, energy_j, participants) of greedy fills of ``amounts`` samples along
    ``order``; the time is at least the longest busy time of a constraint the participants
    share (:func:`_shared_time`)."""
    a, b = coef.j_per_sample[order], coef.fixed_j[order]
    t_full = coef.transfer_s[order] + coef.s_per_sample[order] * caps
    q = np.cumsum(caps)
    k = np.searchsorted(q, amounts - 1e-9)           # the (partially) used last device
    prev_q = np.where(k > 0, q[np.maximum(k - 1, 0)], 0.0)
    r = amounts - prev_q
    full_e = np.concatenate([[0.0], np.cumsum(a * caps + b)])[k]
    full_t = np.concatenate([[0.0], np.maximum.accumulate(t_full)])[k]
    last_t = coef.transfer_s[order][k] + coef.s_per_sample[order][k] * r
    time_s = np.maximum(np.maximum(full_t, last_t), _shared_time(coef, order)[k]) \
        + coef.agg_s * (k + 1)
    energy = full_e + a[k] * r + b[k] + coef.idle_w * time_s
    return time_s, energy, k + 1


def build_candidates(problem: PlanningProblem, variant: int, eps: float) -> VariantCandidates:
    """The candidate epochs of ``variant`` at accuracy ``eps`` (see the module docstring)."""
    coef = coefficients(problem, variant)
    empty = np.zeros(0)
    if len(coef.idx) == 0:
        return VariantCandidates(variant, coef, empty, empty, empty, empty, empty.astype(int),
                                 empty.astype(int), empty.astype(int), empty)
    finish = coef.transfer_s + coef.s_per_sample * coef.samples
    lo = float(np.min(coef.transfer_s + coef.s_per_sample))
    budgets = np.unique(np.concatenate([_grid(lo, float(finish.max()), eps), finish]))
    amounts = np.unique(np.round(_grid(1.0, float(coef.samples.sum()), eps)))
    if problem.all_nodes:  # the only candidate: every device, all its samples
        budgets, amounts = np.array([finish.max()]), np.array([coef.samples.sum()])
    d_all, t_all, e_all, b_all, r_all, p_all = [], [], [], [], [], []
    fills: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for bi, budget in enumerate(budgets):
        for rule in range(1 if problem.all_nodes else len(RULES)):
            order, caps = _ranking(coef, float(budget), rule)
            if len(order) == 0:
                continue
            prefix = np.zeros(0) if problem.all_nodes else np.cumsum(caps)
            amt = np.unique(np.concatenate([amounts[amounts <= caps.sum()], prefix]))
            t, e, parts = _fills(coef, order, caps, amt)
            if problem.coverage is not None:
                fills.append((order, caps, amt, parts))
            p_all.append(parts)
            d_all.append(amt)
            t_all.append(t)
            e_all.append(e)
            b_all.append(np.full(len(amt), bi))
            r_all.append(np.full(len(amt), rule))
    d, t, e, bud, rule_, parts = (np.concatenate(x) for x in (d_all, t_all, e_all, b_all,
                                                               r_all, p_all))
    gain = problem.predictor.gain(d, parts)
    if problem.coverage is not None:
        gain = gain * coverage_weights(problem, variant, coef, fills)
    keep = _pareto(gain, t, e, eps)
    return VariantCandidates(variant, coef, budgets, d[keep], t[keep], e[keep], bud[keep],
                             rule_[keep], parts[keep], gain[keep])


#: the most entries (fills x devices) one batch of :func:`coverage_weights` holds
COVERAGE_BATCH_ENTRIES = 2_000_000


def coverage_weights(problem: PlanningProblem, variant: int, coef: Coefficients,
                     fills: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
                     ) -> np.ndarray:
    """Under label skew, what each greedy fill is worth per effective sample the scalar model
    gives it (netsim's extension of PACT, whose paper assumes IID data). ``fills``: per
    (budget, ranking), the ranking's ``order`` (positions in ``coef.idx``), its ``caps``, the
    ``amounts`` filled along it and the participants each uses; returns one weight per
    amount, in order. Each fill is repeated for the epochs the scalar model says it needs to
    the target (at most the epochs left) and rated by the policy's per-class state
    (:meth:`netsim.training.loss.PlanningCoverage.gain_weights`), many fills per call (at
    most ``COVERAGE_BATCH_ENTRIES`` fill x device entries). A fill of devices holding few of
    the classes gets little (its classes saturate and the others lag); one that trains the
    population's mix about 1. The planner replays its plan through the per-class state and
    corrects what this stationary rating misses (:class:`policies.pact.planner.Planner`)."""
    cov = problem.coverage
    assert cov is not None
    start = cov.equivalent_samples(variant)
    target, horizon = problem.target_samples(variant), problem.epochs_left
    n = len(coef.idx)
    out: list[np.ndarray] = []
    batch: list[np.ndarray] = []
    gains: list[np.ndarray] = []
    size = 0

    def flush() -> None:
        nonlocal size
        if batch:
            out.append(cov.gain_weights(coef.idx, np.concatenate(batch), np.concatenate(gains),
                                        variant, target, horizon, start))
        batch.clear()
        gains.clear()
        size = 0

    for order, caps, amounts, parts in fills:
        prev = np.concatenate([[0.0], np.cumsum(caps)[:-1]])
        takes = np.zeros((len(amounts), n))
        takes[:, order] = np.clip(amounts[:, None] - prev[None, :], 0.0, caps[None, :])
        if size + takes.size > COVERAGE_BATCH_ENTRIES:
            flush()
        batch.append(takes)
        gains.append(np.asarray(problem.predictor.gain(amounts, parts), dtype=float))
        size += takes.size
    flush()
    return np.concatenate(out) if out else np.zeros(0)


def _front_2d(group: np.ndarray, t: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Indices not dominated in (time, energy) by another of the same ``group`` (vectorised)."""
    order = np.lexsort((e, t, group))
    g, es = group[order], e[order]
    rank = np.unique(g, return_inverse=True)[1]
    key = es + (rank.max() - rank) * (np.abs(es).max() + 1.0) * 4.0  # groups never mix
    prev = np.concatenate([[np.inf], np.minimum.accumulate(key)[:-1]])
    return order[key < prev - 1e-12 * np.abs(np.where(np.isfinite(prev), prev, 0.0))]


def _pareto(d: np.ndarray, t: np.ndarray, e: np.ndarray, eps: float) -> np.ndarray:
    """Indices of candidates not dominated (at least as much progress ``d``, no longer, no
    costlier) by another candidate of their bucket of ``d`` (relative width eps). ``d`` is the
    epoch's gain in effective samples: with a participant exponent, more samples spread over
    more devices can be less progress."""
    first = _front_2d(d, t, e)                        # same D: a (time, energy) front
    d1, t1, e1 = d[first], t[first], e[first]
    bucket = np.floor(np.log(d1) / eps + 1e-9).astype(np.int64)
    order = np.argsort(bucket, kind="stable")
    bounds = np.flatnonzero(np.diff(bucket[order])) + 1
    keep = []
    for grp in np.split(order, bounds):
        if len(grp) > 1:
            dd, tt, ee = d1[grp], t1[grp], e1[grp]
            dom = ((dd[None, :] >= dd[:, None]) & (tt[None, :] <= tt[:, None])
                   & (ee[None, :] <= ee[:, None]))
            strict = ((dd[None, :] > dd[:, None]) | (tt[None, :] < tt[:, None])
                      | (ee[None, :] < ee[:, None]))
            grp = grp[~(dom & strict).any(axis=1)]
        keep.append(grp)
    return np.sort(first[np.concatenate(keep)])
