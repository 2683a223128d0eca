"""The static per-device view a policy plans with: arrays indexed like the scenario's devices.

Built once per run from the resolved network and its routes to and from the aggregator; policies
read it through the Observation (or build it in ``reset``) and never touch SimPy objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

import numpy as np

from netsim.fastepoch import RouteTable
from netsim.network import Topology
from netsim.network.goodput import payload_bps
from netsim.network.topology import Radio
from netsim.network.tree import NodeIndex, TreeTopology
from netsim.scenario.fleet import Fleet, FleetLinks
from netsim.scenario.network import ResolvedNetwork, network_of
from netsim.scenario.schema import DeviceSpec, Scenario


@dataclass(frozen=True)
class DeviceTable:
    """Per-device figures (read-only arrays of length ``n``; the aggregator is one of the
    devices).

    Routes are those between the device and the aggregator: ``down_*`` from the aggregator to
    the device, ``up_*`` back; ``*_bps`` the route's bottleneck bandwidth (bit/s), ``*_latency_s``
    its total latency (s), ``*_j_per_bit`` the energy of one bit over the whole route (J/bit).
    """

    ids: tuple[str, ...]
    aggregator: int
    flop_per_s: np.ndarray
    memory_bytes: np.ndarray
    power_busy_w: np.ndarray
    power_idle_w: np.ndarray
    samples: np.ndarray
    availability: np.ndarray
    down_bps: np.ndarray
    down_latency_s: np.ndarray
    down_j_per_bit: np.ndarray
    up_bps: np.ndarray
    up_latency_s: np.ndarray
    up_j_per_bit: np.ndarray
    device_class: tuple[str | None, ...]
    index: Mapping[str, int] = field(repr=False, compare=False, default_factory=dict)
    down_routes: RouteTable | None = field(default=None, repr=False, compare=False)
    """Each device's route from the aggregator as arrays (hops over ``capacity_bps``), row i
    for device i: what the engine and :func:`netsim.costs.estimate_epoch` share links with."""
    up_routes: RouteTable | None = field(default=None, repr=False, compare=False)
    """Each device's route to the aggregator (row i for device i)."""
    capacity_bps: np.ndarray | None = field(default=None, repr=False, compare=False)
    """Capacity of every constraint of the topology, indexed by the routes' hops: directed
    links (bit/s), then shared media (air-time budgets; netsim.network.topology)."""
    radios: Sequence[Radio] = field(default=(), repr=False, compare=False)
    """The topology's radios (the routes' ``radios`` index them; netsim.network.radio)."""
    n_nodes: int = field(default=0, repr=False, compare=False)
    """Nodes of the topology (devices, then network nodes): the radios' node indices."""
    onset_flows: np.ndarray | None = field(default=None, repr=False, compare=False)
    """Per constraint, the active flows from which a contended medium's budget shrinks (inf:
    never); None when no medium is contended."""
    contention_loss: np.ndarray | None = field(default=None, repr=False, compare=False)
    """Per constraint, a contended medium's budget loss per flow beyond its onset (0
    elsewhere); None when no medium is contended."""

    def __post_init__(self) -> None:
        """Read-only in fact: every array ``writeable=False`` and the index a read-only
        mapping, so a policy that writes into the table gets an error, never a changed world."""
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        if not isinstance(self.index, MappingProxyType):
            object.__setattr__(self, "index", MappingProxyType(dict(self.index)))

    @property
    def n(self) -> int:
        """Number of devices (aggregator included)."""
        return len(self.ids)

    @cached_property
    def trainers(self) -> np.ndarray:
        """Indices of devices that can train (hold samples), aggregator excluded (read-only;
        computed once: a fleet's scan, not one per epoch)."""
        mask = self.samples > 0
        mask[self.aggregator] = False
        out = np.flatnonzero(mask)
        out.setflags(write=False)
        return out


def scenario_topology(scenario: Scenario) -> Topology:
    """The topology of a *resolved* scenario: its links and media, devices first (a generated
    fleet's in arrays, :func:`fleet_topology`)."""
    return network_topology(network_of(scenario))


def network_topology(net: ResolvedNetwork) -> Topology:
    """The topology of a resolved network: a generated fleet's in arrays
    (:func:`fleet_topology`), explicit devices and links as a graph."""
    if net.fleet is not None:
        return fleet_topology(net.fleet, net.links, net.goodput_factor)
    return Topology(net.node_ids, net.links, net.media, n_devices=len(net.devices),
                    goodput_factor=net.goodput_factor)


def fleet_topology(fleet: Fleet, links: Sequence | None = None,
                   goodput_factor: float = 1.0) -> TreeTopology:
    """The topology of a generated fleet, in arrays (:class:`netsim.network.tree.TreeTopology`):
    the aggregator the root, the core router its child, cells under the core, devices under
    their cells; every link's rate its payload rate at ``goodput_factor`` (the scenario's:
    netsim.network.goodput)."""
    n_dev = fleet.n_devices
    core = n_dev
    cell_node = n_dev + 1 + np.arange(len(fleet.cell_ids))
    owner = fleet.link_owner
    n_links = len(owner)
    is_access = owner > 0
    is_backhaul = owner < 0
    row = np.where(is_access, owner, 0)
    k = np.maximum(row - 1, 0)                       # generated device's position
    cell = np.where(is_access, fleet.device_cell[k], np.where(is_backhaul, -owner - 1, 0))
    root = fleet.ids.index(fleet.aggregator_id)  # (a fleet has a device, so a cell)
    link_a = np.where(is_access, row, np.where(is_backhaul, cell_node[cell], root))
    link_b = np.where(is_access, cell_node[cell], core)
    const = {f: np.where(is_backhaul, fleet.backhaul[f], fleet.fibre[f])
             for f in ("bandwidth_bps", "latency_s", "energy_j_per_bit")}
    bandwidth = payload_bps(np.where(is_access, fleet.access_bps[k], const["bandwidth_bps"]),
                            goodput_factor)
    latency = np.where(is_access, fleet.access_latency_s[k], const["latency_s"])
    j_per_bit = np.where(is_access, fleet.access_j_per_bit[k], const["energy_j_per_bit"])
    medium = np.where(is_access, fleet.cell_medium[cell], -1)
    radio = {f: np.zeros(n_links) for f in ("rx_energy_j_per_bit", "radio_power_w", "tail_s",
                                             "tail_power_w")}
    kind_of_cell = np.array(fleet.cell_kind, dtype=object)
    for kind, figures in fleet.access_radio.items():
        on = is_access & (medium >= 0) & (kind_of_cell[cell] == kind)
        for f, value in figures.items():
            radio[f][on] = value
    parent = np.full(n_dev + 1 + len(cell_node), -1, dtype=np.intp)
    parent_link = np.full(len(parent), -1, dtype=np.intp)
    access = np.flatnonzero(is_access)
    parent[row[access]] = cell_node[cell[access]]
    parent_link[row[access]] = access
    backhaul = np.flatnonzero(is_backhaul)
    parent[cell_node[cell[backhaul]]] = core
    parent_link[cell_node[cell[backhaul]]] = backhaul
    parent[core], parent_link[core] = root, 0
    return TreeTopology(fleet.node_ids, n_dev, root, parent, parent_link, link_a, link_b,
                        bandwidth, latency, j_per_bit, radio["rx_energy_j_per_bit"],
                        radio["radio_power_w"], radio["tail_s"], radio["tail_power_w"],
                        medium, fleet.media, links if links is not None else FleetLinks(fleet))


def onset_flows(topology: Topology) -> np.ndarray | None:
    """Per constraint of ``topology``, the active flows from which a contended Wi-Fi
    medium's budget shrinks (inf elsewhere); None when no medium is contended."""
    n_dir = len(topology.capacity_bps)
    out = np.full(len(topology.constraint_capacity), np.inf)
    for k, m in enumerate(topology.constraint_medium):
        onset = topology.media[m].contention_onset_flows
        if onset is not None:
            out[n_dir + k] = onset
    return out if np.isfinite(out).any() else None


def contention_loss(topology: Topology) -> np.ndarray | None:
    """Per constraint of ``topology``, a contended Wi-Fi medium's budget loss per flow beyond
    its onset (0 elsewhere); None when no medium is contended."""
    n_dir = len(topology.capacity_bps)
    out = np.zeros(len(topology.constraint_capacity))
    for k, m in enumerate(topology.constraint_medium):
        if topology.media[m].contention_onset_flows is not None:
            out[n_dir + k] = topology.media[m].contention_loss_per_flow
    return out if onset_flows(topology) is not None else None


def build_device_table(scenario: Scenario, topology: Topology | None = None) -> DeviceTable:
    """The device table of a *resolved* scenario (explicit devices, links and aggregator)."""
    devices: Sequence[DeviceSpec] = scenario.devices or []
    agg = str(scenario.aggregator)
    if topology is None:
        topology = scenario_topology(scenario)
    fleet = network_of(scenario).fleet
    if fleet is not None and isinstance(topology, TreeTopology):
        return _fleet_table(fleet, topology)
    n = len(devices)
    cols = {k: np.zeros(n) for k in ("down_bps", "down_latency_s", "down_j_per_bit",
                                     "up_bps", "up_latency_s", "up_j_per_bit")}
    for i, d in enumerate(devices):
        if d.id == agg:
            for k in ("down_bps", "up_bps"):
                cols[k][i] = np.inf
            continue
        down, up = topology.route(agg, d.id), topology.route(d.id, agg)
        cols["down_bps"][i], cols["up_bps"][i] = down.bottleneck_bps, up.bottleneck_bps
        cols["down_latency_s"][i], cols["up_latency_s"][i] = down.latency_s, up.latency_s
        cols["down_j_per_bit"][i] = down.total_energy_j_per_bit
        cols["up_j_per_bit"][i] = up.total_energy_j_per_bit
    ids = tuple(d.id for d in devices)
    down_routes = RouteTable.of([topology.route(agg, d) for d in ids])
    up_routes = RouteTable.of([topology.route(d, agg) for d in ids])
    return DeviceTable(
        ids=ids,
        aggregator=ids.index(agg),
        flop_per_s=np.array([d.flop_per_s for d in devices]),
        memory_bytes=np.array([d.memory_bytes for d in devices]),
        power_busy_w=np.array([d.power_busy_w for d in devices]),
        power_idle_w=np.array([d.power_idle_w for d in devices]),
        samples=np.array([d.samples for d in devices], dtype=np.int64),
        availability=np.array([d.availability for d in devices]),
        device_class=tuple(d.device_class for d in devices),
        index={d: i for i, d in enumerate(ids)},
        down_routes=down_routes, up_routes=up_routes,
        capacity_bps=np.array(topology.constraint_capacity, dtype=float),
        onset_flows=onset_flows(topology), contention_loss=contention_loss(topology),
        radios=tuple(topology.radios),
        n_nodes=len(topology.node_ids),
        **cols,
    )


def _fleet_table(fleet: Fleet, topology: TreeTopology) -> DeviceTable:
    """The device table of a generated fleet, from its arrays and the tree's routes in one
    pass (the same figures :func:`build_device_table` computes route by route)."""
    routes = topology.root_routes()
    tables = {}
    for name in ("down", "up"):
        r = routes[name]
        tables[name] = RouteTable(r["route_id"], r["cap_bps"], r["latency_s"], r["hop_start"],
                                  r["hops"], r["rate_ref"], (), r["radio_start"],
                                  r["radio_ids"])
    node_index = topology.index
    assert isinstance(node_index, NodeIndex)  # (devices first: fleet.ids in order)
    agg = node_index.devices[fleet.aggregator_id]
    cols = {}
    for name in ("down", "up"):
        r = routes[name]
        cols[f"{name}_bps"] = r["cap_bps"]  # (read-only, shared with the route tables)
        cols[f"{name}_latency_s"] = r["latency_s"]
        cols[f"{name}_j_per_bit"] = r["j_per_bit"]
    return DeviceTable(
        ids=tuple(fleet.ids), aggregator=agg,
        flop_per_s=fleet.flop_per_s, memory_bytes=fleet.memory_bytes,  # (the fleet's own,
        power_busy_w=fleet.power_busy_w, power_idle_w=fleet.power_idle_w,  # read-only from
        samples=fleet.samples, availability=np.ones(fleet.n_devices),      # now: shared)
        device_class=tuple(fleet.device_class),
        index=MappingProxyType(node_index.devices),  # (the tree's, shared)
        down_routes=tables["down"], up_routes=tables["up"],
        capacity_bps=np.array(topology.constraint_capacity, dtype=float),
        onset_flows=onset_flows(topology), contention_loss=contention_loss(topology),
        radios=topology.radios, n_nodes=len(topology.node_ids), **cols)
