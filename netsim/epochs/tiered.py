"""An asynchronous hierarchical epoch (docs/hierarchical.md): the cloud aggregates the edges'
models asynchronously (RFL-HA, Wang et al. INFOCOM 2021: synchronous edges; Async-HFL, Yu et
al. IoTDI 2023: asynchronous edges too). Entry point :func:`run`.

netsim's formalization, on netsim's FedBuff machinery (netsim.dynamics.buffered: jobs, a
buffer, versions, staleness), one level up:

- The cloud is a FedBuff server whose **jobs are edge jobs**: an idle edge with participants
  in the decision starts one. The job downloads the cloud's current model over the backhaul,
  runs ``edge_rounds`` (kappa_2) edge aggregations, uploads the edge's model; it lands in the
  cloud's buffer with its staleness (cloud aggregations since the job started). The epoch ends
  at the cloud aggregation that follows the K-th landed edge model (``buffer_updates``; also
  once no edge is in flight, or at the training deadline), as a FedBuff epoch does; one epoch
  row per cloud aggregation.
- Each edge is a FedBuff server over its devices (its own buffer; its version moves at each
  of its aggregations and when the cloud's model arrives). At the job's start its
  participants start device jobs (download from the edge, train, upload: the event path's
  guarded participants on the routes to the edge). The edge aggregates (2 x params FLOP per
  update, on the edge) every ``edge_buffer_updates`` arrivals (asynchronous edges), or when
  all its participants have arrived (synchronous edges: None); the devices whose updates it
  took start again from its new model until its kappa_2-th aggregation. Device jobs still
  training then go on and land in the edge's buffer for its next job, stale.
- Progress: each edge model counts its edge rounds' device updates, each discounted by its
  staleness at the edge, the whole by its staleness at the cloud
  (:meth:`netsim.training.loss.LossPredictor.tiers_gain`).

In a changing world (netsim.dynamics; docs/hierarchical.md, "In a changing world") every
device job is the star's asynchronous job (netsim.epochs.buffered): it starts only on a device
online then with charge left, at its epoch's compute speed, and drops out when its session ends
or its battery empties (:class:`netsim.dynamics.epoch.GuardedParticipant`: the same stop rule
and battery drain); a battery that empties takes its device offline for good at that instant;
selected time and wasted energy by the star's functions
(:func:`netsim.dynamics.buffered.selected_s_of`, :func:`~netsim.dynamics.buffered.wasted_j_by_row`).
An edge aggregates what arrives; once it has nobody in flight and nothing waiting it ends its
job, sending its model up only if it aggregated an update. Edges and the backhaul are always
on; every link follows the bandwidth model (:class:`_Changing`).

These epochs play in arrays where they can (netsim.epochs.tiered_arrays: the star's buffered
player one level up, in a changing world too, where the star's plays, the same tables as the
events; there the device jobs start through :meth:`_Changing.starts` and end through
:meth:`_Changing.ended_job`, as here), else as SimPy events (here); on the surrogate only:
the real backend trains synchronous tiers.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import simpy

from netsim.dynamics.buffered import Job, UpdateBuffer, selected_s_of, wasted_j_by_row
from netsim.dynamics.epoch import GuardedParticipant
from netsim.epochs.outcome import EdgeUpdate, EpochOutcome, RoundUpdates, TierOutcome
from netsim.epochs.shared import EpochWorld
from netsim.epochs.tiered_arrays import TierPlayer
from netsim.policy import Decision


@dataclass(eq=False)
class EdgeState:
    """One edge's side of asynchronous tiers: its buffer over its devices (versions,
    jobs in flight, updates waiting) and the cloud job it runs (None: idle)."""

    buffer: UpdateBuffer
    job: Job | None = None
    rounds: list[RoundUpdates] = field(default_factory=list)


class Tiered:
    """The world's asynchronous tiers (kept across epochs): the cloud's buffer of edge jobs
    and each edge's state."""

    def __init__(self, world: EpochWorld, busy_edges: np.ndarray, busy_devices: np.ndarray
                 ) -> None:
        self.cloud = UpdateBuffer(world.env, busy_edges)
        self.changing = _Changing(world, self) if world.dynamic else None
        """The changing world's side of the tiers (None: a static world)."""
        changing = self.changing
        self.player = TierPlayer.of(world, self.cloud)
        """The tiers played in arrays (netsim.epochs.tiered_arrays; None: as events)."""
        player = self.player
        self.edges = [EdgeState(player.edge_buffer(busy_devices, changing)
                                if player is not None
                                else _EdgeBuffer(world.env, busy_devices, changing)
                                if changing is not None
                                else UpdateBuffer(world.env, busy_devices))
                      for _ in range(world.tiers.n)]
        if player is not None:
            player.tiered, player.changing = self, changing
        self.edge_work: dict[int, tuple[RoundUpdates, ...]] = {}
        """Per cloud job key, the edge rounds its model carries."""

    @property
    def landed(self) -> int:
        """Edge models waiting in the cloud's buffer."""
        return len(self.cloud.landed)

    def cut(self) -> int:
        """The run stops: device jobs at every edge stop now; returns how many edge jobs were
        in flight."""
        for e in self.edges:
            e.buffer.cut()
        return len(self.cloud.cut())


def run(world: EpochWorld, decision: Decision) -> EpochOutcome:
    """One asynchronous cloud aggregation (module docstring)."""
    env, meter, tiers = world.env, world.meter, world.tiers
    tiered: Tiered = world.tiered()
    cloud, changing, player = tiered.cloud, tiered.changing, tiered.player
    world.epochs_by_path["events" if player is None else "arrays"] += 1
    start = env.now
    wait, ahead = world.take_wait()  # (a wait for someone to come online belongs to the epoch)
    if player is not None:  # (in arrays, what was in flight at the wait's start is the
        player.check_clock(float(start), wait is not None)  # player's)
        ahead += player.unsent_at_end_j if wait is not None else 0.0
    unsent = world.network.unsent_j if player is None else (lambda: player.unsent_j(env.now))
    before = wait.totals() if wait is not None else meter.totals(start)
    unsent_before = ahead if wait is not None else unsent()
    if changing is not None:
        changing.begin_epoch(player)
    edges_before = meter.node_j_of(tiers.nodes, start)
    cloud_before = meter.node_j_of(np.array([world.aggregator_row]), start)
    work = world.workload_of(decision)
    n, index = len(decision.participants), world.devices.index
    rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
    edge_of = world.edges_of(decision, rows)
    mine = edge_of[rows]
    started_edges = []
    with nullcontext() if player is None else player.starting():
        for k in np.unique(mine).tolist():
            state = tiered.edges[k]
            if state.job is None:  # (the job is in flight from now: the buffer sees it at once)
                state.job = Job(cloud.new_key(), tiers.ids[k], k, 0, cloud.version,
                                float(start),
                                float(meter.node_j_of(np.array([tiers.nodes[k]]), start)[0]),
                                float(tiers.flop_per_s[k]))
                cloud.add(state.job)
                started_edges.append(k)
                if player is None:
                    env.process(_edge_job(world, tiered, decision, k, rows[mine == k], work))
                else:  # (a process's start: before anything else due now, as SimPy's)
                    player.edge_job(k, state, decision, rows[mine == k], work, float(start))
    k_cloud = int(decision.buffer_updates or 1)
    deadline_at = float(world.scenario.training.deadline_s)
    if player is None:
        closed = cloud.open(k_cloud, decision.max_staleness, deadline_at)
        if not closed.triggered:
            env.run(until=closed)
    else:
        cloud.configure(k_cloud, decision.max_staleness)
        close_s = player.play_to_close(float(start), deadline_at)
        if close_s > env.now:
            env.run(until=close_s)
    updates = cloud.take()
    taken = cloud.taken
    world.aggregate(work, len(updates), None if player is None else player.play_until)
    cloud.aggregated()
    end = env.now
    if player is not None:
        player.flush()
        player.clock_s = float(end)
    dropped: list[Job] = []
    wasted_j: dict[int, float] = {}
    if changing is not None:
        dropped, wasted_j = changing.end_epoch(end)
        if player is not None:
            player.end_epoch(float(end))
    arrived, discarded, _ = cloud.drain()
    edge_updates = tuple(EdgeUpdate(tiers.ids[j.row], tiered.edge_work.pop(j.key, ()),
                                    j.staleness) for j in taken)
    for j in discarded:
        tiered.edge_work.pop(j.key, None)
    energy = meter.totals(end) - before
    # transfers outlive epochs: an epoch is charged the bits sent in it (docs/async.md)
    energy = replace(energy, communication_j=energy.communication_j
                     - (unsent() - unsent_before))
    down_j, up_j = world.tier_routes.edge_backhaul_j_per_bit()
    energy_backhaul = 8.0 * (float(np.sum(down_j[started_edges])) * work.download_bytes
                             + float(np.sum(up_j[[j.row for j in arrived]]))
                             * work.upload_bytes)
    return EpochOutcome(
        start, end, energy, counted=None, dropped=tuple(j.device for j in dropped),
        late=tuple(tiers.ids[j.row] for j in discarded), wasted_j_by_row=wasted_j,
        started=n, in_flight=cloud.in_flight,
        tiers=TierOutcome(edge_updates, max((len(e.rounds) for e in edge_updates), default=0)),
        bytes_backhaul=float(len(started_edges) * work.download_bytes
                             + len(arrived) * work.upload_bytes),
        energy_backhaul_j=energy_backhaul,
        energy_edges_j=float(np.sum(meter.node_j_of(tiers.nodes, end) - edges_before)),
        energy_cloud_j=float(meter.node_j_of(np.array([world.aggregator_row]), end)[0]
                             - cloud_before[0]))


def _edge_job(world: EpochWorld, tiered: Tiered, decision: Decision, k: int,
              rows: np.ndarray, work: Any) -> Generator[simpy.Event, Any, None]:
    """Edge ``k``'s cloud job (module docstring): download the cloud's model, kappa_2 edge
    aggregations over its devices ``rows``, upload; lands in the cloud's buffer."""
    env, meter, tiers, network = world.env, world.meter, world.tiers, world.network
    state, cloud = tiered.edges[k], tiered.cloud
    job = state.job
    assert job is not None
    node, cloud_id = tiers.node_ids[k], world.aggregator_id
    yield network.transfer(cloud_id, node, work.download_bytes)
    buf = state.buffer
    buf.version += 1  # the cloud's model replaces the edge's
    samples = {int(r): int(decision.participants[world.devices.ids[r]]) for r in rows}
    k_edge = decision.edge_buffer_updates or len(rows)
    rounds: list[RoundUpdates] = []
    start_now = [r for r in rows.tolist() if not world.busy[r]]
    changing = tiered.changing
    for _ in range(int(decision.edge_rounds or 1)):
        _start_devices(world, tiered, buf, k, start_now, samples, work)
        closed = buf.open(min(k_edge, max(buf.in_flight + len(buf.landed), 1)), None,
                          math.inf)
        if not closed.triggered:
            yield closed
        updates = buf.take()
        if updates:
            meter.set_busy(int(tiers.nodes[k]), env.now)
            yield env.timeout(work.aggregation_flop(len(updates)) / float(tiers.flop_per_s[k]))
            meter.set_idle(int(tiers.nodes[k]), env.now)
        buf.aggregated()
        buf.drain()
        if changing is not None and not updates:  # (nobody in flight, nothing waiting: the
            break  # devices dropped out or could not start; the edge's job is done)
        rounds.append(RoundUpdates.of(updates))
        index = world.devices.index  # (a device's waiting update and a fresh one: once)
        start_now = [r for r in dict.fromkeys(index[u.device] for u in updates)
                     if r in samples and not world.busy[r]]
    if changing is not None and not rounds:  # (nothing aggregated: nothing to send up)
        state.job = None
        cloud.dropped(job.key)
        return
    yield network.transfer(node, cloud_id, work.upload_bytes)
    tiered.edge_work[job.key] = tuple(rounds)
    state.job = None
    cloud.arrived(float(env.now), job.key)


def _start_devices(world: EpochWorld, tiered: Tiered, buf: UpdateBuffer, k: int,
                   rows: list[int], samples: dict[int, int], work: Any) -> None:
    """Device jobs of edge ``k`` for ``rows`` from the edge's current version (the event
    path's guarded participants on the routes to and from the edge); in a changing world
    only on the devices that can start now (:meth:`_Changing.starts`)."""
    env, t, routes = world.env, world.devices, world.tier_routes
    changing, now = tiered.changing, float(env.now)
    starts: list[tuple[int, float | None, float, float, float]] = [
        (r, None, math.inf, math.inf, float(t.flop_per_s[r])) for r in rows] \
        if changing is None else list(changing.starts(rows, now))
    with world.network.batch():
        for r, node_j, offline_at, left_j, flops in starts:
            if node_j is None:  # (a static world: read as each job starts)
                node_j = float(world.meter.node_j_of(np.array([r]), env.now)[0])
            job = Job(buf.new_key(), t.ids[r], r, samples[r], buf.version, now, node_j, flops)
            buf.add(job)
            job.participant = GuardedParticipant(
                env, world.network, world.meter, buf, job.key, r, work.download_bytes,
                samples[r] * work.flop_per_sample / flops,
                routes.device_route(r, k, True), routes.device_route(r, k, False), offline_at,
                left_j, float(t.power_idle_w[r]), float(t.power_busy_w[r]),
                float(world.own_up_j_per_bit[r]), work.upload_bytes)
            if changing is not None:
                changing.started(job)


class _Changing:
    """The asynchronous tiers in a changing world (module docstring), kept across epochs.

    Device jobs are the star's asynchronous jobs, so they are accounted by the star's
    functions: selected time (:func:`netsim.dynamics.buffered.selected_s_of`, from a job's
    start to its end, or to its device's session end) and wasted energy
    (:func:`~netsim.dynamics.buffered.wasted_j_by_row`: what a dropped job's device drew from
    its start to the epoch's end). Unlike the star's, tier jobs also start while an epoch
    runs (an edge's later rounds, an edge job's first round after its backhaul download), so
    the availability timeline is brought to each start (who is online, until when; the
    meter's reading of what a battery holds then), a device's selected time so far is booked
    before its battery is read, and a battery that empties takes its device offline at once
    (the star does it at the epoch's end, ``timeline.kill`` at the job's end either way).
    Compute speeds are drawn once per tiered epoch (the star's per epoch) and hold for every
    job that starts until the next; the capacity ticks re-share the links during each epoch
    (as the star's events)."""

    def __init__(self, world: EpochWorld, tiered: Tiered) -> None:
        self.world, self.tiered = world, tiered
        self.flops = world.devices.flop_per_s
        self.since_s = float(world.env.now)  # (selected time is booked from here)
        self.live: dict[int, list[Job]] = {}  # per device row, its jobs of the epoch
        self.booked_s: dict[int, float] = {}  # per device row, selected time booked until
        self.ended: list[Job] = []  # device jobs that arrived or dropped since the last end
        self.dropped: list[Job] = []

    def begin_epoch(self, player: TierPlayer | None) -> None:
        """An epoch starts: this epoch's compute speeds; the capacity ticks armed (the
        events'; ``player``: the array path's, which first re-shares the flows present under
        the capacities the world set now)."""
        world = self.world
        dyn = world.dynamics
        if dyn.varies_compute:  # (one draw per epoch, the star's)
            self.flops = world.devices.flop_per_s * dyn.compute_factors()
        if player is None:
            world.arm_capacity_ticks()
        else:
            player.begin_epoch(float(world.env.now))

    def starts(self, rows: list[int], now: float
               ) -> list[tuple[int, float, float, float, float]]:
        """Of devices ``rows``, those that can start a job now (online, charge left), each
        as (row, its energy so far (J), when its session ends (s), what its battery holds (J;
        inf: mains), its FLOP/s)."""
        world = self.world
        dyn = world.dynamics
        timeline = dyn.timeline
        timeline.advance(now)
        on = np.array([r for r in rows if timeline.online[r]], dtype=np.intp)
        if not len(on):
            return []
        self._book_selected(on.tolist(), now)
        node_j = world.meter.node_j_of(on, now)
        left = np.full(len(on), math.inf)
        if dyn.batteries.any:
            left = np.nan_to_num(world.battery_left_of(on, now, node_j), nan=math.inf)
        ok = left > 0.0
        return list(zip(on[ok].tolist(), node_j[ok].tolist(),
                        timeline.next_change_s[on[ok]].tolist(), left[ok].tolist(),
                        self.flops[on[ok]].tolist(), strict=True))

    def started(self, job: Job) -> None:
        self.live.setdefault(job.row, []).append(job)

    def ended_job(self, job: Job, now_s: float, dropped: bool) -> None:
        """Job ``job`` arrived at its edge or dropped out at ``now_s`` (s)."""
        self.ended.append(job)
        if dropped:
            self.dropped.append(job)
            if job.participant.battery_out:  # (offline for good from its stop)
                self.world.dynamics.timeline.kill(job.row, now_s)

    def _book_selected(self, rows: list[int], until_s: float) -> None:
        """Book devices ``rows``' selected time from what is booked up to ``until_s`` (s)."""
        booked, live, since = self.booked_s, self.live, self.since_s
        out_rows, out_s = [], []
        for r in rows:
            jobs = live.get(r)
            if jobs:
                out_rows.append(r)
                out_s.append(float(np.sum(selected_s_of(jobs, booked.get(r, since), until_s))))
            booked[r] = until_s
        if out_rows:
            self.world.meter.add_selected(np.array(out_rows, dtype=np.intp), np.array(out_s))

    def end_epoch(self, end_s: float) -> tuple[list[Job], dict[int, float]]:
        """The epoch closes at ``end_s`` (s): selected time booked, the timeline brought to
        the end, the batteries of the devices whose jobs ended checked at the next epoch's
        start; returns the jobs that dropped out since the last end and what their devices
        drew from each job's start (J, by row: wasted)."""
        world = self.world
        world.end_capacity_ticks()
        self._book_selected(sorted(self.live), end_s)
        world.dynamics.timeline.advance(end_s)
        if world.dynamics.batteries.any and self.ended:
            world.check_batteries_next(np.unique([j.row for j in self.ended]))
        dropped = self.dropped
        wasted = wasted_j_by_row(world.meter, dropped, end_s)
        self.live = {}
        for e in self.tiered.edges:  # (the jobs still in flight belong to the next epoch too)
            for j in e.buffer.jobs.values():
                self.live.setdefault(j.row, []).append(j)
        self.booked_s, self.since_s = {}, end_s
        self.ended, self.dropped = [], []
        return dropped, wasted


class _EdgeBuffer(UpdateBuffer):
    """An edge's buffer over its devices in a changing world: the star's
    (netsim.dynamics.buffered), telling :class:`_Changing` of every job that arrives or drops
    out as it does."""

    def __init__(self, env: simpy.Environment, busy: np.ndarray, changing: _Changing) -> None:
        super().__init__(env, busy)
        self.changing = changing

    def drop(self, key: Any, now_s: float) -> None:
        job = self.jobs[key]
        super().drop(key, now_s)
        self.changing.ended_job(job, now_s, dropped=True)

    def land(self, key: int, now_s: float) -> None:
        job = self.jobs[key]
        super().land(key, now_s)
        self.changing.ended_job(job, now_s, dropped=False)
