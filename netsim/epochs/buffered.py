"""A buffered asynchronous epoch (docs/async.md): the decision's participants start jobs
from the current model version, jobs from earlier epochs go on, and the epoch ends at the
aggregation that follows the K-th buffered update (or once nothing is in flight, or at the
training deadline). Jobs outlive the epoch (netsim.dynamics.buffered): played in arrays
where the run's can be (netsim.epochs.buffered_arrays), else as guarded SimPy events. Entry
point :func:`run`."""

from __future__ import annotations

import math

import numpy as np

from netsim.dynamics.buffered import Job, selected_s_of, wasted_j_by_row
from netsim.dynamics.epoch import GuardedParticipant
from netsim.energy import EnergyTotals
from netsim.epochs.buffered_arrays import BufferedPlayer
from netsim.epochs.outcome import EpochOutcome
from netsim.epochs.shared import EpochWorld
from netsim.policy import Decision


def run(world: EpochWorld, decision: Decision) -> EpochOutcome:
    """One asynchronous epoch: the decision's participants start jobs from the current
    model version, jobs from earlier epochs go on, and the epoch ends at the aggregation
    that follows the K-th buffered update (or once nothing is in flight, or at the
    training deadline). In arrays where the run's jobs can play there
    (netsim.epochs.buffered_arrays), else as guarded SimPy events."""
    env, v, dyn, buf = world.env, decision.variant, world.dynamics, world.buffer
    player = _player(world)
    world.epochs_by_path["events" if player is None else "arrays"] += 1
    unsent = world.network.unsent_j if player is None else (lambda: player.unsent_j(env.now))
    start = env.now
    wait, ahead = world.take_wait()
    before = wait.totals() if wait is not None else world.meter.totals(start)
    ahead_before = ahead if wait is not None else unsent()
    if player is not None:  # (the capacities begin_epoch set now: the flows present re-shared)
        player.sync(start)
    if decision.participants:
        _start_jobs(world, decision, start, player)
    # every job of the epoch (those in flight, then those it started), for the selected time
    live = list(buf.jobs.values()) if world.dynamic else []
    n = len(decision.participants)
    k, deadline_at = int(decision.buffer_updates or 1), float(world.scenario.training.deadline_s)
    if player is None:
        closed = buf.open(k, decision.max_staleness, deadline_at)
        world.arm_capacity_ticks()
        if not closed.triggered:
            env.run(until=closed)
    else:
        buf.configure(k, decision.max_staleness)
        player.arm_ticks(start)
        close_s = player.play_to_close(start, deadline_at)
        if close_s > env.now:
            env.run(until=close_s)
    updates = buf.take()
    world.aggregate(world.model.workload(v), len(updates),
                    None if player is None else player.play_until)
    world.end_capacity_ticks()
    buf.aggregated()
    end = env.now
    if player is not None:
        player.flush()
    arrived, discarded, dropped = buf.drain()
    for job in dropped:
        if job.participant.battery_out:
            dyn.timeline.kill(job.row, float(job.ended_s if job.ended_s is not None else end))
    if arrived:
        p = [j.participant for j in arrived]
        world.measure([j.row for j in arrived], [j.flop_per_s for j in arrived],
                      [q.down_bps for q in p], [q.up_bps for q in p])
    if world.dynamic:  # selected: from a job's start (or the epoch's) to its end (or the
        # epoch's, or when its device went offline); every job of the epoch is in ``live``
        world.meter.add_selected(np.array([j.row for j in live], dtype=np.intp),
                                 selected_s_of(live, start, end))
        dyn.timeline.advance(end)
    energy = world.meter.totals(end) - before
    # transfers outlive epochs: an epoch is charged the bits sent in it (the ledger books a
    # transfer's bits at its start)
    energy = EnergyTotals(energy.time_s, energy.compute_j,
                          energy.communication_j - (unsent() - ahead_before), energy.idle_j,
                          energy.sleep_j, energy.radio_j)
    if dyn.batteries.any and (arrived or dropped):  # (checked at the next epoch's start)
        world.check_batteries_next(np.array([j.row for j in arrived + dropped], dtype=np.intp))
    wasted_j = wasted_j_by_row(world.meter, discarded + dropped, end)
    counted: dict[str, int] = {}
    for u in updates:
        counted[u.device] = counted.get(u.device, 0) + u.samples
    return EpochOutcome(start, end, energy, counted, tuple(j.device for j in dropped),
                        tuple(j.device for j in discarded), wasted_j, tuple(updates), n,
                        buf.in_flight)


_FEW_ROWS = 8
"""Participants up to which :func:`_start_jobs` reads their figures one by one."""


def _player(world: EpochWorld) -> BufferedPlayer | None:
    """The run's array player (built at its first buffered epoch), or None: events."""
    if world.buffered_player is None:
        world.buffered_player = BufferedPlayer.of(world) or False
    return world.buffered_player or None


def _start_jobs(world: EpochWorld, decision: Decision, start: float,
                player: BufferedPlayer | None) -> list[Job]:
    """Start a job for each of the decision's participants now, from the current model
    version (guarded participants: they drop out when their device goes offline or its
    battery empties; ``player``: played in arrays); returns the jobs."""
    env, v, dyn, t, buf = world.env, decision.variant, world.dynamics, world.devices, world.buffer
    nbytes, fps = world.model.model_bytes(v), world.model.flop_per_sample(v)
    flops = t.flop_per_s * dyn.compute_factors() if dyn.varies_compute else t.flop_per_s
    n, index = len(decision.participants), t.index
    row_list = [index[d] for d in decision.participants]
    rows = np.array(row_list, dtype=np.intp)

    def pick(values: np.ndarray) -> list[float]:  # (a few rows: read one by one, cheaper)
        return [values.item(r) for r in row_list] if n <= _FEW_ROWS else values[rows].tolist()

    samples = list(decision.participants.values())
    job_flops = pick(flops)
    compute = [float(s) * fps / f for s, f in zip(samples, job_flops, strict=True)]
    node_j = world.meter.node_j_of(rows, start)
    node_before = node_j.tolist()
    off = pick(dyn.timeline.next_change_s)
    full = [math.inf] * n
    if dyn.batteries.any:
        full = np.nan_to_num(world.battery_left_of(rows, start, node_j), nan=math.inf).tolist()
    idle_w, busy_w = pick(t.power_idle_w), pick(t.power_busy_w)
    own = pick(world.own_up_j_per_bit)
    jobs = []
    with world.network.batch() if player is None else player.starting():
        for k, (dev, r) in enumerate(zip(decision.participants, row_list, strict=True)):
            job = Job(buf.new_key(), dev, r, int(samples[k]), buf.version, start,
                      node_before[k], job_flops[k])
            buf.add(job)
            jobs.append(job)
            job.participant = player.start(
                job, nbytes, compute[k], start, off[k], full[k], idle_w[k], busy_w[k], own[k]
            ) if player is not None else GuardedParticipant(
                env, world.network, world.meter, buf, job.key, r, nbytes, compute[k],
                world.routes_down[r], world.routes_up[r], off[k], full[k], idle_w[k],
                busy_w[k], own[k])
    return jobs
