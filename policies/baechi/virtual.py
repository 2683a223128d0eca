"""Baechi's own step measure: its ``VirtualScheduler`` (``placer/virtual_scheduler.py``) replayed.

Baechi's placers print the step of a placement as this simulation of the *unfused* operator
graph, not as the placer's own schedule: operators run in the order they become ready (a global
queue by ready time, ties by Baechi's topological rank), each on its device as soon as the
device is free; when an operator ends, each tensor it sends to another device (one transfer per
tensor and destination device, reused by later consumers there) holds the sender's channel for
its transfer time from the later of the operator's end and the channel's last use, and the
receiver's from the later of that send start and the receiver channel's last use. Times are
whole microseconds (Baechi's integer costs). Memory is not modelled.

``benchmarks/baechi_compare.py`` reports it next to netsim's executed step: it is the figure
Baechi's public code prints, hence the one to compare with Baechi's published numbers.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import networkx as nx

from netsim.opgraph.costs import FAITHFUL_LATENCY_S, FAITHFUL_S_PER_BYTE, DeviceLike
from netsim.opgraph.graph import node_reference_time_s, send_bytes
from netsim.opgraph.grouping import FusedGraph, baechi_topo_rank
from policies.baechi.result import PlacementResult


def _tensors(graph: nx.DiGraph, u, v) -> list[tuple]:
    ts = graph.edges[u, v].get("tensors")
    if ts:
        return [((u, k), float(b)) for k, b in ts]
    return [((u, None), send_bytes(graph, u))]


def virtual_step_s(graph: nx.DiGraph, placement: dict) -> float:
    """Makespan (s) of one step of ``graph`` placed by ``placement`` (node -> device index or
    id), as Baechi's ``VirtualScheduler`` computes it with its linear transfer cost."""
    rank = baechi_topo_rank(graph)
    us = {n: round(node_reference_time_s(graph, n) * 1e6, 6) for n in graph.nodes}
    missing = {n: graph.in_degree(n) for n in graph.nodes}
    free: dict = {}
    chan: dict = {}
    recv_end: dict = {}  # (tensor, device) -> arrival (us)
    end: dict = {}
    heap = [(0.0, rank[n], n) for n, k in missing.items() if k == 0]
    heapq.heapify(heap)
    makespan = 0.0
    while heap:
        ready, _, u = heapq.heappop(heap)
        d = placement[u]
        start = max(free.get(d, 0.0), ready)
        end[u] = e = start + us[u]
        free[d] = e
        makespan = max(makespan, e)
        for v in graph.successors(u):
            dv = placement[v]
            if dv != d:
                for t, nbytes in _tensors(graph, u, v):
                    if (t, dv) in recv_end:
                        continue
                    w = round(FAITHFUL_S_PER_BYTE * 1e6 * nbytes + FAITHFUL_LATENCY_S * 1e6)
                    send = max(e, chan.get(d, 0.0))
                    chan[d] = send + w
                    recv_end[(t, dv)] = chan[dv] = max(send, chan.get(dv, 0.0)) + w
            missing[v] -= 1
            if missing[v] == 0:
                r = 0.0
                for p in graph.predecessors(v):
                    if placement[p] == dv:
                        r = max(r, end[p])
                    else:
                        r = max(r, *(recv_end[(t, dv)] for t, _ in _tensors(graph, p, v)))
                heapq.heappush(heap, (r, rank[v], v))
    return makespan * 1e-6


def baechi_step_s(res: PlacementResult, graph: nx.DiGraph, devices: Sequence[DeviceLike]) -> float:
    """:func:`virtual_step_s` of a feasible placement result on the unfused ``graph`` (the result's
    fused placement expanded to every operator)."""
    fused = res.fused
    placement = fused.expand(res.placement) if isinstance(fused, FusedGraph) else res.placement
    ids = {d.id: i for i, d in enumerate(devices)}
    return virtual_step_s(graph, {n: ids.get(p, p) if isinstance(p, str) else p for n, p in placement.items()})
