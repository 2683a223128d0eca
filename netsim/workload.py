"""What one epoch's participants move and compute (bytes, FLOP): the one place that says it.

Each participant downloads ``download_bytes`` from the aggregator, computes
``flop_per_sample`` FLOP per sample it uses, and uploads ``upload_bytes``; the aggregator then
spends ``aggregation_flop_per_update`` FLOP on each update it takes. A training epoch's
workload is its model variant's (:meth:`netsim.scenario.schema.ModelSpec.workload`: the
variant's bytes both ways, its training FLOP per sample, 2 x its parameters per update). A
decision may carry its own (``Decision.workload``), as a driven run does when a Flower round
moves the bytes of its messages and an evaluate round computes forward passes only
(netsim's formalization, docs/flower.md). Where its participants differ (each Flower message
and reply carries its own records), ``by_device`` gives each its own figures
(:class:`DeviceWork`), in place of the shared ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceWork:
    """One participant's own figures (a :class:`Workload`'s ``by_device``): bytes down and
    up (B), compute (FLOP, in place of samples x FLOP per sample) and the aggregator's FLOP
    for its update (counted only when its update is taken). Every figure finite and >= 0."""

    download_bytes: float
    upload_bytes: float
    flop: float
    aggregation_flop: float

    def __post_init__(self) -> None:
        _check_figures(self, "workload.by_device", ("download_bytes", "upload_bytes", "flop",
                                                    "aggregation_flop"))


@dataclass(frozen=True)
class Workload:
    """Per participant: bytes down (B), FLOP per sample, bytes up (B); per update at the
    aggregator: FLOP. Every figure finite and >= 0. ``by_device`` (optional): each
    participant's own figures (device id -> :class:`DeviceWork`, for every participant of
    the decision) in place of these; a participant's compute is then its ``flop``, whatever
    its samples."""

    download_bytes: float
    upload_bytes: float
    flop_per_sample: float
    aggregation_flop_per_update: float
    by_device: Mapping[str, DeviceWork] | None = None

    def __post_init__(self) -> None:
        _check_figures(self, "workload", ("download_bytes", "upload_bytes", "flop_per_sample",
                                          "aggregation_flop_per_update"))

    @property
    def symmetric(self) -> bool:
        """Whether every upload moves as many bytes as every download (what the changing
        world's and the hierarchical array paths play; a static epoch plays any workload in
        arrays, each transfer its own size: netsim.fastepoch); never with per-device
        figures."""
        return self.by_device is None and self.download_bytes == self.upload_bytes

    def aggregation_flop(self, updates: int | float,
                         devices: Iterable[str] | None = None) -> float:
        """FLOP the aggregator spends on ``updates`` updates; with per-device figures and
        ``devices`` (the participants whose updates it takes), the sum of theirs."""
        if self.by_device is not None and devices is not None:
            return float(sum(self.by_device[d].aggregation_flop for d in devices))
        return self.aggregation_flop_per_update * updates

    def bytes_of(self, device: str) -> tuple[float, float]:
        """(download, upload) bytes of participant ``device``."""
        own = self.by_device.get(device) if self.by_device is not None else None
        if own is None:
            return self.download_bytes, self.upload_bytes
        return own.download_bytes, own.upload_bytes

    def compute_flop(self, device: str, samples: float) -> float:
        """FLOP participant ``device`` computes on ``samples`` samples."""
        own = self.by_device.get(device) if self.by_device is not None else None
        return own.flop if own is not None else samples * self.flop_per_sample


def _check_figures(obj: object, prefix: str, names: tuple[str, ...]) -> None:
    """Each of ``names`` a finite number >= 0, else a ValueError naming it."""
    for name in names:
        value = getattr(obj, name)
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0.0):
            raise ValueError(f"{prefix}.{name}: {value!r} is not a finite number >= 0")


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

