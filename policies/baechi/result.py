"""The outcome of a placement algorithm."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import networkx as nx


@dataclass
class PlacementResult:
    """A placement with the schedule the algorithm planned for it.

    Attributes
    ----------
    algorithm, mode
        Which algorithm and cost mode produced it.
    status
        ``"ok"`` or ``"infeasible"`` (then ``reason`` says why; placement may be partial).
    placement
        Node of ``graph`` -> device index.
    order
        Node -> rank in the planned start order (the devices' ready-list order).
    transfer_order
        ``(node, dst_device)`` in the order the plan reserved the channels.
    start_s, end_s
        Planned start and end of each operator (s).
    planned_step_s
        Planned makespan (s).
    planned_peak_memory_bytes
        Planned peak memory per device (bytes).
    placement_time_s, lp_time_s
        Wall-clock time to compute the placement and, for m-SCT, of the LP alone (s).
    graph
        The graph that was placed (the fused graph when grouping ran).
    fused
        The :class:`netsim.opgraph.grouping.FusedGraph` when grouping ran, else None.
    """

    algorithm: str
    mode: str
    status: str = "ok"
    reason: str = ""
    placement: dict = field(default_factory=dict)
    order: dict = field(default_factory=dict)
    transfer_order: list = field(default_factory=list)
    start_s: dict = field(default_factory=dict)
    end_s: dict = field(default_factory=dict)
    planned_step_s: float = math.nan
    planned_peak_memory_bytes: list = field(default_factory=list)
    placement_time_s: float = 0.0
    lp_time_s: float = 0.0
    graph: nx.DiGraph | None = None
    fused: object | None = None

    @property
    def ok(self) -> bool:
        """Whether every operator was placed within the memory limits."""
        return self.status == "ok"
