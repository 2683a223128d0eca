"""What one epoch's participants move and compute (bytes, FLOP): the one place that says it.

Each participant downloads ``download_bytes`` from the aggregator, computes
``flop_per_sample`` FLOP per sample it uses, and uploads ``upload_bytes``; the aggregator then
spends ``aggregation_flop_per_update`` FLOP on each update it takes. A training epoch's
workload is its model variant's (:meth:`netsim.scenario.schema.ModelSpec.workload`: the
variant's bytes both ways, its training FLOP per sample, 2 x its parameters per update). A
decision may carry its own (``Decision.workload``), as a driven run does when a Flower round
moves the bytes of its messages and an evaluate round computes forward passes only
(netsim's formalization, docs/flower.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    """Per participant: bytes down (B), FLOP per sample, bytes up (B); per update at the
    aggregator: FLOP. Every figure finite and >= 0."""

    download_bytes: float
    upload_bytes: float
    flop_per_sample: float
    aggregation_flop_per_update: float

    def __post_init__(self) -> None:
        for name in ("download_bytes", "upload_bytes", "flop_per_sample",
                     "aggregation_flop_per_update"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0.0):
                raise ValueError(f"workload.{name}: {value!r} is not a finite number >= 0")

    @property
    def symmetric(self) -> bool:
        """Whether the upload moves as many bytes as the download (what the array fast path
        plays: netsim.fastepoch)."""
        return self.download_bytes == self.upload_bytes

    def aggregation_flop(self, updates: int | float) -> float:
        """FLOP the aggregator spends on ``updates`` updates."""
        return self.aggregation_flop_per_update * updates


@dataclass(frozen=True)
class LocalTraining:
    """How each participant trains in an epoch: ``epochs`` local passes (E) over the samples
    it uses, in minibatches of ``batch_size`` samples (B; None: the whole local data, one step
    a pass). A decision may set it for its epoch (``Decision.local``); else the scenario's
    ``training.local_epochs`` and ``training.batch_size`` hold."""

    epochs: int = 1
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.epochs, int) and self.epochs >= 1):
            raise ValueError(f"local.epochs: {self.epochs!r} is not an integer >= 1")
        if self.batch_size is not None and not (isinstance(self.batch_size, int)
                                                and self.batch_size >= 1):
            raise ValueError(f"local.batch_size: {self.batch_size!r} is not an integer >= 1 "
                             "(or None: the whole local data)")

