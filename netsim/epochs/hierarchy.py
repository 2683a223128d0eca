"""A synchronous hierarchical epoch (docs/hierarchical.md): one cloud round as phases of the
plain epoch, played by the same players. Entry point :func:`run`.

netsim's formalization (HierFAVG, Liu et al. ICC 2020, writes its algorithm in global steps;
timing is ours):

1. ``edge_rounds`` (kappa_2) **edge rounds**. In each, every participant downloads the model
   from its edge, trains its samples (its local epochs: kappa_1) and uploads its update; each
   edge aggregates its participants' updates (2 x params FLOP per update on the edge) as soon
   as the last has arrived. An edge round is a plain epoch on the routes between the devices
   and their edges: played forward in arrays (:func:`netsim.fastepoch.play_plain_epoch`,
   booked by :func:`netsim.epochs.arrays.book`) when it can be, else as the event path's
   participants (:class:`netsim.epoch.Participant`), one barrier per edge. The next round
   starts when every edge has aggregated (a phase ends with its slowest member).
2. **Backhaul up**: every edge that took part uploads its model to the cloud at once, shared
   max-min on the backhaul (:func:`netsim.fastepoch.play_phase`, else events).
3. **Cloud aggregation**: 2 x params FLOP per edge model on the aggregator.
4. **Backhaul down**: the cloud sends the new model to those edges at once.

On private links this is the closed form the tests check: kappa_2 x max over edges (max over
its devices (down + compute + up) + edge aggregation) + backhaul up (max-min at the cloud
link) + cloud aggregation + backhaul down (tests/test_hierarchy.py).
"""

from __future__ import annotations

import numpy as np
import simpy

from netsim.epoch import EpochBarrier, EpochContext, Participant
from netsim.epochs.arrays import book, measure
from netsim.epochs.outcome import EdgeUpdate, EpochOutcome, RoundUpdates, TierOutcome
from netsim.epochs.shared import EpochWorld
from netsim.fastepoch import RouteTable, play_phase, play_plain_epoch
from netsim.policy import Decision


def run(world: EpochWorld, decision: Decision) -> EpochOutcome:
    """One synchronous cloud round of ``decision.edge_rounds`` edge rounds (module
    docstring); its outcome's ``tiers`` hold the edges' updates the cloud aggregated."""
    env, tiers, meter = world.env, world.tiers, world.meter
    start = env.now
    before = meter.totals(start)
    nodes = tiers.nodes
    edges_before = meter.node_j_of(nodes, start)
    cloud_before = meter.node_j_of(np.array([world.aggregator_row]), start)
    work = world.workload_of(decision)
    n, index = len(decision.participants), world.devices.index
    rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
    samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
    edge_of = world.edges_of(decision, rows)
    active = np.unique(edge_of[rows])
    phases: list[dict] = []
    for j in range(int(decision.edge_rounds or 1)):
        t0 = env.now
        path = _edge_round(world, rows, samples, edge_of, work)
        phases.append({"type": "edge-round", "tier": "device-edge", "round": j + 1,
                       "start_s": t0, "end_s": env.now, "path": path,
                       "edges": int(len(active)), "participants": n})
    nbytes = work.upload_bytes
    down_e, up_e = world.tier_routes.edge_tables()
    t0 = env.now
    _backhaul(world, active, up_e, nbytes, False)
    phases.append({"type": "backhaul-up", "tier": "edge-cloud", "start_s": t0, "end_s": env.now,
                   "edges": int(len(active))})
    t0 = env.now
    world.aggregate(work, len(active))
    phases.append({"type": "cloud-aggregation", "tier": "cloud", "start_s": t0,
                   "end_s": env.now, "edges": int(len(active))})
    t0 = env.now
    _backhaul(world, active, down_e, work.download_bytes, True)
    phases.append({"type": "backhaul-down", "tier": "edge-cloud", "start_s": t0,
                   "end_s": env.now, "edges": int(len(active))})
    end = env.now
    energy = meter.totals(end) - before
    down_j, up_j = world.tier_routes.edge_backhaul_j_per_bit()
    rounds = _edge_updates(world, decision, rows, edge_of, active,
                           int(decision.edge_rounds or 1))
    return EpochOutcome(
        start, end, energy, counted=None, tiers=TierOutcome(rounds, int(decision.edge_rounds or 1)),
        bytes_backhaul=float(len(active)) * (work.upload_bytes + work.download_bytes),
        energy_backhaul_j=8.0 * float(np.sum(up_j[active]) * work.upload_bytes
                                      + np.sum(down_j[active]) * work.download_bytes),
        energy_edges_j=float(np.sum(meter.node_j_of(nodes, end) - edges_before)),
        energy_cloud_j=float(meter.node_j_of(np.array([world.aggregator_row]), end)[0]
                             - cloud_before[0]),
        phases=tuple(phases))


def _edge_updates(world: EpochWorld, decision: Decision, rows: np.ndarray,
                  edge_of: np.ndarray, active: np.ndarray, rounds: int
                  ) -> tuple[EdgeUpdate, ...]:
    """Per edge that took part, its participants' updates in each edge round (all fresh)."""
    ids, tiers = world.devices.ids, world.tiers
    mine = edge_of[rows]
    order = np.argsort(mine, kind="stable")
    cuts = np.searchsorted(mine[order], active[1:])
    samples = np.fromiter(decision.participants.values(), dtype=np.int64, count=len(rows))
    out = []
    for k, group in zip(active.tolist(), np.split(order, cuts), strict=True):
        updates = RoundUpdates(tuple(ids[r] for r in rows[group].tolist()), samples[group],
                               np.zeros(len(group), dtype=np.int64))
        out.append(EdgeUpdate(tiers.ids[k], (updates,) * rounds))
    return tuple(out)


def _edge_round(world: EpochWorld, rows: np.ndarray, samples: np.ndarray,
                edge_of: np.ndarray, work) -> str:
    """One edge round (module docstring, 1): the participants' transfers to and from their
    edges and their training, then each edge's aggregation; the clock ends when the last
    edge has aggregated. Returns the path it played on ("arrays" or "events")."""
    env, tiers = world.env, world.tiers
    now = float(env.now)
    nbytes, fps = work.download_bytes, work.flop_per_sample
    compute_s = samples * fps / world.devices.flop_per_s[rows]
    down, up = world.tier_routes.device_tables(rows, edge_of)
    mine = edge_of[rows]
    plan = None
    if world.fast_epochs and world.network.active_flows == 0 and work.symmetric and len(rows):
        capacity = world.static_tables()[2]
        plan = play_plain_epoch(now, np.arange(len(rows)), compute_s, 8.0 * nbytes, down, up,
                                capacity, onset_flows=world.devices.onset_flows)
    if plan is not None:
        book(world, plan, rows, nbytes, tables=(down, up))
        measure(world, plan, rows, world.devices.flop_per_s[rows], nbytes, now,
                (down.latency_s, up.latency_s))
        arrived = np.full(tiers.n, -np.inf)
        np.maximum.at(arrived, mine, plan.upload_arrival_s)
        path = "arrays"
    else:
        routes = world.tier_routes
        down_r = [routes.device_route(r, k, True) for r, k in zip(rows.tolist(), mine.tolist(),
                                                                    strict=True)]
        up_r = [routes.device_route(r, k, False) for r, k in zip(rows.tolist(), mine.tolist(),
                                                                   strict=True)]
        arrived = _edge_round_events(world, rows, compute_s, mine, down_r, up_r, work)
        path = "events"
    world.epochs_by_path[path] += 1
    took = np.where(np.isfinite(arrived), 0.0, np.nan)
    active = np.flatnonzero(np.isfinite(arrived))
    counts = np.bincount(mine, minlength=tiers.n)
    took[active] = [work.aggregation_flop(int(counts[k])) / float(tiers.flop_per_s[k])
                    for k in active.tolist()]
    if len(active):
        world.meter.add_busy_many(tiers.nodes[active].tolist(), took[active].tolist())
        end = float(np.max(arrived[active] + took[active]))
        if end > env.now:
            env.run(until=end)
    return path


def _edge_round_events(world: EpochWorld, rows: np.ndarray, compute_s: np.ndarray,
                       mine: np.ndarray, down_r: list, up_r: list, work) -> np.ndarray:
    """An edge round's participants as the event path's callback chains, one barrier per
    edge; returns, per edge, when its last update arrived (s; -inf: none of its devices
    took part). The clock ends at the last arrival."""
    env, network, meter = world.env, world.network, world.meter
    counts = np.bincount(mine, minlength=world.tiers.n)
    barriers = {k: EpochBarrier(env, int(counts[k])) for k in np.flatnonzero(counts).tolist()}
    contexts = {k: EpochContext(env, network, meter, work.download_bytes, b, work.upload_bytes)
                for k, b in barriers.items()}
    with network.batch():
        for j, (r, k) in enumerate(zip(rows.tolist(), mine.tolist(), strict=True)):
            Participant(contexts[k], r, float(compute_s[j]), down_r[j], up_r[j])
    if barriers:
        env.run(until=simpy.AllOf(env, [b.event for b in barriers.values()]))
    arrived = np.full(world.tiers.n, -np.inf)
    for k, b in barriers.items():
        arrived[k] = b.latest_s
    return arrived


def _backhaul(world: EpochWorld, active: np.ndarray, table: RouteTable, nbytes: float,
              to_edge: bool) -> None:
    """The edges ``active`` each send (or receive, ``to_edge``) ``nbytes`` over the backhaul
    at once, shared max-min (module docstring, 2 and 4): in arrays by
    :func:`netsim.fastepoch.play_phase` when every transfer crosses at most one binding
    constraint, else as flows of the network. The clock ends at the last arrival."""
    env = world.env
    if not len(active):
        return
    now = float(env.now)
    hops = table.hops_of(active)
    played = None
    if world.fast_epochs and world.network.active_flows == 0:
        played = play_phase(np.full(len(active), now), active, table, 8.0 * nbytes,
                            world.static_tables()[2], hops, world.devices.onset_flows)
    if played is not None:
        arrival = played[0] + table.latency_s[active]
        moving = active[table.hop_start[active + 1] > table.hop_start[active]]
        world.network.book(table.route_id[moving].tolist(), [nbytes] * len(moving))
        _book_radios(world, table, active, now, arrival)
        end = float(np.max(arrival))
        world.epochs_by_path["arrays"] += 1
    else:
        routes = world.tier_routes.edge_routes(to_edge)
        barrier = EpochBarrier(env, len(active))
        with world.network.batch():
            for k in active.tolist():
                world.network.send_on(routes[k], nbytes, barrier.arrived)
        env.run(until=barrier.event)
        end = float(env.now)
        world.epochs_by_path["events"] += 1
    if end > env.now:
        env.run(until=end)


def _book_radios(world: EpochWorld, table: RouteTable, rows: np.ndarray, start_s: float,
                 arrival_s: np.ndarray) -> None:
    """A backhaul phase's radio periods (an edge's route may end on a radio link), from the
    phase's start to each transfer's arrival, as :func:`netsim.fastepoch.book_radios` books
    a plain epoch's."""
    radio, starts, ids = world.network.radio, table.radio_start, table.radio_ids
    if not radio or starts is None or ids is None or not len(ids):
        return
    counts = starts[rows + 1] - starts[rows]
    at = np.repeat(starts[rows] - (np.cumsum(counts) - counts), counts) \
        + np.arange(int(counts.sum()))
    radio.play(ids[at], np.full(len(at), start_s), np.repeat(arrival_s, counts))
