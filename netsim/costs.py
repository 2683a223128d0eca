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

from collections.abc import Sequence
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


def participant_times(table: DeviceTable, model: ModelSpec, variant: int, rows: np.ndarray,
                      samples: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per participant (device ``rows[k]`` training ``samples[k]`` samples, > 0): the time of
    its download and upload alone on its routes (s), its compute time (s) and the per-bit
    energy of both transfers (J). The one formula of an epoch's contention-free costs."""
    bits = 8.0 * model.model_bytes(variant)
    transfer = bits / table.down_bps[rows] + table.down_latency_s[rows] \
        + bits / table.up_bps[rows] + table.up_latency_s[rows]
    compute = samples * model.flop_per_sample(variant) / table.flop_per_s[rows]
    comm = bits * (table.down_j_per_bit[rows] + table.up_j_per_bit[rows])
    return transfer, compute, comm


def device_epoch_times(table: DeviceTable, model: ModelSpec, variant: int,
                       samples: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-device (transfer_s, compute_s, comm_j) for the given samples (0 = not taking part):
    :func:`participant_times` over the devices with samples, 0 elsewhere.

    transfer_s is download + upload time; comm_j the energy of both transfers.
    """
    samples = np.asarray(samples, dtype=float)
    rows = np.flatnonzero(samples > 0)
    transfer, compute, comm = np.zeros(len(samples)), np.zeros(len(samples)), \
        np.zeros(len(samples))
    transfer[rows], compute[rows], comm[rows] = participant_times(table, model, variant, rows,
                                                                  samples[rows])
    return transfer, compute, comm


def aggregation_s(table: DeviceTable, model: ModelSpec, variant: int, updates: int) -> float:
    """How long the aggregator averages ``updates`` updates of ``variant`` (s)."""
    return model.aggregation_flop(variant, updates) / float(table.flop_per_s[table.aggregator])


def contention_free_time_s(table: DeviceTable, model: ModelSpec, variant: int,
                           rows: np.ndarray, samples: np.ndarray) -> float:
    """An epoch's duration with every transfer alone on its route (s), participants ``rows``
    with ``samples``: a lower bound of the engine's, at a cost that follows the participants
    (:func:`estimate_epoch`'s time on a table without routes)."""
    transfer, compute, _ = participant_times(table, model, variant, rows, samples)
    return float((transfer + compute).max(initial=0.0)) \
        + aggregation_s(table, model, variant, len(rows))


def constraint_seconds(table: DeviceTable, model: ModelSpec, variant: int,
                       devices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What each device's epoch transfers take of every shared constraint they cross: entries
    (position in ``devices``, constraint, seconds), one per hop of its download and of its
    upload, ``bits x coefficient / capacity`` (s): the time the constraint is busy with that
    transfer alone at full capacity (a Wi-Fi cell's air time, a backhaul's transmission time).

    A plan's epoch lasts at least the sum of these over its participants on any constraint
    (every transfer of an epoch crosses it within the epoch): the planners' linear price of
    contention (PACT's candidate search, DepL's placement), netsim's bound. Only constraints
    that two or more of ``devices`` cross are listed (a private link's time is in the
    device's own transfer time). Empty without routes."""
    down, up, capacity = table.down_routes, table.up_routes, table.capacity_bps
    if down is None or up is None or capacity is None or not len(devices):
        empty = np.zeros(0, dtype=np.intp)
        return empty, empty, np.zeros(0)
    bits = 8.0 * model.model_bytes(variant)
    owners, hops, secs = [], [], []
    for routes in (down, up):
        owner, hop, ref = routes.hops_of(np.asarray(devices, dtype=np.intp))
        owners.append(owner)
        hops.append(hop)
        secs.append(bits * hop_coefficients(ref, capacity) / capacity[hop])
    owner, hop, sec = (np.concatenate(x) for x in (owners, hops, secs))
    users = np.zeros(len(capacity), dtype=np.intp)
    np.add.at(users, np.unique(np.stack([hop, owner]), axis=1)[0], 1)
    shared = users[hop] >= 2
    return owner[shared], hop[shared], sec[shared]


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
    """Predicted epoch for ``samples`` (array over devices; 0 means the device sits out) on an
    idle network with idle radios; ``device_time_s`` is each participant's update arrival
    after the epoch's start (s)."""
    return estimate_epochs(table, model, [(variant, samples)])[0]


def estimate_epochs(table: DeviceTable, model: ModelSpec,
                    epochs: Sequence[tuple[int, np.ndarray]]) -> list[EpochEstimate]:
    """Predicted epochs run back to back, each starting when the one before ends (a plan):
    ``epochs`` as (variant, samples) pairs. Each is :func:`estimate_epoch`'s, except that the
    radios carry over from one epoch to the next as the engine books them
    (:class:`netsim.network.radio.RadioMeter`): a tail booked at the end of a participant's
    last upload is partly taken back when its next download starts inside it. So a plan's
    energies sum to what its run meters. Epochs repeated are played once."""
    timelines: dict[tuple[int, bytes], tuple] = {}
    scratch = EnergyMeter([0.0] * max(table.n_nodes, table.n), [0.0] * max(table.n_nodes, table.n))
    radio = RadioMeter(table.radios, scratch) if table.radios else None
    out, now = [], 0.0
    for variant, samples in epochs:
        samples = np.asarray(samples, dtype=float)
        key = (int(variant), samples.tobytes())
        if key not in timelines:
            timelines[key] = _timeline(table, model, int(variant), samples)
        rows, played, finish, compute, comm = timelines[key]
        if radio is not None and played is not None and model.model_bytes(variant) > 0.0:
            assert table.down_routes is not None and table.up_routes is not None
            before = scratch.snapshot(0.0).radio_j[: table.n]
            book_radios(radio, now, rows, table.down_routes, table.up_routes,
                        PlainEpoch(played.download_arrival_s + now, played.trained_s + now,
                                   played.upload_arrival_s + now))
            comm = comm + (scratch.snapshot(0.0).radio_j[: table.n] - before)
        n_part = int(np.count_nonzero(samples))
        agg = table.aggregator
        agg_s = aggregation_s(table, model, variant, n_part)
        time_s = float(finish.max(initial=0.0)) + agg_s
        busy = compute.copy()
        busy[agg] += agg_s
        e_compute = float(np.dot(busy, table.power_busy_w))
        e_idle = float(np.dot(np.maximum(time_s - busy, 0.0), table.power_idle_w))
        out.append(EpochEstimate(time_s, e_compute, float(comm.sum()), e_idle, finish))
        now += time_s
    return out


def _timeline(table: DeviceTable, model: ModelSpec, variant: int, samples: np.ndarray
              ) -> tuple[np.ndarray, PlainEpoch | None, np.ndarray, np.ndarray, np.ndarray]:
    """(participant rows, played timeline or None without routes, per-device update
    arrival (s), compute time (s), per-bit communication energy (J)) of one epoch."""
    transfer, compute, comm = device_epoch_times(table, model, variant, samples)
    finish = transfer + compute
    rows = np.flatnonzero(samples > 0)
    played = None
    if table.down_routes is not None and table.up_routes is not None \
            and table.capacity_bps is not None:
        bits = 8.0 * model.model_bytes(variant)
        played = play_plain_epoch(0.0, rows, compute[rows], bits, table.down_routes,
                                  table.up_routes, table.capacity_bps,
                                  onset_flows=table.onset_flows)
        if played is None:
            played = _replayed(table, rows, compute[rows], bits)
        finish = np.zeros(table.n)
        finish[rows] = played.upload_arrival_s
    return rows, played, finish, compute, comm
