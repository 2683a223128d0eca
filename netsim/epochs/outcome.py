"""What one executed epoch cost (:class:`EpochOutcome`): what every kind of epoch returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from netsim.dynamics.buffered import Update
from netsim.energy import EnergyTotals


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

    @property
    def wasted_j(self) -> float:
        """Energy of the dropped and late participants in this epoch (J)."""
        return float(sum(self.wasted_j_by_row.values()))
