"""A run's concrete network: the devices, links and media of a scenario, or those its generator
builds from a seed (kept apart from loading and validation, which the device table, the engine
and the validation's checks all need without importing one another)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from netsim.scenario.generator import generate_network, generated_media
from netsim.scenario.schema import DeviceSpec, GenerateSpec, LinkSpec, MediumSpec, Scenario


@dataclass(frozen=True)
class ResolvedNetwork:
    """The concrete network of a run: devices, links (network nodes implied) and aggregator."""

    devices: list[DeviceSpec]
    links: list[LinkSpec]
    aggregator: str
    media: list[MediumSpec] = field(default_factory=list)

    @property
    def node_ids(self) -> list[str]:
        """Device ids first (in order), then network nodes in order of first appearance."""
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
    devices, links, agg = generate_network(spec, rng, power_states=power_states)
    return ResolvedNetwork(devices, links, agg, generated_media(links))


def resolve_network(scenario: Scenario, seed: int) -> ResolvedNetwork:
    """The scenario's network; generated ones from ``generate.seed`` or else the run's seed
    (with power states, sleep power and batteries, when the scenario has dynamics)."""
    if scenario.generate is None:
        return ResolvedNetwork(list(scenario.devices or []), list(scenario.links or []),
                               str(scenario.aggregator), list(scenario.media))
    return generated_network(scenario.generate, seed,
                             power_states=scenario.dynamics is not None)
