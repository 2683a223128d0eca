"""An epoch of the changing world (netsim.dynamics, docs/dynamics.md): played forward in
arrays, its participants' stops included (a session that ends, a battery that empties, the
epoch's deadline or its ``keep_updates``-th update closing it: each one more piece boundary
of the phase it falls in, netsim.epochs.stopping; capacity changes, known in advance, are
played across piece by piece), else as guarded SimPy events (netsim.dynamics.epoch) in which
participants drop out and links are re-shared: clusters, transfers still moving, per-device
workloads, or a piece the arrays cannot play (two binding constraints that do not nest, a
contended medium past its onset). Entry point :func:`run`."""

from __future__ import annotations

import math

import numpy as np

from netsim.dynamics.epoch import GuardedBarrier, GuardedParticipant, cancel_all, selected_s
from netsim.epochs import clusters
from netsim.epochs.outcome import EpochOutcome
from netsim.epochs.shared import EpochWorld
from netsim.epochs.stopping import StoppingEpoch, book_stopping, measure_stopping, play_stopping
from netsim.fastepoch import CapacityPieces
from netsim.policy import Decision
from netsim.workload import Workload


def run(world: EpochWorld, decision: Decision) -> EpochOutcome:
    """One epoch in a changing world: played forward in arrays when nothing changes before
    its last update arrives (no session ends, no battery empties, no update cut by
    ``keep_updates`` or ``epoch_deadline_s``; the transfers are played across capacity
    changes piece by piece, each piece meeting the array path's conditions), else as guarded
    SimPy events (netsim.dynamics.epoch) in which participants drop out and links are
    re-shared."""
    env, dyn = world.env, world.dynamics
    start = env.now
    wait, _ = world.take_wait()  # (a wait belongs to the epoch)
    before = wait.totals() if wait is not None else world.meter.totals(start)
    work = world.workload_of(decision)
    nbytes, fps = work.download_bytes, work.flop_per_sample
    flops = world.devices.flop_per_s
    if dyn.varies_compute:
        flops = flops * dyn.compute_factors()
    n, index = len(decision.participants), world.devices.index
    rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
    samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
    cluster_rows = [index[dev] for c in decision.clusters for dev in c.devices]
    taking_part = np.unique(np.concatenate([rows, np.array(cluster_rows, dtype=np.intp)]))
    node_before = wait.node_j[taking_part] if wait is not None \
        else world.meter.node_j_of(taking_part, start)
    compute_s = samples * fps / flops[rows]
    if work.by_device is not None:  # (each participant's own FLOP)
        compute_s = np.fromiter((work.by_device[d].flop for d in decision.participants),
                                dtype=float, count=n) / flops[rows]
    offline_at = dyn.timeline.next_change_s[rows]
    left = np.full(n, math.inf)
    if dyn.batteries.any:
        left = np.nan_to_num(world.battery_left_of(rows, start), nan=math.inf)
    deadline_at = start + decision.epoch_deadline_s if decision.epoch_deadline_s else math.inf
    why = _why_events(world, decision, n, work)
    plan = None
    if why is None:
        plan = _arrays_plan(world, rows, compute_s, nbytes, offline_at, left, deadline_at,
                            decision.keep_updates)
        if plan is None:
            why = "a piece the arrays cannot play"
    world.epochs_by_path["arrays" if plan is not None else "events"] += 1
    if why is not None:
        world.events_why[why] = world.events_why.get(why, 0) + 1
    if plan is not None:
        counted, dropped, late, stopped = _play_arrays(world, decision, plan, rows, nbytes,
                                                       flops, start)
    else:
        counted, dropped, late, stopped = _run_guarded(world,
            decision, rows, compute_s, work, offline_at, left, deadline_at, flops)
    n_kept = (len(decision.participants) + len(decision.clusters)) if counted is None \
        else len(counted)
    world.aggregate(work, n_kept,
                    devices=list(decision.participants) if counted is None else counted)
    end = env.now
    # selected until it stopped, else until the epoch's end or, if earlier, until it went
    # offline after its update had left (an offline device draws nothing)
    selected = selected_s(start, end, offline_at, stopped)
    world.meter.add_selected(np.concatenate([rows, np.array(cluster_rows, dtype=np.intp)]),
                            np.concatenate([selected, np.full(len(cluster_rows), end - start)]))
    dyn.timeline.advance(end)
    energy = world.meter.totals(end) - before
    # devices that took part: their batteries are checked at the next epoch's start
    world.check_batteries_next(taking_part)
    wasted_rows = np.array([index[d] for d in dropped + late], dtype=np.intp)
    wasted = world.meter.node_j_of(wasted_rows, end) \
        - node_before[np.searchsorted(taking_part, wasted_rows)]
    return EpochOutcome(start, end, energy, counted, tuple(dropped), tuple(late),
                        dict(zip(wasted_rows.tolist(), wasted.tolist(), strict=True)))


def _why_events(world: EpochWorld, decision: Decision, n: int, work: Workload) -> str | None:
    """Why the epoch cannot play in arrays whatever its timeline (None: it may)."""
    if not world.fast_epochs:
        return "fast_epochs=False"
    if not n or decision.clusters:
        return "model-parallel clusters"
    if world.network.active_flows:
        return "transfers still moving"
    if not work.symmetric:
        return "a per-device workload"
    return None


def _arrays_plan(world: EpochWorld, rows: np.ndarray, compute_s: np.ndarray, nbytes: float,
                 offline_at: np.ndarray, left_j: np.ndarray, deadline_at: float,
                 keep: int | None = None) -> StoppingEpoch | None:
    """The epoch's timeline in arrays with its participants' stops (sessions that end,
    batteries that empty, the deadline, the close at the ``keep``-th update:
    netsim.epochs.stopping). Capacity changes are known
    in advance (piecewise constant): the transfers are played piece by piece across them
    (:func:`netsim.fastepoch.play_phase_stopping`), each piece meeting the array path's
    conditions, else None (events)."""
    down, up = world.current_tables()
    capacity, t = world.dynamics.capacity, world.devices
    return play_stopping(world.env.now, rows, compute_s, 8.0 * nbytes, down, up, world.caps_now,
                         None if capacity.static else _pieces(world), t.onset_flows,
                         offline_at, left_j, t.power_idle_w[rows], t.power_busy_w[rows],
                         world.own_up_j_per_bit[rows], deadline_at, keep)


def _play_arrays(world: EpochWorld, decision: Decision, plan: StoppingEpoch, rows: np.ndarray,
                 nbytes: float, flops: np.ndarray, start: float
                 ) -> tuple[dict[str, int] | None, list[str], list[str], np.ndarray]:
    """Book, measure and run the clock to the close of an epoch played in arrays; returns
    what :func:`_run_guarded` returns (counted updates, None: every participant's; dropped;
    late; when each dropped participant stopped)."""
    env, dyn = world.env, world.dynamics
    book_stopping(world, plan, rows, nbytes, None if dyn.capacity.static else _pieces(world))
    measure_stopping(world, plan, rows, flops[rows], nbytes, start)
    if plan.capacity_changes:  # (the links' capacities as the events leave them)
        world.arm_capacity_ticks()
    if plan.close_s > env.now:
        env.run(until=plan.close_s)
    if plan.capacity_changes:
        world.end_capacity_ticks()
    for r, at in zip(rows[plan.battery_out].tolist(), plan.stopped_s[plan.battery_out].tolist(),
                     strict=True):
        dyn.timeline.kill(r, at)
    ids = list(decision.participants)
    dropped = [ids[k] for k in np.flatnonzero(plan.dropped).tolist()]
    late = [ids[k] for k in np.flatnonzero(plan.late).tolist()]
    counted = None
    if dropped or late:
        kept = plan.reported & ~plan.late
        counted = {ids[k]: decision.participants[ids[k]] for k in np.flatnonzero(kept).tolist()}
    return counted, dropped, late, np.where(plan.dropped, plan.stopped_s, math.nan)


def _pieces(world: EpochWorld) -> CapacityPieces:
    """The world's capacities over time from now on, as the capacity ticks set them in the
    events (:meth:`netsim.engine.World.arm_capacity_ticks`): every constraint's capacity in
    force at an instant (s; those in force now until the schedule's next change) and the
    next change after it."""
    capacity, caps_now, caps_until = world.dynamics.capacity, world.caps_now, world.caps_until

    def capacity_at(t_s: float) -> np.ndarray:
        if t_s < caps_until:  # the same piece: the capacities in force now
            return caps_now
        return world.constraint_caps(capacity.at(t_s))

    def next_change_s(t_s: float) -> float:
        return max(capacity.next_change_s(t_s), math.nextafter(t_s, math.inf))

    return CapacityPieces(capacity_at, next_change_s)


def _run_guarded(world: EpochWorld, decision: Decision, rows: np.ndarray, compute_s: np.ndarray,
                 work: Workload, offline_at: np.ndarray, left_j: np.ndarray,
                 deadline_at: float, flops: np.ndarray
                 ) -> tuple[dict[str, int], list[str], list[str], np.ndarray]:
    """The epoch as guarded events up to its close; returns (counted updates, dropped,
    late, when each participant stopped (s; NaN: it did not))."""
    env, t, dyn = world.env, world.devices, world.dynamics
    nbytes, fps = work.download_bytes, work.flop_per_sample
    barrier = GuardedBarrier(env, len(rows) + len(decision.clusters), decision.keep_updates,
                             deadline_at)
    parts = []
    with world.network.batch():
        for k, (dev, r) in enumerate(zip(decision.participants, rows.tolist(), strict=True)):
            down_bytes, up_bytes = work.bytes_of(dev)
            parts.append(GuardedParticipant(
                env, world.network, world.meter, barrier, dev, r, down_bytes,
                float(compute_s[k]), world.routes_down[r], world.routes_up[r],
                float(offline_at[k]), float(left_j[k]), float(t.power_idle_w[r]),
                float(t.power_busy_w[r]), float(world.own_up_j_per_bit[r]), up_bytes))
    for c, cluster in enumerate(decision.clusters):
        env.process(clusters.cluster(world, cluster, fps, nbytes, barrier, ("cluster", c)))
    world.arm_capacity_ticks()
    env.run(until=barrier.event)
    world.end_capacity_ticks()
    dropped = [p for p in parts if p.phase == "gone"]
    late = cancel_all(parts, lambda key: key in barrier.kept)
    for p in dropped:
        if p.battery_out:
            dyn.timeline.kill(p.node, float(p.stopped_s or env.now))
    finished = [p for p in parts if not math.isnan(p.up_bps)]
    world.measure(np.array([p.node for p in finished], dtype=np.intp),
                  flops[[p.node for p in finished]],
                  np.array([p.down_bps for p in finished]),
                  np.array([p.up_bps for p in finished]))
    counted = {p.key: decision.participants[p.key] for p in parts if p.key in barrier.kept}
    for c, cluster in enumerate(decision.clusters):
        if ("cluster", c) in barrier.kept:
            head = cluster.devices[0]
            counted[head] = counted.get(head, 0) + cluster.samples
    stopped = np.array([p.stopped_s if p.stopped_s is not None and not p.late else math.nan
                        for p in parts], dtype=float)
    return counted, [p.key for p in dropped], [p.key for p in late], stopped
