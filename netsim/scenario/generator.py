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

from netsim.scenario.fleet import Fleet, FleetDevices, FleetLinks
from netsim.scenario.schema import EdgeSpec, GenerateSpec, MediumSpec
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


def _shares_to_codes(shares: dict[str, float], n: int, rng: np.random.Generator
                     ) -> tuple[list[str], np.ndarray]:
    """The names with a positive share (sorted) and a shuffled label code per entry: counts
    in proportion to the shares, the remainder drawn with the shares as probabilities."""
    names = sorted(k for k, v in shares.items() if v > 0)
    p = np.array([shares[k] for k in names], dtype=float)
    counts = np.floor(p / p.sum() * n).astype(int)
    remainder = n - counts.sum()
    if remainder:
        extra = rng.choice(len(names), size=remainder, replace=True, p=p / p.sum())
        np.add.at(counts, extra, 1)
    labels = np.repeat(np.arange(len(names)), counts)
    rng.shuffle(labels)
    return names, labels


def generate_network(
    spec: GenerateSpec, rng: np.random.Generator, power_states: bool = False
) -> tuple[FleetDevices, FleetLinks, str]:
    """Devices, links and the aggregator id of a generated network (deterministic in ``rng``):
    read-only sequences over :func:`generate_fleet`'s arrays."""
    fleet = generate_fleet(spec, rng, power_states)
    return FleetDevices(fleet), FleetLinks(fleet), AGGREGATOR_ID


def generate_fleet(spec: GenerateSpec, rng: np.random.Generator,
                   power_states: bool = False) -> Fleet:
    """A generated network as arrays (:class:`netsim.scenario.fleet.Fleet`), deterministic in
    ``rng``; no Python object per device.

    ``power_states``: give devices their class's ``power_sleep_w`` and ``battery_j`` (for
    scenarios with dynamics); the rest of the network is the same either way.
    """
    catalog = edge_catalog()
    classes, access = catalog["device_classes"], catalog["access_links"]
    n = spec.n_devices
    class_names, kind_code = _shares_to_codes(spec.mix, n, rng)
    access_names, access_code = _shares_to_codes(spec.access, n, rng)
    flops_jitter = rng.lognormal(0.0, _COMPUTE_SIGMA, n)
    power_jitter = rng.lognormal(0.0, _POWER_SIGMA, n)
    bw_jitter = rng.lognormal(0.0, _BANDWIDTH_SIGMA, n)
    samples = np.maximum(
        1, np.round(spec.samples_mean * rng.lognormal(0.0, spec.samples_spread, n))
    ).astype(np.int64) if spec.samples_mean > 0 else np.zeros(n, dtype=np.int64)
    mem_pick = rng.random(n)

    def per_class(field: str) -> np.ndarray:
        return np.array([_number(classes[c].get(field)) for c in class_names], dtype=float)

    agg = classes[spec.aggregator_class]
    n_mem = np.array([len(classes[c]["memory_bytes"]) for c in class_names])
    mem_table = np.full((len(class_names), int(n_mem.max(initial=1))), np.nan)
    for k, c in enumerate(class_names):
        mem_table[k, :n_mem[k]] = classes[c]["memory_bytes"]
    memory = mem_table[kind_code, (mem_pick * n_mem[kind_code]).astype(np.intp)]
    jittered = {f: per_class(f)[kind_code] * power_jitter
                for f in ("power_busy_w", "power_idle_w")}
    sleep = np.full(n + 1, np.nan)
    battery = np.full(n + 1, np.nan)
    if power_states:
        sleep[1:] = per_class("power_sleep_w")[kind_code] * power_jitter
        battery[1:] = per_class("battery_j")[kind_code]
        sleep[0] = _number(agg.get("power_sleep_w"))
        battery[0] = _number(agg.get("battery_j"))

    def with_agg(value: float, rest: np.ndarray) -> np.ndarray:
        return np.concatenate([[float(value)], rest])

    width = len(str(n))
    ids = [AGGREGATOR_ID] + [f"{class_names[c]}-{i:0{width}d}"
                             for i, c in enumerate(kind_code.tolist())]
    device_class = [spec.aggregator_class] + [class_names[c] for c in kind_code.tolist()]

    # cells: per access type, a new cell every devices_per_cell devices of that type
    rank = _rank_within(access_code, len(access_names))
    opens = rank % spec.devices_per_cell == 0
    opened_before = np.cumsum(opens) - opens           # cells opened by earlier devices
    cell_of_opener = np.flatnonzero(opens)              # the device opening each cell
    n_cells = len(cell_of_opener)
    # a device's cell: the latest cell of its type opened at or before it
    cell_number = rank // spec.devices_per_cell        # within its type (0-based)
    key = access_code.astype(np.int64) * (n + 1) + cell_number
    cell_key = key[cell_of_opener]
    device_cell = np.searchsorted(np.sort(cell_key), key)
    order = np.argsort(cell_key, kind="stable")
    device_cell = order[device_cell]
    cell_kind = [access_names[c] for c in access_code[cell_of_opener].tolist()]
    cell_ids = [f"{kind}-cell-{num + 1}" for kind, num in
                zip(cell_kind, cell_number[cell_of_opener].tolist(), strict=True)]
    access_link = 1 + np.arange(n) + opened_before + opens
    link_owner = np.zeros(1 + n + n_cells, dtype=np.int64)
    link_owner[access_link] = np.arange(1, n + 1)
    link_owner[access_link[cell_of_opener] - 1] = -(np.arange(n_cells) + 1)

    radio_of = {kind: {k: float(access[kind][k]) for k in _RADIO_FIELDS if k in access[kind]}
                for kind in access_names
                if spec.shared_media and access[kind].get("medium")}
    radio_of = {k: v for k, v in radio_of.items() if v}
    cell_medium = np.full(n_cells, -1, dtype=np.int64)
    media: list[MediumSpec] = []
    for ci, kind in enumerate(cell_kind):
        if kind in radio_of:
            cell_medium[ci] = len(media)
            media.append(MediumSpec(id=cell_ids[ci], kind=access[kind]["medium"]))
    typ = {f: np.array([float(access[k][f]) for k in access_names])
           for f in ("bandwidth_bps", "latency_s", "energy_j_per_bit")}
    backhaul, fibre = dict(access[spec.backhaul]), dict(access["fibre"])
    edges, cell_edge = _edges(spec, classes, cell_ids)
    if spec.edges is not None and spec.edges.backhaul_bps is not None:
        backhaul["bandwidth_bps"] = spec.edges.backhaul_bps
    if spec.edges is not None and spec.edges.metro_bps is not None:
        fibre["bandwidth_bps"] = spec.edges.metro_bps
    return Fleet(
        ids=ids, device_class=device_class,
        flop_per_s=with_agg(agg["flop_per_s"], per_class("flop_per_s")[kind_code] * flops_jitter),
        memory_bytes=with_agg(agg["memory_bytes"][-1], memory),
        power_busy_w=with_agg(agg["power_busy_w"], jittered["power_busy_w"]),
        power_idle_w=with_agg(agg["power_idle_w"], jittered["power_idle_w"]),
        samples=np.concatenate([[0], samples]).astype(np.int64),
        power_sleep_w=sleep, battery_j=battery,
        cell_ids=cell_ids, cell_kind=cell_kind, cell_medium=cell_medium, media=media,
        device_cell=device_cell,
        access_bps=typ["bandwidth_bps"][access_code] * bw_jitter,
        access_latency_s=typ["latency_s"][access_code],
        access_j_per_bit=typ["energy_j_per_bit"][access_code],
        access_radio=radio_of,
        backhaul={"bandwidth_bps": float(backhaul["bandwidth_bps"]),
                  "latency_s": float(backhaul["latency_s"]),
                  "energy_j_per_bit": float(backhaul["energy_j_per_bit"]),
                  "link_type": spec.backhaul},
        fibre={"bandwidth_bps": float(fibre["bandwidth_bps"]),
               "latency_s": float(fibre["latency_s"]),
               "energy_j_per_bit": float(fibre["energy_j_per_bit"])},
        link_owner=link_owner, core_id=CORE_ID, aggregator_id=AGGREGATOR_ID,
        edges=edges, cell_edge=cell_edge)


def _edges(spec: GenerateSpec, classes: dict[str, Any], cell_ids: list[str]
           ) -> tuple[list[EdgeSpec], np.ndarray | None]:
    """The generated edge aggregators (netsim's generator, docs/hierarchical.md): one on the
    node of every ``cells_per_edge``-th cell (in order of opening), serving that cell and the
    next ``cells_per_edge - 1``, with the figures of the catalog's ``edge_class``; and per
    cell the index of its edge. No draws: the rest of the network is the same either way."""
    if spec.edges is None:
        return [], None
    per, kind = spec.edges.cells_per_edge, classes[spec.edges.edge_class]
    cell_edge = np.arange(len(cell_ids), dtype=np.intp) // per
    edges = [EdgeSpec.model_construct(
        id=f"edge-{k + 1}", node=cell_ids[k * per], flop_per_s=float(kind["flop_per_s"]),
        power_busy_w=float(kind["power_busy_w"]), power_idle_w=float(kind["power_idle_w"]),
        memory_bytes=float(kind["memory_bytes"][-1]))
        for k in range(int(cell_edge[-1]) + 1 if len(cell_ids) else 0)]
    return edges, cell_edge


def _number(value: Any) -> float:
    """A catalog figure as a float (NaN for null)."""
    return np.nan if value is None else float(value)


def _rank_within(code: np.ndarray, n_codes: int) -> np.ndarray:
    """Each entry's position among the earlier entries of its code (0, 1, ...)."""
    out = np.empty(len(code), dtype=np.int64)
    for c in range(n_codes):
        at = np.flatnonzero(code == c)
        out[at] = np.arange(len(at))
    return out


_RADIO_FIELDS = ("rx_energy_j_per_bit", "radio_power_w", "tail_s", "tail_power_w")
