"""Buffered asynchronous epochs played in arrays, without SimPy events (netsim's fast path for
:mod:`netsim.epochs.buffered`, docs/async.md).

A buffered epoch's jobs outlive it: each downloads the model, trains, uploads, and its update
lands in the aggregator's buffer while other jobs are at other steps. In a world whose
flows each cross at most one constraint that can saturate (the condition the synchronous
array path checks per phase, here checked once for every route of the fleet in both
directions, so that it holds for any jobs at any step, and under every capacity state the run
can take: :meth:`BufferedPlayer.of`), max-min fairness over the
network is one water-filling per such constraint, and :class:`BufferedPlayer` plays the jobs
forward in one loop over a heap of instants: each constraint's next finish
(:class:`netsim.network.online.SharedConstraint`), the end of a transfer alone on its route,
an arrival, the end of training, an update's landing, a job's stop when its device's session
ends or its battery empties, a capacity change. It books what the event path books, at
the same instants and through the same meters: bytes, energy and air time at each transfer's
start (the network's ledger), busy time from arrival to the end of training (the energy
meter), radio periods at each start and last bit (netsim.network.radio); the buffer
(netsim.dynamics.buffered) keeps the staleness rule and the epoch's close. Once a run's first
buffered epoch plays here, the run's jobs all do (the flow network never sees them). What a
device's routes cross is read from the route tables on its first job (the work follows the
participants). tests/test_buffered_arrays.py checks both paths against each other (times,
energy, bytes, air time, staleness) on fleets with and without Wi-Fi cells and radio tails,
with sessions, stragglers and batteries, on random changing worlds, and under bandwidth
traces. The asynchronous tiers play on this player too (netsim.epochs.tiered_arrays: route
rows per device and edge, a buffer per job, backhaul transfers that are no job's,
:meth:`BufferedPlayer.carry`, and callbacks, :meth:`BufferedPlayer.call_at`).

Capacities that change (netsim's, as the flow network's ``set_capacities``): where every
state they can take is known up front (a bandwidth trace's rows, :meth:`CapacitySchedule.states`)
and each meets the condition above, the capacity changes are instants of the heap, armed per
epoch as the events' ticks are (:meth:`BufferedPlayer.arm_ticks`; a change at an epoch's start
is the world's ``begin_epoch``'s: :meth:`BufferedPlayer.sync`). At each, the transfers started
so far are booked under the capacities of their start (their air time at those station
rates), the world's capacities are set (:meth:`netsim.engine.World.change_capacities`), and
every flow present is re-shared with its bits left: its standalone rate, binding constraint
and coefficient re-read, each constraint water-filled again at its new capacity
(:meth:`BufferedPlayer._reshare`). A transfer cut after a change un-books the bits it did not
send at the station rates of its start, as ``FlowNetwork.cancel`` does.

Not here (the event path plays them): capacities whose states are not known up front
(log-normal pieces), a capacity state under which a route crosses two constraints that can
saturate, contended media whose flows
could pass their onset, routes that cross two constraints that can saturate (cells under an
aggregator link they can fill: above about 3,000 generated devices), and
``fast_epochs=False``.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from netsim.dynamics.buffered import Job
from netsim.dynamics.epoch import stop_instant
from netsim.fastepoch import RouteTable, hop_coefficients, route_caps
from netsim.network.online import SharedConstraint
from netsim.network.sharing import HopBlock, can_bind_blocks
from netsim.network.tolerances import CAPACITY_TOLERANCE

_INF = float("inf")
# what an instant of the heap is: (time (s), order, kind, subject, token)
_DUE, _LAST_BIT, _ARRIVED, _TRAINED, _LANDED, _STOP, _TICK, _CALL = range(8)
# (_CALL: a callback ``subject(t, token)`` of another epoch's playback, netsim.epochs
# .tiered_arrays; True: the closing buffer may close now)


class ArrayParticipant:
    """One job's device as the array path plays it; reads like the event path's
    :class:`netsim.dynamics.epoch.GuardedParticipant` where the epoch and the buffer read
    it (``phase``, ``down_bps``, ``up_bps``, ``battery_out``, ``offline_at_s``, ``stop``).

    ``way_row``: the row of the player's route tables its transfers take (the star's: its
    device row); ``buffer``: the buffer its update lands in (the star's: the player's);
    ``up_nbytes``: its upload's size (B; None: ``nbytes``, the download's); ``then``: for a
    transfer that is not a device's job (netsim.epochs.tiered_arrays: an edge's model over the
    backhaul), what its arrival calls (``then(t, participant)`` at the arrival instant), its
    direction the ``phase`` it starts in."""

    __slots__ = ("player", "job", "row", "nbytes", "up_nbytes", "compute_s", "phase",
                 "started_s", "transfer", "down_bps", "up_bps", "battery_out", "offline_at_s",
                 "ways", "left_j", "t_phase", "idle_w", "busy_w", "own_j_per_bit", "token",
                 "start_caps", "way_row", "buffer", "then")

    def __init__(self, player: BufferedPlayer, job: Job, nbytes: float, compute_s: float,
                 offline_at_s: float, battery_left_j: float, idle_w: float, busy_w: float,
                 own_j_per_bit: float, way_row: int | None = None, buffer: Any = None,
                 up_nbytes: float | None = None) -> None:
        self.player, self.job, self.row = player, job, job.row
        self.way_row = job.row if way_row is None else way_row
        self.buffer = player.buffer if buffer is None else buffer
        self.then: Any = None
        self.nbytes, self.compute_s = nbytes, compute_s
        self.up_nbytes = nbytes if up_nbytes is None else up_nbytes
        self.phase = "down"
        self.started_s = self.t_phase = job.started_s
        self.transfer: Any = None  # its constraint (int), its solo token (tuple), or None
        self.start_caps: np.ndarray | None = None  # the capacities of its transfer's start
        self.down_bps = self.up_bps = math.nan
        self.battery_out = False
        self.offline_at_s, self.left_j = offline_at_s, battery_left_j
        self.idle_w, self.busy_w, self.own_j_per_bit = idle_w, busy_w, own_j_per_bit
        self.token = 0  # its stop instant's (a session's end or an empty battery)
        self.ways = player.ways_of(self.way_row)
        """Its download's and its upload's routes (:class:`Way`)."""

    def stop(self) -> None:
        """Stop now (the run ends): as :meth:`GuardedParticipant.stop`."""
        self.player.stop_at(self, float(self.player.world.env.now))

    # -- its battery and session, as GuardedParticipant keeps them --------------------------
    def spend(self, now_s: float) -> None:
        """What its battery drew since the last phase change, at that phase's power."""
        self.left_j -= (self.busy_w if self.phase == "train" else self.idle_w) \
            * (now_s - self.t_phase)
        self.t_phase = now_s

    def stop_at_s(self) -> tuple[float, bool]:
        """When it stops in its current phase (s; inf: not before it ends) and whether its
        battery empties then (else its session ends): :func:`stop_instant`."""
        return stop_instant(self.t_phase, self.left_j,
                            self.busy_w if self.phase == "train" else self.idle_w,
                            self.offline_at_s)


class Way:
    """What the player reads of one route (a device's download or upload): its ``Route.id``,
    standalone rate (bit/s), latency (s), whether it crosses anything, the constraint on it
    that can bind (-1: none) and its coefficient there, its radios (the standalone rate,
    binding constraint and coefficient: under the capacities in force when it was read)."""

    __slots__ = ("route_id", "cap_bps", "latency_s", "crosses", "bind", "coef", "radios")

    def __init__(self, route_id: int, cap_bps: float, latency_s: float, crosses: bool,
                 bind: int, coef: float, radios: tuple[int, ...]) -> None:
        self.route_id, self.cap_bps, self.latency_s = route_id, cap_bps, latency_s
        self.crosses, self.bind, self.coef, self.radios = crosses, bind, coef, radios


def can_play(world: Any) -> bool:
    """Whether the run's buffered epochs can play in arrays (the module's conditions, but
    for the routes' check: :meth:`BufferedPlayer.of`): capacities that stay within states
    known up front (none change, or a bandwidth trace's rows: not log-normal pieces), and
    no job in flight on the flow network (sessions may end, batteries empty, speeds vary
    per epoch)."""
    t = world.devices
    return bool(world.fast_epochs and world.dynamics.capacity.states() is not None
                and t.down_routes is not None
                and t.up_routes is not None and world.network.active_flows == 0
                and not world.buffer.in_flight)


class _State:
    """One capacity state of the run: every constraint's ``capacity`` (bit/s; media after
    the links) and, per route (the downloads' rows, then the uploads'), its standalone rate
    ``cap_bps`` (bit/s), the constraint on it that can bind (``bind``, -1: none) and its
    coefficient there (``coef``)."""

    __slots__ = ("capacity", "cap_bps", "bind", "coef")

    def __init__(self, capacity: np.ndarray, cap_bps: np.ndarray, bind: np.ndarray,
                 coef: np.ndarray) -> None:
        self.capacity, self.cap_bps, self.bind, self.coef = capacity, cap_bps, bind, coef


def _state_of(tables: tuple[RouteTable, RouteTable], capacity: np.ndarray,
              cap_bps: np.ndarray) -> _State | None:
    """The state of capacities ``capacity`` (per constraint, bit/s) with the routes'
    standalone rates ``cap_bps`` (bit/s, downloads then uploads), or None when a route
    crosses two constraints that can saturate under them."""
    n = len(tables[0].route_id)

    def blocks() -> Iterator[HopBlock]:  # downloads (flows 0 .. n - 1), then uploads
        for d, t in enumerate(tables):
            for owner, hop, ref in t.blocks():
                yield owner + d * n, hop, hop_coefficients(ref, capacity)

    # every route of the fleet in both directions at once: a constraint that cannot
    # saturate then cannot under any jobs at any step (can_bind's bound only grows
    # with the flows)
    binding = can_bind_blocks(blocks, cap_bps, capacity)
    bind = np.full(2 * n, -1, dtype=np.intp)
    on = np.ones(2 * n)
    for d, t in enumerate(tables):
        first, last = int(t.hop_start[0]), int(t.hop_start[-1])
        hops = t.hops[first:last]
        owner = np.repeat(np.arange(n), np.diff(t.hop_start))
        hit = binding[hops]
        if np.bincount(owner[hit]).max(initial=0) > 1:
            return None
        bind[d * n + owner[hit]] = hops[hit]
        on[d * n + owner[hit]] = hop_coefficients(t.rate_ref[first:last][hit], capacity)
    return _State(capacity, cap_bps, bind, on)


def capacity_states(world: Any, down: RouteTable, up: RouteTable
                    ) -> tuple[dict[bytes, _State], _State] | None:
    """Every capacity state the run can take for transfers on the routes of ``down`` and
    ``up`` (row r of each: one sender's download and upload; the star's: each device's, the
    asynchronous tiers': netsim.epochs.tiered_arrays), by its capacities' bytes, and the one
    in force; None where they cannot play in arrays (a route crossing two constraints that
    can saturate under one of them; a contended medium whose flows could pass its onset).
    The ledger indexes every route that crosses something, once."""
    capacity = world.static_tables()[2]
    n = len(down.route_id)
    tables = (down, up)
    onset = world.devices.onset_flows
    contended: list[np.ndarray] = []  # (medium, device) of the hops on contended media
    for t in tables:
        first, last = int(t.hop_start[0]), int(t.hop_start[-1])
        hops = t.hops[first:last]
        owner = np.repeat(np.arange(n), np.diff(t.hop_start))
        if onset is not None:
            at = np.isfinite(onset)[hops]
            contended.append(hops[at].astype(np.int64) * n + owner[at])
    if contended:  # a device has one job: one flow at a time
        pairs = np.unique(np.concatenate(contended))
        media, devices = np.unique(pairs // n, return_counts=True)
        if np.any(devices > onset[media]):
            return None
    # every capacity state the run can take (netsim's: a flow present at a change is
    # re-shared under the new capacities, its cap re-read, as the flow network does), each
    # checked on its own; the static world's one is the device table's
    schedule = world.dynamics.capacity
    candidates = [np.asarray(world.caps_now, dtype=float)]
    if not schedule.static:
        candidates += [world.constraint_caps(row) for row in schedule.states()]
    states: dict[bytes, _State] = {}
    for caps in candidates:
        key = caps.tobytes()
        if key in states:
            continue
        if np.array_equal(caps, capacity):
            state = _state_of(tables, capacity,
                              np.concatenate([down.cap_bps, up.cap_bps]))
        else:
            state = _state_of(tables, caps, np.concatenate([route_caps(down, caps),
                                                            route_caps(up, caps)]))
        if state is None:
            return None
        states[key] = state
    # the ledger's books of every route at once (the check above read them all already),
    # not a few more at each epoch's settling
    crossing = np.concatenate([np.diff(down.hop_start), np.diff(up.hop_start)]) > 0
    world.network.ledger.index(
        np.concatenate([down.route_id, up.route_id])[crossing].tolist())
    return states, states[candidates[0].tobytes()]


class BufferedPlayer:
    """The jobs of a run's buffered epochs, played forward in arrays (module docstring).

    Built by :meth:`of` once per run; :meth:`start` starts a job's download,
    :meth:`play_to_close` plays until the epoch can close, :meth:`play_until` through the
    aggregation, :meth:`flush` books the transfers started, :meth:`unsent_j` is the
    network's :meth:`~netsim.network.FlowNetwork.unsent_j` for these transfers."""

    def __init__(self, world: Any, down: RouteTable, up: RouteTable,
                 states: dict[bytes, _State], now: _State) -> None:
        """``states``: every capacity state the run can take, by its capacities' bytes;
        ``now``: the one in force."""
        self.world, self.meter, self.network = world, world.meter, world.network
        self.radio = world.network.radio
        self.buffer = world.buffer
        self.tables = (down, up)
        self._states = states
        self._state = now
        self.capacity = now.capacity
        """Every constraint's capacity in force (bit/s; media after the links)."""
        self._caps_seen: np.ndarray | None = None  # the world's capacities last adopted
        self._ways: dict[int, tuple[Way, Way]] = {}  # under the capacities in force
        self._route_j: dict[int, float] = {}  # by route id
        self.has_radios = bool(self.radio)
        self.heap: list[tuple[float, int, int, Any, Any]] = []
        self.order = itertools.count()
        self.constraints: dict[int, SharedConstraint] = {}
        self.moving: dict[ArrayParticipant, None] = {}  # transfers in progress, by start
        self.booked_ids: list[int] = []
        self.booked_bytes: list[float] = []
        self.changes = 0
        """Transfers started, ended or stopped so far (what :meth:`unsent_j` remembers)."""
        self._unsent_memo = (-_INF, -1, 0.0)
        dyn = world.dynamics
        self.guarded = not dyn.timeline.static or bool(dyn.batteries.any)
        """Whether jobs may stop (sessions end, batteries empty): else no stop is armed."""
        self.schedule = dyn.capacity
        self._tick_token = 0  # an epoch's capacity ticks (arm_ticks); earlier ones are void
        self.capacity_changes = 0
        """Capacity changes played (the flows present re-shared at each)."""
        self._starting: dict[int, int] | None = None
        """Inside :meth:`starting` or :meth:`_play`: per constraint a transfer joined without
        a re-share yet, the heap order its next finish takes (reserved at the join, as
        :meth:`_schedule` would take it); None: each join re-shares at once."""
        self._joined_at = (-_INF, 0)
        """When the joins waiting in :attr:`_starting` began: the instant (s) and the first
        order they reserved (entries ordered before were in the heap already)."""

    @classmethod
    def of(cls, world: Any) -> BufferedPlayer | None:
        """The player of ``world``'s buffered epochs, or None when they cannot play in arrays
        (:func:`can_play`; a route crossing two constraints that can saturate under some
        capacity state the run can take; a contended medium whose flows could pass its
        onset)."""
        if not can_play(world):
            return None
        down, up, _, _ = world.static_tables()
        states = capacity_states(world, down, up)
        return None if states is None else cls(world, down, up, *states)

    # -- capacity changes ------------------------------------------------------------------
    def sync(self, now_s: float) -> None:
        """An epoch starts at ``now_s`` (s): the capacities the world set then (its
        ``begin_epoch``, before any job starts), if they changed, re-share the flows present
        (as the flow network's ``set_capacities``)."""
        self._adopt(now_s)

    def arm_ticks(self, now_s: float) -> None:
        """Play the capacity changes from ``now_s`` (s) on (the epoch's, as
        :meth:`netsim.engine.World.arm_capacity_ticks` arms them for the events; the
        previous epoch's are void)."""
        self._tick_token += 1
        if not self.schedule.static:
            at = self.schedule.next_change_s(now_s)
            if at < _INF:
                self._push(at, _TICK, None, self._tick_token)

    def _tick(self, t: float) -> None:
        """A capacity tick at ``t`` (s): the transfers started so far booked under the
        capacities of their start, the world's capacities set (the network's, its ledger's),
        the flows present re-shared; the next tick armed."""
        self.flush()
        at = self.world.change_capacities(t)
        self._adopt(t)
        if at < _INF:
            self._push(at, _TICK, None, self._tick_token)

    def _adopt(self, t: float) -> None:
        """The world's capacities (``caps_now``) in force from ``t`` (s): when they are not
        the player's, its state moves to theirs and every flow present is re-shared at ``t``
        (:meth:`_reshare`)."""
        caps = self.world.caps_now
        if caps is self._caps_seen:  # (the world replaces its array when capacities change)
            return
        self._caps_seen = caps
        if caps is self.capacity or np.array_equal(caps, self.capacity):
            return
        state = self._states.get(np.asarray(caps, dtype=float).tobytes())
        if state is None:
            raise RuntimeError("buffered arrays: capacities outside the states checked")
        self._state, self.capacity = state, state.capacity
        self._ways = {}
        self.capacity_changes += 1
        self._reshare(t)

    def _reshare(self, t: float) -> None:
        """Every flow present re-shared at ``t`` (s) under the capacities in force: its bits
        left kept, its standalone rate, binding constraint and coefficient re-read, each
        constraint water-filled again with its capacity (netsim's: the flow network's
        re-share at a capacity change, one water-filling per constraint that can bind). A flow
        alone on its route at an unchanged rate, and a constraint whose capacity, flows and
        their caps and coefficients are unchanged, keep their instants."""
        constraints = self.constraints
        for c in constraints.values():
            c.advance(t)
        placed: dict[int, dict[ArrayParticipant, list[float]]] = {}
        tol = CAPACITY_TOLERANCE
        for p in self.moving:  # (in start order)
            d = 0 if p.phase == "down" else 1
            old = p.transfer
            if type(old) is int:
                left = constraints[old].flows[p][0]
            else:
                since, bits, cap = old
                left = bits - cap * (t - since)
            if left < 0.0:
                left = 0.0
            p.ways = self.ways_of(p.way_row)
            way = p.ways[d]
            b = way.bind
            if b >= 0:
                placed.setdefault(b, {})[p] = [
                    left, way.cap_bps, way.coef, 0.0,
                    max(8.0 * (p.nbytes if d == 0 else p.up_nbytes), 1.0) * tol]
            elif type(old) is int or old[2] != way.cap_bps:
                p.transfer = token = (t, left, way.cap_bps)
                self._push(t + left / way.cap_bps, _LAST_BIT, p, token)
        capacity = self.capacity
        for b in sorted(placed.keys() | constraints.keys()):
            flows = placed.get(b, {})
            kept = constraints.get(b)
            if kept is None:
                kept = constraints[b] = SharedConstraint(float(capacity[b]))
            elif kept.capacity_bps == float(capacity[b]) and list(kept.flows) == list(flows) \
                    and all(f[1:3] == flows[k][1:3] for k, f in kept.flows.items()):
                continue  # (nothing of it changed)
            kept.replace(float(capacity[b]), t, flows)
            for p in flows:
                p.transfer = b
            self._schedule(b, kept)

    # -- jobs ---------------------------------------------------------------------------------
    def start(self, job: Job, nbytes: float, compute_s: float, now_s: float,
              offline_at_s: float = _INF, battery_left_j: float = _INF,
              idle_w: float = 0.0, busy_w: float = 0.0, own_j_per_bit: float = 0.0,
              way_row: int | None = None, buffer: Any = None, up_nbytes: float | None = None
              ) -> ArrayParticipant:
        """Job ``job`` starts now (``now_s``, s): its download of ``nbytes`` bytes begins;
        it trains for ``compute_s`` (s) once the model has arrived. It stops when its
        device's session ends (``offline_at_s``, s) or its battery empties (``battery_left_j``
        J now, drawn at ``idle_w`` and ``busy_w`` W, and ``own_j_per_bit`` J per bit at
        once as its upload starts), as :class:`GuardedParticipant` does. ``way_row``,
        ``buffer``, ``up_nbytes``: :class:`ArrayParticipant`'s (None: the star's)."""
        p = ArrayParticipant(self, job, nbytes, compute_s, offline_at_s, battery_left_j,
                             idle_w, busy_w, own_j_per_bit, way_row, buffer, up_nbytes)
        self._send(p, 0, now_s)
        if self.guarded:
            self._arm_stop(p)
        return p

    def carry(self, job: Job, way_row: int, d: int, nbytes: float, now_s: float,
              then: Any) -> ArrayParticipant:
        """A transfer of ``nbytes`` bytes that is not a device's job (an edge's model over
        the backhaul: netsim.epochs.tiered_arrays) starts now (``now_s``, s) on route row
        ``way_row`` in direction ``d`` (0: the tables' downloads, 1: their uploads), for job
        ``job`` (its ``row``: not a device's); at its arrival the loop calls ``then(t, it)``
        (an event path's ``yield network.transfer(...)`` resuming its process). It never
        stops (nor does the event path's flow)."""
        p = ArrayParticipant(self, job, nbytes, 0.0, _INF, _INF, 0.0, 0.0, 0.0, way_row)
        p.phase, p.then = ("down", "up")[d], then
        self._send(p, d, now_s)
        return p

    def call_at(self, at_s: float, fn: Any, token: Any = None) -> None:
        """``fn(at_s, token)`` at ``at_s`` (s), after what is due then so far (a SimPy event
        scheduled now: the callback's order is taken now); ``fn`` returns whether the buffer
        the epoch closes on may close now."""
        self._push(at_s, _CALL, fn, token)

    @contextmanager
    def starting(self) -> Iterator[None]:
        """Start several jobs at this instant (:meth:`start`) with one re-share per
        constraint their downloads join, after the last (an epoch's start: at a run's first,
        every client's download joins its node's link). Each constraint's next finish enters
        the heap with the order its last join took, so the heap plays what it would have
        played had each join re-shared (the earlier finishes it skips were void: a later join
        moved the constraint's version on). No time passes inside the block."""
        self._starting = {}
        try:
            yield
        finally:
            self._flush_joined()
            self._starting = None

    def _flush_joined(self) -> None:
        """Re-share each constraint transfers joined without it and push its next finish
        with the order its last join reserved (:meth:`starting`)."""
        joined = self._starting
        if not joined:
            return
        pending = list(joined.items())
        joined.clear()
        for b, order in pending:
            c = self.constraints[b]
            c.reshare()
            at = c.next_finish_s()
            if at < _INF:
                heapq.heappush(self.heap, (at, order, _DUE, b, c.version))

    def play_to_close(self, start_s: float, deadline_at_s: float) -> float:
        """Play until the buffer can close the epoch (:attr:`UpdateBuffer.closable`: K
        updates, or nothing in flight), else to the deadline (s); returns that instant
        (s). The buffer was configured for the epoch."""
        if self.buffer.closable:
            return start_s
        # (as SimPy orders them: what was due at the deadline before the epoch opened comes
        # first, and at the instant the epoch can close, what was due then before it could)
        closed = self._play(deadline_at_s, next(self.order), closing=True)
        if closed is not None:
            return closed
        if deadline_at_s < _INF:
            return deadline_at_s
        raise RuntimeError("buffered arrays: jobs in flight with nothing left to happen")

    def play_until(self, until_s: float) -> None:
        """Play every instant before ``until_s`` (s), and those at ``until_s`` that were
        due before this call (SimPy's order): the aggregation under way."""
        self._play(until_s, next(self.order), closing=False)

    def flush(self) -> None:
        """Book the transfers started since the last call (the ledger, as the flow network
        books them: bytes, energy and air time at their start)."""
        if self.booked_ids:
            self.network.book(self.booked_ids, self.booked_bytes)
            self.booked_ids, self.booked_bytes = [], []

    def unsent_j(self, now_s: float) -> float:
        """Communication energy booked for the bits the transfers in progress have still to
        send at ``now_s`` (J)."""
        at, changes, memo = self._unsent_memo
        if at == now_s and changes == self.changes:  # (an epoch's end is the next one's start)
            return memo
        total = 0.0
        for p in self.moving:  # (in start order)
            d = 0 if p.phase == "down" else 1
            total += self._bits_left(p, d, now_s) * self._j_per_bit(p.ways[d])
        self._unsent_memo = (now_s, self.changes, total)
        return total

    def stop_at(self, p: ArrayParticipant, now: float) -> None:
        """Stop job ``p`` at ``now`` (s; its device left, its battery emptied, or the run
        ends): its training ends, or its transfer is cancelled (the bits not sent un-booked),
        as the event path stops a participant."""
        if p.phase == "train":
            self.meter.set_idle(p.row, now)
        elif p.transfer is not None:
            d = 0 if p.phase == "down" else 1
            left = self._bits_left(p, d, now)
            if type(p.transfer) is int:
                c = self.constraints[p.transfer]
                c.remove(p, now)
                self._schedule(p.transfer, c)
            if p.ways[d].radios:
                self.radio.end(p.ways[d].radios, now)
            del self.moving[p]
            self.changes += 1
            p.transfer = None
            self.flush()
            if left > 0.0:  # (air time at the station rates of its start, as the events
                # un-book it: FlowNetwork.cancel)
                self.network.book([p.ways[d].route_id], [-left / 8.0],
                                  None if p.start_caps is self.capacity else p.start_caps)
        p.phase = "gone"

    # -- the loop -------------------------------------------------------------------------------
    def _play(self, until_s: float, before: int, closing: bool) -> float | None:
        """Play the instants before ``until_s`` (s), and those at ``until_s`` ordered before
        ``before``, in time order; ``closing``: stop once the buffer can close the epoch,
        after the instants due at that time before it could (an event path's ``closed``
        event comes after them), and return that time."""
        if self._starting is not None:  # (_close_at's, inside a play)
            return self._play_loop(until_s, before, closing)
        with self.starting():
            return self._play_loop(until_s, before, closing)

    def _play_loop(self, until_s: float, before: int, closing: bool) -> float | None:
        """:meth:`_play`'s loop. Uploads that start at one instant (jobs that trained
        together: at a run's first epoch, every client's) join their constraints without a
        re-share each (:meth:`starting`'s way); the re-shares and next finishes are made
        before the next entry unless that entry is another job's end of training or
        arrival at the same instant that was in the heap before the joins (it comes before
        any finish they could push: an earlier order at a time no later), so the play is
        the one each join re-sharing at once would give."""
        heap, pop, buf = self.heap, heapq.heappop, self.buffer
        constraints, guarded = self.constraints, self.guarded
        joined = self._starting
        assert joined is not None
        t = -_INF
        ended = False  # (a job ended since the buffer was last asked whether it can close)
        while True:
            if joined:
                at, first = self._joined_at
                top = heap[0] if heap else None
                if top is None or top[0] != at or top[1] >= first \
                        or (top[2] != _TRAINED and top[2] != _ARRIVED) \
                        or not (at < until_s or (at == until_s and top[1] < before)):
                    self._flush_joined()
            if not (heap and (heap[0][0] < until_s or (heap[0][0] == until_s
                                                       and heap[0][1] < before))):
                break
            if ended and closing and buf.closable:
                return self._close_at(t)
            t, _, kind, subject, token = pop(heap)
            if kind == _DUE:
                c = constraints[subject]
                if token != c.version:
                    continue
                done = c.finish_due(t)
                self._schedule(subject, c)
                for p in done:
                    self._last_bit(p, t)
            elif kind == _LAST_BIT:
                if subject.transfer is token:
                    self._last_bit(subject, t)
            elif kind == _ARRIVED:
                if subject.phase == "down":
                    if guarded:
                        subject.spend(t)
                    subject.phase = "train"
                    self.meter.set_busy(subject.row, t)
                    self._push(t + subject.compute_s, _TRAINED, subject, None)
                    if guarded:
                        self._arm_stop(subject)
            elif kind == _TRAINED:
                if subject.phase == "train":
                    ended = self._trained(subject, t)
            elif kind == _LANDED:
                landing = subject.buffer
                if subject.job.key in landing.jobs:
                    landing.land(subject.job.key, t)
                    ended = True
            elif kind == _CALL:
                if subject(t, token):
                    ended = True
            elif kind == _TICK:
                if token == self._tick_token:
                    self._tick(t)
            elif token == subject.token and subject.phase in ("down", "train", "up"):  # _STOP
                subject.battery_out = t < subject.offline_at_s
                self._drop(subject, t)
                ended = True
        if ended and closing and buf.closable:
            return self._close_at(t)
        return None

    def _close_at(self, t: float) -> float:
        """The buffer can close the epoch at ``t`` (s): play what was due at ``t`` before,
        as the event path does before its ``closed`` event (more updates may land, with the
        same staleness); returns ``t``."""
        self._play(t, next(self.order), closing=False)
        return t

    def _trained(self, p: ArrayParticipant, t: float) -> bool:
        """Job ``p`` has trained at ``t`` (s): its upload starts, unless its battery cannot
        pay for it (then it drops out: True)."""
        self.meter.set_idle(p.row, t)
        if not self.guarded:
            p.phase = "up"
            self._send(p, 1, t)
            return False
        p.spend(t)
        p.phase = "up"
        lump = 8.0 * p.up_nbytes * p.own_j_per_bit
        if p.left_j < _INF and p.left_j <= lump:  # empties as the upload would start
            p.battery_out = True
            self._drop(p, t)
            return True
        p.left_j -= lump
        self._send(p, 1, t)
        self._arm_stop(p)
        return False

    def _drop(self, p: ArrayParticipant, t: float) -> None:
        """Job ``p`` stops at ``t`` (s) and leaves the buffer (nothing of it counts)."""
        self.stop_at(p, t)
        p.buffer.drop(p.job.key, t)

    def _arm_stop(self, p: ArrayParticipant) -> None:
        """Job ``p``'s stop instant in its current phase, if any (the earlier one is void,
        whether or not this phase has one)."""
        p.token += 1
        at, _ = p.stop_at_s()
        if at < _INF:
            heapq.heappush(self.heap, (at, next(self.order), _STOP, p, p.token))

    def _push(self, at_s: float, kind: int, subject: Any, token: Any) -> None:
        heapq.heappush(self.heap, (at_s, next(self.order), kind, subject, token))

    def _schedule(self, b: int, c: SharedConstraint) -> None:
        if self._starting:  # (re-shared now: a join waiting is overtaken)
            self._starting.pop(b, None)
        at = c.next_finish_s()
        if at < _INF:
            heapq.heappush(self.heap, (at, next(self.order), _DUE, b, c.version))

    def _send(self, p: ArrayParticipant, d: int, now_s: float) -> None:
        """Job ``p``'s transfer in direction ``d`` (0: download, 1: upload) starts now."""
        if self.capacity_changes:  # (its route's figures under the capacities in force)
            p.ways = self.ways_of(p.way_row)
        way = p.ways[d]
        p.started_s = now_s
        if not way.crosses:  # (local: arrives at once, nothing booked)
            self._arrive(p, d, now_s, now_s)
            return
        nbytes = p.nbytes if d == 0 else p.up_nbytes
        self.booked_ids.append(way.route_id)
        self.booked_bytes.append(nbytes)
        bits = 8.0 * nbytes
        if bits <= 0.0:
            self._arrive(p, d, now_s, now_s + way.latency_s)
            return
        if way.radios:
            self.radio.start(way.radios, now_s)
        self.moving[p] = None
        self.changes += 1
        p.start_caps = self.capacity
        b = way.bind
        if b < 0:  # alone on its route: at its cap to the end
            p.transfer = token = (now_s, bits, way.cap_bps)
            self._push(now_s + bits / way.cap_bps, _LAST_BIT, p, token)
            return
        c = self.constraints.get(b)
        if c is None:
            c = self.constraints[b] = SharedConstraint(float(self.capacity[b]))
        starting = self._starting
        c.add(p, bits, way.cap_bps, way.coef, now_s, reshare=starting is None)
        p.transfer = b
        if starting is None:
            self._schedule(b, c)
        else:  # (the order _schedule would take now: re-shared and pushed later)
            order = next(self.order)
            if not starting:
                self._joined_at = (now_s, order)
            starting[b] = order

    def _last_bit(self, p: ArrayParticipant, t: float) -> None:
        """Job ``p``'s transfer in progress has sent its last bit at ``t`` (s): it arrives
        after its route's latency (:meth:`_arrive`)."""
        d = 0 if p.phase == "down" else 1
        way = p.ways[d]
        arrival = t + way.latency_s
        if way.radios:
            self.radio.end(way.radios, arrival)
        del self.moving[p]
        self.changes += 1
        p.transfer = None
        self._arrive(p, d, t, arrival)

    def _arrive(self, p: ArrayParticipant, d: int, t: float, arrival_s: float) -> None:
        """The last bit of job ``p``'s transfer ``d`` left at ``t``; it arrives at
        ``arrival_s`` (s): training starts (a download), or the update lands."""
        if d == 0:
            if t > p.started_s:
                p.down_bps = 8.0 * p.nbytes / (t - p.started_s)
            if p.then is None:
                self._push(arrival_s, _ARRIVED, p, None)
                return
        else:
            if t > p.started_s:
                p.up_bps = 8.0 * p.up_nbytes / (t - p.started_s)
            p.phase = "sent"
            if p.then is None:
                self._push(arrival_s, _LANDED, p, None)
                return
        p.phase = "gone"  # (a transfer that is not a job's: its arrival calls on)
        self._push(arrival_s, _CALL, p.then, p)

    def _bits_left(self, p: ArrayParticipant, d: int, now_s: float) -> float:
        transfer = p.transfer
        if type(transfer) is int:
            return self.constraints[transfer].bits_left(p, now_s)
        started, bits, cap = transfer
        left = bits - cap * (now_s - started)
        return left if left > 0.0 else 0.0

    def ways_of(self, row: int) -> tuple[Way, Way]:
        """Device ``row``'s download and upload routes (read on its first job under the
        capacities in force)."""
        ways = self._ways.get(row)
        if ways is None:
            pair = []
            n = len(self.tables[0].route_id)
            for d, t in enumerate(self.tables):
                start, ids, radios = t.radio_start, t.radio_ids, ()
                if self.has_radios and start is not None and ids is not None:
                    first, end = start.item(row), start.item(row + 1)
                    if end > first:
                        radios = tuple(ids[first:end].tolist())
                hop_start = t.hop_start
                state = self._state
                pair.append(Way(t.route_id.item(row), state.cap_bps.item(d * n + row),
                                t.latency_s.item(row),
                                hop_start.item(row + 1) > hop_start.item(row),
                                state.bind.item(d * n + row), state.coef.item(d * n + row),
                                radios))
            ways = self._ways[row] = (pair[0], pair[1])
        return ways

    def _j_per_bit(self, way: Way) -> float:
        """The energy of a bit over ``way`` (J/bit), read from the ledger's books once."""
        j = self._route_j.get(way.route_id)
        if j is None:
            j = self._route_j[way.route_id] = self.network.ledger.route_j_per_bit(
                way.route_id)
        return j
