"""Checking a hierarchical Decision (docs/hierarchical.md): ``edge_rounds``, ``association``
and ``edge_buffer_updates``, every bad field named (netsim.policy.validate calls it)."""

from __future__ import annotations

import numpy as np

from netsim.policy.contract import Decision, Observation


def tier_problems(decision: Decision, obs: Observation) -> list[str]:
    """Problems of a decision's hierarchical fields (none for a star decision in a world
    without asynchronous edge work in flight)."""
    kappa, tiers = decision.edge_rounds, obs.tiers
    busy = 0 if obs.edges_busy is None else int(np.count_nonzero(obs.edges_busy))
    if kappa is None:
        out = []
        if decision.association is not None:
            out.append("association: given without edge_rounds (a star epoch has no edges "
                       "to associate with)")
        if decision.edge_buffer_updates is not None:
            out.append("edge_buffer_updates: given without edge_rounds")
        if busy:
            out.append(f"edge_rounds: None (a star epoch) while {busy} edges still work from "
                       "earlier asynchronous hierarchical decisions")
        return out
    if tiers is None:
        return ["edge_rounds: the world has no edge aggregators (scenario edges:, or "
                "generate.edges)"]
    out = []
    if type(kappa) is not int or kappa < 1:
        out.append(f"edge_rounds: {kappa!r} is not an integer >= 1 (kappa_2: edge rounds per "
                   "cloud round)")
    for name, given in (("clusters", bool(decision.clusters)),
                        ("keep_updates", decision.keep_updates is not None),
                        ("epoch_deadline_s", decision.epoch_deadline_s is not None),
                        ("workload", decision.workload is not None),
                        ("local", decision.local is not None)):
        if given:
            out.append(f"{name}: not with edge_rounds (a hierarchical epoch trains the "
                       "variant as the scenario says, data-parallel)")
    out += _association_problems(decision, obs)
    k_edge = decision.edge_buffer_updates
    if k_edge is not None:
        if decision.buffer_updates is None:
            out.append("edge_buffer_updates: needs buffer_updates (asynchronous edges under a "
                       "synchronous cloud are not modelled)")
        if type(k_edge) is not int or k_edge < 1:
            out.append(f"edge_buffer_updates: {k_edge!r} is not an integer >= 1")
    if decision.buffer_updates is None and busy:
        out.append(f"buffer_updates: None (a synchronous hierarchical epoch) while {busy} "
                   "edges still work from earlier asynchronous decisions")
    if decision.buffer_updates is not None:
        out += _async_tier_problems(decision, obs, busy)
    return out


def _async_tier_problems(decision: Decision, obs: Observation, busy: int) -> list[str]:
    """Asynchronous tiers: the cloud's K within the edge models that can land; no participant
    of an edge that still works; on the surrogate only."""
    tiers, index = obs.tiers, obs.devices.index
    assert tiers is not None
    out = []
    edge_busy = obs.edges_busy
    starting: set[int] = set()
    assoc = decision.association or {}
    for dev in decision.participants:
        row = index.get(dev)
        if row is None:
            continue
        k = tiers.index.get(assoc[dev], -1) if dev in assoc else int(tiers.default_edge[row])
        if k < 0:
            continue
        if edge_busy is not None and edge_busy[k]:
            out.append(f"participants[{dev!r}]: its edge {tiers.ids[k]!r} still works on its "
                       "earlier job (edges_busy); start it once that edge is idle")
        starting.add(k)
    k_cloud = decision.buffer_updates
    can_land = len(starting) + busy  # (busy: edges whose model waits in the buffer too)
    if type(k_cloud) is not int or not 1 <= k_cloud <= max(can_land, 1):
        out.append(f"buffer_updates: {k_cloud!r} outside 1..{can_land} (edge models that can "
                   f"land: {len(starting)} started + {busy - obs.buffered} still working + "
                   f"{obs.buffered} buffered)")
    if obs.training.backend in ("real", "torch"):
        out.append("buffer_updates: asynchronous tiers run on the surrogate only (the "
                   f"{obs.training.backend} backend trains synchronous hierarchical rounds)")
    return out


def _association_problems(decision: Decision, obs: Observation) -> list[str]:
    """Each participant reaches an edge; an association names participants and edges they
    can reach."""
    tiers, index = obs.tiers, obs.devices.index
    assert tiers is not None
    out = []
    assoc = decision.association or {}
    for dev, edge in assoc.items():
        where = f"association[{dev!r}]"
        if dev not in decision.participants:
            out.append(f"{where}: not a participant of this epoch")
            continue
        k = tiers.index.get(edge) if isinstance(edge, str) else None
        if k is None:
            out.append(f"{where}: unknown edge {edge!r}")
            continue
        row = index.get(dev)
        if row is not None and not tiers.can_reach(row, k):
            mine = [tiers.ids[e] for e in tiers.reachable(row).tolist()]
            out.append(f"{where}: edge {edge!r} is not one the device can reach "
                       f"(its edges: {mine or 'none'})")
    for dev in decision.participants:
        row = index.get(dev)
        if row is not None and dev not in assoc and tiers.default_edge[row] < 0:
            out.append(f"participants[{dev!r}]: reaches no edge aggregator (give it one in "
                       "association)")
    return out
