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

These epochs run as SimPy events only (a static world; no array path), and on the surrogate
only: the real backend trains synchronous tiers.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import simpy

from netsim.dynamics.buffered import Job, UpdateBuffer
from netsim.dynamics.epoch import GuardedParticipant
from netsim.epochs.outcome import EdgeUpdate, EpochOutcome, RoundUpdates, TierOutcome
from netsim.epochs.shared import EpochWorld
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
        self.edges = [EdgeState(UpdateBuffer(world.env, busy_devices))
                      for _ in range(world.tiers.n)]
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
    cloud = tiered.cloud
    start = env.now
    before = meter.totals(start)
    unsent_before = world.network.unsent_j()
    edges_before = meter.node_j_of(tiers.nodes, start)
    cloud_before = meter.node_j_of(np.array([world.aggregator_row]), start)
    work = world.workload_of(decision)
    n, index = len(decision.participants), world.devices.index
    rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
    edge_of = world.edges_of(decision, rows)
    mine = edge_of[rows]
    started_edges = []
    for k in np.unique(mine).tolist():
        state = tiered.edges[k]
        if state.job is None:  # (the job is in flight from now: the buffer sees it at once)
            state.job = Job(cloud.new_key(), tiers.ids[k], k, 0, cloud.version, float(start),
                            float(meter.node_j_of(np.array([tiers.nodes[k]]), start)[0]),
                            float(tiers.flop_per_s[k]))
            cloud.add(state.job)
            started_edges.append(k)
            env.process(_edge_job(world, tiered, decision, k, rows[mine == k], work))
    k_cloud = int(decision.buffer_updates or 1)
    closed = cloud.open(k_cloud, decision.max_staleness,
                        float(world.scenario.training.deadline_s))
    if not closed.triggered:
        env.run(until=closed)
    updates = cloud.take()
    taken = cloud.taken
    world.aggregate(work, len(updates))
    cloud.aggregated()
    end = env.now
    arrived, discarded, _ = cloud.drain()
    edge_updates = tuple(EdgeUpdate(tiers.ids[j.row], tiered.edge_work.pop(j.key, ()),
                                    j.staleness) for j in taken)
    for j in discarded:
        tiered.edge_work.pop(j.key, None)
    energy = meter.totals(end) - before
    # transfers outlive epochs: an epoch is charged the bits sent in it (docs/async.md)
    energy = replace(energy, communication_j=energy.communication_j
                     - (world.network.unsent_j() - unsent_before))
    down_j, up_j = world.tier_routes.edge_backhaul_j_per_bit()
    energy_backhaul = 8.0 * (float(np.sum(down_j[started_edges])) * work.download_bytes
                             + float(np.sum(up_j[[j.row for j in arrived]]))
                             * work.upload_bytes)
    return EpochOutcome(
        start, end, energy, counted=None, late=tuple(tiers.ids[j.row] for j in discarded),
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
    for _ in range(int(decision.edge_rounds or 1)):
        _start_devices(world, buf, k, start_now, samples, work)
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
        rounds.append(RoundUpdates.of(updates))
        index = world.devices.index  # (a device's waiting update and a fresh one: once)
        start_now = [r for r in dict.fromkeys(index[u.device] for u in updates)
                     if r in samples and not world.busy[r]]
    yield network.transfer(node, cloud_id, work.upload_bytes)
    tiered.edge_work[job.key] = tuple(rounds)
    state.job = None
    cloud.arrived(float(env.now), job.key)


def _start_devices(world: EpochWorld, buf: UpdateBuffer, k: int, rows: list[int],
                   samples: dict[int, int], work: Any) -> None:
    """Device jobs of edge ``k`` for ``rows`` from the edge's current version (the event
    path's guarded participants on the routes to and from the edge)."""
    env, t, routes = world.env, world.devices, world.tier_routes
    with world.network.batch():
        for r in rows:
            job = Job(buf.new_key(), t.ids[r], r, samples[r], buf.version, float(env.now),
                      float(world.meter.node_j_of(np.array([r]), env.now)[0]),
                      float(t.flop_per_s[r]))
            buf.add(job)
            job.participant = GuardedParticipant(
                env, world.network, world.meter, buf, job.key, r, work.download_bytes,
                samples[r] * work.flop_per_sample / float(t.flop_per_s[r]),
                routes.device_route(r, k, True), routes.device_route(r, k, False), math.inf,
                math.inf, float(t.power_idle_w[r]), float(t.power_busy_w[r]),
                float(world.own_up_j_per_bit[r]), work.upload_bytes)
