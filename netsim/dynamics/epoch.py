"""One synchronous epoch in a changing world, as SimPy callbacks: participants that can drop out
mid-epoch, and a barrier that keeps the first updates or stops at an epoch deadline.

A participant downloads the variant, trains, uploads (as :class:`netsim.epoch.Participant`),
and can stop at any instant: when it goes offline (its session ends), when its battery empties,
or when the epoch closes before its update has arrived (late). Stopping cancels its transfer
(only the bits sent cost energy: the network un-books the rest) or ends its training (busy
time up to that instant); its samples and update do not count. Battery: the device draws
``power_idle_w`` while selected and not computing, ``power_busy_w`` while computing, and its
own links' J/bit when its upload starts (the network books a transfer's energy at its start);
its battery empties at the instant those reach what it had left at the epoch's start. Once its
update is on its way, its battery is checked again only at the next epoch's start (netsim's
formalization).

The barrier (:class:`GuardedBarrier`) closes the epoch at the earliest of: the arrival of the
``keep``-th update, the epoch deadline, the last arrival when nobody is still running, or at
once when every participant has dropped out. Updates that arrive after the close are late.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import simpy

from netsim.dynamics.buffered import UpdateBuffer
from netsim.energy import EnergyMeter
from netsim.network import Route
from netsim.network.flows import FlowNetwork
from netsim.simclock import fire_after

_INF = math.inf


class GuardedBarrier:
    """Counts updates in; fires ``event`` when the epoch closes (see the module docstring).

    ``participants``: how many updates are expected; ``keep``: close at the arrival of this
    many (None: all); ``deadline_at_s``: close at this instant at the latest (s; inf: none).
    """

    def __init__(self, env: simpy.Environment, participants: int, keep: int | None,
                 deadline_at_s: float) -> None:
        self.env, self.event = env, simpy.Event(env)
        self.pending = participants
        self.keep = keep if keep is not None else participants
        self.deadline_at_s = deadline_at_s
        self.reports: list[tuple[float, Any]] = []   # (arrival time (s), participant key)
        self.kept: set[Any] = set()
        self.closed_at: float | None = None
        self._token = 0
        self._smallest: list[float] = []  # the ``keep`` earliest arrivals, a max-heap (negated)
        self._latest = -_INF
        self._close_s = _INF
        if deadline_at_s < _INF:
            fire_after(env, max(deadline_at_s - env.now, 0.0), self._deadline)

    def arrived(self, arrival_s: float, key: Any = None) -> None:
        """The update of ``key`` has left its sender; it arrives at ``arrival_s`` (s)."""
        if self.closed_at is not None:
            return
        self.pending -= 1
        self.reports.append((arrival_s, key))
        heapq.heappush(self._smallest, -arrival_s)
        if len(self._smallest) > self.keep:
            heapq.heappop(self._smallest)
        self._latest = max(self._latest, arrival_s)
        self._check()

    def dropped(self, key: Any = None) -> None:
        """A participant (``key``) dropped out: its update never comes."""
        if self.closed_at is not None:
            return
        self.pending -= 1
        self._check()

    def _check(self) -> None:
        if len(self.reports) >= self.keep:
            at = -self._smallest[0]  # the keep-th earliest arrival
        elif self.pending == 0:
            at = self._latest if self.reports else self.env.now
        else:
            return
        self._close_at(min(at, self.deadline_at_s))

    def _close_at(self, at: float) -> None:
        if at == self._close_s:
            return
        self._close_s = at
        self._token += 1
        token = self._token
        fire_after(self.env, max(at - self.env.now, 0.0), lambda _e: self._close(token))

    def _deadline(self, _event: simpy.Event) -> None:
        if self.closed_at is None:
            self._token += 1
            self._close(self._token)

    def _close(self, token: int) -> None:
        if token != self._token or self.closed_at is not None:
            return
        now = self.env.now
        self.closed_at = now
        on_time = sorted((a, i) for i, (a, _) in enumerate(self.reports) if a <= now)
        self.kept = {self.reports[i][1] for _, i in on_time[: self.keep]}
        self.event.succeed()


def stop_instant(since_s: float, left_j: float, power_w: float, offline_at_s: float
                 ) -> tuple[float, bool]:
    """When a participant stops (s; inf: not in this phase), drawing ``power_w`` W from
    ``since_s`` (s) with ``left_j`` J left in its battery (inf: mains powered) and its session
    ending at ``offline_at_s`` (s), and whether its battery empties then (else its session
    ends first, or at the same instant): the one rule of both paths
    (:class:`GuardedParticipant`, netsim.epochs.buffered_arrays)."""
    death = since_s + left_j / power_w if power_w > 0.0 and left_j < _INF else _INF
    at = min(offline_at_s, death)
    return at, at == death and death < offline_at_s


def stop_instants(since_s: float | np.ndarray, left_j: np.ndarray, power_w: np.ndarray,
                  offline_at_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`stop_instant` for many participants at once (arrays; the same rule, element by
    element): when each stops (s; inf: not in this phase) and whether its battery empties
    then (netsim.epochs.stopping)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        death = np.where((power_w > 0.0) & (left_j < _INF), since_s + left_j / power_w, _INF)
    at = np.minimum(offline_at_s, death)
    return at, (at == death) & (death < offline_at_s)


def selected_s(start_s: float, end_s: float, offline_at_s: np.ndarray,
               stopped_s: np.ndarray) -> np.ndarray:
    """How long each participant of an epoch from ``start_s`` to ``end_s`` (s) was selected
    (s): until it stopped (``stopped_s``; NaN: it did not), else until the epoch's end or, if
    earlier, until it went offline (``offline_at_s``) after its update had left (an offline
    device draws nothing): the one rule of the star's epochs (netsim.epochs.guarded) and the
    hierarchy's (netsim.epochs.hierarchy)."""
    return np.where(np.isnan(stopped_s), np.minimum(end_s, np.maximum(offline_at_s, start_s)),
                    stopped_s) - start_s


class GuardedParticipant:
    """One participant of a guarded epoch (see the module docstring).

    ``offline_at_s``: when its session ends (s; inf: not this epoch); ``battery_left_j``: what
    its battery holds at the epoch's start (J; inf: mains powered); ``own_j_per_bit``: the
    energy per bit its upload costs the device itself (J/bit).
    """

    __slots__ = ("env", "network", "meter", "barrier", "key", "node", "nbytes", "up_bytes",
                 "compute_s",
                 "down", "up", "offline_at_s", "left_j", "idle_w", "busy_w", "own_j_per_bit",
                 "phase", "t_phase", "flow", "started_s", "token", "stopped_s", "battery_out",
                 "late", "down_bps", "up_bps", "on_change")

    def __init__(self, env: simpy.Environment, network: FlowNetwork, meter: EnergyMeter,
                 barrier: GuardedBarrier | UpdateBuffer, key: Any, node: int, nbytes: float,
                 compute_s: float,
                 down: Route, up: Route, offline_at_s: float, battery_left_j: float,
                 idle_w: float, busy_w: float, own_j_per_bit: float,
                 up_bytes: float | None = None) -> None:
        self.env, self.network, self.meter, self.barrier = env, network, meter, barrier
        self.key, self.node, self.nbytes, self.compute_s = key, node, nbytes, compute_s
        self.up_bytes = nbytes if up_bytes is None else up_bytes  # (B; download: nbytes)
        self.down, self.up = down, up
        self.offline_at_s, self.left_j = offline_at_s, battery_left_j
        self.idle_w, self.busy_w, self.own_j_per_bit = idle_w, busy_w, own_j_per_bit
        self.phase, self.t_phase, self.token = "down", env.now, 0
        self.stopped_s: float | None = None
        self.battery_out = self.late = False
        self.down_bps = self.up_bps = math.nan
        self.started_s = env.now
        self.flow = network.send_on(down, nbytes, self._downloaded)
        self._arm_stop()

    # -- battery and sessions --------------------------------------------------------------
    def _power_w(self) -> float:
        return self.busy_w if self.phase == "train" else self.idle_w

    def _spend(self, now: float) -> None:
        self.left_j -= self._power_w() * (now - self.t_phase)
        self.t_phase = now

    def _arm_stop(self) -> None:
        """Arm this phase's stop instant; a stop armed for an earlier phase is void whether
        or not this phase has one (a battery that training at busy power would empty is not
        emptied by an upload at 0 W idle power)."""
        self.token += 1
        at, battery = stop_instant(self.t_phase, self.left_j, self._power_w(), self.offline_at_s)
        if at < _INF:
            token = self.token
            fire_after(self.env, max(at - self.env.now, 0.0),
                       lambda _e: self._stop_event(token, battery))

    def _stop_event(self, token: int, battery: bool) -> None:
        if token == self.token and self.phase in ("down", "train", "up"):
            self.battery_out = battery
            self.stop()
            self.barrier.dropped(self.key)

    # -- the epoch's steps -----------------------------------------------------------------
    def _downloaded(self, arrival_s: float) -> None:
        now = self.env.now
        self.flow = None
        if now > self.started_s:
            self.down_bps = 8.0 * self.nbytes / (now - self.started_s)
        fire_after(self.env, arrival_s - now, self._train)

    def _train(self, _event: simpy.Event) -> None:
        if self.phase != "down":
            return
        now = self.env.now
        self._spend(now)
        self.phase = "train"
        self.meter.set_busy(self.node, now)
        fire_after(self.env, self.compute_s, self._trained)
        self._arm_stop()

    def _trained(self, _event: simpy.Event) -> None:
        if self.phase != "train":
            return
        now = self.env.now
        self._spend(now)
        self.meter.set_idle(self.node, now)
        self.phase = "up"
        lump = 8.0 * self.up_bytes * self.own_j_per_bit
        if self.left_j < _INF and self.left_j <= lump:  # empties as the upload would start
            self.battery_out = True
            self.stop()
            self.barrier.dropped(self.key)
            return
        self.left_j -= lump
        self.started_s = now
        self.flow = self.network.send_on(self.up, self.up_bytes, self._uploaded)
        self._arm_stop()

    def _uploaded(self, arrival_s: float) -> None:
        now = self.env.now
        self.flow = None
        if now > self.started_s:
            self.up_bps = 8.0 * self.up_bytes / (now - self.started_s)
        self.phase = "sent"
        self.barrier.arrived(arrival_s, self.key)

    def stop(self) -> None:
        """Stop now: cancel the running transfer (un-booking the bits not sent) or end the
        training; nothing of this participant counts."""
        now = self.env.now
        if self.phase == "train":
            self.meter.set_idle(self.node, now)
        if self.flow is not None:
            route = self.down if self.phase == "down" else self.up
            left_bits = self.network.cancel(self.flow)
            if left_bits > 0.0:
                self.network.book([route.id], [-left_bits / 8.0])
            self.flow = None
        self.phase = "gone"
        self.stopped_s = now


def cancel_all(participants: list[GuardedParticipant],
               is_kept: Callable[[Any], bool]) -> list[GuardedParticipant]:
    """At the epoch's close: stop every participant still running and mark every one whose
    update does not count (still running, or arriving after the close) late; returns them."""
    late = []
    for p in participants:
        if p.phase == "gone":
            continue
        if p.phase != "sent":
            p.stop()
        if not is_kept(p.key):
            p.late = True
            late.append(p)
    return late
