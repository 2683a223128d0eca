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
    ig = IndexedGraph(graph, per_tensor=mode == "faithful")
    cost = CostModel(ig, devices, mode, topology)
    nd = len(devices)
    sizes = [ig.memory_bytes[i] + ig.temporary_bytes[i] + ig.output_bytes[i] for i in range(len(ig))]
    share = sum(sizes) / nd + max(sizes, default=0.0)  # Baechi's cap: the mean plus the largest operator
    res = None
    fills = [_fill(ig, [min(m, share) for m in cost.memory_bytes]), _fill(ig, cost.memory_bytes)]
    if mode == "faithful":
        baechi = _fill_baechi(ig, nd)
        if baechi is not None:
            fills.insert(0, baechi)
    for fixed in fills:
        res = list_schedule(ig, cost, "m-topo", fixed=fixed)
        if res.ok:
            break
    assert res is not None  # the loop above ran (two cap lists)
    res.placement_time_s = time.perf_counter() - t0
    return res


def _fill_baechi(ig: IndexedGraph, nd: int) -> list[int] | None:
    """Baechi's ``TopoUniformWithColocation`` (``placer/m_topo.py``): an operator's size is its
    temporary bytes plus its outputs (a profile's outputs hold its persistent bytes; a fused
    operator's: the distinct tensors leaving it), the cap the sum over operators // devices plus the largest;
    a colocation group goes whole to the current device while the device's placed size plus the
    group's largest temporary and summed persistent bytes stays under the cap, else the next
    device takes it. None when the last device overflows (the caller falls back)."""
    n = len(ig)
    out = [sum(ig.tensor_bytes[t] for t in ig.out_tensors[i]) if ig.graph.nodes[ig.nodes[i]].get("op") == "fused"
           else ig.output_bytes[i] + ig.memory_bytes[i] for i in range(n)]
    size = [ig.temporary_bytes[i] + out[i] for i in range(n)]
    cap = sum(size) // nd + max(size, default=0.0)
    members: dict[int, list[int]] = {}
    for i, g in enumerate(ig.group):
        members.setdefault(g if g >= 0 else -1 - i, []).append(i)
    need = {g: max(ig.temporary_bytes[j] for j in m) + sum(ig.memory_bytes[j] for j in m) for g, m in members.items()}
    fixed, i = [-1] * n, 0
    for d in range(nd):
        used = 0.0
        while i < n:
            if fixed[i] < 0:
                g = ig.group[i] if ig.group[i] >= 0 else -1 - i
                if not used + need[g] < cap:
                    break
                for j in members[g]:
                    fixed[j] = d
                    used += size[j]
            i += 1
    return fixed if i == n else None


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
