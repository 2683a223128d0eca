"""Asynchronous tiers played in arrays, without SimPy events (netsim's fast path for
:mod:`netsim.epochs.tiered`, docs/hierarchical.md).

The star's buffered player (:class:`netsim.epochs.buffered_arrays.BufferedPlayer`) plays one
level up: its heap of instants, its transfers (each constraint that can saturate water-filled
on its own, :class:`netsim.network.online.SharedConstraint`; the rest at their standalone
rate), its device jobs (download, train, upload; busy time, bytes, energy, air time, radio
periods booked as the events book them) and its close of an epoch on a buffer, here the
cloud's. What the tiers add are callbacks of the same heap (``_CALL``), each taking its order
when the event path would schedule its SimPy event, so ties play in the events' order: an
edge job's backhaul download (:meth:`BufferedPlayer.carry`; its arrival resumes the job, as
``yield network.transfer`` does), the edge's device jobs (the star's, on the routes between
each device and its edge, landing in the edge's buffer), the edge's resumption once its buffer
can close (:class:`_EdgeBuffer`: the event path's ``closed`` event, scheduled at the landing
that makes it closable), its aggregation's end (``env.timeout``), the next round, then the
backhaul upload, whose arrival hands the edge's model to the cloud's buffer one callback later
(``cloud.arrived``'s ``fire_after(0)``). The buffers, versions and staleness are the event
path's own (netsim.dynamics.buffered), and :func:`netsim.epochs.tiered.run` closes the epoch,
aggregates and reports as it does there. tests/test_tiers_arrays.py checks both paths' tables
against each other.

In a changing world (netsim.dynamics) the device jobs are the star's guarded array jobs
(:meth:`BufferedPlayer.start` with their session's end and battery: the same stop rule and
drain), started through the event path's ``_Changing.starts`` (netsim.epochs.tiered: the
timeline brought to the start, who is online, what a battery holds, the epoch's compute
speed; the transfers started so far booked first, so a battery's reading counts their bits)
and ended through its ``_Changing.ended_job`` (the edge's buffer tells it of each landing
and drop, as the event path's does); a drop that makes an edge's buffer closable resumes
the edge as a landing does; an edge round that took nothing ends the edge's job, which, if
it aggregated nothing, leaves the cloud's buffer (the closing buffer may close then). The
capacity changes are the star player's (:meth:`BufferedPlayer.sync`, ``arm_ticks``: armed
before the edge jobs start, as the event path's ticks; void at the epoch's end). Between two
epochs the world may wait for someone to come online (SimPy's clock moves while tier jobs
are in flight): :meth:`TierPlayer.guard_waits` plays them as SimPy reaches their instants.

Where (:meth:`TierPlayer.of`): where the star's array path plays (``fast_epochs``,
capacities that stay within states known up front: none change, or a bandwidth trace's
rows), nothing in flight on the flow network or in the star's buffer when the run's first
asynchronous tier epoch starts, and every route the tiers can take (each device to and from
every edge it can reach, each edge to and from the cloud) crossing at most one constraint
that can saturate with all of them present, under every capacity state, contended media
within their onset (the star's condition, :func:`netsim.epochs.buffered_arrays
.capacity_states`, on those routes). Elsewhere the events play. Once a run's tiers play here
they all do; another kind of epoch while tier jobs are in flight is refused
(:meth:`TierPlayer.check_clock`: those jobs would not see it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import simpy

from netsim.dynamics.buffered import Job, Update, UpdateBuffer
from netsim.epochs.buffered_arrays import _LANDED, BufferedPlayer, capacity_states
from netsim.epochs.outcome import RoundUpdates
from netsim.fastepoch import RouteTable
from netsim.simclock import fire_after

_INF = float("inf")


class _EdgeJob:
    """One edge's cloud job as the player runs it (the event path's ``_edge_job``)."""

    __slots__ = ("k", "state", "decision", "rows", "work", "samples", "k_edge", "left",
                 "rounds")

    def __init__(self, k: int, state: Any, decision: Any, rows: np.ndarray, work: Any) -> None:
        self.k, self.state, self.decision, self.rows, self.work = k, state, decision, rows, work
        self.samples: dict[int, int] = {}
        self.k_edge = 0
        self.left = 0
        self.rounds: list[RoundUpdates] = []


class _EdgeBuffer(UpdateBuffer):
    """An edge's buffer over its devices on the array path: the event path's, which, when the
    update that lands (or, in a changing world, the job that drops out) makes it closable
    while its edge waits, resumes the edge after what is due then (the event path's
    ``closed`` event, scheduled by ``_check`` at that landing or drop). ``changing``: the
    changing world's tiers (netsim.epochs.tiered ``_Changing``), told of every job that
    arrives or drops out, as the event path's edge buffer tells them; None: a static world."""

    def __init__(self, env: simpy.Environment, busy: np.ndarray, player: TierPlayer,
                 changing: Any = None) -> None:
        super().__init__(env, busy)
        self.player = player
        self.changing = changing
        self.waiting: _EdgeJob | None = None

    def land(self, key: int, now_s: float) -> None:
        changing = self.changing
        job = self.jobs[key] if changing is not None else None
        super().land(key, now_s)
        if job is not None:
            changing.ended_job(job, now_s, dropped=False)
        self._resume_at(now_s)

    def drop(self, key: Any, now_s: float) -> None:
        changing = self.changing
        job = self.jobs[key] if changing is not None else None
        super().drop(key, now_s)
        if job is not None:
            changing.ended_job(job, now_s, dropped=True)
        self._resume_at(now_s)

    def _resume_at(self, now_s: float) -> None:
        job = self.waiting
        if job is not None and self.closable:
            self.waiting = None
            self.player.call_at(now_s, self.player._resume, job)


class TierPlayer(BufferedPlayer):
    """The jobs of a run's asynchronous tiers, played forward in arrays (module docstring):
    the star's player whose route tables hold, per (device, edge it can reach), the device's
    routes from and to the edge (rows ``slots[(row, edge)]``), then per edge its routes from
    and to the cloud (row ``backhaul0 + edge``), and whose epochs close on the cloud's
    buffer."""

    def __init__(self, world: Any, down: RouteTable, up: RouteTable, states: dict[bytes, Any],
                 now: Any, slots: dict[tuple[int, int], int], cloud: UpdateBuffer) -> None:
        super().__init__(world, down, up, states, now)
        self.buffer = cloud
        self.slots = slots
        self.backhaul0 = len(slots)
        self.tiered: Any = None
        """The world's tiers (netsim.epochs.tiered.Tiered: the edges' states, their work)."""
        self.clock_s = float(world.env.now)
        """Where the last tier epoch left the clock (s)."""
        self.changing: Any = None
        """The changing world's tiers (netsim.epochs.tiered ``_Changing``; None: static)."""
        self._cloud_ended = False  # (an edge job dropped out of the cloud's buffer)
        self._guard = 0  # the wait guard's token (guard_waits); earlier guards are void
        self.unsent_at_end_j = 0.0
        """:meth:`unsent_j` at the last tier epoch's end (J): a wait's start."""

    @classmethod
    def of(cls, world: Any, cloud: UpdateBuffer) -> TierPlayer | None:  # type: ignore[override]
        """The player of ``world``'s asynchronous tiers with the cloud's buffer ``cloud``, or
        None when they cannot play in arrays (module docstring)."""
        if not (world.fast_epochs and world.dynamics.capacity.states() is not None
                and world.network.active_flows == 0 and not world.buffer.in_flight):
            return None
        tiers, routes = world.tiers, world.tier_routes
        start, reach = tiers.reach_start, tiers.reach_edges
        owner = np.repeat(np.arange(len(start) - 1), np.diff(start))
        pairs = list(zip(owner.tolist(), reach.tolist(), strict=True))
        downs = [routes.device_route(r, e, True) for r, e in pairs] + routes.edge_routes(True)
        ups = [routes.device_route(r, e, False) for r, e in pairs] + routes.edge_routes(False)
        down, up = RouteTable.of(downs), RouteTable.of(ups)
        states = capacity_states(world, down, up)
        if states is None:
            return None
        return cls(world, down, up, *states, {p: i for i, p in enumerate(pairs)}, cloud)

    def edge_buffer(self, busy: np.ndarray, changing: Any = None) -> UpdateBuffer:
        """A new edge's buffer over the devices (``busy``: the world's per-device array;
        ``changing``: the changing world's tiers, None: static)."""
        return _EdgeBuffer(self.world.env, busy, self, changing)

    def check_clock(self, now_s: float, waited: bool = False) -> None:
        """A tier epoch starts at ``now_s`` (s): the clock is where the last one left it, or
        the world waited for someone to come online meanwhile (``waited``: the wait guard
        played the jobs to now, :meth:`guard_waits`), or nothing is in flight here (else
        another kind of epoch ran meanwhile, unseen by these jobs: refused). The wait guard
        stops."""
        self._guard += 1
        if now_s != self.clock_s and not waited and (self.moving or any(
                e.buffer.in_flight for e in self.tiered.edges) or self.buffer.in_flight):
            raise RuntimeError(
                "asynchronous tiers in arrays: another kind of epoch ran while tier jobs "
                "were in flight (run with fast_epochs=False)")

    # -- a changing world ---------------------------------------------------------------------
    def begin_epoch(self, now_s: float) -> None:
        """A tier epoch of a changing world starts at ``now_s`` (s): the capacities the world
        set then re-share the flows present, and the epoch's capacity changes are armed (the
        event path's ``arm_capacity_ticks``, before the edge jobs start)."""
        self.sync(now_s)
        self.arm_ticks(now_s)

    def end_epoch(self, end_s: float) -> None:
        """The tier epoch of a changing world ended at ``end_s`` (s): its capacity changes
        stop (the event path's ``end_capacity_ticks``; what changes them until the next is
        the world's ``begin_epoch``) and, where sessions change, the wait guard is armed
        (:meth:`guard_waits`)."""
        self._tick_token += 1
        self.unsent_at_end_j = self.unsent_j(end_s)
        self.guard_waits()

    def guard_waits(self) -> None:
        """Between two tier epochs the world may wait for someone to come online
        (:meth:`netsim.engine.World.wait_for_someone`: SimPy's clock moves on while tier jobs
        are in flight, as the event path's processes go on). A guard, a SimPy event at the
        player's next instant or the timeline's next change (a wait's end, where the world's
        ``begin_epoch`` may set new capacities), plays them as SimPy reaches them: at each,
        the world's capacities adopted (re-sharing the flows present), the instants due then
        played, the transfers booked, the guard armed again. The next tier epoch voids it
        (:meth:`check_clock`)."""
        self._guard += 1
        if not self.world.dynamics.timeline.static:
            self._arm_guard(self._guard)

    def _arm_guard(self, token: int) -> None:
        env = self.world.env
        heap = self.heap
        at = min(heap[0][0] if heap else _INF,
                 self.world.dynamics.timeline.next_change_at())
        if at < _INF:
            fire_after(env, max(at - env.now, 0.0), lambda _e: self._guarded(token))

    def _guarded(self, token: int) -> None:
        if token != self._guard:
            return
        t = float(self.world.env.now)
        self._adopt(t)
        self._play(t, next(self.order), closing=False)
        self.flush()
        self._arm_guard(token)

    def _ended(self) -> bool:
        """Whether an edge job dropped out of the cloud's buffer since the last call (the
        closing buffer may close now)."""
        ended, self._cloud_ended = self._cloud_ended, False
        return ended

    # -- an edge's cloud job (the event path's _edge_job, step by step) -----------------------
    def edge_job(self, k: int, state: Any, decision: Any, rows: np.ndarray, work: Any,
                 now_s: float) -> None:
        """Edge ``k``'s cloud job (``state.job``, in the cloud's buffer) starts at ``now_s``
        (s) with its devices ``rows``: the cloud's model over the backhaul first."""
        job = _EdgeJob(k, state, decision, rows, work)
        self.carry(state.job, self.backhaul0 + k, 0, work.download_bytes, now_s,
                   lambda t, _p: self._downloaded(job, t))

    def _downloaded(self, job: _EdgeJob, t: float) -> bool:
        """The cloud's model has reached the edge at ``t`` (s): it replaces the edge's; the
        first round starts."""
        buf = job.state.buffer
        buf.version += 1
        ids, decision = self.world.devices.ids, job.decision
        job.samples = {int(r): int(decision.participants[ids[r]]) for r in job.rows}
        job.k_edge = decision.edge_buffer_updates or len(job.rows)
        job.left = int(decision.edge_rounds or 1)
        busy = self.world.busy
        self._round(job, [r for r in job.rows.tolist() if not busy[r]], t)
        return self._ended()

    def _round(self, job: _EdgeJob, rows: list[int], t: float) -> None:
        """An edge round starts at ``t`` (s): device jobs for ``rows``; the edge waits for
        its buffer to be closable (at once: on)."""
        buf = job.state.buffer
        self._start_devices(job, rows, t)
        buf.configure(min(job.k_edge, max(buf.in_flight + len(buf.landed), 1)), None)
        if buf.closable:
            self._take(job, t)
        else:
            buf.waiting = job

    def _resume(self, t: float, job: _EdgeJob) -> bool:
        self._take(job, t)
        return self._ended()

    def _take(self, job: _EdgeJob, t: float) -> None:
        """The edge takes what its buffer holds at ``t`` (s) and aggregates it (busy)."""
        updates = job.state.buffer.take()
        if updates:
            tiers = self.world.tiers
            self.meter.set_busy(int(tiers.nodes[job.k]), t)
            self.call_at(t + job.work.aggregation_flop(len(updates))
                         / float(tiers.flop_per_s[job.k]), self._aggregated, (job, updates))
        else:
            self._next(job, updates, t)

    def _aggregated(self, t: float, token: tuple[_EdgeJob, list[Update]]) -> bool:
        job, updates = token
        self.meter.set_idle(int(self.world.tiers.nodes[job.k]), t)
        self._next(job, updates, t)
        return self._ended()

    def _next(self, job: _EdgeJob, updates: list[Update], t: float) -> None:
        """The edge's round ends at ``t`` (s): its next starts with the devices whose updates
        it took, or, after the last, its model goes up the backhaul. In a changing world a
        round that took nothing (nobody in flight, nothing waiting) ends the edge's job,
        which, if it aggregated nothing, leaves the cloud's buffer with nothing sent up."""
        buf = job.state.buffer
        buf.aggregated()
        buf.drain()
        changing = self.changing is not None
        if not (changing and not updates):
            job.rounds.append(RoundUpdates.of(updates))
            job.left -= 1
            if job.left > 0:
                index, busy = self.world.devices.index, self.world.busy
                self._round(job, [r for r in dict.fromkeys(index[u.device] for u in updates)
                                  if r in job.samples and not busy[r]], t)
                return
        if changing and not job.rounds:
            state = job.state
            key = state.job.key
            state.job = None
            self.buffer.drop(key, t)
            self._cloud_ended = True
            return
        self.carry(job.state.job, self.backhaul0 + job.k, 1, job.work.upload_bytes, t,
                   lambda at, p: self._uploaded(job, at, p))

    def _uploaded(self, job: _EdgeJob, t: float, carrier: Any) -> bool:
        """The edge's model has reached the cloud at ``t`` (s): the edge is idle; the model
        lands in the cloud's buffer one callback later (the event path's
        ``cloud.arrived``)."""
        state = job.state
        self.tiered.edge_work[state.job.key] = tuple(job.rounds)
        state.job = None
        self._push(t, _LANDED, carrier, None)
        return False

    def _start_devices(self, job: _EdgeJob, rows: list[int], t: float) -> None:
        """Device jobs of the edge for ``rows`` at ``t`` (s), from its current version (the
        event path's guarded participants in a static world: they never stop; in a changing
        world those of the devices that can start then, with their session's end, battery
        and speed, ``_Changing.starts``, stopping as the star's jobs stop)."""
        changing = self.changing
        if not rows and changing is None:
            return
        world, buf, k, work = self.world, job.state.buffer, job.k, job.work
        d = world.devices
        if changing is not None:  # (nobody to start too: the timeline brought to now)
            self.flush()  # (a battery's reading counts the bits sent so far: the ledger's)
            own = world.own_up_j_per_bit
            for r, before, offline_at, left_j, flops in changing.starts(rows, t):
                samples = job.samples[r]
                dev = Job(buf.new_key(), d.ids[r], r, samples, buf.version, t, before, flops)
                buf.add(dev)
                dev.participant = self.start(
                    dev, work.download_bytes, samples * work.flop_per_sample / flops, t,
                    offline_at, left_j, d.power_idle_w.item(r), d.power_busy_w.item(r),
                    own.item(r), way_row=self.slots[(r, k)], buffer=buf,
                    up_nbytes=work.upload_bytes)
                changing.started(dev)
            return
        node_j = self.meter.node_j_of(np.array(rows, dtype=np.intp), t).tolist()
        own = world.own_up_j_per_bit
        for r, before in zip(rows, node_j, strict=True):
            flops = d.flop_per_s.item(r)
            samples = job.samples[r]
            dev = Job(buf.new_key(), d.ids[r], r, samples, buf.version, t, before, flops)
            buf.add(dev)
            dev.participant = self.start(
                dev, work.download_bytes, samples * work.flop_per_sample / flops, t,
                idle_w=d.power_idle_w.item(r), busy_w=d.power_busy_w.item(r),
                own_j_per_bit=own.item(r), way_row=self.slots[(r, k)], buffer=buf,
                up_nbytes=work.upload_bytes)
