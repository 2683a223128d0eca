"""A generated network held in arrays: a fleet of any size without a Python object per device.

The generator (:mod:`netsim.scenario.generator`) draws a fleet as arrays; the engine, the
topology and the device table read those arrays directly. The resolved scenario's ``devices``
and ``links`` are :class:`FleetDevices` / :class:`FleetLinks`: read-only sequences that build a
:class:`~netsim.scenario.schema.DeviceSpec` or :class:`~netsim.scenario.schema.LinkSpec` only
for the entry asked for (a policy reading ``scenario.devices[i]`` gets the same figures as the
arrays). Values come from the catalog (validated once per class and link type) and from draws
that keep them in range, so no per-device validation is needed.

Layout (netsim's generator): row 0 is the aggregator, rows 1..n the generated devices in
order. Link 0 joins the aggregator to the core router; each cell's backhaul link comes just
before the access link of the device that opens the cell, each device's access link joins it
to its cell. Nodes: the devices, then the core router, then the cells in order of opening.
Memory: about 150 bytes per device in these arrays (``Fleet.nbytes``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from netsim.scenario.schema import DeviceSpec, EdgeSpec, LinkSpec, MediumSpec


@dataclass(frozen=True)
class Fleet:
    """A generated network as arrays (see the module docstring); figures in SI units."""

    ids: list[str]                 # device ids, row 0 the aggregator
    device_class: list[str]        # class name per device row
    flop_per_s: np.ndarray         # FLOP/s per device row
    memory_bytes: np.ndarray       # bytes
    power_busy_w: np.ndarray       # W
    power_idle_w: np.ndarray       # W
    samples: np.ndarray            # int64
    power_sleep_w: np.ndarray      # W, NaN: none (no dynamics, or the class has none)
    battery_j: np.ndarray          # J, NaN: mains powered
    cell_ids: list[str]            # network nodes after the core router, in order of opening
    cell_kind: list[str]           # access type per cell
    cell_medium: np.ndarray        # per cell: its index in ``media``, -1 if not a medium
    media: list[MediumSpec]
    device_cell: np.ndarray        # per generated device (row - 1): its cell
    access_bps: np.ndarray         # per generated device: access bandwidth (bit/s)
    access_latency_s: np.ndarray
    access_j_per_bit: np.ndarray
    access_radio: dict[str, dict[str, float]]  # access type -> radio figures (shared media)
    backhaul: dict[str, Any]       # bandwidth_bps, latency_s, energy_j_per_bit, link_type
    fibre: dict[str, Any]
    link_owner: np.ndarray         # per link: 0 (link 0), device row (> 0) or -(cell + 1)
    core_id: str
    aggregator_id: str
    edges: list[EdgeSpec] = field(default_factory=list)
    """Edge aggregators on cell nodes (``generate.edges``; docs/hierarchical.md)."""
    cell_edge: np.ndarray | None = None
    """Per cell: the index in ``edges`` of the edge serving its devices (None: no edges)."""

    @property
    def n_devices(self) -> int:
        """Devices, the aggregator included."""
        return len(self.ids)

    @property
    def node_ids(self) -> list[str]:
        """Device ids, then the core router, then the cells (the topology's node order)."""
        return [*self.ids, self.core_id, *self.cell_ids]

    @property
    def nbytes(self) -> int:
        """Bytes the fleet's arrays take (strings and their lists included, roughly)."""
        arrays = [v for v in vars(self).values() if isinstance(v, np.ndarray)]
        strings = sum(49 + len(s) + 8 for s in self.ids) + 8 * len(self.device_class)
        return int(sum(a.nbytes for a in arrays) + strings)

    def device(self, row: int) -> DeviceSpec:
        """The device of ``row`` as a spec (the same figures as the arrays)."""
        extra: dict[str, Any] = {}
        if not np.isnan(self.power_sleep_w[row]):
            extra["power_sleep_w"] = float(self.power_sleep_w[row])
        if not np.isnan(self.battery_j[row]):
            extra["battery_j"] = float(self.battery_j[row])
        return DeviceSpec.model_construct(
            id=self.ids[row], flop_per_s=float(self.flop_per_s[row]),
            memory_bytes=float(self.memory_bytes[row]),
            power_busy_w=float(self.power_busy_w[row]),
            power_idle_w=float(self.power_idle_w[row]), samples=int(self.samples[row]),
            device_class=self.device_class[row], **extra)

    def link(self, j: int) -> LinkSpec:
        """Link ``j`` as a spec."""
        if j == 0:
            f = self.fibre
            return LinkSpec.model_construct(a=self.aggregator_id, b=self.core_id,
                                            bandwidth_bps=f["bandwidth_bps"],
                                            latency_s=f["latency_s"],
                                            energy_j_per_bit=f["energy_j_per_bit"],
                                            link_type="fibre")
        owner = int(self.link_owner[j])
        if owner < 0:
            b = self.backhaul
            return LinkSpec.model_construct(a=self.cell_ids[-owner - 1], b=self.core_id,
                                            bandwidth_bps=b["bandwidth_bps"],
                                            latency_s=b["latency_s"],
                                            energy_j_per_bit=b["energy_j_per_bit"],
                                            link_type=b["link_type"])
        k = owner - 1
        cell = int(self.device_cell[k])
        kind = self.cell_kind[cell]
        radio: dict[str, Any] = dict(self.access_radio.get(kind, {}))
        return LinkSpec.model_construct(
            a=self.ids[owner], b=self.cell_ids[cell], bandwidth_bps=float(self.access_bps[k]),
            latency_s=float(self.access_latency_s[k]),
            energy_j_per_bit=float(self.access_j_per_bit[k]), link_type=kind,
            medium=self.cell_ids[cell] if self.cell_medium[cell] >= 0 else None, **radio)


class _FleetSequence(Sequence):
    """A read-only sequence over a fleet whose entries are built when asked for."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def _entry(self, i: int) -> Any:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self._entry(k) for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._entry(i)

    def __iter__(self) -> Iterator[Any]:
        return (self._entry(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence (list, tuple, fleet) of equal entries, in order."""
        if isinstance(other, _FleetSequence) and other.fleet is self.fleet \
                and type(other) is type(self):
            return True
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


class FleetDevices(_FleetSequence):
    """The fleet's devices as a sequence of :class:`DeviceSpec` (built on access)."""

    def __len__(self) -> int:
        return self.fleet.n_devices

    def _entry(self, i: int) -> DeviceSpec:
        return self.fleet.device(i)


class FleetLinks(_FleetSequence):
    """The fleet's links as a sequence of :class:`LinkSpec` (built on access)."""

    def __len__(self) -> int:
        return len(self.fleet.link_owner)

    def _entry(self, i: int) -> LinkSpec:
        return self.fleet.link(i)


def fleet_of(devices: Sequence[Any] | None) -> Fleet | None:
    """The fleet behind a resolved scenario's ``devices`` (None for explicit devices)."""
    return devices.fleet if isinstance(devices, FleetDevices) else None
