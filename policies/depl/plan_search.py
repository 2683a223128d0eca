"""The exact best-first search for the cheapest DepL plan that meets pi (netsim's formulation).

:func:`search_plans` searches the states of variant sequences (option, last variant,
effective samples, per-node log failure so far, depth, cost; energies in J) over every data
fraction at once, with dominance (:class:`_Bucket`) and bound pruning
(:mod:`policies.depl.plan_bounds`), from a first best plan of one variant or one switch
(:func:`_two_phase`). It stops at its time or state limit with its best plan and a proven
lower bound (:class:`SearchResult`: ``status``, ``bound_j``, ``gap``). The success of a plan is
computed as :mod:`policies.depl.plan_success` computes it; the policy that uses the search:
:mod:`policies.depl.optimum`.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import log_ndtr

from netsim.training.loss import LossPredictor
from policies.depl.plan_bounds import cost_to_go, dominance_slack, loss_bound
from policies.depl.plan_success import EpochOption, increment, quadrature

STATUS_OPTIMAL, STATUS_TIME, STATUS_STATES = "optimal", "time_limit", "state_limit"


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
                _, inc = increment(base, x, target_loss, np.array([a]), np.array([acc_n]))
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
                        means, inc = increment(base, x, target_loss, last, cur_n)
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
    the mean's range), and the loss-space bound of :func:`cost_to_go` (the cheapest way to
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
    x, w = quadrature()
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
    tables = [cost_to_go(base, x, o, horizon, target_loss) for o in options]
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
        means, inc = increment(base, x, target_loss, u, n_new)
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
                lb[rows] = np.maximum(lb[rows], c_new[k] + loss_bound(
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
