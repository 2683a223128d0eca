"""What one executed epoch cost (:class:`EpochOutcome`): what every kind of epoch returns."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netsim.dynamics.buffered import Update
from netsim.energy import EnergyTotals


@dataclass(frozen=True)
class RoundUpdates:
    """The device updates one edge aggregation took, as arrays (a synchronous epoch of a
    thousand participants builds no object per update): their devices, samples and
    staleness (edge versions); iterating gives :class:`Update` objects."""

    devices: tuple[str, ...]
    samples: np.ndarray
    staleness: np.ndarray

    def __post_init__(self) -> None:
        for a in (self.samples, self.staleness):
            a.setflags(write=False)

    def __len__(self) -> int:
        return len(self.devices)

    def __iter__(self) -> Iterator[Update]:
        return (Update(d, s, t) for d, s, t in zip(
            self.devices, self.samples.tolist(), self.staleness.tolist(), strict=True))

    @classmethod
    def of(cls, updates: Iterable[Update]) -> RoundUpdates:
        """The arrays of ``updates``."""
        u = list(updates)
        return cls(tuple(x.device for x in u), np.array([x.samples for x in u], dtype=np.int64),
                   np.array([x.staleness for x in u], dtype=np.int64))


@dataclass(frozen=True)
class EdgeUpdate:
    """What one edge sent the cloud in a hierarchical epoch (docs/hierarchical.md): the
    device updates each of its edge aggregations took (``rounds``, in order; staleness in
    edge versions) and its own staleness at the cloud (cloud aggregations between the start
    of its work and its arrival; 0 when synchronous)."""

    edge: str
    rounds: tuple[RoundUpdates, ...]
    staleness: int = 0

    @property
    def samples(self) -> int:
        """Samples its devices trained, over every edge round."""
        return int(sum(int(r.samples.sum()) for r in self.rounds))


@dataclass(frozen=True)
class TierOutcome:
    """A hierarchical epoch's training: the edge updates its cloud aggregation took and how
    many edge rounds it played (the most any edge made)."""

    edge_updates: tuple[EdgeUpdate, ...]
    edge_rounds: int

    @property
    def counted(self) -> dict[str, int]:
        """Samples per device over every edge round of every edge update taken."""
        out: dict[str, int] = {}
        for e in self.edge_updates:
            for r in e.rounds:
                for d, s in zip(r.devices, r.samples.tolist(), strict=True):
                    out[d] = out.get(d, 0) + s
        return out

    def staleness(self) -> list[int]:
        """The staleness (edge versions) of every device update taken."""
        return [s for e in self.edge_updates for r in e.rounds for s in r.staleness.tolist()]


@dataclass(frozen=True)
class EpochOutcome:
    """What one executed epoch cost: its interval (s) and the energy it used by category; in a
    changing world also whose updates counted (``counted``: device -> samples, clusters by
    head; None: every participant's), who dropped out or was late, and the energy each of
    those drew in the epoch (``wasted_j_by_row``: device row -> J). An asynchronous epoch
    (docs/async.md) also gives the ``updates`` its aggregation took (with their staleness),
    how many jobs its decision ``started`` and how many are still ``in_flight`` at its end;
    its ``late`` are the updates discarded as too stale."""

    start_s: float
    end_s: float
    energy: EnergyTotals
    counted: dict[str, int] | None = None
    dropped: tuple[str, ...] = ()
    late: tuple[str, ...] = ()
    wasted_j_by_row: dict[int, float] = field(default_factory=dict)
    updates: tuple[Update, ...] | None = None
    started: int | None = None
    in_flight: int = 0
    tiers: TierOutcome | None = None
    """A hierarchical epoch's (docs/hierarchical.md): the edges' updates the cloud took."""
    bytes_backhaul: float = 0.0
    """Bytes that crossed the backhaul (edge <-> cloud links) in the epoch (B): a transfer
    counted once, however many backhaul links it crosses."""
    energy_backhaul_j: float = 0.0
    """The senders' per-bit energy of those bytes on the backhaul links (J; part of comm)."""
    energy_edges_j: float = 0.0
    """What the edge aggregators drew in the epoch (J, every category)."""
    energy_cloud_j: float = 0.0
    """What the cloud aggregator drew in the epoch (J, every category)."""
    phases: tuple[dict[str, Any], ...] = ()
    """A hierarchical epoch's phases in order, each with its tier (``epochs.phases``)."""
    phase_times: tuple[Any, Any] | None = None
    """Where the scenario keeps them (``record_phase_times``) and the epoch is a static star
    epoch: (device rows, per row its download start and end and its upload start and end,
    s; training runs from the download's end to the upload's start)."""

    @property
    def wasted_j(self) -> float:
        """Energy of the dropped and late participants in this epoch (J)."""
        return float(sum(self.wasted_j_by_row.values()))
