"""Baechi: memory-constrained operator placement (m-TOPO, m-ETF, m-SCT) and the exact optimum.

Functions take the graph first and a list of devices: :func:`m_topo`, :func:`m_etf`,
:func:`m_sct`, :func:`placement_optimum`; :func:`place` adds grouping and fusion,
:func:`best_placement` keeps the shortest simulated step. The ``baechi`` policy lives in
``policies.baechi.policy`` (imported by the policy registry).
"""

from policies.baechi.etf import m_etf
from policies.baechi.optimum import placement_optimum
from policies.baechi.place import ALGORITHMS, best_placement, place, simulate, single_device
from policies.baechi.result import PlacementResult
from policies.baechi.sct import m_sct
from policies.baechi.topo import m_topo

__all__ = ["ALGORITHMS", "PlacementResult", "best_placement", "m_etf", "m_sct", "m_topo", "place",
           "placement_optimum", "simulate", "single_device"]
