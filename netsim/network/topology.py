"""Links, shared media and routes: what every transfer crosses (the flow-level network that
shares them is :mod:`netsim.network.flows`).

Constraints. Every link direction is a constraint of its bandwidth (bit/s): directed link
``2*i`` is link i from a to b, ``2*i+1`` from b to a. A shared medium adds constraints after
them (indices from ``2 x links``): a ``wifi`` medium one air-time budget for both directions
of every member link, a ``cellular`` medium two (its uplink, station to access node, and its
downlink). A route that crosses a member link crosses the link's direction (coefficient 1,
capacity the station rate r) and then the medium's constraint with coefficient 1/r, r read
from that direction's capacity now (so a changing bandwidth changes the air time a bit costs).

Stations and radios. A member link's *station* is its device end (the ``a`` end when both are
devices; a member link between two network nodes is invalid). Radio energy belongs to device
ends: the receiving device pays ``rx_energy_j_per_bit`` per bit, and a device end of a link
with ``radio_power_w`` or a tail has a *radio* (netsim.network.radio) that draws them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import NamedTuple, Protocol, cast, overload

import networkx as nx
import numpy as np

from netsim.network.goodput import link_goodput, payload_bps


class LinkLike(Protocol):
    """What the topology needs of a link: its end points, bandwidth (bit/s per direction),
    latency (s) and energy per bit (J/bit)."""

    a: str
    b: str
    bandwidth_bps: float
    latency_s: float
    energy_j_per_bit: float


class MediumLike(Protocol):
    """What the topology needs of a shared medium: its id, kind (``wifi`` or ``cellular``)
    and, for wifi, the optional contention figures."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def contention_onset_flows(self) -> int | None: ...
    @property
    def contention_loss_per_flow(self) -> float: ...


def _link_figure(link: LinkLike, name: str, default: float = 0.0) -> float:
    """A link's optional radio figure (links without the field, such as Baechi's, have 0)."""
    value = getattr(link, name, None)
    return default if value is None else float(value)


@dataclass(frozen=True)
class Radio:
    """The radio of one device end of one link: base power while it has a transfer in
    progress on the link (W), then a tail of ``tail_s`` (s) at ``tail_power_w`` (W)."""

    node: int
    link: int
    power_w: float
    tail_s: float
    tail_power_w: float


class RadioSet(Sequence[Radio]):
    """Radios held as arrays (one entry per radio): a :class:`Radio` is built when asked for.

    What a topology of a million devices keeps instead of a million objects; read-only."""

    def __init__(self, node: np.ndarray, link: np.ndarray, power_w: np.ndarray,
                 tail_s: np.ndarray, tail_power_w: np.ndarray) -> None:
        self.node = np.asarray(node, dtype=np.intp)
        self.link = np.asarray(link, dtype=np.intp)
        self.power_w = np.asarray(power_w, dtype=float)
        self.tail_s = np.asarray(tail_s, dtype=float)
        self.tail_power_w = np.asarray(tail_power_w, dtype=float)
        for a in (self.node, self.link, self.power_w, self.tail_s, self.tail_power_w):
            a.setflags(write=False)

    @classmethod
    def of(cls, radios: Sequence[Radio]) -> RadioSet:
        """The set of ``radios`` (a RadioSet is returned as it is)."""
        if isinstance(radios, RadioSet):
            return radios
        return cls(np.array([r.node for r in radios], dtype=np.intp),
                   np.array([r.link for r in radios], dtype=np.intp),
                   np.array([r.power_w for r in radios], dtype=float),
                   np.array([r.tail_s for r in radios], dtype=float),
                   np.array([r.tail_power_w for r in radios], dtype=float))

    def __len__(self) -> int:
        return len(self.node)

    @overload
    def __getitem__(self, i: int) -> Radio: ...
    @overload
    def __getitem__(self, i: slice) -> list[Radio]: ...

    def __getitem__(self, i: int | slice) -> Radio | list[Radio]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return Radio(int(self.node[i]), int(self.link[i]), float(self.power_w[i]),
                     float(self.tail_s[i]), float(self.tail_power_w[i]))


@dataclass(frozen=True)
class Route:
    """A path between two nodes.

    ``hops`` are the constraints crossed: directed links (``2*i`` is link i from a to b,
    ``2*i+1`` from b to a) and, after a member link, its medium's constraint; ``rate_refs``
    (empty on a route without media, else parallel to ``hops``) names for each medium hop the
    directed link whose capacity is the station rate r (coefficient 1/r), -1 for a link hop;
    ``senders`` the node index sending on each link hop; ``charges`` every (node, J/bit) the
    route costs (senders' ``energy_j_per_bit``, receiving devices' ``rx_energy_j_per_bit``);
    ``airtime`` (station node, directed link) per medium crossed; ``radios`` the radios
    (:attr:`Topology.radios` indices) active while the transfer is in progress; ``id`` the
    route's position in :attr:`Topology.routes`.

    A route between two stations of one cell crosses its medium twice (up to the access point
    and down again): the bits take air time at both rates, so on that constraint the transfer
    counts once with the two coefficients summed (``1/r_a + 1/r_b``; :attr:`flow_hops`,
    :meth:`coefficients`, :meth:`cap`), and its standalone rate is the medium's budget over that
    sum (``r_a r_b / (r_a + r_b)`` alone in the cell: ``8S/r_a + 8S/r_b`` seconds for S bytes).
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
    rate_refs: tuple[int, ...] = ()
    airtime: tuple[tuple[int, int], ...] = ()
    radios: tuple[int, ...] = ()

    @cached_property
    def _repeats(self) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]] | None:
        """None when no constraint is crossed twice; else the distinct constraints (first
        crossing's order) and, per distinct constraint, its positions in ``hops``."""
        if len(set(self.hops)) == len(self.hops):
            return None
        at: dict[int, list[int]] = {}
        for j, h in enumerate(self.hops):
            at.setdefault(h, []).append(j)
        return tuple(at), tuple(tuple(v) for v in at.values())

    @property
    def flow_hops(self) -> tuple[int, ...]:
        """The constraints a transfer on this route loads, each once: ``hops`` without a
        medium's second crossing (the class docstring)."""
        repeats = self._repeats
        return self.hops if repeats is None else repeats[0]

    @cached_property
    def total_energy_j_per_bit(self) -> float:
        """Energy of one bit over the whole route (J/bit), receivers' costs included (computed
        once: a route is immutable)."""
        return float(sum(e for _, e in self.charges))

    def coefficients(self, capacity: Sequence[float]) -> tuple[float, ...] | None:
        """Each of :attr:`flow_hops`' coefficients under ``capacity`` (per constraint): 1 on a
        link, 1/r on a medium (summed over a medium crossed twice); None on a route without
        media (all 1)."""
        if not self.rate_refs:
            return None
        per_hop = tuple([1.0 if r < 0 else 1.0 / capacity[r] for r in self.rate_refs])
        repeats = self._repeats
        if repeats is None:
            return per_hop
        return tuple(sum(per_hop[j] for j in at) for at in repeats[1])

    def cap(self, capacity: Sequence[float]) -> float:
        """The route's standalone rate (bit/s) under ``capacity``: the smallest of each
        constraint's capacity over its coefficient (a medium: budget x station rate)."""
        if not self.rate_refs:
            return min(capacity[h] for h in self.hops)
        if self._repeats is not None:
            coefs = cast("tuple[float, ...]", self.coefficients(capacity))
            return min(capacity[h] / c for h, c in zip(self.flow_hops, coefs, strict=True))
        return min(capacity[h] if r < 0 else capacity[h] * capacity[r]
                   for h, r in zip(self.hops, self.rate_refs, strict=True))


class RouteStep(NamedTuple):
    """One link crossed by a route: the directed link ``hop``, its sending node, J/bit,
    bandwidth (bit/s) and latency (s); for a member link its station and the medium's
    constraint in this direction (else -1, -1); the link's receiver J/bit and the receiving
    node; the radios of the link."""

    hop: int
    sender: int
    j_per_bit: float
    bps: float
    latency_s: float
    station: int
    medium: int
    rx_j_per_bit: float
    receiver: int
    radios: Sequence[int]


def build_route(names: tuple[str, ...], steps: Sequence[RouteStep], receiver: int, rid: int,
                n_devices: int) -> Route:
    """The route crossing ``steps`` in order: netsim's rules in one place (the medium's
    constraint after a member link with coefficient 1 / rate of the hop, the senders' and a
    receiving device's charges, air time to the station, the links' radios, bottleneck and
    latency summed in path order); :class:`Topology` and the tree topology both build with it."""
    hops, senders, epb, refs = [], [], [], []
    airtime: list[tuple[int, int]] = []
    radios: list[int] = []
    charges: list[tuple[int, float]] = []
    bottleneck, latency = float("inf"), 0.0
    for hop, sender, j_per_bit, bps, latency_s, station, medium, rx_j_per_bit, receiver_k, \
            step_radios in steps:
        hops.append(hop)
        refs.append(-1)
        senders.append(sender)
        epb.append(j_per_bit)
        charges.append((sender, j_per_bit))
        if station >= 0:
            hops.append(medium)
            refs.append(hop)
            airtime.append((station, hop))
        if rx_j_per_bit > 0.0 and receiver_k < n_devices:
            charges.append((receiver_k, rx_j_per_bit))
        if step_radios:
            radios += step_radios
        if bps < bottleneck:
            bottleneck = bps
        latency += latency_s
    route = Route(names, tuple(hops), tuple(senders), tuple(epb), bottleneck, latency, receiver,
                  tuple(charges), rid, tuple(refs) if airtime else (), tuple(airtime),
                  tuple(radios))
    if len(set(hops)) < len(hops):  # a medium crossed twice: its air time at both rates
        budget = [1.0] * (max(hops) + 1)  # (the nominal air-time budget; links: their bps)
        for step in steps:
            budget[step.hop] = step.bps
        route = replace(route, bottleneck_bps=min(bottleneck, route.cap(budget)))
    else:  # no constraint crossed twice: _repeats known already (its cache filled, as its
        route.__dict__["_repeats"] = None  # first read would: Python 3.11's takes a lock)
    return route


class Topology:
    """Static network: nodes (devices and pure network nodes) and full-duplex links.

    Routes minimise total latency (ties broken by hop count, then by link order) and are cached.

    Raises
    ------
    ValueError
        If a link names an unknown node.
    """

    def __init__(self, node_ids: Sequence[str], links: Sequence[LinkLike],
                 media: Sequence[MediumLike] = (), n_devices: int | None = None,
                 goodput_factor: float = 1.0) -> None:
        """``n_devices``: the first that many nodes are devices, the rest network nodes
        (None: every node is a device); it decides stations and radios.
        ``goodput_factor``: the share of a link's bandwidth that carries payload where the
        link gives none of its own (netsim.network.goodput): every capacity and rate below is
        its payload rate."""
        self.node_ids = list(node_ids)
        self.index = {n: i for i, n in enumerate(self.node_ids)}
        self.links = list(links)
        self.media = list(media)
        self.capacity_bps = [0.0] * (2 * len(self.links))
        """Capacity of every link direction (bit/s): what a changing world changes."""
        n_dev = len(self.node_ids) if n_devices is None else n_devices
        self.graph = nx.Graph()
        self.graph.add_nodes_from(self.node_ids)
        for i, link in enumerate(self.links):
            for end in (link.a, link.b):
                if end not in self.index:
                    raise ValueError(f"links[{i}]: unknown node {end!r}")
            rate = payload_bps(float(link.bandwidth_bps), link_goodput(link, goodput_factor))
            self.capacity_bps[2 * i] = rate
            self.capacity_bps[2 * i + 1] = rate
            weight = float(link.latency_s) + 1e-12  # hop count breaks latency ties
            prev = self.graph.get_edge_data(link.a, link.b)
            if prev is None or weight < prev["weight"]:
                self.graph.add_edge(link.a, link.b, link=i, weight=weight)
        # per directed edge of the routing graph: (hop, sender index, J/bit, bit/s, s)
        self._edge: dict[tuple[str, str], tuple[int, int, float, float, float]] = {}
        for u, v, i in self.graph.edges(data="link"):
            link = self.links[i]
            epb, bw, lat = float(link.energy_j_per_bit), self.capacity_bps[2 * i], \
                float(link.latency_s)
            forward = 2 * i if link.a == u else 2 * i + 1
            self._edge[(u, v)] = (forward, self.index[u], epb, bw, lat)
            self._edge[(v, u)] = (forward ^ 1, self.index[v], epb, bw, lat)
        # media: constraints after the link directions
        n_dir = len(self.capacity_bps)
        self.constraint_medium: list[int] = []
        """Per medium constraint (index ``2 x links + k``), its medium's index in ``media``."""
        first: dict[str, int] = {}
        for m, medium in enumerate(self.media):
            first[medium.id] = n_dir + len(self.constraint_medium)
            self.constraint_medium += [m] * (1 if medium.kind == "wifi" else 2)
        # per link: (station node, constraint a->b, constraint b->a) for member links
        self._member: dict[int, tuple[int, int, int]] = {}
        self.direction_medium: list[int] = [-1] * n_dir
        """Per link direction, the index in ``media`` of the medium its link belongs to (-1:
        a wired link)."""
        self.radios: list[Radio] = []
        self._radios_of: dict[int, tuple[int, ...]] = {}
        self._rx: dict[int, float] = {}
        for i, link in enumerate(self.links):
            a, b = self.index[link.a], self.index[link.b]
            medium_id = getattr(link, "medium", None)
            if medium_id is not None:
                if medium_id not in first:
                    raise ValueError(f"links[{i}].medium: unknown medium {medium_id!r}")
                station = a if a < n_dev else b
                if station >= n_dev:
                    raise ValueError(f"links[{i}].medium: a member link needs a device end")
                c = first[medium_id]
                kind = self.media[self.constraint_medium[c - n_dir]].kind
                up, down = (c, c) if kind == "wifi" else (c, c + 1)
                self._member[i] = (station, up, down) if station == a else (station, down, up)
                self.direction_medium[2 * i] = self.direction_medium[2 * i + 1] = \
                    self.constraint_medium[c - n_dir]
            self._rx[i] = _link_figure(link, "rx_energy_j_per_bit")
            power, tail_s = _link_figure(link, "radio_power_w"), _link_figure(link, "tail_s")
            tail_w = _link_figure(link, "tail_power_w")
            if power > 0.0 or (tail_s > 0.0 and tail_w > 0.0):
                ends = [e for e in (a, b) if e < n_dev]
                self._radios_of[i] = tuple(range(len(self.radios), len(self.radios) + len(ends)))
                self.radios += [Radio(e, i, power, tail_s, tail_w) for e in ends]
        self.constraint_capacity = self.capacity_bps + [1.0] * len(self.constraint_medium)
        """Capacity of every constraint: link directions (bit/s), then media (air-time
        budgets, 1 without contention)."""
        self.n_devices = n_dev
        self._paths: dict[str, dict[str, list[str]]] = {}
        self._step_of: dict[tuple[str, str], RouteStep] = {}  # per directed edge (route)
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
        edge, index, step_of = self._edge, self.index, self._step_of
        steps = []
        for u, v in itertools.pairwise(nodes):
            step = step_of.get((u, v))
            if step is None:  # (a directed edge's step is the same in every route)
                hop, sender, j_per_bit, bps, lat = edge[(u, v)]
                link = hop >> 1
                member = self._member.get(link)
                medium = (-1, -1) if member is None else (
                    member[0], member[1] if hop == 2 * link else member[2])
                step = step_of[(u, v)] = RouteStep(
                    hop, sender, j_per_bit, bps, lat, *medium, self._rx.get(link, 0.0),
                    index[v], self._radios_of.get(link, ()))
            steps.append(step)
        route = build_route(tuple(nodes), steps, index[dst], len(self.routes), self.n_devices)
        self.route_cache[key] = route
        self.routes.append(route)
        return route

