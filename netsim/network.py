"""Links, topology and the flow-level network.

A transfer is a *flow* over the route between two nodes. Concurrent flows share each link
direction by max-min fairness (progressive filling, the idea of SimGrid's flow model); rates are
recomputed when a flow starts or ends. A flow alone on a route of bottleneck bandwidth B and
total latency D moves S bytes in ``8*S/B + D`` seconds: the bits drain at the flow's rate, then
the last bit takes the route's latency to arrive.

Cost per transfer: one SimPy event (the transfer's own completion), plus one shared wake-up per
distinct completion time. A start or end takes a fast path, inline and without an event, when
it cannot move any other flow's rate (the changed flow's bottleneck is a link it has to itself
and every shared link on its route is unsaturated); otherwise the flows starting at that instant
are rated together by one progressive-filling pass over all active flows (one shared event), so
many transfers starting at once cost one pass, not one each.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import networkx as nx
import simpy
from simpy.events import NORMAL

from netsim.energy import EnergyMeter

_REL_TOL = 1e-9


class LinkLike(Protocol):
    """What the topology needs of a link: its end points, bandwidth (bit/s per direction),
    latency (s) and energy per bit (J/bit)."""

    a: str
    b: str
    bandwidth_bps: float
    latency_s: float
    energy_j_per_bit: float


@dataclass(frozen=True)
class Route:
    """A path between two nodes.

    ``hops`` are directed-link indices (``2*i`` is link i from a to b, ``2*i+1`` from b to a);
    ``senders`` the node index sending on each hop (who is charged its energy).
    """

    nodes: tuple[str, ...]
    hops: tuple[int, ...]
    senders: tuple[int, ...]
    energy_j_per_bit: tuple[float, ...]
    bottleneck_bps: float
    latency_s: float

    @property
    def total_energy_j_per_bit(self) -> float:
        """Energy of one bit over the whole route (J/bit)."""
        return float(sum(self.energy_j_per_bit))


class Topology:
    """Static network: nodes (devices and pure network nodes) and full-duplex links.

    Routes minimise total latency (ties broken by hop count, then by link order) and are cached.

    Raises
    ------
    ValueError
        If a link names an unknown node.
    """

    def __init__(self, node_ids: Sequence[str], links: Sequence[LinkLike]) -> None:
        self.node_ids = list(node_ids)
        self.index = {n: i for i, n in enumerate(self.node_ids)}
        self.links = list(links)
        self.capacity_bps = [0.0] * (2 * len(self.links))
        self.graph = nx.Graph()
        self.graph.add_nodes_from(self.node_ids)
        for i, link in enumerate(self.links):
            for end in (link.a, link.b):
                if end not in self.index:
                    raise ValueError(f"links[{i}]: unknown node {end!r}")
            self.capacity_bps[2 * i] = float(link.bandwidth_bps)
            self.capacity_bps[2 * i + 1] = float(link.bandwidth_bps)
            weight = float(link.latency_s) + 1e-12  # hop count breaks latency ties
            prev = self.graph.get_edge_data(link.a, link.b)
            if prev is None or weight < prev["weight"]:
                self.graph.add_edge(link.a, link.b, link=i, weight=weight)
        self._paths: dict[str, dict[str, list[str]]] = {}
        self._routes: dict[tuple[str, str], Route] = {}

    def connected(self, a: str, b: str) -> bool:
        """Whether a route exists between nodes a and b."""
        return nx.has_path(self.graph, a, b)

    def route(self, src: str, dst: str) -> Route:
        """The (cached) route from src to dst.

        Raises
        ------
        KeyError
            If either node is unknown; ``ValueError`` if no path exists.
        """
        key = (src, dst)
        cached = self._routes.get(key)
        if cached is not None:
            return cached
        if src not in self.index or dst not in self.index:
            raise KeyError(f"unknown node in route {src!r} -> {dst!r}")
        paths = self._paths.get(src)
        if paths is None:
            paths = nx.single_source_dijkstra_path(self.graph, src, weight="weight")
            self._paths[src] = paths
        if dst not in paths:
            raise ValueError(f"no route from {src!r} to {dst!r}")
        nodes = paths[dst]
        hops, senders, epb = [], [], []
        bottleneck, latency = float("inf"), 0.0
        for u, v in itertools.pairwise(nodes):
            i = self.graph.edges[u, v]["link"]
            link = self.links[i]
            hops.append(2 * i if link.a == u else 2 * i + 1)
            senders.append(self.index[u])
            epb.append(float(link.energy_j_per_bit))
            bottleneck = min(bottleneck, float(link.bandwidth_bps))
            latency += float(link.latency_s)
        route = Route(tuple(nodes), tuple(hops), tuple(senders), tuple(epb), bottleneck, latency)
        self._routes[key] = route
        return route


class _Flow:
    __slots__ = ("hops", "remaining_bits", "rate_bps", "updated_s", "finish_s", "latency_s",
                 "done", "version")

    def __init__(self, hops: tuple[int, ...], bits: float, latency_s: float, done: simpy.Event):
        self.hops = hops
        self.remaining_bits = bits
        self.rate_bps = 0.0
        self.updated_s = 0.0
        self.finish_s = float("inf")
        self.latency_s = latency_s
        self.done = done
        self.version = 0


def _fire_after(env: simpy.Environment, event: simpy.Event, delay_s: float) -> None:
    """Trigger ``event`` successfully ``delay_s`` from now (one scheduled event, like a Timeout)."""
    event._ok = True
    event._value = None
    env.schedule(event, NORMAL, delay_s)


class FlowNetwork:
    """Transfers over a :class:`Topology` with max-min fair sharing of each link direction.

    Communication energy (bits x J/bit of every link crossed) is charged, when the transfer
    starts, to the node at the sending end of each link, in category communication.
    """

    def __init__(self, env: simpy.Environment, topology: Topology, meter: EnergyMeter) -> None:
        self.env = env
        self.topology = topology
        self.meter = meter
        n_dir = len(topology.capacity_bps)
        self._cap = topology.capacity_bps
        self._alloc = [0.0] * n_dir  # sum of rates per directed link (bit/s)
        self._link_flows: list[set[_Flow]] = [set() for _ in range(n_dir)]
        self._active: set[_Flow] = set()
        self._added: list[_Flow] = []
        self._force_full = False
        self._heap: list[tuple[float, int, int, _Flow]] = []
        self._seq = itertools.count()
        self._recompute_pending = False
        self._wakeup_at = float("inf")
        self.bytes_sent = [0.0] * len(topology.node_ids)
        self.bytes_received = [0.0] * len(topology.node_ids)
        self.full_recomputations = 0
        self.fast_path_updates = 0

    # -- public API -------------------------------------------------------------------------
    def transfer(self, src: str, dst: str, size_bytes: float) -> simpy.Event:
        """Start moving ``size_bytes`` from src to dst; the event fires when it has arrived."""
        done = self.env.event()
        if src == dst:
            _fire_after(self.env, done, 0.0)
            return done
        route = self.topology.route(src, dst)
        bits = 8.0 * float(size_bytes)
        self.bytes_sent[route.senders[0]] += size_bytes
        self.bytes_received[self.topology.index[dst]] += size_bytes
        charge = self.meter.add_communication
        for sender, epb in zip(route.senders, route.energy_j_per_bit, strict=True):
            charge(sender, bits * epb)
        if bits <= 0.0:
            _fire_after(self.env, done, route.latency_s)
            return done
        flow = _Flow(route.hops, bits, route.latency_s, done)
        flow.updated_s = self.env.now
        self._active.add(flow)
        for h in flow.hops:
            self._link_flows[h].add(flow)
        if self._recompute_pending or not self._fast_add(flow, self.env.now):
            self._added.append(flow)  # rated with the others at this instant, in one pass
            self._request_recompute()
        else:
            self._schedule_wakeup()
        return done

    @property
    def active_flows(self) -> int:
        """Number of transfers currently moving bits."""
        return len(self._active)

    # -- rate bookkeeping -------------------------------------------------------------------
    def _request_recompute(self) -> None:
        if not self._recompute_pending:
            self._recompute_pending = True
            ev = self.env.event()
            ev.callbacks.append(self._recompute)
            _fire_after(self.env, ev, 0.0)

    def _set_rate(self, flow: _Flow, rate: float, now: float) -> None:
        old = flow.rate_bps
        if old == rate:
            return
        if old > 0.0:
            flow.remaining_bits -= old * (now - flow.updated_s)
            if flow.remaining_bits < 0.0:
                flow.remaining_bits = 0.0
        flow.updated_s = now
        for h in flow.hops:
            self._alloc[h] += rate - old
        flow.rate_bps = rate
        flow.version += 1
        flow.finish_s = now + flow.remaining_bits / rate if rate > 0.0 else float("inf")
        heapq.heappush(self._heap, (flow.finish_s, next(self._seq), flow.version, flow))

    def _fast_add(self, flow: _Flow, now: float) -> bool:
        cap, alloc, link_flows = self._cap, self._alloc, self._link_flows
        rate = min(cap[h] - alloc[h] for h in flow.hops)
        if rate <= cap[flow.hops[0]] * _REL_TOL:
            return False
        private = False
        for h in flow.hops:
            shared = len(link_flows[h]) > 1
            residual_after = cap[h] - alloc[h] - rate
            if shared and residual_after <= cap[h] * _REL_TOL:
                return False
            if not shared and residual_after <= cap[h] * _REL_TOL:
                private = True
        if not private:
            return False
        self._set_rate(flow, rate, now)
        self.fast_path_updates += 1
        return True

    def _leaving_frees_capacity_for_others(self, leaving: list[_Flow]) -> bool:
        """Whether flows about to end (still on their links) leave a saturated shared link:
        then other flows there may speed up and rates must be recomputed."""
        cap, alloc, link_flows = self._cap, self._alloc, self._link_flows
        count: dict[int, int] = {}
        for flow in leaving:
            for h in flow.hops:
                count[h] = count.get(h, 0) + 1
        return any(len(link_flows[h]) > n and cap[h] - alloc[h] <= cap[h] * _REL_TOL
                   for h, n in count.items())

    def _recompute(self, _event: simpy.Event) -> None:
        self._recompute_pending = False
        now = self.env.now
        added, self._added = self._added, []
        need_full, self._force_full = self._force_full, False
        if not need_full:
            for flow in added:
                if flow in self._active and flow.rate_bps == 0.0 and not self._fast_add(flow, now):
                    need_full = True
                    break
        if need_full:
            self._progressive_filling(now)
        self._schedule_wakeup()

    def _progressive_filling(self, now: float) -> None:
        """Max-min fair rates for every active flow (bit/s), set in place."""
        self.full_recomputations += 1
        cap, link_flows = self._cap, self._link_flows
        residual: dict[int, float] = {}
        count: dict[int, int] = {}
        for flow in self._active:
            for h in flow.hops:
                if h in count:
                    count[h] += 1
                else:
                    count[h] = 1
                    residual[h] = cap[h]
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
                        k = max(residual[g], 0.0) / count[g]
                        key[g] = k
                        heapq.heappush(heap, (k, g))
        for flow, rate in fixed.items():
            old = flow.rate_bps
            if old == 0.0 or abs(rate - old) > _REL_TOL * old:
                self._set_rate(flow, rate, now)

    def _schedule_wakeup(self) -> None:
        heap = self._heap
        while heap and heap[0][2] != heap[0][3].version:
            heapq.heappop(heap)
        if not heap:
            return
        at = heap[0][0]
        if at < self._wakeup_at:
            self._wakeup_at = at
            ev = self.env.event()
            ev.callbacks.append(self._wakeup)
            _fire_after(self.env, ev, max(at - self.env.now, 0.0))

    def _wakeup(self, _event: simpy.Event) -> None:
        now = self.env.now
        if self._wakeup_at <= now:
            self._wakeup_at = float("inf")
        heap = self._heap
        due = []
        while heap and heap[0][0] <= now * (1.0 + 1e-12) + 1e-12:
            _, _, version, flow = heapq.heappop(heap)
            if version == flow.version and flow in self._active:
                due.append(flow)
        if due:
            full = self._leaving_frees_capacity_for_others(due)
            for flow in due:
                self._finish(flow, now)
            if full and self._recompute_pending:
                self._force_full = True  # the pass already scheduled at this instant does it
            elif full:
                self._progressive_filling(now)
        self._schedule_wakeup()

    def _finish(self, flow: _Flow, now: float) -> None:
        self._active.discard(flow)
        for h in flow.hops:
            flows = self._link_flows[h]
            flows.discard(flow)
            self._alloc[h] = self._alloc[h] - flow.rate_bps if flows else 0.0
        flow.remaining_bits = 0.0
        flow.version += 1
        _fire_after(self.env, flow.done, flow.latency_s)
