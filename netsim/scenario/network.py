"""A run's concrete network: the devices, links and media of a scenario, or those its generator
builds from a seed (kept apart from loading and validation, which the device table, the engine
and the validation's checks all need without importing one another)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from netsim.scenario.fleet import Fleet, FleetDevices, FleetLinks, fleet_of
from netsim.scenario.generator import generate_fleet
from netsim.scenario.schema import (
    DeviceSpec,
    EdgeSpec,
    GenerateSpec,
    LinkSpec,
    MediumSpec,
    Scenario,
)


@dataclass(frozen=True)
class ResolvedNetwork:
    """The concrete network of a run: devices, links (network nodes implied) and aggregator."""

    devices: Sequence[DeviceSpec]
    links: Sequence[LinkSpec]
    aggregator: str
    media: list[MediumSpec] = field(default_factory=list)
    edges: list[EdgeSpec] = field(default_factory=list)
    """Edge aggregators (docs/hierarchical.md)."""
    goodput_factor: float = 1.0
    """The scenario's goodput factor, for links that do not give their own
    (netsim.network.goodput)."""

    @property
    def fleet(self) -> Fleet | None:
        """The arrays of a generated network (None for explicit devices and links, or where
        either was replaced after generation)."""
        fleet = fleet_of(self.devices)
        if fleet is None or not isinstance(self.links, FleetLinks) or self.links.fleet is not fleet:
            return None
        return fleet

    @property
    def node_ids(self) -> list[str]:
        """Device ids first (in order), then network nodes in order of first appearance."""
        if self.fleet is not None:
            return self.fleet.node_ids
        ids = [d.id for d in self.devices]
        known = set(ids)
        for link in self.links:
            for end in (link.a, link.b):
                if end not in known:
                    known.add(end)
                    ids.append(end)
        return ids


def generated_network(spec: GenerateSpec, seed: int, power_states: bool = False
                      ) -> ResolvedNetwork:
    """A generated network: from ``spec.seed`` or else ``seed`` (the run's); devices get
    their class's power_sleep_w and battery_j with ``power_states``."""
    gen_seed = spec.seed if spec.seed is not None else seed
    rng = np.random.default_rng(np.random.SeedSequence([gen_seed, 0x6E6574]))
    fleet = generate_fleet(spec, rng, power_states=power_states)
    return ResolvedNetwork(FleetDevices(fleet), FleetLinks(fleet), fleet.aggregator_id,
                           list(fleet.media), list(fleet.edges))


def resolve_network(scenario: Scenario, seed: int) -> ResolvedNetwork:
    """The scenario's network; generated ones from ``generate.seed`` or else the run's seed
    (with power states, sleep power and batteries, when the scenario has dynamics)."""
    if scenario.generate is None:
        return network_of(scenario)
    return replace(generated_network(scenario.generate, seed,
                                     power_states=scenario.dynamics is not None),
                   goodput_factor=float(scenario.goodput_factor))


def network_of(scenario: Scenario) -> ResolvedNetwork:
    """The network of a *resolved* scenario (explicit, or a fleet's sequences kept as they
    are: never a list of a million specs)."""
    devices, links = scenario.devices or (), scenario.links or ()
    goodput = float(scenario.goodput_factor)
    net = ResolvedNetwork(devices, links, str(scenario.aggregator), list(scenario.media),
                          list(scenario.edges), goodput)
    if net.fleet is not None:
        return net
    return ResolvedNetwork(list(devices), list(links), str(scenario.aggregator),
                           list(scenario.media), list(scenario.edges), goodput)
