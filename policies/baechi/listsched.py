"""Memory-aware list scheduling: the engine under m-ETF, m-SCT and m-TOPO.

Repeatedly picks the (ready operator, device) pair with the earliest possible start, ties by
topological index. The start counts transfers of inputs from other devices, each reserving the
sender's and the receiver's channel (one serialised channel per device, appended in order), and
the device's live memory (see :mod:`policies.baechi.memory`): an operator needs its persistent
bytes for the whole step, and temporary + output bytes plus received inputs from their
allocation on. Nothing is delayed for memory (the executor does not wait for it): a transfer
starts as soon as its producer has ended and both channels are free, the operator when its
device is free and its inputs have arrived, and a device where that does not fit is skipped
until memory is freed there.

Per device, ready operators sit in two priority queues: those whose inputs are ready by the
time the device is free (keyed by topological index) and the others (keyed by a lower bound of
their data-ready time, refreshed lazily). The device's best candidate is cached and recomputed
only when that device, a channel it uses, or its memory changes: each step costs
O(devices x log n) plus the in-degree of the operators re-evaluated.

Options: ``fixed`` pins operators to devices (m-TOPO); colocation groups (``IndexedGraph.group``)
go to the device of their first operator. m-SCT's favourite-child rule is a subclass
(:mod:`policies.baechi.favourite`) that overrides :meth:`_Scheduler.choose`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

from netsim.opgraph.costs import CostModel, IndexedGraph
from policies.baechi.memory import MemoryTimeline
from policies.baechi.result import PlacementResult


def _snap(x: float) -> float:
    """``x`` (s) on the whole nanosecond when it is that up to float error (faithful mode: sums of
    Baechi's whole-microsecond times then tie exactly, as its integer times do), else ``x``."""
    r = round(x, 9)
    return r if abs(r - x) < 1e-13 else x


class _Scheduler:
    """The list scheduler's state; :meth:`run` places every operator or says why it cannot."""

    def __init__(self, ig: IndexedGraph, cost: CostModel, fixed=None, favourite=None) -> None:
        n, nd = len(ig), cost.n_devices
        self.ig, self.cost, self.n, self.nd = ig, cost, n, nd
        self.mem = [MemoryTimeline(m) for m in cost.memory_bytes]
        self.dev_free = [0.0] * nd
        self.chan_free = [0.0] * nd
        self.dev = [-1] * n
        self.start = [0.0] * n
        self.end = [0.0] * n
        self.pin = list(fixed) if fixed is not None else [-1] * n
        self.fav = list(favourite) if favourite is not None else [-1] * n
        self.group_dev = [-1] * ig.n_groups
        self.rules = fixed is not None or ig.n_groups > 0
        self.missing = [len(p) for p in ig.preds]
        self.inputs: list[list[tuple]] = [[] for _ in range(n)]  # set when ready, see ready()
        nt = len(ig.tensor_src)
        self.comm_out: list[list[float]] = [[] for _ in range(nt)]  # per tensor, set on commit (s)
        self.base_need = [t + o for t, o in zip(ig.temporary_bytes, ig.output_bytes, strict=True)]  # bytes
        self.left = [len(s) for s in ig.succs]
        self.arrival: list[float | None] = [None] * (nt * nd)  # [t * nd + d]: tensor t on d (s)
        self.targets: list[list[int]] = [[] for _ in range(nt)]
        self.local_end = [0.0] * n
        self.remote_end: list[float | None] = [None] * (nt * nd)  # [t * nd + d]: last use on d (s)
        self.out_end = [0.0] * n
        self.now_q: list[list[int]] = [[] for _ in range(nd)]
        self.later_q: list[list[tuple[float, int]]] = [[] for _ in range(nd)]
        self.blocked: list[list[int]] = [[] for _ in range(nd)]
        self.cache: list[tuple | None] = [None] * nd
        self.order: list[int] = []
        self.transfers: list[tuple[int, int, int, float, float, int]] = []
        self.touched: set[int] = set()
        self.baechi = cost.mode == "faithful"  # Baechi's transfer rules (see evaluate)
        # whole-microsecond graphs (profiles): snap sums so Baechi's integer ties stay ties
        self.snap = self.baechi and all(abs(t * 1e6 - round(t * 1e6)) < 1e-6 for t in ig.time_ref_s)
        self.now = 0.0  # faithful: the time of the last decision; idle devices wait until it

    # -- candidates -----------------------------------------------------------------------
    def allowed(self, i: int, d: int) -> bool:
        p = self.pin[i]
        if p >= 0:
            return p == d
        g = self.ig.group[i]
        return g < 0 or self.group_dev[g] < 0 or self.group_dev[g] == d

    def devices_for(self, i: int) -> range | tuple[int]:
        if self.pin[i] >= 0:
            return (self.pin[i],)
        g = self.ig.group[i]
        if g >= 0 and self.group_dev[g] >= 0:
            return (self.group_dev[g],)
        return range(self.nd)

    def ready(self, i: int) -> None:
        """i's inputs are all scheduled: record them, by end, and queue i.

        Each input is a tensor t of a producer u: ``(u, t * n_devices, u's device, u's end (s),
        t's bytes, t's transfer time to each device (s))``: all fixed once u is scheduled. In
        producer end order (faithful mode: the graph's in-edge order, as Baechi's placers send); one per producer unless the graph has several tensors per edge.
        """
        ig, end = self.ig, self.end
        preds, ts = ig.preds[i], ig.in_tensors[i]
        ks: Sequence[int]
        if self.baechi or len(preds) < 2:
            ks = range(len(preds))  # faithful: Baechi sends inputs in the graph's in-edge order
        else:
            ks = sorted(range(len(preds)), key=lambda k: end[preds[k]])
        nd, dev, tb, comm_out = self.nd, self.dev, ig.tensor_bytes, self.comm_out
        self.inputs[i] = [(u, t * nd, dev[u], end[u], tb[t], comm_out[t])
                          for k in ks for u in (preds[k],) for t in ts[k]]
        self.push(i)

    def push(self, i: int, devices=None) -> None:
        arrival, inputs = self.arrival, self.inputs[i]
        for d in devices if devices is not None else self.devices_for(i):
            dr = 0.0
            for _, un, _, eu, _, comm in inputs:  # comm[dev[u]] is 0.0: a local input is ready at its end
                a = arrival[un + d]
                if a is None:
                    a = eu + comm[d]
                if a > dr:
                    dr = a
            if dr <= self.dev_free[d]:
                heapq.heappush(self.now_q[d], i)
                key = (self.dev_free[d], i)
            else:
                heapq.heappush(self.later_q[d], (dr, i))
                key = (dr, i)
            c = self.cache[d]
            if c is not None and key < (c[0], c[1]):
                self.cache[d] = None

    def evaluate(self, i: int, d: int):
        """``(start, i, d, transfers)`` of i on d, or None if it does not fit; each transfer is
        ``(producer, its device, start, arrival, tensor id * n_devices, bytes)`` (s), in start
        order.

        As the executor runs the plan: each input transfer starts as soon as its producer has
        ended and both channels are free (never later), its bytes held on ``d`` from that start;
        the operator starts when ``d`` is free and its inputs are there, its temporary + output
        bytes held from then on. Nothing waits for memory: when this does not fit, ``d`` is not
        feasible for ``i`` at this point of the schedule.
        """
        if self.baechi:
            return self._evaluate_baechi(i, d)
        arrival = self.arrival
        t = self.dev_free[d]
        cf = None  # the channels as these transfers leave them (a copy once there is one)
        xf = []
        recv = 0.0
        for u, un, du, eu, sbu, comm in self.inputs[i]:
            if du == d:
                if eu > t:
                    t = eu
                continue
            a = arrival[un + d]  # un: the tensor's id * n_devices
            if a is None:
                if cf is None:
                    cf = self.chan_free.copy()
                s = eu
                if cf[du] > s:
                    s = cf[du]
                if cf[d] > s:
                    s = cf[d]
                a = s + comm[d]
                cf[du] = cf[d] = a
                xf.append((u, du, s, a, un, sbu, a))
                recv += sbu
            if a > t:
                t = a
        return self._fits(i, d, t, t, xf, recv)

    def _fits(self, i: int, d: int, rank_s: float, t: float, xf: list, recv: float):
        """The candidate ``(rank_s, i, d, xf, t)`` if i's memory fits on d, else None."""
        if self._fits_surely(i, d, recv):
            return (rank_s, i, d, xf, t)
        ig, m = self.ig, self.mem[d]
        need = self.base_need[i] + recv
        held = 0.0  # received tensors, each from its transfer's start (xf is in start order)
        for _, _, s, _, _, b, _ in xf:
            held += b
            if not m.fits(s, held, ig.memory_bytes[i]):
                return None
        if not m.fits(t, need, ig.memory_bytes[i]):
            return None
        return (rank_s, i, d, xf, t)

    def _fits_surely(self, i: int, d: int, recv: float) -> bool:
        """True when i fits on d whatever the timeline, receiving ``recv`` bytes (the memory
        check's fast path: the peak so far plus all of i's needs)."""
        m = self.mem[d]
        return m.peak_dynamic_bytes + self.base_need[i] + recv + m.persistent_bytes + self.ig.memory_bytes[i] <= m.limit_bytes

    def _baechi_rank(self, i: int, d: int) -> tuple[float, float]:
        """``(rank, received bytes)`` of i on d: Baechi's estimate of its start (s), each in-edge
        on its own against the channels as they are (the edge's tensors not yet on d as one
        transfer: it starts on the sender's channel when the producer has ended and that channel
        is free, and is received when the receiver's channel is free too), and the bytes of the
        tensors d has still to receive."""
        arrival, chan, snap = self.arrival, self.chan_free, self.snap
        rank = self.dev_free[d]
        recv = 0.0
        inputs = self.inputs[i]
        k, n = 0, len(inputs)
        while k < n:
            u, _, du, eu, _, _ = inputs[k]
            if du == d:
                if eu > rank:
                    rank = eu
                k += 1
                continue
            w_sum, est = 0.0, 0.0
            while k < n and inputs[k][0] == u:  # the edge u -> i: its tensors are consecutive
                _, un, _, _, b, comm = inputs[k]
                a = arrival[un + d]
                if a is None:
                    w_sum += comm[d]
                    recv += b
                elif a > est:
                    est = a
                k += 1
            if w_sum > 0.0:
                s = eu if eu > chan[du] else chan[du]
                e = (s if s > chan[d] else chan[d]) + w_sum
                if snap:
                    e = _snap(e)
                if e > est:
                    est = e
            if est > rank:
                rank = est
        return rank, recv

    def _evaluate_baechi(self, i: int, d: int):
        """:meth:`evaluate` as Baechi's m-ETF (``placer/placer_utils.py``, ``ReadyOpManager``).

        The rank of i on d is Baechi's estimate (:meth:`_baechi_rank`). The start is what
        committing does: the tensors sent one at a time in in-edge order, each holding the
        sender's channel from its send start and the receiver's from its receive start (the later
        of the send start and the receiver's channel) for its transfer time; the operator starts
        when d is free and all have arrived.
        """
        rank, recv = self._baechi_rank(i, d)
        arrival, snap = self.arrival, self.snap
        t = self.dev_free[d]
        cf = None
        xf: list = []
        for u, un, du, eu, b, comm in self.inputs[i]:
            if du == d:
                if eu > t:
                    t = eu
                continue
            a = arrival[un + d]
            if a is None:
                if cf is None:
                    cf = self.chan_free.copy()
                s = eu if eu > cf[du] else cf[du]
                w = comm[d]
                r = s if s > cf[d] else cf[d]
                a, sent = r + w, s + w
                if snap:
                    a, sent = _snap(a), _snap(sent)
                cf[du], cf[d] = sent, a
                xf.append((u, du, s, a, un, b, sent))
            if a > t:
                t = a
        return self._fits(i, d, rank, t, xf, recv)

    def top(self, d: int):
        if self.cache[d] is not None:
            return self.cache[d]
        dev, now_q, later_q = self.dev, self.now_q[d], self.later_q[d]
        free = self.dev_free[d]
        allowed = self.allowed if self.rules else None
        while later_q and later_q[0][0] <= free:
            heapq.heappush(now_q, heapq.heappop(later_q)[1])
        while now_q:
            i = now_q[0]
            if dev[i] >= 0 or (allowed is not None and not allowed(i, d)):
                heapq.heappop(now_q)
                continue
            c = self.evaluate(i, d)
            if c is not None and c[0] <= free:
                self.cache[d] = c
                return c
            heapq.heappop(now_q)
            if c is None:
                self.block(i, d)
            else:
                heapq.heappush(later_q, (c[0], i))
        while later_q:
            key, i = later_q[0]
            if dev[i] >= 0 or (allowed is not None and not allowed(i, d)):
                heapq.heappop(later_q)
                continue
            c = self.evaluate(i, d)
            if c is None:
                heapq.heappop(later_q)
                self.block(i, d)
            elif c[0] > key:
                heapq.heapreplace(later_q, (c[0], i))
            else:
                self.cache[d] = c
                return c
        return None

    def block(self, i: int, d: int) -> None:
        """i does not fit on d now: wait for frees there."""
        self.blocked[d].append(i)

    # -- commitment -----------------------------------------------------------------------
    def commit(self, c) -> None:
        rank, i, d, xf, t = c
        ig, nd, mem = self.ig, self.nd, self.mem[d]
        if self.baechi and rank > self.now:
            # Baechi's scheduler moves in time: a device idle at the decision time cannot start
            # anything earlier (``ETFDevice.advance``)
            self.now = rank
            for x in range(nd):
                if self.dev_free[x] < rank:
                    self.dev_free[x] = rank
                    self.cache[x] = None
        changed = {d}
        self.dev[i], self.start[i] = d, t
        e = t + self.cost.compute_s[i][d]
        if self.snap:
            e = _snap(e)  # Baechi's integer times tie exactly
        self.end[i] = e
        self.dev_free[d] = e
        for tt in ig.out_tensors[i]:
            self.comm_out[tt] = self.cost.comm_row_s(ig.tensor_bytes[tt], d)
        chan_free = self.chan_free
        for u, du, s, a, un, b, sent in xf:
            changed.add(du)
            chan_free[du] = max(chan_free[du], sent)
            chan_free[d] = max(chan_free[d], a)
            self.arrival[un + d] = a
            self.targets[un // nd].append(d)
            self.out_end[u] = max(self.out_end[u], a)
            self.transfers.append((u, du, d, s, a, un // nd))
            mem.allocate(s, b)
        self.touched = set(changed)  # devices whose memory was freed or allocated
        mem.add_persistent(ig.memory_bytes[i])
        mem.allocate(t, ig.temporary_bytes[i], until_s=e)
        mem.allocate(t, ig.output_bytes[i])
        if not ig.succs[i]:
            mem.free(e, ig.output_bytes[i])
        self.order.append(i)
        for u, un, du, _, _, _ in self.inputs[i]:
            if du == d:
                self.local_end[u] = max(self.local_end[u], e)
            else:
                k = un + d
                r = self.remote_end[k]
                if r is None or e > r:
                    self.remote_end[k] = e
        for u in ig.preds[i]:
            self.left[u] -= 1
            if self.left[u] == 0:
                self.release(u)
        g = ig.group[i]
        if g >= 0 and self.group_dev[g] < 0:
            self.group_dev[g] = d
        for x in self.touched:  # frees may unblock operators; they only make caches pessimistic
            if self.blocked[x]:
                for b in self.blocked[x]:
                    if self.dev[b] < 0 and self.allowed(b, x):
                        self.push(b, (x,))
                self.blocked[x] = []
        cache, rules = self.cache, self.rules
        for x in range(nd):
            cx = cache[x]
            if cx is None:
                continue
            if x in changed or cx[1] == i or (rules and not self.allowed(cx[1], x)):
                cache[x] = None
                continue
            for xfer in cx[3]:  # a channel its transfers use
                if xfer[1] in changed:
                    cache[x] = None
                    break
        missing = self.missing
        for v in ig.succs[i]:
            missing[v] -= 1
            if missing[v] == 0:
                self.ready(v)

    def release(self, u: int) -> None:
        du, ig, nd = self.dev[u], self.ig, self.nd
        self.mem[du].free(max(self.end[u], self.local_end[u], self.out_end[u]), ig.output_bytes[u])
        self.touched.add(du)
        for t in ig.out_tensors[u]:
            for d in self.targets[t]:
                k = t * nd + d
                last = self.remote_end[k]
                if last is None:
                    last = self.arrival[k]
                    assert last is not None  # d is among t's targets: the tensor was sent there
                self.mem[d].free(last, ig.tensor_bytes[t])
                self.touched.add(d)

    # -- driver ---------------------------------------------------------------------------
    choose: Callable[[int, Any], Any] | None = None
    """Optional ``choose(d, candidate) -> candidate``: a rule over m-ETF's candidate of device d
    (m-SCT's favourite child, :mod:`policies.baechi.favourite`)."""

    def run(self) -> str:
        for i in range(self.n):
            if self.missing[i] == 0:
                self.ready(i)
        cache, devices, choose = self.cache, range(self.nd), self.choose
        for _ in range(self.n):
            best = None
            for d in devices:
                c = cache[d]
                if c is None:
                    c = self.top(d)
                if choose is not None:
                    c = choose(d, c)
                if c is not None and (best is None or c[0] < best[0] or (c[0] == best[0] and c[1] < best[1])):
                    best = c
            if best is None:
                return self.why_stuck()
            self.commit(best)
        return ""

    def why_stuck(self) -> str:
        ig = self.ig
        total = sum(ig.memory_bytes) + sum(ig.temporary_bytes) + sum(ig.output_bytes)
        capacity = sum(self.cost.memory_bytes)
        if sum(ig.memory_bytes) > capacity:
            return (f"persistent memory of the graph ({sum(ig.memory_bytes):.4g} bytes) exceeds the "
                    f"devices' total memory ({capacity:.4g} bytes)")
        ready = [i for i in range(self.n) if self.dev[i] < 0 and self.missing[i] == 0]
        i = ready[0] if ready else next(i for i in range(self.n) if self.dev[i] < 0)
        free = [f"{m.limit_bytes - m.persistent_bytes - m.total_bytes:.4g}" for m in self.mem]
        return (f"operator {ig.nodes[i]!r} (persistent {ig.memory_bytes[i]:.4g} bytes, temporary + "
                f"output {ig.temporary_bytes[i] + ig.output_bytes[i]:.4g} bytes) fits on no allowed "
                f"device; free memory per device (bytes): {', '.join(free)}; graph total "
                f"{total:.4g} bytes, devices total {capacity:.4g} bytes")


def list_schedule(
    ig: IndexedGraph,
    cost: CostModel,
    algorithm: str,
    fixed: Sequence[int] | None = None,
    favourite: Sequence[int] | None = None,
    scheduler: type[_Scheduler] = _Scheduler,
) -> PlacementResult:
    """Schedule ``ig`` on the cost model's devices (see the module docstring).

    ``favourite[i]`` is operator i's favourite child index or -1, used by ``scheduler`` (the
    plain scheduler ignores it).

    Returns
    -------
    PlacementResult
        Status ``"infeasible"`` with the reason when some operator can never be placed.
    """
    s = scheduler(ig, cost, fixed, favourite)
    reason = s.run()
    nodes = ig.nodes
    placed = [i for i in s.order]
    res = PlacementResult(algorithm=algorithm, mode=cost.mode, graph=ig.graph)
    res.placement = {nodes[i]: s.dev[i] for i in placed}
    res.order = {nodes[i]: k for k, i in enumerate(placed)}
    res.start_s = {nodes[i]: s.start[i] for i in placed}
    res.end_s = {nodes[i]: s.end[i] for i in placed}
    key = ig.tensor_key
    res.transfer_order = [(nodes[u], dst) if key[t] is None else (nodes[u], dst, key[t])
                          for u, _, dst, _, _, t in s.transfers]
    res.planned_peak_memory_bytes = [m.peak_bytes() for m in s.mem]
    if reason:
        res.status, res.reason = "infeasible", reason
    else:
        res.planned_step_s = max(s.end, default=0.0)
    return res
