"""Links, shared media and routes: what every transfer crosses (the flow-level network that
shares them is :mod:`netsim.network.flows`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import networkx as nx


class LinkLike(Protocol):
    """What the topology needs of a link: its end points, bandwidth (bit/s per direction),
    latency (s) and energy per bit (J/bit)."""

    a: str
    b: str
    bandwidth_bps: float
    latency_s: float
    energy_j_per_bit: float


@dataclass(frozen=True)
class Route:
    """A path between two nodes.

    ``hops`` are directed-link indices (``2*i`` is link i from a to b, ``2*i+1`` from b to a);
    ``senders`` the node index sending on each hop (who is charged its energy); ``id`` the
    route's position in :attr:`Topology.routes`.
    """

    nodes: tuple[str, ...]
    hops: tuple[int, ...]
    senders: tuple[int, ...]
    energy_j_per_bit: tuple[float, ...]
    bottleneck_bps: float
    latency_s: float
    receiver: int = -1
    charges: tuple[tuple[int, float], ...] = ()
    id: int = -1

    @property
    def total_energy_j_per_bit(self) -> float:
        """Energy of one bit over the whole route (J/bit)."""
        return float(sum(self.energy_j_per_bit))


class Topology:
    """Static network: nodes (devices and pure network nodes) and full-duplex links.

    Routes minimise total latency (ties broken by hop count, then by link order) and are cached.

    Raises
    ------
    ValueError
        If a link names an unknown node.
    """

    def __init__(self, node_ids: Sequence[str], links: Sequence[LinkLike]) -> None:
        self.node_ids = list(node_ids)
        self.index = {n: i for i, n in enumerate(self.node_ids)}
        self.links = list(links)
        self.capacity_bps = [0.0] * (2 * len(self.links))
        self.graph = nx.Graph()
        self.graph.add_nodes_from(self.node_ids)
        for i, link in enumerate(self.links):
            for end in (link.a, link.b):
                if end not in self.index:
                    raise ValueError(f"links[{i}]: unknown node {end!r}")
            self.capacity_bps[2 * i] = float(link.bandwidth_bps)
            self.capacity_bps[2 * i + 1] = float(link.bandwidth_bps)
            weight = float(link.latency_s) + 1e-12  # hop count breaks latency ties
            prev = self.graph.get_edge_data(link.a, link.b)
            if prev is None or weight < prev["weight"]:
                self.graph.add_edge(link.a, link.b, link=i, weight=weight)
        # per directed edge of the routing graph: (hop, sender index, J/bit, bit/s, s)
        self._edge: dict[tuple[str, str], tuple[int, int, float, float, float]] = {}
        for u, v, i in self.graph.edges(data="link"):
            link = self.links[i]
            epb, bw, lat = float(link.energy_j_per_bit), float(link.bandwidth_bps), \
                float(link.latency_s)
            forward = 2 * i if link.a == u else 2 * i + 1
            self._edge[(u, v)] = (forward, self.index[u], epb, bw, lat)
            self._edge[(v, u)] = (forward ^ 1, self.index[v], epb, bw, lat)
        self._paths: dict[str, dict[str, list[str]]] = {}
        self.route_cache: dict[tuple[str, str], Route] = {}
        """Routes computed so far, by (src, dst); read-only for callers (use :meth:`route`)."""
        self.routes: list[Route] = []
        """Every route computed so far, in order (``Route.id`` is the position)."""

    def connected(self, a: str, b: str) -> bool:
        """Whether a route exists between nodes a and b."""
        return nx.has_path(self.graph, a, b)

    def route(self, src: str, dst: str) -> Route:
        """The (cached) route from src to dst.

        Raises
        ------
        KeyError
            If either node is unknown; ``ValueError`` if no path exists.
        """
        key = (src, dst)
        cached = self.route_cache.get(key)
        if cached is not None:
            return cached
        if src not in self.index or dst not in self.index:
            raise KeyError(f"unknown node in route {src!r} -> {dst!r}")
        if src not in self._paths and dst in self._paths:  # links are full duplex: reuse
            back = self._paths[dst].get(src)                 # the tree already built from dst
            if back is None:
                raise ValueError(f"no route from {src!r} to {dst!r}")
            nodes = back[::-1]
        else:
            paths = self._paths.get(src)
            if paths is None:
                paths = nx.single_source_dijkstra_path(self.graph, src, weight="weight")
                self._paths[src] = paths
            if dst not in paths:
                raise ValueError(f"no route from {src!r} to {dst!r}")
            nodes = paths[dst]
        hops, senders, epb = [], [], []
        bottleneck, latency = float("inf"), 0.0
        edge = self._edge
        for u, v in itertools.pairwise(nodes):
            hop, sender, j_per_bit, bps, lat = edge[(u, v)]
            hops.append(hop)
            senders.append(sender)
            epb.append(j_per_bit)
            if bps < bottleneck:
                bottleneck = bps
            latency += lat
        route = Route(tuple(nodes), tuple(hops), tuple(senders), tuple(epb), bottleneck, latency,
                      self.index[dst], tuple(zip(senders, epb, strict=True)), len(self.routes))
        self.route_cache[key] = route
        self.routes.append(route)
        return route

