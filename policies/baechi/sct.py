"""m-SCT: small-communication-times placement (Baechi): favourite-child LP, then m-ETF with the
soft favourite-child rule (:mod:`policies.baechi.favourite`); in the faithful mode Baechi's own
LP form and its urgent-operator clause."""

from __future__ import annotations

import time
from collections.abc import Sequence

import networkx as nx

from netsim.gcpause import relaxed_gc
from netsim.opgraph.costs import CostModel, DeviceLike, IndexedGraph
from policies.baechi.favourite import SoftFavouriteScheduler, UrgentFavouriteScheduler
from policies.baechi.listsched import list_schedule
from policies.baechi.result import PlacementResult
from policies.baechi.sct_lp import baechi_favourite_children, favourite_children

DEFAULT_THRESHOLD = 0.1
"""Rounding threshold of the LP's favourite-edge variables (Baechi's placer default)."""


@relaxed_gc()
def m_sct(
    graph: nx.DiGraph,
    devices: Sequence[DeviceLike],
    mode: str = "faithful",
    topology=None,
    threshold: float = DEFAULT_THRESHOLD,
    urgent: bool | None = None,
    lp_method: str = "highs",
    lp_presolve: bool = True,
) -> PlacementResult:
    """Place ``graph`` with m-SCT.

    Solves the favourite-child LP relaxation (:mod:`policies.baechi.sct_lp`, HiGHS), rounds it
    at ``threshold`` (an edge with ``x <= threshold`` is a favourite edge; Baechi's placer uses
    0.1, ``placer/placer_lib.py``'s ``sct_threshold``), then list-schedules as m-ETF with the soft
    favourite-child rule: a device that last ran a parent waits for its favourite child only when
    the child is ready and starts earliest there (:mod:`policies.baechi.favourite`); ``urgent``
    adds Baechi's urgent-operator clause (:class:`policies.baechi.favourite.UrgentFavouriteScheduler`).
    ``lp_time_s`` reports the LP's share. Parameters and return as
    :func:`policies.baechi.etf.m_etf`.

    Faithful mode does what Baechi's ``placer/m_sct.py`` does: its LP form and rounding
    (:func:`policies.baechi.sct_lp.baechi_favourite_children`) and the urgent clause on
    (``urgent=None`` means on in faithful mode, off otherwise). On GNMT this reproduces the
    placement of Baechi's code run with HiGHS for its LP (132.2 ms in Baechi's measure).
    ``lp_method`` and ``lp_presolve`` (faithful mode only) choose how HiGHS solves that LP
    (:func:`policies.baechi.sct_lp.baechi_favourite_children`): the LP is degenerate, so they
    change which optimal point, hence which favourites, it returns.
    """
    t0 = time.perf_counter()
    ig = IndexedGraph(graph, per_tensor=mode == "faithful")
    cost = CostModel(ig, devices, mode, topology)
    t_lp = time.perf_counter()
    faithful = mode == "faithful"
    if faithful:
        favourite, _ = baechi_favourite_children(ig, cost, threshold, lp_method, lp_presolve)
    else:
        favourite, _ = favourite_children(ig, cost, threshold)
    lp_time = time.perf_counter() - t_lp
    scheduler = UrgentFavouriteScheduler if (faithful if urgent is None else urgent) else SoftFavouriteScheduler
    res = list_schedule(ig, cost, "m-sct", favourite=favourite, scheduler=scheduler)
    res.placement_time_s = time.perf_counter() - t0
    res.lp_time_s = lp_time
    return res


def m_sct_urgent(
    graph: nx.DiGraph, devices: Sequence[DeviceLike], mode: str = "faithful", topology=None
) -> PlacementResult:
    """:func:`m_sct` with Baechi's urgent-operator clause (``urgent=True``), as a named variant."""
    res = m_sct(graph, devices, mode, topology, urgent=True)
    res.algorithm = "m-sct-urgent"
    return res
