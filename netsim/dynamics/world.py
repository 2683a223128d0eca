"""One run's changing world: availability timeline, capacity schedule, compute factors,
batteries (docs/dynamics.md).

Every draw comes from the run's dynamics stream (:func:`run_streams`, the fourth), split into
availability, bandwidth and compute sub-streams, never from the policy's: the world a policy
sees does not depend on which policy runs, nor on when the engine asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netsim.dynamics.availability import (
    AlwaysOnline,
    AvailabilityTimeline,
    MarkovSessions,
    SessionSource,
    TraceSessions,
)
from netsim.dynamics.bandwidth import (
    CapacitySchedule,
    LognormalCapacity,
    TraceCapacity,
)
from netsim.scenario.fleet import fleet_of
from netsim.scenario.schema import DeviceSpec, DynamicsSpec, LinkSpec


def run_streams(seed: int) -> list[np.random.SeedSequence]:
    """The run's four seed sequences: policy, loss, per-epoch (bernoulli) availability, and
    the dynamics (netsim.engine.run draws from exactly these)."""
    return np.random.SeedSequence([seed, 0x6E73]).spawn(4)


@dataclass
class Batteries:
    """Battery capacity per device (J; NaN: mains powered) and the fraction below which a
    device does not volunteer."""

    capacity_j: np.ndarray
    min_fraction: np.ndarray

    @property
    def any(self) -> bool:
        """Whether some device runs on a battery (computed once the capacities are read-only,
        as the changing world leaves them)."""
        if self.capacity_j.flags.writeable:
            return bool(np.any(~np.isnan(self.capacity_j)))
        if getattr(self, "_any", None) is None:
            self._any = bool(np.any(~np.isnan(self.capacity_j)))
        return bool(self._any)


class Dynamics:
    """The changing world of one run (see the module docstring).

    ``devices``/``links``: the resolved network, devices in table order; ``aggregator``: its
    row (always online); ``base_bps``: the topology's capacity per link direction (bit/s).
    """

    def __init__(self, spec: DynamicsSpec | None, devices: Sequence[DeviceSpec],
                 links: Sequence[LinkSpec], aggregator: int, base_bps: Sequence[float],
                 seed: np.random.SeedSequence, goodput_factor: float = 1.0) -> None:
        self.spec = spec
        n = len(devices)
        avail_seed, bw_seed, compute_seed = seed.spawn(3)
        self.bernoulli = spec is None or spec.availability.model == "bernoulli"
        self.timeline = AvailabilityTimeline(self._sessions(spec, devices, aggregator,
                                                            avail_seed), n)
        self.capacity = self._capacity(spec, links, np.asarray(base_bps, dtype=float), bw_seed,
                                       goodput_factor)
        compute = spec.compute if spec is not None else None
        self._spread = compute.spread if compute is not None else 0.0
        self._straggle = compute.straggler_probability if compute is not None else 0.0
        self._slowdown = compute.straggler_slowdown if compute is not None else 1.0
        self._compute_rng = np.random.default_rng(compute_seed)
        self._n = n
        fleet = fleet_of(devices)
        if fleet is not None:  # a generated fleet: its arrays (min fraction: the default)
            self.batteries = Batteries(fleet.battery_j.copy(), np.full(
                n, DeviceSpec.model_fields["battery_min_fraction"].default))
        else:
            self.batteries = Batteries(
                np.array([np.nan if d.battery_j is None else d.battery_j for d in devices]),
                np.array([d.battery_min_fraction for d in devices]))
        self.batteries.capacity_j[aggregator] = np.nan  # (ours: the aggregator is mains powered)
        self.batteries.capacity_j.setflags(write=False)  # (set once: ``any`` is computed once)

    @staticmethod
    def _sessions(spec: DynamicsSpec | None, devices: Sequence[DeviceSpec], aggregator: int,
                  seed: np.random.SeedSequence) -> SessionSource:
        if spec is None or spec.availability.model == "bernoulli":
            return AlwaysOnline()
        a = spec.availability
        if a.model == "trace":
            from netsim.dynamics.traces import read_availability_trace

            assert a.trace is not None
            ids = [d.id if i != aggregator else "" for i, d in enumerate(devices)]
            return TraceSessions(read_availability_trace(a.trace), ids, a.repeat)
        from netsim.dynamics.catalog import session_lengths

        fleet = fleet_of(devices)
        classes = fleet.device_class if fleet is not None else [d.device_class for d in devices]
        first: dict[str | None, int] = {}
        code = np.array([first.setdefault(c, len(first)) for c in classes], dtype=np.intp)
        table = np.array([session_lengths(c) for c in first], dtype=float).reshape(-1, 2)
        on = table[code, 0] if a.mean_online_s is None else np.full(len(code), a.mean_online_s)
        off = table[code, 1] if a.mean_offline_s is None else np.full(len(code),
                                                                      a.mean_offline_s)
        always = np.zeros(len(devices), dtype=bool)
        always[aggregator] = True
        return MarkovSessions(on, off, a.diurnal_amplitude, always, seed)

    @staticmethod
    def _capacity(spec: DynamicsSpec | None, links: Sequence[LinkSpec], base: np.ndarray,
                  seed: np.random.SeedSequence, goodput_factor: float = 1.0) -> CapacitySchedule:
        if spec is None or spec.bandwidth.model == "constant":
            return CapacitySchedule(base)
        b = spec.bandwidth
        if b.model == "trace":
            from netsim.dynamics.traces import read_bandwidth_trace

            assert b.trace is not None
            return TraceCapacity(base, read_bandwidth_trace(b.trace), links, b.repeat,
                                 goodput_factor)
        return LognormalCapacity(base, b.sigma, b.correlation_s, b.step_s,
                                 np.random.default_rng(seed))

    @property
    def static(self) -> bool:
        """Whether nothing ever changes (no sessions, capacities, compute spread, batteries)."""
        return (self.timeline.static and self.capacity.static and not self.varies_compute
                and not self.batteries.any)

    @property
    def varies_compute(self) -> bool:
        """Whether device speed varies per device-epoch."""
        return self._spread > 0.0 or self._straggle > 0.0

    def compute_factors(self) -> np.ndarray:
        """The next epoch's speed factor per device (multiplies ``flop_per_s``): log-normal
        of median 1 and sigma ``spread``, divided by ``straggler_slowdown`` with probability
        ``straggler_probability``. Drawn for every device every epoch, in epoch order."""
        rng, n = self._compute_rng, self._n
        factor = np.exp(self._spread * rng.standard_normal(n))
        slow = rng.random(n) < self._straggle
        return np.where(slow, factor / self._slowdown, factor)
