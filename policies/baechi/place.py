"""Baechi's pipeline: co-placement grouping and fusion, then a placement algorithm; and the
choice of the best placement by simulated step time."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import networkx as nx

from netsim.gcpause import relaxed_gc
from netsim.opgraph.costs import CostModel, DeviceLike, IndexedGraph
from netsim.opgraph.execution import StepResult, execute_placement
from netsim.opgraph.grouping import group_and_fuse
from policies.baechi.etf import m_etf
from policies.baechi.listsched import list_schedule
from policies.baechi.result import PlacementResult
from policies.baechi.sct import m_sct, m_sct_urgent
from policies.baechi.topo import m_topo


@relaxed_gc()
def single_device(
    graph: nx.DiGraph, devices: Sequence[DeviceLike], mode: str = "faithful", topology=None
) -> PlacementResult:
    """Everything on one device: the fastest device whose memory holds the graph's schedule.

    Returns an infeasible result (with the reason) when no single device can hold it.
    """
    t0 = time.perf_counter()
    ig = IndexedGraph(graph, per_tensor=mode == "faithful")
    cost = CostModel(ig, devices, mode, topology)
    best, reason = None, ""
    for d in range(len(devices)):
        res = list_schedule(ig, cost, "single", fixed=[d] * len(ig))
        if res.ok and (best is None or res.planned_step_s < best.planned_step_s):
            best = res
        elif not res.ok:
            reason = res.reason
    if best is None:
        best = PlacementResult("single", mode, status="infeasible", graph=graph,
                               reason=f"no single device holds the graph: {reason}")
    best.placement_time_s = time.perf_counter() - t0
    return best


ALGORITHMS: dict[str, Callable[..., PlacementResult]] = {
    "m-topo": m_topo,
    "m-etf": m_etf,
    "m-sct": m_sct,
    "m-sct-urgent": m_sct_urgent,
    "single": single_device,
}


def place(
    graph: nx.DiGraph,
    devices: Sequence[DeviceLike],
    algorithm: str = "m-etf",
    mode: str = "faithful",
    topology=None,
    group: bool = True,
) -> PlacementResult:
    """Group and fuse ``graph`` (when ``group``), then place it with ``algorithm``.

    Parameters
    ----------
    algorithm
        One of :data:`ALGORITHMS` (``m-topo``, ``m-etf``, ``m-sct``, ``m-sct-urgent``: m-SCT with
        Baechi's urgent-operator clause, ``single``), or ``best``:
        the shortest simulated step of m-TOPO, m-ETF, m-SCT and ``single`` (:func:`best_placement`, the ``baechi``
        policy's choice; ``algorithm`` of the result names the winner).
    group
        Run co-placement grouping and fusion first (groups capped at the smallest device's
        memory); the result's ``graph`` is then the fused graph and ``fused`` maps it back.
        ``single`` always places the graph as given.

    Returns
    -------
    PlacementResult
        ``placement_time_s`` includes grouping.

    Raises
    ------
    ValueError
        On an unknown algorithm or mode.
    """
    if algorithm == "best":
        t0 = time.perf_counter()
        best, _ = best_placement(graph, devices, mode, topology, group=group)
        best.result.placement_time_s = time.perf_counter() - t0
        return best.result
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm: must be one of {sorted([*ALGORITHMS, 'best'])}, got {algorithm!r}")
    t0 = time.perf_counter()
    fused = None
    if group:
        # faithful: Baechi's default fusion in Baechi's order; heterogeneous: netsim's (more fusion)
        faithful = mode == "faithful"
        fused = group_and_fuse(graph, max_group_bytes=min(float(d.memory_bytes) for d in devices),
                               disjoint_paths=not faithful, baechi_order=faithful)
        graph = fused.graph
    res = ALGORITHMS[algorithm](graph, devices, mode, topology)
    res.fused = fused
    res.graph = graph
    res.placement_time_s = time.perf_counter() - t0
    return res


def simulate(res: PlacementResult, devices: Sequence[DeviceLike], topology=None) -> StepResult:
    """Execute a feasible placement for one step (on the graph it placed, in its planned order):
    the replay of a plan, the one to test a plan's ``planned_step_s`` (s) against.

    The whole plan is replayed: operator order, channel reservation order and, in the faithful
    mode, each operator's planned start (s) as its release time. Those are part of a faithful
    plan: Baechi's time-stepped scheduler lets an idle device start nothing before the time it
    decides, and m-SCT's urgent clause starts the urgent operator at its urgency, so a device may
    idle with its next operator's inputs there; without them a replay can end earlier than
    planned."""
    return execute_placement(res.graph, res.placement, devices, topology, res.mode,
                             order=res.order, transfer_order=res.transfer_order,
                             release_s=res.start_s if res.mode == "faithful" else None)


@dataclass
class Candidate:
    """One algorithm's placement and its simulated step (``step`` None when infeasible)."""

    result: PlacementResult
    step: StepResult | None

    @property
    def step_time_s(self) -> float:
        """Simulated step time (s); inf when infeasible or out of memory."""
        if self.step is None or self.step.status != "ok":
            return math.inf
        return self.step.step_time_s


TIE_TOLERANCE = 1e-9
"""Relative difference under which two simulated steps count as equal (:func:`best_placement`)."""


def best_placement(
    graph: nx.DiGraph,
    devices: Sequence[DeviceLike],
    mode: str = "faithful",
    topology=None,
    algorithms: Sequence[str] = ("m-topo", "m-etf", "m-sct"),
    group: bool = True,
) -> tuple[Candidate, list[Candidate]]:
    """Run each algorithm (plus ``single`` on the unfused graph), simulate each feasible
    placement, and keep the shortest simulated step (ties, within a relative 1e-9 so float
    rounding never picks a split over one device: the first of ``single``, then
    ``algorithms`` in order). When one device holds the graph, ``single`` is a candidate, so the
    best is never slower than one device. ``group``: as :func:`place`.

    Returns
    -------
    (best, candidates)
        ``best.result.status`` is infeasible when no candidate ran within memory.
    """
    candidates = []
    for name in ("single", *algorithms):
        res = place(graph, devices, name, mode, topology, group=group and name != "single")
        step = simulate(res, devices, topology) if res.ok else None
        candidates.append(Candidate(res, step))
    shortest = min(c.step_time_s for c in candidates)
    best = next(c for c in candidates if c.step_time_s <= shortest * (1.0 + TIE_TOLERANCE))
    if math.isinf(best.step_time_s):
        reasons = "; ".join(f"{c.result.algorithm}: {c.result.reason or cast(StepResult, c.step).reason}" for c in candidates)
        best = Candidate(PlacementResult("baechi", mode, status="infeasible", reason=reasons), None)
    return best, candidates
