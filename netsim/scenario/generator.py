"""Seeded generator of heterogeneous edge networks from device classes and access-link types.

Topology (netsim's): devices of one access type are grouped into cells of at most
``devices_per_cell`` devices; each cell is a network node (Wi-Fi access point or cellular base
station) joined to a core router by a ``backhaul`` link; the aggregator (an ``aggregator_class``
device) hangs off the core router by a fibre link. Each device's access link is drawn around its
type's typical bandwidth (log-normal, sigma 0.3: channel quality varies), its compute around its
class's typical FLOP/s (log-normal, sigma 0.25), its memory from the class's sizes and its
samples log-normally around ``samples_mean``. Figures and sources: netsim/data/edge_catalog.yaml.

With ``power_states`` (scenarios with a ``dynamics`` block), devices also get their class's
``power_sleep_w`` (scaled by the device's power jitter, like its busy and idle power) and
``battery_j``; without, the devices are exactly those of the static world (no extra draws:
the same seed gives the same network either way, power states aside).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from netsim.scenario.schema import DeviceSpec, GenerateSpec, LinkSpec, MediumSpec
from netsim.yamlio import safe_load

AGGREGATOR_ID = "aggregator"
CORE_ID = "core-router"
_COMPUTE_SIGMA = 0.25
_BANDWIDTH_SIGMA = 0.3
_POWER_SIGMA = 0.1


@lru_cache(maxsize=1)
def edge_catalog() -> dict[str, dict[str, Any]]:
    """The table of device classes and access links with their sources."""
    text = resources.files("netsim").joinpath("data").joinpath("edge_catalog.yaml").read_text("utf-8")
    return safe_load(text)


def _shares_to_counts(shares: dict[str, float], n: int, rng: np.random.Generator) -> list[str]:
    names = sorted(k for k, v in shares.items() if v > 0)
    p = np.array([shares[k] for k in names], dtype=float)
    counts = np.floor(p / p.sum() * n).astype(int)
    remainder = n - counts.sum()
    if remainder:
        extra = rng.choice(len(names), size=remainder, replace=True, p=p / p.sum())
        np.add.at(counts, extra, 1)
    labels = np.repeat(np.array(names, dtype=object), counts)
    rng.shuffle(labels)
    return [str(x) for x in labels]


def _power_states(cls: dict[str, Any], jitter: float) -> dict[str, float]:
    """A device's power_sleep_w (W, jittered) and battery_j (J) from its class, where given."""
    out: dict[str, float] = {}
    if cls.get("power_sleep_w") is not None:
        out["power_sleep_w"] = float(cls["power_sleep_w"]) * jitter
    if cls.get("battery_j") is not None:
        out["battery_j"] = float(cls["battery_j"])
    return out


def generate_network(
    spec: GenerateSpec, rng: np.random.Generator, power_states: bool = False
) -> tuple[list[DeviceSpec], list[LinkSpec], str]:
    """Devices, links and the aggregator id of a generated network (deterministic in ``rng``).

    ``power_states``: give devices their class's ``power_sleep_w`` and ``battery_j`` (for
    scenarios with dynamics); the rest of the network is the same either way.
    """
    catalog = edge_catalog()
    classes, access = catalog["device_classes"], catalog["access_links"]
    kinds = _shares_to_counts(spec.mix, spec.n_devices, rng)
    link_kinds = _shares_to_counts(spec.access, spec.n_devices, rng)
    n = spec.n_devices
    flops_jitter = rng.lognormal(0.0, _COMPUTE_SIGMA, n)
    power_jitter = rng.lognormal(0.0, _POWER_SIGMA, n)
    bw_jitter = rng.lognormal(0.0, _BANDWIDTH_SIGMA, n)
    samples = np.maximum(
        1, np.round(spec.samples_mean * rng.lognormal(0.0, spec.samples_spread, n))
    ).astype(int) if spec.samples_mean > 0 else np.zeros(n, dtype=int)
    mem_pick = rng.random(n)

    agg = classes[spec.aggregator_class]
    devices = [DeviceSpec(
        id=AGGREGATOR_ID, flop_per_s=agg["flop_per_s"], memory_bytes=agg["memory_bytes"][-1],
        power_busy_w=agg["power_busy_w"], power_idle_w=agg["power_idle_w"], samples=0,
        device_class=spec.aggregator_class, **(_power_states(agg, 1.0) if power_states else {}))]
    backhaul = access[spec.backhaul]
    fibre = access["fibre"]
    links = [LinkSpec(a=AGGREGATOR_ID, b=CORE_ID, bandwidth_bps=fibre["bandwidth_bps"],
                      latency_s=fibre["latency_s"], energy_j_per_bit=fibre["energy_j_per_bit"],
                      link_type="fibre")]
    cell_fill: dict[str, tuple[str, int]] = {}
    cell_count: dict[str, int] = {}
    width = len(str(n))
    for i in range(n):
        cls = classes[kinds[i]]
        dev_id = f"{kinds[i]}-{i:0{width}d}"
        mems = cls["memory_bytes"]
        devices.append(DeviceSpec(
            id=dev_id, flop_per_s=cls["flop_per_s"] * flops_jitter[i],
            memory_bytes=mems[int(mem_pick[i] * len(mems))],
            power_busy_w=cls["power_busy_w"] * power_jitter[i],
            power_idle_w=cls["power_idle_w"] * power_jitter[i],
            samples=int(samples[i]), device_class=kinds[i],
            **(_power_states(cls, float(power_jitter[i])) if power_states else {})))
        kind = link_kinds[i]
        cell, used = cell_fill.get(kind, ("", spec.devices_per_cell))
        if used >= spec.devices_per_cell:
            cell_count[kind] = cell_count.get(kind, 0) + 1
            cell = f"{kind}-cell-{cell_count[kind]}"
            used = 0
            links.append(LinkSpec(a=cell, b=CORE_ID, bandwidth_bps=backhaul["bandwidth_bps"],
                                  latency_s=backhaul["latency_s"],
                                  energy_j_per_bit=backhaul["energy_j_per_bit"],
                                  link_type=spec.backhaul))
        cell_fill[kind] = (cell, used + 1)
        typ = access[kind]
        radio = {k: typ[k] for k in _RADIO_FIELDS if k in typ} \
            if spec.shared_media and typ.get("medium") else {}
        links.append(LinkSpec(a=dev_id, b=cell, bandwidth_bps=typ["bandwidth_bps"] * bw_jitter[i],
                              latency_s=typ["latency_s"], energy_j_per_bit=typ["energy_j_per_bit"],
                              link_type=kind, medium=cell if radio else None, **radio))
    return devices, links, AGGREGATOR_ID


_RADIO_FIELDS = ("rx_energy_j_per_bit", "radio_power_w", "tail_s", "tail_power_w")


def generated_media(links: list[LinkSpec]) -> list[MediumSpec]:
    """The media of a generated network's member links, in order of first appearance: a
    cell of an access type whose catalog ``medium`` is ``wifi`` is a wifi medium, ``cellular``
    (LTE, 5G) a cellular one (docs/wireless.md)."""
    access = edge_catalog()["access_links"]
    seen: dict[str, MediumSpec] = {}
    for link in links:
        if link.medium is not None and link.medium not in seen:
            kind = access[str(link.link_type)]["medium"]
            seen[link.medium] = MediumSpec(id=link.medium, kind=kind)
    return list(seen.values())
