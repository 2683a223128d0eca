"""Predicted time and energy of one synchronous epoch, for policies to plan with.

The engine's own cost functions (architecture spec, "Epoch semantics"): each participant
downloads the variant from the aggregator, trains its samples at its FLOP/s, uploads the
update; the aggregator then averages (2 x params x participants FLOP). Energy: busy power x
compute time, route J/bit x bits both ways, and idle power of *every* device for the epoch's
non-busy time (devices stay on for the whole run).

Timing, shared links and media included: when the device table carries its routes (every
table the engine builds does), the transfers are played forward by the same function the
engine's fast path executes (:func:`netsim.fastepoch.play_plain_epoch`: max-min sharing of
every saturated constraint), so on an idle network the estimate *is* the simulated epoch, to
rounding. Where that function hands an epoch to the event engine (routes crossing two
saturated constraints, a Wi-Fi cell whose uploads start while downloads still take its air
time, a contended cell), the epoch is replayed by the fluid replay of the sharing core
(:func:`netsim.network.fluid.replay`), the flow network's rates without its event queue: the
estimate is still the simulated epoch, to rounding. Radio energy is booked by the engine's
own booking on both. Only for tables without routes is each transfer timed alone on its
route (bits over the bottleneck plus latency), a lower bound on the simulated time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.devices import DeviceTable
from netsim.energy import EnergyMeter
from netsim.fastepoch import PlainEpoch, book_radios, hop_coefficients, play_plain_epoch
from netsim.network.fluid import replay
from netsim.network.radio import RadioMeter
from netsim.scenario.schema import ModelSpec


@dataclass(frozen=True)
class EpochEstimate:
    """Predicted epoch: duration (s), energy (J) by category, per-device finish time (s)."""

    time_s: float
    energy_compute_j: float
    energy_comm_j: float
    energy_idle_j: float
    device_time_s: np.ndarray

    @property
    def energy_j(self) -> float:
        """Total predicted energy (J)."""
        return self.energy_compute_j + self.energy_comm_j + self.energy_idle_j


def device_epoch_times(table: DeviceTable, model: ModelSpec, variant: int,
                       samples: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-device (transfer_s, compute_s, comm_j) for the given samples (0 = not taking part).

    transfer_s is download + upload time; comm_j the energy of both transfers.
    """
    bits = 8.0 * model.model_bytes(variant)
    active = samples > 0
    transfer = np.where(active, bits / table.down_bps + table.down_latency_s
                        + bits / table.up_bps + table.up_latency_s, 0.0)
    compute = samples * model.flop_per_sample(variant) / table.flop_per_s
    comm = np.where(active, bits * (table.down_j_per_bit + table.up_j_per_bit), 0.0)
    return transfer, compute, comm


def _radio_j(table: DeviceTable, rows: np.ndarray, played: PlainEpoch) -> np.ndarray:
    """Per device, the radio energy (J) of a played epoch on radios idle before it: the
    engine's own booking (:func:`netsim.fastepoch.book_radios`) on a scratch meter."""
    assert table.down_routes is not None and table.up_routes is not None
    scratch = EnergyMeter([0.0] * table.n_nodes, [0.0] * table.n_nodes)
    book_radios(RadioMeter(table.radios, scratch), 0.0, rows, table.down_routes,
                table.up_routes, played)
    return scratch.snapshot(0.0).radio_j[: table.n]


def _replayed(table: DeviceTable, rows: np.ndarray, compute_s: np.ndarray,
              bits: float) -> PlainEpoch:
    """The plain epoch of participants ``rows`` by the fluid replay: every download at 0,
    each upload when its download has arrived and training is done."""
    down, up = table.down_routes, table.up_routes
    assert down is not None and up is not None and table.capacity_bps is not None
    capacity = table.capacity_bps
    m = len(rows)
    hops, coefs = [], []
    for routes in (down, up):
        owner, hop, ref = routes.hops_of(rows)
        coef = hop_coefficients(ref, capacity)
        cuts = np.searchsorted(owner, np.arange(1, m))
        hops += [h.tolist() for h in np.split(hop, cuts)]
        coefs += [c.tolist() for c in np.split(coef, cuts)]
    after = np.concatenate([np.full(m, -1), np.arange(m)])
    delay = np.concatenate([np.zeros(m), down.latency_s[rows] + compute_s])
    last = replay(hops, coefs, np.full(2 * m, bits), np.zeros(2 * m), capacity, after, delay,
                  table.onset_flows, table.contention_loss)
    arrival = last[:m] + down.latency_s[rows]
    return PlainEpoch(arrival, arrival + compute_s, last[m:] + up.latency_s[rows])


def estimate_epoch(table: DeviceTable, model: ModelSpec, variant: int,
                   samples: np.ndarray) -> EpochEstimate:
    """Predicted epoch for ``samples`` (array over devices; 0 means the device sits out);
    ``device_time_s`` is each participant's update arrival after the epoch's start (s)."""
    samples = np.asarray(samples, dtype=float)
    transfer, compute, comm = device_epoch_times(table, model, variant, samples)
    finish = transfer + compute
    if table.down_routes is not None and table.up_routes is not None \
            and table.capacity_bps is not None:
        rows = np.flatnonzero(samples > 0)
        played = play_plain_epoch(0.0, rows, compute[rows], 8.0 * model.model_bytes(variant),
                                  table.down_routes, table.up_routes, table.capacity_bps,
                                  onset_flows=table.onset_flows)
        if played is None:
            played = _replayed(table, rows, compute[rows], 8.0 * model.model_bytes(variant))
        if played is not None:
            finish = np.zeros(table.n)
            finish[rows] = played.upload_arrival_s
            if table.radios and model.model_bytes(variant) > 0.0:
                comm = comm + _radio_j(table, rows, played)
    n_part = int(np.count_nonzero(samples))
    agg = table.aggregator
    agg_s = model.aggregation_flop(variant, n_part) / table.flop_per_s[agg]
    time_s = float(finish.max(initial=0.0)) + agg_s
    busy = compute.copy()
    busy[agg] += agg_s
    e_compute = float(np.dot(busy, table.power_busy_w))
    e_idle = float(np.dot(np.maximum(time_s - busy, 0.0), table.power_idle_w))
    return EpochEstimate(time_s, e_compute, float(comm.sum()), e_idle, finish)
