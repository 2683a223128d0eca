"""A changing world's epoch in arrays when participants stop mid-epoch (netsim's fast path for
:mod:`netsim.epochs.guarded`; docs/dynamics.md).

A participant stops when its session ends, when its battery empties, or when the epoch closes
at its deadline (``epoch_deadline_s``) before its update has arrived. The event path
(:class:`netsim.dynamics.epoch.GuardedParticipant`) then cancels its transfer (the bits not
sent un-booked) or ends its training, and the others' transfers are re-shared at that instant.
Here each phase is played in arrays with every stop as one more piece boundary, as a capacity
change is (:func:`netsim.fastepoch.play_phase_stopping`), and each participant's steps follow
the event path's rules:

- while it downloads (until its download arrives) it draws idle power; it stops at the first
  of its session's end and the instant its battery empties at that power
  (:func:`netsim.dynamics.epoch.stop_instants`); a stop at its download's arrival comes first;
- while it trains it draws busy power; the end of training comes before a stop at that instant;
- as its upload starts its own links' energy is drawn at once: a battery that cannot pay it
  empties then; while it uploads (until its last bit leaves) it draws idle power again, and its
  last bit comes before a stop at that instant;
- the deadline comes before a participant's own stop at the same instant; where the epoch
  closes at its deadline, everyone still running is stopped then (late), and an update whose
  last bit left before it but which arrives after it is late too.

The epoch closes at the first of its deadline, the arrival of its ``keep_updates``-th update
and the instant nobody is left running (the last arrival or the last stop), as
:class:`netsim.dynamics.epoch.GuardedBarrier` closes it; where the kept updates close it
before the deadline, the epoch is played again up to that close (nothing before it changes),
everyone still running stopped then. tests/test_stopping.py checks the tables
against the event path (``fast_epochs=False``) to 1e-9, and tests/player_fuzz.py the stopped
phases against the flow network's cancel.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

import numpy as np

from netsim.dynamics.epoch import stop_instants
from netsim.epochs.arrays import book_moving, measure
from netsim.epochs.shared import EpochWorld
from netsim.fastepoch import (
    CapacityPieces,
    PlainEpoch,
    RouteTable,
    book_radios,
    play_phase_stopping,
)

_INF = float("inf")


@dataclass(frozen=True)
class StoppingEpoch:
    """An epoch's timeline with its participants' stops (s; NaN where a step never came)."""

    plan: PlainEpoch
    """Download arrival, end of training, upload arrival; a transfer stopped mid-way: the
    instant it stopped (what its radio period runs to)."""
    trained: np.ndarray
    """Whether it began training (its download arrived before any stop)."""
    busy_s: np.ndarray
    """How long it trained (s; 0 for those that did not)."""
    uploading: np.ndarray
    """Whether its upload started."""
    reported: np.ndarray
    """Whether its upload's last bit left (its update is on its way)."""
    stopped_s: np.ndarray
    """When it stopped (s; NaN: it did not), dropped or cut at the close."""
    dropped: np.ndarray
    """Whether it went offline or its battery emptied before the close."""
    battery_out: np.ndarray
    """Whether its battery emptied (a dropped participant)."""
    late: np.ndarray
    """Whether its update does not count though it did not drop: stopped at the close, or
    arriving after it."""
    down_cut_bits: np.ndarray
    up_cut_bits: np.ndarray
    """The bits its download, its upload, had left when stopped (NaN: not stopped mid-way)."""
    close_s: float
    """When the epoch closes (s)."""
    reported_s: np.ndarray
    """When its update's last bit left (s; NaN: it did not)."""

    @property
    def capacity_changes(self) -> int:
        """The capacity changes its phases crossed (its plan's)."""
        return self.plan.capacity_changes


def play_stopping(now_s: float | np.ndarray, rows: np.ndarray, compute_s: np.ndarray,
                  bits: float,
                  down: RouteTable, up: RouteTable, capacity_bps: np.ndarray,
                  pieces: CapacityPieces | None, onset_flows: np.ndarray | None,
                  offline_at_s: np.ndarray, battery_left_j: np.ndarray, idle_w: np.ndarray,
                  busy_w: np.ndarray, own_j_per_bit: np.ndarray, deadline_at_s: float,
                  keep: int | None = None) -> StoppingEpoch | None:
    """The epoch's timeline from ``now_s`` (s; one instant, or each participant's own
    start: a hierarchical edge round's edges at their own pace, netsim.epochs.hierarchy) with
    its participants' stops (module docstring), or None where a phase cannot play in arrays
    (then: events).

    ``rows``: each participant's row in ``down`` and ``up``; ``compute_s``: its training (s);
    ``bits``: the variant's size (bits); ``capacity_bps``, ``pieces`` and ``onset_flows`` as
    :func:`netsim.fastepoch.play_plain_epoch` takes them; per participant ``offline_at_s``,
    when its session ends (s; inf), ``battery_left_j``, what its battery holds now (J; inf:
    mains), its idle and busy power (W) and its own links' energy per upload bit (J/bit);
    ``deadline_at_s``: the epoch's deadline (s; inf: none); ``keep``: the epoch closes at the
    arrival of this many updates (``keep_updates``; None: all), as the guarded barrier
    closes it (:func:`_barrier_close`): then everyone still running is stopped (late), and
    of the updates on time only the first ``keep`` to arrive count."""
    args = (now_s, rows, compute_s, bits, down, up, capacity_bps, pieces, onset_flows,
            offline_at_s, battery_left_j, idle_w, busy_w, own_j_per_bit)
    epoch = _play_once(*args, deadline_at_s)
    if epoch is None or keep is None or keep >= len(rows):
        return epoch
    close = _barrier_close(epoch, keep, float(deadline_at_s))
    if close < epoch.close_s:  # (nothing before the close changes: played again to it)
        epoch = _play_once(*args, close)
        if epoch is None:
            return None
    return _keep_first(epoch, keep)


def _barrier_close(epoch: StoppingEpoch, keep: int, deadline_s: float) -> float:
    """When :class:`netsim.dynamics.epoch.GuardedBarrier` closes the epoch (s): its reports
    (an update's last bit leaving, with its arrival) and drops in time order, the close
    scheduled at the ``keep``-th earliest arrival once that many reported (or at the last
    arrival once nobody is left running), no later than the deadline; an event at or after
    the close scheduled comes too late."""
    reported = np.flatnonzero(epoch.reported)
    dropped = np.flatnonzero(epoch.dropped)
    times = np.concatenate([epoch.reported_s[reported], epoch.stopped_s[dropped]])
    arrivals = np.concatenate([epoch.plan.upload_arrival_s[reported],
                               np.full(len(dropped), np.nan)])
    pending = len(epoch.reported)
    smallest: list[float] = []  # the keep earliest arrivals, a max-heap (negated)
    latest, scheduled = -_INF, _INF
    for k in np.argsort(times, kind="stable").tolist():
        t = float(times[k])
        if t >= scheduled:
            break
        pending -= 1
        a = float(arrivals[k])
        if a == a:  # (a report)
            heapq.heappush(smallest, -a)
            if len(smallest) > keep:
                heapq.heappop(smallest)
            latest = max(latest, a)
        if len(smallest) >= keep:
            at = -smallest[0]
        elif pending == 0:
            at = latest if smallest else t
        else:
            continue
        scheduled = max(min(at, deadline_s), t)
    return min(scheduled, deadline_s)


def _keep_first(epoch: StoppingEpoch, keep: int) -> StoppingEpoch:
    """Of the updates on time, the first ``keep`` to arrive count (ties: the first reported);
    the rest are late."""
    on_time = np.flatnonzero(epoch.reported & ~epoch.late)
    order = np.lexsort((epoch.reported_s[on_time], epoch.plan.upload_arrival_s[on_time]))
    late = epoch.late.copy()
    late[on_time[order[keep:]]] = True
    return replace(epoch, late=late)


def _play_once(now_s: float | np.ndarray, rows: np.ndarray, compute_s: np.ndarray,
               bits: float,
               down: RouteTable, up: RouteTable, capacity_bps: np.ndarray,
               pieces: CapacityPieces | None, onset_flows: np.ndarray | None,
               offline_at_s: np.ndarray, battery_left_j: np.ndarray, idle_w: np.ndarray,
               busy_w: np.ndarray, own_j_per_bit: np.ndarray, deadline_at_s: float
               ) -> StoppingEpoch | None:
    """:func:`play_stopping` closing at ``deadline_at_s`` at the latest (s)."""
    m = len(rows)
    now: float | np.ndarray = float(now_s) if np.ndim(now_s) == 0 \
        else np.asarray(now_s, dtype=float)  # (each participant's own start: hierarchy)
    deadline = float(deadline_at_s)
    # -- downloads: stopped at the first of its own stop and the deadline ----------------------
    own1, empty1 = stop_instants(now, battery_left_j, idle_w, offline_at_s)
    cut1 = np.minimum(own1, deadline)
    down_hops = down.hops_of(rows)
    played = play_phase_stopping(np.full(m, now), rows, down, bits, capacity_bps, down_hops,
                                 onset_flows, pieces, _finite_or_none(cut1))
    if played is None:
        return None
    arrival = played.last_bit_s + down.latency_s[rows]
    stop1 = cut1 <= arrival  # (inf arrival: stopped mid-way)
    training = ~stop1
    # -- training: busy power from the download's arrival ----------------------------------------
    with np.errstate(invalid="ignore"):  # (the stopped ones' figures are not read)
        left2 = battery_left_j - idle_w * (arrival - now)
        trained_s = arrival + compute_s
    own2, empty2 = stop_instants(np.where(training, arrival, now), left2, busy_w, offline_at_s)
    stop2 = training & ((own2 < trained_s) | (deadline <= trained_s))
    cut2 = np.minimum(own2, deadline)
    with np.errstate(invalid="ignore"):
        busy_s = np.where(training, np.where(stop2, cut2, trained_s) - arrival, 0.0)
    # -- the upload's start: its own links' energy at once -----------------------------------
    ready = training & ~stop2
    with np.errstate(invalid="ignore"):
        left3 = left2 - busy_w * (trained_s - arrival)
    lump = bits * own_j_per_bit
    empty_at_start = ready & (left3 < _INF) & (left3 <= lump)
    uploading = ready & ~empty_at_start
    up_at = np.flatnonzero(uploading)
    # -- uploads: idle power from their start, stopped at the first of its own and the deadline
    own3, empty3 = stop_instants(trained_s[up_at], left3[up_at] - lump[up_at], idle_w[up_at],
                                 offline_at_s[up_at])
    cut3 = np.minimum(own3, deadline)
    up_last = np.full(m, np.nan)
    up_cut_bits = np.full(m, np.nan)
    changes = played.capacity_changes
    if len(up_at):
        played_up = play_phase_stopping(trained_s[up_at], rows[up_at], up, bits, capacity_bps,
                                        up.hops_of(rows[up_at]), onset_flows, pieces,
                                        _finite_or_none(cut3))
        if played_up is None:
            return None
        up_last[up_at] = played_up.last_bit_s
        up_cut_bits[up_at] = played_up.cut_bits
        changes += played_up.capacity_changes
    stop3 = np.zeros(m, dtype=bool)
    stop3[up_at] = cut3 < up_last[up_at]  # (its last bit first at a tie)
    reported = uploading & ~stop3
    # -- who stopped, when and why ---------------------------------------------------------------
    own = np.where(stop1, own1, np.where(stop2, own2, np.inf))
    own[up_at] = np.where(stop3[up_at], own3, own[up_at])
    stopped_s = np.where(stop1, cut1, np.where(stop2, cut2, np.nan))
    stopped_s[up_at] = np.where(stop3[up_at], cut3, stopped_s[up_at])
    stopped_s[empty_at_start] = trained_s[empty_at_start]
    own[empty_at_start] = trained_s[empty_at_start]
    dropped = (stop1 | stop2 | stop3 | empty_at_start) & (own < deadline)
    empty = np.zeros(m, dtype=bool)
    empty[stop1] = empty1[stop1]
    empty[stop2] = empty2[stop2]
    empty[up_at] |= stop3[up_at] & empty3
    empty |= empty_at_start
    # -- the close: the deadline, or once nobody is left running ------------------------------
    up_arrival = up_last + up.latency_s[rows]
    cut_at_close = (stop1 | stop2 | stop3) & ~dropped
    if cut_at_close.any():
        close = deadline
    else:
        ends = np.concatenate([up_arrival[reported], stopped_s[dropped]])
        close = min(deadline, float(ends.max()))
    late = (cut_at_close | (reported & (up_arrival > close))) & ~dropped
    down_cut = played.cut_bits  # (NaN but where stopped before its last bit)
    radio_down_end = np.where(np.isnan(down_cut), arrival, cut1)
    radio_up_end = up_arrival.copy()
    radio_up_end[up_at] = np.where(stop3[up_at], cut3, up_arrival[up_at])
    plan = PlainEpoch(radio_down_end, trained_s, radio_up_end, changes)
    return StoppingEpoch(plan, training, busy_s, uploading, reported, stopped_s, dropped,
                         empty & dropped, late, down_cut, up_cut_bits, close,
                         np.where(reported, up_last, np.nan))


def _finite_or_none(stop_s: np.ndarray) -> np.ndarray | None:
    """``stop_s`` where some stop is finite, else None (nobody stops in the phase)."""
    return stop_s if np.isfinite(stop_s).any() else None


def book_stopping(world: EpochWorld, epoch: StoppingEpoch, rows: np.ndarray, model_bytes: float,
                  pieces: CapacityPieces | None) -> None:
    """Book the epoch as the event path books it: every download at the epoch's start, each
    upload as its training ends (the air time of the piece of its start), the bits of the
    transfers stopped mid-way un-booked at their start's station rates, the busy time each
    trained, and the radios' periods up to each transfer's arrival or stop."""
    network = world.network
    down, up = world.devices.down_routes, world.devices.up_routes  # (ids, hops: any caps)
    assert down is not None and up is not None
    book_moving(network, down, rows, np.full(len(rows), model_bytes), None, None)
    up_at = np.flatnonzero(epoch.uploading)
    order = up_at[np.argsort(epoch.plan.trained_s[up_at], kind="stable")]
    book_moving(network, up, rows[order], np.full(len(order), model_bytes),
                epoch.plan.trained_s[order], pieces)
    cut = np.flatnonzero(np.isfinite(epoch.down_cut_bits) & (epoch.down_cut_bits > 0.0))
    if len(cut):
        book_moving(network, down, rows[cut], -epoch.down_cut_bits[cut] / 8.0, None, None)
    cut = order[np.isfinite(epoch.up_cut_bits[order]) & (epoch.up_cut_bits[order] > 0.0)]
    if len(cut):
        book_moving(network, up, rows[cut], -epoch.up_cut_bits[cut] / 8.0,
                    epoch.plan.trained_s[cut], pieces)
    trained = np.flatnonzero(epoch.trained)
    world.meter.add_busy_many(rows[trained].tolist(), epoch.busy_s[trained].tolist())
    if model_bytes > 0.0:
        book_radios(network.radio, float(world.env.now), rows, down, up, epoch.plan,
                    epoch.uploading)


def measure_stopping(world: EpochWorld, epoch: StoppingEpoch, rows: np.ndarray,
                     flop_per_s: np.ndarray, nbytes: float, start_s: float) -> None:
    """What the participants whose update left measured (their speed and throughputs), as
    the event path measures them (:func:`netsim.epochs.arrays.measure`)."""
    f = np.flatnonzero(epoch.reported)
    if not len(f):
        return
    p = epoch.plan
    measure(world, PlainEpoch(p.download_arrival_s[f], p.trained_s[f], p.upload_arrival_s[f]),
            rows[f], flop_per_s[f], nbytes, start_s)
