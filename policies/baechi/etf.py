"""m-ETF: memory-aware earliest-task-first list scheduling (Baechi)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import networkx as nx

from netsim.gcpause import relaxed_gc
from netsim.opgraph.costs import CostModel, DeviceLike, IndexedGraph
from policies.baechi.listsched import list_schedule
from policies.baechi.result import PlacementResult


@relaxed_gc()
def m_etf(
    graph: nx.DiGraph, devices: Sequence[DeviceLike], mode: str = "faithful", topology=None
) -> PlacementResult:
    """Place ``graph`` with m-ETF.

    Among ready operators and devices, repeatedly schedule the pair with the earliest possible
    start (ties by topological order), counting input transfers and the device's live memory.

    Parameters
    ----------
    graph
        Operator graph (``time_s``/``flop``, memory attributes in bytes, edge ``bytes``).
    devices
        Devices with ``memory_bytes`` (and ``flop_per_s`` in heterogeneous mode).
    mode
        ``"faithful"`` (Baechi's cost model) or ``"heterogeneous"`` (netsim's extension).
    topology
        :class:`netsim.network.Topology` over the device ids (heterogeneous mode).

    Returns
    -------
    PlacementResult
        With ``placement_time_s`` (wall clock, s); ``status="infeasible"`` and a reason when
        memory runs out.

    Examples
    --------
    >>> import numpy as np
    >>> from netsim.opgraph import chain_graph, identical_devices
    >>> g = chain_graph(4, np.random.default_rng(0))
    >>> m_etf(g, identical_devices(2, 1e9)).ok
    True
    """
    t0 = time.perf_counter()
    ig = IndexedGraph(graph, per_tensor=mode == "faithful")
    res = list_schedule(ig, CostModel(ig, devices, mode, topology), "m-etf")
    res.placement_time_s = time.perf_counter() - t0
    return res
