"""m-TOPO: fill devices one after another in topological order (Baechi), memory enforced."""

from __future__ import annotations

import time
from collections.abc import Sequence

import networkx as nx

from netsim.gcpause import relaxed_gc
from netsim.opgraph.costs import CostModel, DeviceLike, IndexedGraph
from policies.baechi.listsched import list_schedule
from policies.baechi.result import PlacementResult


@relaxed_gc()
def m_topo(
    graph: nx.DiGraph, devices: Sequence[DeviceLike], mode: str = "faithful", topology=None
) -> PlacementResult:
    """Place ``graph`` with m-TOPO.

    Operators are taken in topological order and assigned to the current device until its cap,
    ``min(device memory, graph memory / n_devices + largest operator memory)`` of summed operator
    memory (persistent + temporary + output, bytes; Baechi's ``placer/m_topo.py``), would be
    exceeded; then the next device. Colocated operators
    follow their group. Unlike Baechi's public m-TOPO, the assignment is then scheduled with
    live-memory checks against each device's real limit, and an overflow is reported as
    infeasible. When the balanced caps leave the last device overfull, the fill is retried
    with each device's real limit as its cap. Parameters and return as :func:`policies.baechi.etf.m_etf`.
    """
    t0 = time.perf_counter()
    ig = IndexedGraph(graph)
    cost = CostModel(ig, devices, mode, topology)
    nd = len(devices)
    sizes = [ig.memory_bytes[i] + ig.temporary_bytes[i] + ig.output_bytes[i] for i in range(len(ig))]
    share = sum(sizes) / nd + max(sizes, default=0.0)  # Baechi's cap: the mean plus the largest operator
    res = None
    for caps in ([min(m, share) for m in cost.memory_bytes], cost.memory_bytes):
        res = list_schedule(ig, cost, "m-topo", fixed=_fill(ig, caps))
        if res.ok:
            break
    assert res is not None  # the loop above ran (two cap lists)
    res.placement_time_s = time.perf_counter() - t0
    return res


def _fill(ig: IndexedGraph, caps: list[float]) -> list[int]:
    """Device of each operator when filling devices in topological order up to ``caps``."""
    nd = len(caps)
    fixed = [-1] * len(ig)
    group_dev: dict[int, int] = {}
    d, used = 0, 0.0
    for i in range(len(ig)):
        size = ig.memory_bytes[i] + ig.temporary_bytes[i] + ig.output_bytes[i]
        g = ig.group[i]
        if g >= 0 and g in group_dev:
            fixed[i] = group_dev[g]
            continue
        while d < nd - 1 and used > 0.0 and used + size > caps[d]:
            d, used = d + 1, 0.0
        fixed[i] = d
        used += size
        if g >= 0:
            group_dev[g] = d
    return fixed
