"""The edge tier of a run's world: edge aggregators, which devices reach which, and the
routes between the tiers (docs/hierarchical.md).

An edge aggregator sits on a network node between devices and the cloud aggregator. It
computes (aggregation) and meters energy like a device; the node it sits on forwards traffic
as before, so a star epoch's transfers relay through it unaggregated where it is on their
route. :class:`Tiers` is what a policy sees of it (read-only arrays, through
``Observation.tiers``); :class:`TierRoutes` keeps the routes the world's hierarchical phases
play on (device <-> edge, edge <-> cloud) and which links form the backhaul (every link of an
edge's route to or from the cloud).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from netsim.fastepoch import RouteTable
from netsim.network import Route, Topology
from netsim.scenario.fleet import fleet_of
from netsim.scenario.schema import DeviceSpec, EdgeSpec, Scenario


@dataclass(frozen=True)
class Tiers:
    """The edge aggregators of a world and which device reaches which (read-only).

    ``ids``: the edges' ids; ``node_ids`` / ``nodes``: the network node each sits on (id,
    topology index); ``flop_per_s`` (FLOP/s), ``power_busy_w``, ``power_idle_w`` (W),
    ``memory_bytes`` (NaN: not given); per device row, ``default_edge`` (the index of its
    edge; -1: none, such as the aggregator) and its reachable edges in CSR form
    (``reach_edges[reach_start[r]:reach_start[r + 1]]``, its default first)."""

    ids: tuple[str, ...]
    node_ids: tuple[str, ...]
    nodes: np.ndarray
    flop_per_s: np.ndarray
    power_busy_w: np.ndarray
    power_idle_w: np.ndarray
    memory_bytes: np.ndarray
    default_edge: np.ndarray
    reach_start: np.ndarray
    reach_edges: np.ndarray
    reach_bps: np.ndarray
    """Per reachable (device, edge) pair (aligned with ``reach_edges``): the bottleneck of
    the route from the device to the edge (bit/s; a generated fleet's: its access link)."""
    reach_latency_s: np.ndarray
    """And that route's latency (s)."""
    index: Mapping[str, int] = field(repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        """Read-only in fact (arrays not writeable, the index a read-only mapping)."""
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        if not isinstance(self.index, MappingProxyType):
            object.__setattr__(self, "index", MappingProxyType(
                {e: k for k, e in enumerate(self.ids)}))

    @property
    def n(self) -> int:
        """Number of edge aggregators."""
        return len(self.ids)

    def reachable(self, row: int) -> np.ndarray:
        """The edges device ``row`` can reach (indices, its default first)."""
        return self.reach_edges[self.reach_start[row]:self.reach_start[row + 1]]

    def can_reach(self, row: int, edge: int) -> bool:
        """Whether device ``row`` can reach edge ``edge`` (an index)."""
        return bool(np.any(self.reachable(row) == edge))

    def members(self, edge_of: np.ndarray) -> list[np.ndarray]:
        """Per edge, the device rows whose entry in ``edge_of`` (an edge index per device
        row, -1: none) is that edge, in row order."""
        rows = np.flatnonzero(edge_of >= 0)
        order = np.argsort(edge_of[rows], kind="stable")
        rows = rows[order]
        cuts = np.searchsorted(edge_of[rows], np.arange(1, self.n))
        return np.split(rows, cuts)


def build_tiers(scenario: Scenario, topology: Topology) -> Tiers | None:
    """The edge tier of a *resolved* scenario on its topology (None without edges).

    A device's reachable edges are its ``edges`` (explicit devices), else the first edge on
    its route to the aggregator (generated fleets: its cell's edge, netsim's generator).
    Raises ValueError (naming the field) where validation was skipped and a device's edge is
    unknown; :mod:`netsim.scenario.edge_checks` reports these before anything runs."""
    edges: Sequence[EdgeSpec] = scenario.edges
    if not edges:
        return None
    ids = tuple(e.id for e in edges)
    node_ids = tuple(e.node_id for e in edges)
    nodes = np.array([topology.index[v] for v in node_ids], dtype=np.intp)
    index = {e: k for k, e in enumerate(ids)}
    devices = scenario.devices or ()
    fleet = fleet_of(devices)
    n = len(devices)
    if fleet is not None and fleet.cell_edge is not None:
        default = np.full(n, -1, dtype=np.intp)
        default[1:] = fleet.cell_edge[fleet.device_cell]
        has = default >= 0
        start = np.zeros(n + 1, dtype=np.intp)
        np.cumsum(has, out=start[1:])
        reach = default[has]
        bps = np.concatenate([[np.inf], fleet.access_bps])[has]
        latency = np.concatenate([[0.0], fleet.access_latency_s])[has]
    else:
        default, start, reach = _explicit_reach(devices, str(scenario.aggregator), topology,
                                                index, node_ids)
        owner = np.repeat(np.arange(n), np.diff(start))
        routes = [topology.route(devices[r].id, node_ids[k])
                  for r, k in zip(owner.tolist(), reach.tolist(), strict=True)]
        bps = np.array([r.bottleneck_bps for r in routes], dtype=float)
        latency = np.array([r.latency_s for r in routes], dtype=float)
    return Tiers(ids, node_ids, nodes,
                 np.array([e.flop_per_s for e in edges], dtype=float),
                 np.array([e.power_busy_w for e in edges], dtype=float),
                 np.array([e.power_idle_w for e in edges], dtype=float),
                 np.array([np.nan if e.memory_bytes is None else e.memory_bytes
                           for e in edges], dtype=float),
                 default, start, reach, bps, latency)


def _explicit_reach(devices: Sequence[DeviceSpec], agg: str, topology: Topology,
                    index: dict[str, int], node_ids: tuple[str, ...]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Default edge and reachable edges (CSR) of explicit devices (see :func:`build_tiers`)."""
    on_node = {v: k for k, v in enumerate(node_ids)}
    default = np.full(len(devices), -1, dtype=np.intp)
    start = [0]
    reach: list[int] = []
    for r, d in enumerate(devices):
        if d.id != agg:
            if d.edges is not None:
                unknown = [e for e in d.edges if e not in index]
                if unknown:
                    raise ValueError(f"devices[{r}].edges: unknown edge {unknown[0]!r}")
                mine = [index[e] for e in d.edges]
            else:
                route = topology.route(d.id, agg)
                mine = [on_node[v] for v in route.nodes[1:] if v in on_node][:1]
            if mine:
                default[r] = mine[0]
                reach += mine
        start.append(len(reach))
    return default, np.array(start, dtype=np.intp), np.array(reach, dtype=np.intp)


class TierRoutes:
    """The routes a world's hierarchical phases play on, built when first asked for: device
    <-> edge (per device row and edge, as :class:`~netsim.network.topology.Route` objects, a
    participant's kept once built), edge <-> cloud (one table over the edges), and the
    backhaul (the links of the edges' routes to and from the cloud): which devices' star
    routes cross it and what one bit costs on it (J/bit)."""

    def __init__(self, topology: Topology, tiers: Tiers, device_ids: Sequence[str],
                 aggregator_id: str, down: RouteTable, up: RouteTable) -> None:
        self._topology, self._tiers, self._ids = topology, tiers, device_ids
        self._agg = aggregator_id
        self._star = (down, up)
        self._to_edge: dict[tuple[int, int, bool], Route] = {}
        self._edge_tables: tuple[RouteTable, RouteTable] | None = None
        self._backhaul: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._rows = _PaddedRoutes()
        self._last_tables: tuple[tuple[bytes, bytes], tuple[RouteTable, RouteTable]] | None \
            = None

    @property
    def n_edges(self) -> int:
        """How many edges the tier has."""
        return self._tiers.n

    def device_route(self, row: int, edge: int, to_device: bool) -> Route:
        """The route from edge ``edge`` to device ``row`` (``to_device``), or back."""
        key = (row, edge, to_device)
        route = self._to_edge.get(key)
        if route is None:
            node, dev = self._tiers.node_ids[edge], self._ids[row]
            route = self._topology.route(node, dev) if to_device \
                else self._topology.route(dev, node)
            self._to_edge[key] = route
        return route

    def device_tables(self, rows: np.ndarray, edge_of: np.ndarray
                      ) -> tuple[RouteTable, RouteTable]:
        """The routes of devices ``rows`` to and from their edges ``edge_of[rows]``, as
        tables whose row j is ``rows[j]`` (edge to device, then device to edge). A route is
        built once (:meth:`device_route`), then kept in padded arrays, so an epoch's tables
        are gathered, not rebuilt."""
        e = edge_of[rows]
        key = (rows.tobytes(), e.tobytes())
        if self._last_tables is None or self._last_tables[0] != key:
            # (an epoch asks again for each edge round, and for its deadline bound: kept)
            self._last_tables = (key, (self._rows.gather(self, rows, e, True),
                                       self._rows.gather(self, rows, e, False)))
        return self._last_tables[1]

    def edge_tables(self) -> tuple[RouteTable, RouteTable]:
        """The routes from the cloud to each edge and back (row k: edge k)."""
        if self._edge_tables is None:
            top, agg = self._topology, self._agg
            self._edge_tables = (
                RouteTable.of([top.route(agg, v) for v in self._tiers.node_ids]),
                RouteTable.of([top.route(v, agg) for v in self._tiers.node_ids]))
        return self._edge_tables

    def edge_routes(self, to_edge: bool) -> list[Route]:
        """The routes from the cloud to each edge (``to_edge``), or back, as objects."""
        top, agg = self._topology, self._agg
        return [top.route(agg, v) if to_edge else top.route(v, agg)
                for v in self._tiers.node_ids]

    def backhaul(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per device row: whether its star transfers cross the backhaul (a link of an
        edge's route to or from the cloud), and what one bit of its download and of its
        upload costs on the backhaul (J/bit, the senders' charges there)."""
        if self._backhaul is None:
            down_e, up_e = self.edge_tables()
            links = np.unique(np.concatenate([_link_hops(down_e), _link_hops(up_e)]) // 2)
            j_per_bit = _link_j_per_bit(self._topology)
            crosses = np.zeros(len(self._ids), dtype=bool)
            costs = []
            for table in self._star:
                hit, cost = _crossing(table, links, j_per_bit)
                crosses |= hit
                costs.append(cost)
            self._backhaul = (crosses, costs[0], costs[1])
        return self._backhaul

    def edge_backhaul_j_per_bit(self) -> tuple[np.ndarray, np.ndarray]:
        """Per edge, what one bit from the cloud to it and back costs (J/bit, its whole
        route's senders' charges: an edge's route to the cloud is the backhaul)."""
        j_per_bit = _link_j_per_bit(self._topology)
        down_e, up_e = self.edge_tables()
        return (_crossing(down_e, np.arange(len(j_per_bit)), j_per_bit)[1],
                _crossing(up_e, np.arange(len(j_per_bit)), j_per_bit)[1])


def _link_hops(table: RouteTable) -> np.ndarray:
    """The link directions a table's routes cross (medium hops left out)."""
    return table.hops[table.rate_ref < 0]


def _link_j_per_bit(topology: Topology) -> np.ndarray:
    """Each link's sender cost (J/bit): a tree's arrays, else the links' specs."""
    arr: Any = getattr(topology, "energy_j_per_bit", None)
    if isinstance(arr, np.ndarray):
        return arr
    return np.array([link.energy_j_per_bit for link in topology.links], dtype=float)


def _crossing(table: RouteTable, links: np.ndarray, j_per_bit: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per route of ``table``: whether it crosses one of ``links`` and the sum of their
    J/bit over the crossings (one link direction per link hop)."""
    n = len(table.route_id)
    owner = np.repeat(np.arange(n), np.diff(table.hop_start))
    link_hop = table.rate_ref < 0
    link = table.hops // 2
    on = link_hop & np.isin(link, links)
    hit = np.zeros(n, dtype=bool)
    hit[owner[on]] = True
    cost = np.bincount(owner[on], weights=j_per_bit[link[on]], minlength=n)
    return hit, cost


class _PaddedRoutes:
    """Routes kept as padded rows (one slot per device, edge and direction), so that a
    :class:`~netsim.fastepoch.RouteTable` of any of them is a gather (the event path's route
    objects are those :meth:`TierRoutes.device_route` keeps)."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)
        """Every kept route's key (:meth:`_key`), sorted; ``key_slot`` its slot."""
        self.key_slot = np.zeros(0, dtype=np.intp)
        self.width, self.radio_width, self.n = 1, 1, 0
        self.rid = np.zeros(0, dtype=np.intp)
        self.cap = np.zeros(0)
        self.lat = np.zeros(0)
        self.count = np.zeros(0, dtype=np.intp)
        self.hops = np.zeros((0, 1), dtype=np.intp)
        self.refs = np.zeros((0, 1), dtype=np.intp)
        self.radio_count = np.zeros(0, dtype=np.intp)
        self.radios = np.zeros((0, 1), dtype=np.intp)

    @staticmethod
    def _key(rows: np.ndarray, edges: np.ndarray, n_edges: int, to_device: bool) -> np.ndarray:
        """One integer per (device row, edge, direction)."""
        return (rows.astype(np.int64) * n_edges + edges) * 2 + int(to_device)

    def _slots(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each key's slot (-1: not kept) and whether it is kept."""
        pos = np.searchsorted(self.keys, keys)
        found = pos < len(self.keys)
        found[found] = self.keys[pos[found]] == keys[found]
        at = np.full(len(keys), -1, dtype=np.intp)
        at[found] = self.key_slot[pos[found]]
        return at, found

    def gather(self, owner: TierRoutes, rows: np.ndarray, edges: np.ndarray,
               to_device: bool) -> RouteTable:
        """The table of the routes of devices ``rows`` with edges ``edges`` (row j: j)."""
        n_edges = owner.n_edges
        keys = self._key(rows, edges, n_edges, to_device)
        at, found = self._slots(keys)
        if not found.all():
            new = np.unique(keys[~found])
            pairs = [divmod(int(k) // 2, n_edges) for k in new.tolist()]
            self._add([owner.device_route(r, k, to_device) for r, k in pairs], new)
            at, found = self._slots(keys)
        counts, radio_counts = self.count[at], self.radio_count[at]
        start = np.zeros(len(at) + 1, dtype=np.intp)
        np.cumsum(counts, out=start[1:])
        radio_start = np.zeros(len(at) + 1, dtype=np.intp)
        np.cumsum(radio_counts, out=radio_start[1:])
        mask = np.arange(self.width) < counts[:, None]
        radio_mask = np.arange(self.radio_width) < radio_counts[:, None]
        return RouteTable(self.rid[at], self.cap[at], self.lat[at], start,
                          self.hops[at][mask], self.refs[at][mask], (), radio_start,
                          self.radios[at][radio_mask])

    def _add(self, routes: list[Route], keys: np.ndarray) -> None:
        """Keep ``routes`` in new slots (arrays widened and grown as needed)."""
        m = len(routes)
        width = max(self.width, max(len(r.hops) for r in routes))
        radio_width = max(self.radio_width, max(len(r.radios) for r in routes))
        hops = np.full((m, width), -1, dtype=np.intp)
        refs = np.full((m, width), -1, dtype=np.intp)
        radios = np.full((m, radio_width), -1, dtype=np.intp)
        for j, r in enumerate(routes):
            hops[j, :len(r.hops)] = r.hops
            refs[j, :len(r.hops)] = r.rate_refs or (-1,) * len(r.hops)
            radios[j, :len(r.radios)] = r.radios
        def widen(a: np.ndarray, w: int) -> np.ndarray:
            return np.pad(a, ((0, 0), (0, w - a.shape[1])), constant_values=-1)
        self.hops = np.concatenate([widen(self.hops, width), hops])
        self.refs = np.concatenate([widen(self.refs, width), refs])
        self.radios = np.concatenate([widen(self.radios, radio_width), radios])
        self.width, self.radio_width = width, radio_width
        self.rid = np.concatenate([self.rid, [r.id for r in routes]]).astype(np.intp)
        self.cap = np.concatenate([self.cap, [r.bottleneck_bps for r in routes]])
        self.lat = np.concatenate([self.lat, [r.latency_s for r in routes]])
        self.count = np.concatenate([self.count, [len(r.hops) for r in routes]]
                                    ).astype(np.intp)
        self.radio_count = np.concatenate([self.radio_count, [len(r.radios) for r in routes]]
                                          ).astype(np.intp)
        keys = np.concatenate([self.keys, keys])
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.key_slot = np.concatenate([self.key_slot, self.n + np.arange(m)])[order]
        self.n += m
