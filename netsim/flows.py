"""The flow-level network: transfers sharing link directions by max-min fairness.

A transfer is a *flow* over a route. A flow alone on a route of bottleneck bandwidth B and total
latency D moves S bytes in ``8*S/B + D`` seconds: the bits drain at the flow's rate, then the
last bit takes the route's latency to arrive. Concurrent flows share each link direction by
max-min fairness (SimGrid's flow model); rates change only when a flow starts or ends.

How rates are kept (netsim's algorithm, exact, checked against naive progressive filling in
tests/test_network.py). Each flow has a standalone cap: the smallest capacity on its route. A
link direction is *safe* while the caps of the flows crossing it sum to at most its capacity: it
can never bind. When every flow crosses at most one unsafe link, max-min fairness decomposes
into one water-filling per unsafe link: flows whose cap is below the link's fair share run at
their cap, the others share what is left equally. Those sharing flows form a *group* with one
rate and one virtual clock (bits served per member), so a start or end changes one number, not
every member's rate: O(log n) per change with heaps by cap and by finishing point. If some flow
crosses two or more unsafe links, the network falls back to progressive filling over all flows,
once per simulated instant at which flows start or end, until the condition holds again.

Events: one SimPy event per transfer (its arrival), plus one shared wake-up per distinct instant
at which transfers finish (and one per instant of fallback recomputation).
"""

from __future__ import annotations

import heapq
import itertools
from typing import TYPE_CHECKING

import simpy
from simpy.events import NORMAL

from netsim.energy import EnergyMeter

if TYPE_CHECKING:
    from netsim.network import Topology

_TOL = 1e-9
_INF = float("inf")


class _Flow:
    __slots__ = ("hops", "cap", "remaining", "rate", "updated", "version", "done", "latency",
                 "group", "target", "n_unsafe", "capped_in")

    def __init__(self, hops: tuple[int, ...], cap: float, bits: float, latency: float,
                 done: simpy.Event, now: float) -> None:
        self.hops, self.cap, self.remaining, self.latency, self.done = hops, cap, bits, latency, done
        self.rate, self.updated, self.version = 0.0, now, 0
        self.group: _Group | None = None  # sharing member of this unsafe link's group
        self.target = 0.0                 # finishing point on the group's clock (bits)
        self.n_unsafe = 0                 # unsafe links on the route
        self.capped_in: _Group | None = None  # crosses this group's link, running at its cap


class _Group:
    """Water-filling state of one unsafe link direction."""

    __slots__ = ("link", "capacity", "members", "by_cap", "capped", "capped_sum", "rate",
                 "clock", "updated", "finishing", "version")

    def __init__(self, link: int, capacity: float, now: float) -> None:
        self.link, self.capacity = link, capacity
        self.members: set[_Flow] = set()
        self.by_cap: list[tuple[float, int, _Flow]] = []      # min-heap of members' caps
        self.capped: list[tuple[float, int, _Flow]] = []      # max-heap (-cap) of capped flows
        self.capped_sum = 0.0
        self.rate, self.clock, self.updated = 0.0, 0.0, now
        self.finishing: list[tuple[float, int, _Flow]] = []   # min-heap of members' targets
        self.version = 0

    def settle(self, now: float) -> None:
        self.clock += self.rate * (now - self.updated)
        self.updated = now


def _fire_after(env: simpy.Environment, event: simpy.Event, delay_s: float) -> None:
    """Trigger ``event`` successfully ``delay_s`` from now (one scheduled event, like a Timeout)."""
    event._ok = True
    event._value = None
    env.schedule(event, NORMAL, delay_s)


class FlowNetwork:
    """Transfers over a :class:`~netsim.network.Topology`, max-min fair per link direction.

    Communication energy (bits x J/bit of every link crossed) is charged, when the transfer
    starts, to the node at the sending end of each link, in category communication.
    """

    def __init__(self, env: simpy.Environment, topology: Topology, meter: EnergyMeter) -> None:
        self.env, self.topology, self.meter = env, topology, meter
        n_dir = len(topology.capacity_bps)
        self._cap = topology.capacity_bps
        self._link_flows: list[set[_Flow]] = [set() for _ in range(n_dir)]
        self._cap_sum = [0.0] * n_dir
        self._groups: dict[int, _Group] = {}
        self._active: set[_Flow] = set()
        self._multi_unsafe = 0            # flows crossing two or more unsafe links
        self._heap: list[tuple[float, int, int, object]] = []
        self._seq = itertools.count()
        self._wakeup_at = _INF
        self._wakeup_event: simpy.Event | None = None
        self._recompute_pending = False
        self._fallback = False            # rates currently come from progressive filling
        self.bytes_sent = [0.0] * len(topology.node_ids)
        self.bytes_received = [0.0] * len(topology.node_ids)
        self.full_recomputations = 0

    @property
    def active_flows(self) -> int:
        """Number of transfers currently moving bits."""
        return len(self._active)

    def transfer(self, src: str, dst: str, size_bytes: float) -> simpy.Event:
        """Start moving ``size_bytes`` from src to dst; the event fires when it has arrived."""
        done = self.env.event()
        if src == dst:
            _fire_after(self.env, done, 0.0)
            return done
        route = self.topology.route(src, dst)
        bits = 8.0 * float(size_bytes)
        self.bytes_sent[route.senders[0]] += size_bytes
        self.bytes_received[route.receiver] += size_bytes
        comm = self.meter.communication_j
        for sender, epb in route.charges:
            comm[sender] += bits * epb
        if bits <= 0.0:
            _fire_after(self.env, done, route.latency_s)
            return done
        now = self.env.now
        flow = _Flow(route.hops, route.bottleneck_bps, bits, route.latency_s, done, now)
        self._active.add(flow)
        newly_unsafe = []
        link_flows, cap_sum, cap, groups, c = self._link_flows, self._cap_sum, self._cap, \
            self._groups, flow.cap
        for h in flow.hops:
            link_flows[h].add(flow)
            cap_sum[h] += c
            if h in groups:
                flow.n_unsafe += 1
            elif cap_sum[h] > cap[h] * (1.0 + _TOL):
                newly_unsafe.append(h)
        if flow.n_unsafe > 1:
            self._multi_unsafe += 1
        for h in newly_unsafe:
            self._make_unsafe(h, now)
        self._place(flow, now)
        self._schedule_wakeup()
        return done

    # -- rates ------------------------------------------------------------------------------
    def _push_flow(self, flow: _Flow, now: float) -> None:
        flow.version += 1
        finish = now + flow.remaining / flow.rate if flow.rate > 0.0 else _INF
        heapq.heappush(self._heap, (finish, next(self._seq), flow.version, flow))

    def _progress(self, flow: _Flow, now: float) -> None:
        """Bring ``flow.remaining`` up to ``now`` (whatever its current regime)."""
        g = flow.group
        if g is not None:
            g.settle(now)
            flow.remaining = max(flow.target - g.clock, 0.0)
        else:
            flow.remaining = max(flow.remaining - flow.rate * (now - flow.updated), 0.0)
        flow.updated = now

    def _set_individual(self, flow: _Flow, rate: float, now: float) -> None:
        if flow.group is None and flow.rate == rate:
            return
        self._progress(flow, now)
        if flow.group is not None:
            flow.group.members.discard(flow)
            flow.group = None
        flow.rate = rate
        self._push_flow(flow, now)

    def _join(self, flow: _Flow, g: _Group, now: float) -> None:
        self._progress(flow, now)
        g.settle(now)
        flow.group = g
        flow.version += 1  # its individual finish entry is void
        flow.target = g.clock + flow.remaining
        g.members.add(flow)
        seq = next(self._seq)
        heapq.heappush(g.by_cap, (flow.cap, seq, flow))
        heapq.heappush(g.finishing, (flow.target, seq, flow))

    def _add_capped(self, flow: _Flow, g: _Group, now: float) -> None:
        self._set_individual(flow, flow.cap, now)
        flow.capped_in = g
        g.capped_sum += flow.cap
        heapq.heappush(g.capped, (-flow.cap, next(self._seq), flow))

    def _rebalance(self, g: _Group, now: float) -> None:
        """Restore water-filling on g's link: capped flows below the share, members above."""
        g.settle(now)
        by_cap, capped = g.by_cap, g.capped
        for _ in range(4 * (len(by_cap) + len(capped)) + 8):
            n = len(g.members)
            if n:
                share = (g.capacity - g.capped_sum) / n
            else:  # nobody shares yet: unbounded while the capped flows fit, else someone must
                share = _INF if g.capped_sum <= g.capacity * (1.0 + _TOL) else -_INF
            while by_cap and by_cap[0][2].group is not g:
                heapq.heappop(by_cap)
            while capped and capped[0][2].capped_in is not g:
                heapq.heappop(capped)
            if by_cap and by_cap[0][0] < share * (1.0 - _TOL):
                flow = heapq.heappop(by_cap)[2]
                self._add_capped(flow, g, now)
            elif capped and -capped[0][0] > share * (1.0 + _TOL):
                flow = heapq.heappop(capped)[2]
                flow.capped_in = None
                g.capped_sum -= flow.cap
                self._join(flow, g, now)
            else:
                break
        else:
            raise RuntimeError(f"water-filling on link {g.link} did not settle")
        g.rate = max(share, 0.0) if g.members else 0.0
        g.version += 1
        self._push_group(g, now)

    def _push_group(self, g: _Group, now: float) -> None:
        fin = g.finishing
        while fin and (fin[0][2].group is not g or fin[0][2].target != fin[0][0]):
            heapq.heappop(fin)
        if fin and g.rate > 0.0:
            at = now + max(fin[0][0] - g.clock, 0.0) / g.rate
            heapq.heappush(self._heap, (at, next(self._seq), g.version, g))

    def _place(self, flow: _Flow, now: float) -> None:
        """Give a new flow its rate (decomposed regime) or ask for a full pass (fallback)."""
        if self._fallback or self._multi_unsafe:
            self._request_recompute()
            return
        groups, g = self._groups, None
        for h in flow.hops:
            if h in groups:
                g = groups[h]
                break
        if g is None:
            self._set_individual(flow, flow.cap, now)
            return
        if g.members and flow.cap >= g.rate:  # it will share: join directly
            self._join(flow, g, now)
        else:
            self._add_capped(flow, g, now)
        self._rebalance(g, now)

    def _make_unsafe(self, h: int, now: float) -> None:
        g = _Group(h, self._cap[h], now)
        self._groups[h] = g
        for flow in self._link_flows[h]:
            flow.n_unsafe += 1
            if flow.n_unsafe == 2:
                self._multi_unsafe += 1
        if self._fallback or self._multi_unsafe:
            return  # the batched pass at this instant rates everything
        for flow in self._link_flows[h]:
            if flow.rate > 0.0 or flow.group is not None:
                self._add_capped(flow, g, now)
        self._rebalance(g, now)

    def _make_safe(self, h: int, now: float) -> None:
        g = self._groups.pop(h)
        for flow in self._link_flows[h]:
            flow.n_unsafe -= 1
            if flow.n_unsafe == 1:
                self._multi_unsafe -= 1
            if flow.capped_in is g:
                flow.capped_in = None
            if flow.group is g:
                self._set_individual(flow, flow.cap, now)

    def _leave(self, flow: _Flow, now: float) -> None:
        """Take a finished flow off its links and restore fairness where it was."""
        self._active.discard(flow)
        flow.version += 1
        g, c = flow.group, flow.capped_in
        if g is not None:
            g.members.discard(flow)
            flow.group = None
        if c is not None:
            c.capped_sum -= flow.cap
            flow.capped_in = None
        if flow.n_unsafe > 1:
            self._multi_unsafe -= 1
        to_safe = []
        for h in flow.hops:
            self._link_flows[h].discard(flow)
            self._cap_sum[h] = self._cap_sum[h] - flow.cap if self._link_flows[h] else 0.0
            if h in self._groups and self._cap_sum[h] <= self._cap[h] * (1.0 + _TOL):
                to_safe.append(h)
        for h in to_safe:
            self._make_safe(h, now)
        if self._fallback or self._multi_unsafe or self._recompute_pending:
            self._request_recompute()
            return
        for grp in {x for x in (g, c) if x is not None and x.link in self._groups}:
            self._rebalance(grp, now)

    # -- fallback: progressive filling over every flow --------------------------------------
    def _request_recompute(self) -> None:
        if not self._recompute_pending:
            self._recompute_pending = True
            ev = self.env.event()
            ev.callbacks.append(self._recompute)
            _fire_after(self.env, ev, 0.0)

    def _recompute(self, _event: simpy.Event) -> None:
        self._recompute_pending = False
        now = self.env.now
        if self._multi_unsafe:
            self._progressive_filling(now)
        else:
            self._fallback = False  # back in the decomposed regime: rebuild every group
            for flow in self._active:
                self._progress(flow, now)
                flow.group, flow.capped_in = None, None
                flow.rate = -1.0  # forces a fresh individual entry
                self._set_individual(flow, flow.cap, now)
            for h, g in list(self._groups.items()):
                fresh = _Group(h, self._cap[h], now)
                self._groups[h] = fresh
                g.version += 1
                for flow in self._link_flows[h]:
                    flow.capped_in = fresh
                    fresh.capped_sum += flow.cap
                    heapq.heappush(fresh.capped, (-flow.cap, next(self._seq), flow))
                self._rebalance(fresh, now)
        self._schedule_wakeup()

    def _progressive_filling(self, now: float) -> None:
        """Max-min fair rates for every active flow (bit/s), all as individual rates."""
        self.full_recomputations += 1
        self._fallback = True
        for g in self._groups.values():
            g.settle(now)
            g.version += 1
        cap, link_flows = self._cap, self._link_flows
        residual: dict[int, float] = {}
        count: dict[int, int] = {}
        for flow in self._active:
            self._progress(flow, now)
            if flow.group is not None:
                flow.group.members.discard(flow)
                flow.group = None
            flow.capped_in = None
            for h in flow.hops:
                if h in count:
                    count[h] += 1
                else:
                    count[h], residual[h] = 1, cap[h]
        key = {h: residual[h] / count[h] for h in count}
        heap = [(k, h) for h, k in key.items()]
        heapq.heapify(heap)
        fixed: dict[_Flow, float] = {}
        while heap:
            share, h = heapq.heappop(heap)
            if count[h] == 0 or key[h] != share:
                continue
            for flow in link_flows[h]:
                if flow in fixed:
                    continue
                fixed[flow] = share
                for g in flow.hops:
                    residual[g] -= share
                    count[g] -= 1
                    if count[g] > 0:
                        key[g] = max(residual[g], 0.0) / count[g]
                        heapq.heappush(heap, (key[g], g))
        for flow, rate in fixed.items():
            flow.rate = rate
            self._push_flow(flow, now)

    # -- completions ------------------------------------------------------------------------
    def _schedule_wakeup(self) -> None:
        heap = self._heap
        while heap and heap[0][2] != heap[0][3].version:
            heapq.heappop(heap)
        if heap and heap[0][0] < self._wakeup_at:
            self._wakeup_at = heap[0][0]
            ev = self.env.event()
            ev.callbacks.append(self._wakeup)
            self._wakeup_event = ev
            _fire_after(self.env, ev, max(heap[0][0] - self.env.now, 0.0))

    def _wakeup(self, event: simpy.Event) -> None:
        now = self.env.now
        if event is self._wakeup_event:  # not by time: now + (at - now) may round below at
            self._wakeup_at, self._wakeup_event = _INF, None
        heap, limit = self._heap, now * (1.0 + 1e-12) + 1e-12
        while heap and heap[0][0] <= limit:
            _, _, version, obj = heapq.heappop(heap)
            if version != obj.version:
                continue
            if isinstance(obj, _Flow):
                self._finish(obj, now)
            else:
                self._finish_group_members(obj, now)
        self._schedule_wakeup()

    def _finish_group_members(self, g: _Group, now: float) -> None:
        g.settle(now)
        due = []
        fin = g.finishing
        while fin:
            target, _, flow = fin[0]
            if flow.group is not g or flow.target != target:
                heapq.heappop(fin)
            elif target <= g.clock + max(abs(g.clock), 1.0) * _TOL:
                heapq.heappop(fin)
                due.append(flow)
            else:
                break
        if not due:
            self._push_group(g, now)
        for flow in due:
            self._finish(flow, now)

    def _finish(self, flow: _Flow, now: float) -> None:
        flow.remaining = 0.0
        self._leave(flow, now)
        _fire_after(self.env, flow.done, flow.latency)
