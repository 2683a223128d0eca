"""Min-cost cluster placement for one epoch (DepL's clusters and resources).

netsim's formalization, in the style of virtual-network-function placement: the epoch's
compute demand (``samples`` samples of one model variant) is placed on the cheapest capacity
that finishes within the epoch's time budget. Every eligible trainer *i* may take a share
``x_i`` of the samples (at most what it holds); taking part (``y_i = 1``) costs its model
download and upload. The epoch lasts ``T`` = the slowest member's transfer + compute time, plus
the aggregation (2 x params FLOP per member on the aggregator). The energy is exactly
:func:`netsim.costs.estimate_epoch`'s, which is linear in ``(x, y, T)``::

    min  sum_i x_i c_i (P_busy_i - P_idle_i) + y_i (comm_i + g (P_idle_all + P_busy_agg - P_idle_agg))
         + P_idle_all T
    s.t. sum_i x_i = samples;  x_i <= samples_i y_i;  t_i y_i + c_i x_i <= T;
         T + g sum_i y_i <= budget_s;  y binary

with ``c_i`` the compute seconds per sample, ``t_i`` the transfer seconds, ``comm_i`` the
transfer energy (J), ``g`` the aggregation seconds per member. Contention is priced by one
more row per constraint that two or more candidates share (a Wi-Fi or cellular cell's air
time, a backhaul): ``sum_i s_ih y_i <= T``, with ``s_ih`` the seconds candidate i's download
and upload take of it (:func:`netsim.costs.constraint_seconds`, netsim's bound: every transfer
of the epoch crosses it within the epoch). The chosen cluster's time and energy are then
:func:`netsim.costs.estimate_epoch`'s, contention and radio energy included. Solved with HiGHS (scipy's
``milp``). The result is a *cluster*: the members and each one's share of the epoch's compute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_matrix, diags, hstack, identity, vstack

from netsim.costs import constraint_seconds, device_epoch_times, estimate_epochs
from netsim.devices import DeviceTable
from netsim.scenario.schema import ModelSpec


@dataclass(frozen=True)
class Cluster:
    """One epoch's placement: member indices, integer samples each, and the predicted epoch.

    ``samples`` is an array over all devices (0 = not a member); ``time_s`` and ``energy_j``
    come from :func:`netsim.costs.estimate_epochs` for exactly these samples, as an epoch
    that follows one like it (DepL repeats a cluster: radio tails carry over).
    """

    variant: int
    samples: np.ndarray
    time_s: float
    energy_j: float
    gain_weight: float = 1.0
    """Under label skew, what the epoch is worth per effective sample the scalar model gives
    it (:meth:`netsim.training.loss.PlanningCoverage.gain_weights`; 1 for IID data)."""

    @property
    def members(self) -> np.ndarray:
        """Indices of the devices taking part."""
        return np.flatnonzero(self.samples)

    @property
    def flop_share(self) -> np.ndarray:
        """Each member's share of the epoch's compute (sums to 1)."""
        s = self.samples[self.members].astype(float)
        return s / s.sum()


def eligible_trainers(table: DeviceTable, model: ModelSpec, variant: int,
                      memory_overhead: float, available: np.ndarray | None = None) -> np.ndarray:
    """Trainers that hold the variant in memory (model bytes x overhead) and are available."""
    idx = table.trainers
    need = model.model_bytes(variant) * memory_overhead
    ok = table.memory_bytes[idx] >= need
    if available is not None:
        ok &= available[idx]
    return idx[ok]


def _round_samples(x: np.ndarray, cap: np.ndarray, total: int) -> np.ndarray:
    """Integer samples summing to ``total``, each within [0, cap], close to ``x``."""
    out = np.minimum(np.floor(x + 1e-9), cap).astype(np.int64)
    rest = int(total - out.sum())
    if rest > 0:
        order = np.argsort(-(x - out) - 1e3 * (out > 0), kind="stable")
        for i in order:
            if rest == 0:
                break
            add = int(min(rest, cap[i] - out[i]))
            out[i] += add
            rest -= add
    return out


@dataclass(frozen=True)
class _Coefficients:
    """Per-candidate terms of the placement problem (see the module docstring)."""

    cap: np.ndarray        # samples held
    t: np.ndarray          # transfer time (s)
    c: np.ndarray          # compute time per sample (s)
    per_sample_j: np.ndarray
    fixed_j: np.ndarray    # energy of taking part at all (J)
    g: float               # aggregation time per member (s)
    p_idle_w: float        # idle power of every device (W)
    shared: csr_matrix     # seconds each candidate's transfers take of each shared constraint


def _coefficients(table: DeviceTable, model: ModelSpec, variant: int,
                  cand: np.ndarray) -> _Coefficients:
    transfer, compute, comm = device_epoch_times(table, model, variant, np.ones(table.n))
    agg = table.aggregator
    g = model.aggregation_flop(variant, 1) / table.flop_per_s[agg]
    p_idle = float(table.power_idle_w.sum())
    agg_extra = table.power_busy_w[agg] - table.power_idle_w[agg]
    d = (table.power_busy_w - table.power_idle_w)[cand]
    owner, hop, sec = constraint_seconds(table, model, variant, cand)
    rows = np.unique(hop, return_inverse=True)[1]
    shared = csr_matrix((sec, (rows, owner)), shape=(int(rows.max(initial=-1)) + 1, len(cand)))
    return _Coefficients(table.samples[cand].astype(float), transfer[cand], compute[cand],
                         compute[cand] * d, comm[cand] + g * (p_idle + agg_extra), g, p_idle,
                         shared)


def place_epoch(table: DeviceTable, model: ModelSpec, variant: int, samples: int,
                budget_s: float, candidates: np.ndarray, method: str = "auto",
                milp_max_devices: int = 8, time_limit_s: float = 2.0) -> Cluster | None:
    """The cheapest cluster training ``samples`` samples of ``variant`` within ``budget_s``.

    Parameters
    ----------
    table: the device table.
    model: the model (variant sizes and FLOP per sample).
    variant: the variant index.
    samples: samples to train this epoch (integer).
    budget_s: the epoch's time budget (s), aggregation included.
    candidates: indices of the devices allowed to take part.
    method: ``"milp"`` (exact, HiGHS), ``"greedy"`` (scan over the epoch length, then an LP
        for the shares of the chosen members), or ``"auto"``: exact up to
        ``milp_max_devices`` candidates, greedy above (netsim's choice, for planning speed).
    time_limit_s: HiGHS time limit (s) for the exact method; its incumbent is used after.

    Returns
    -------
    The cluster, or None when no placement meets the budget (or too few samples are held).
    """
    cand = np.asarray(candidates, dtype=np.int64)
    cap = table.samples[cand].astype(float)
    if samples <= 0 or cap.sum() < samples or not budget_s > 0:
        return None
    co = _coefficients(table, model, variant, cand)
    if method == "milp" or (method == "auto" and len(cand) <= milp_max_devices):
        x = _solve_milp(co, samples, budget_s, time_limit_s)
    else:
        members = _greedy_members(co, samples, budget_s)
        x = None if members is None else _solve_shares(co, samples, budget_s, members)
    if x is None:
        return None
    alloc = np.zeros(table.n, dtype=np.int64)
    alloc[cand] = _round_samples(x, table.samples[cand], samples)
    # DepL repeats a cluster epoch after epoch: its cost is that of an epoch after one like
    # it (radio tails carried over, netsim.costs.estimate_epochs); time is the same
    est = estimate_epochs(table, model, [(variant, alloc)] * 2)[1]
    return Cluster(variant, alloc, est.time_s, est.energy_j)


def _constraints(co: _Coefficients, samples: int, budget_s: float,
                 y_fixed: np.ndarray | None = None) -> tuple[np.ndarray, LinearConstraint, Bounds]:
    """Objective and constraints over (x, y, T); ``y_fixed`` pins the members (bounds)."""
    k = len(co.cap)
    cost = np.concatenate([co.per_sample_j, co.fixed_j, [co.p_idle_w]])
    eye = identity(k, format="csr")
    a_sum = csr_matrix(np.concatenate([np.ones(k), np.zeros(k), [0.0]])[None, :])
    a_cap = hstack([eye, -diags(co.cap), csr_matrix((k, 1))])
    a_time = hstack([diags(co.c), diags(co.t),
                     csr_matrix(-np.ones((k, 1)))])
    a_agg = csr_matrix(np.concatenate([np.zeros(k), np.full(k, co.g), [1.0]])[None, :])
    n_sh = co.shared.shape[0]
    a_shared = hstack([csr_matrix((n_sh, k)), co.shared, csr_matrix(-np.ones((n_sh, 1)))])
    a = vstack([a_sum, a_cap, a_time, a_agg, a_shared]).tocsr()
    lo = np.concatenate([[samples], np.full(2 * k, -np.inf), [-np.inf], np.full(n_sh, -np.inf)])
    hi = np.concatenate([[samples], np.zeros(2 * k), [budget_s], np.zeros(n_sh)])
    y_lo = np.zeros(k) if y_fixed is None else y_fixed
    y_hi = np.ones(k) if y_fixed is None else y_fixed
    bounds = Bounds(np.concatenate([np.zeros(k), y_lo, [0.0]]),
                    np.concatenate([co.cap, y_hi, [budget_s]]))
    return cost, LinearConstraint(a, lo, hi), bounds


def _solve_milp(co: _Coefficients, samples: int, budget_s: float,
                time_limit_s: float) -> np.ndarray | None:
    k = len(co.cap)
    cost, cons, bounds = _constraints(co, samples, budget_s)
    integrality = np.concatenate([np.zeros(k), np.ones(k), [0]])
    res = milp(cost, constraints=cons, integrality=integrality, bounds=bounds,
               options={"time_limit": time_limit_s, "mip_rel_gap": 1e-6})
    if res.x is None:
        return None
    return np.where(res.x[k:2 * k] > 0.5, res.x[:k], 0.0)


def _solve_shares(co: _Coefficients, samples: int, budget_s: float,
                  members: np.ndarray) -> np.ndarray | None:
    """The optimal shares (LP) once the members are fixed."""
    k = len(co.cap)
    y = np.zeros(k)
    y[members] = 1.0
    cost, cons, bounds = _constraints(co, samples, budget_s, y_fixed=y)
    res = milp(cost, constraints=cons, integrality=np.zeros(2 * k + 1), bounds=bounds)
    return None if res.x is None else np.where(y > 0.5, res.x[:k], 0.0)


def _greedy_members(co: _Coefficients, samples: int, budget_s: float,
                    n_lengths: int = 96) -> np.ndarray | None:
    """Members of the cheapest greedy fill over a scan of epoch lengths ``T``.

    For each ``T`` a candidate holds ``min(samples_i, (T - t_i) / c_i)`` samples; candidates
    are taken by energy per sample at full use until the demand is met.
    """
    finish = co.t + co.c * co.cap
    lo, hi = float(co.t.min()), float(min(finish.max(), budget_s))
    if hi <= lo:
        return None
    grid = np.unique(np.concatenate([np.geomspace(max(lo, 1e-9), hi, n_lengths),
                                     finish[finish <= hi]]))
    held = np.clip((grid[:, None] - co.t[None, :]) / co.c[None, :], 0.0, co.cap[None, :])
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = np.where(held >= 1.0, co.per_sample_j + co.fixed_j / held, np.inf)
    order = np.argsort(unit, axis=1, kind="stable")
    held_sorted = np.take_along_axis(held, order, axis=1)
    cum = np.cumsum(held_sorted, axis=1)
    n_members = (cum < samples).sum(axis=1) + 1
    ok = (cum[:, -1] >= samples) & (grid + co.g * n_members <= budget_s)
    if not ok.any():
        return None
    rows = np.flatnonzero(ok)
    costs = np.full(len(rows), np.inf)
    for j, r in enumerate(rows):
        m = order[r, : n_members[r]]
        rest = samples - (cum[r, n_members[r] - 2] if n_members[r] > 1 else 0.0)
        x = held[r, m].copy()
        x[-1] = rest
        # the members' time on the constraints they share (cells, backhauls) lengthens it
        length = max(float(grid[r]), float(np.max(np.asarray(co.shared[:, m].sum(axis=1)), initial=0.0)))
        if length + co.g * len(m) <= budget_s:
            costs[j] = (x @ co.per_sample_j[m] + co.fixed_j[m].sum()
                        + co.p_idle_w * (length + co.g * len(m)))
    if not np.isfinite(costs).any():
        return None
    best = rows[int(np.argmin(costs))]
    return order[best, : n_members[best]]
