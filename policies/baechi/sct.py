"""m-SCT: small-communication-times placement (Baechi): favourite-child LP, then m-ETF with
favourite children kept on their parent's device."""

from __future__ import annotations

import time
from collections.abc import Sequence

import networkx as nx

from netsim.gcpause import relaxed_gc
from netsim.opgraph.costs import CostModel, DeviceLike, IndexedGraph
from policies.baechi.listsched import list_schedule
from policies.baechi.result import PlacementResult
from policies.baechi.sct_lp import favourite_children


@relaxed_gc()
def m_sct(
    graph: nx.DiGraph,
    devices: Sequence[DeviceLike],
    mode: str = "faithful",
    topology=None,
    threshold: float = 0.5,
) -> PlacementResult:
    """Place ``graph`` with m-SCT.

    Solves the favourite-child LP relaxation (:mod:`policies.baechi.sct_lp`, HiGHS), rounds it
    at ``threshold``, then list-schedules as m-ETF with one more rule: an operator's favourite
    child goes to the parent's device, and that device waits for the child once the child is
    ready instead of taking other work (unless memory forbids, when the child is released).
    When the pins leave the schedule stuck for memory, it is rerun without them (m-ETF's rule).
    ``lp_time_s`` reports the LP's share. Parameters and return as
    :func:`policies.baechi.etf.m_etf`.
    """
    t0 = time.perf_counter()
    ig = IndexedGraph(graph)
    cost = CostModel(ig, devices, mode, topology)
    t_lp = time.perf_counter()
    favourite, _ = favourite_children(ig, cost, threshold)
    lp_time = time.perf_counter() - t_lp
    res = list_schedule(ig, cost, "m-sct", favourite=favourite)
    if not res.ok:  # favourite pins can strand memory: retry with plain m-ETF's rule
        retry = list_schedule(ig, cost, "m-sct")
        res = retry if retry.ok else res
    res.placement_time_s = time.perf_counter() - t0
    res.lp_time_s = lp_time
    return res
