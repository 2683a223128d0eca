"""A synchronous hierarchical epoch (docs/hierarchical.md): one cloud round as phases of the
plain epoch, played by the same players. Entry point :func:`run`.

netsim's formalization (HierFAVG, Liu et al. ICC 2020, writes its algorithm in global steps;
timing is ours):

1. Each edge runs its ``edge_rounds`` (kappa_2) **edge rounds** at its own pace (no barrier
   between edges, issue 56). In each, every participant of the edge downloads the model
   from it, trains its samples (its local epochs: kappa_1) and uploads its update; the edge
   aggregates its participants' updates (2 x params FLOP per update on the edge) as soon as
   the last has arrived, and starts its next round when that is done. An edge round is a
   plain epoch on the routes between the devices and their edges: played forward in arrays
   (:func:`netsim.fastepoch.play_plain_epoch` with each flow's own start, booked by
   :func:`netsim.epochs.arrays.book`) when every round can be and no constraint is crossed
   by two edges' participants (then edges cannot meet: kappa_2 > 1 staggers them), else as
   one SimPy process per edge driving the event path's participants
   (:class:`netsim.epoch.Participant`).
2. **Backhaul up**: each edge uploads its model to the cloud when its last round is done,
   shared max-min on the backhaul with the others in flight (:func:`netsim.fastepoch
   .play_phase` with each edge's start, else flows of the network).
3. **Cloud aggregation** once every edge model has arrived (the cloud waits for all of
   them): 2 x params FLOP per edge model on the aggregator.
4. **Backhaul down**: the cloud sends the new model to those edges at once.

On private links this is the closed form the tests check: max over edges (kappa_2 x (max
over its devices (down + compute + up) + its aggregation) + its backhaul up) + cloud
aggregation + backhaul down (tests/test_hierarchy.py). Before issue 56 every edge round was a
global phase (the next started when every edge had aggregated): kappa_2 x max over edges.

In a changing world (netsim.dynamics; :func:`_run_changing`, docs/hierarchical.md, "In a
changing world") every edge round's participants are the star's guarded participants
(sessions that end, batteries that empty: the same stop rule and functions), on both paths;
a participant that stops is out of the cloud round, an edge with nobody left stops its rounds,
and the cloud aggregates the edge models that come (tests/test_edges_dynamics.py).
"""

from __future__ import annotations

import math

import numpy as np

from netsim.dynamics.epoch import (
    GuardedBarrier,
    GuardedParticipant,
    selected_s,
    stop_instant,
    stop_instants,
)
from netsim.epoch import EpochBarrier, EpochContext, Participant
from netsim.epochs.arrays import book, book_moving, measure
from netsim.epochs.outcome import EdgeUpdate, EpochOutcome, RoundUpdates, TierOutcome
from netsim.epochs.shared import EpochWorld
from netsim.epochs.stopping import StoppingEpoch, play_stopping
from netsim.fastepoch import (
    CapacityPieces,
    PlainEpoch,
    RouteTable,
    book_radios,
    play_phase,
    play_plain_epoch,
)
from netsim.policy import Decision
from netsim.workload import Workload


def run(world: EpochWorld, decision: Decision) -> EpochOutcome:
    """One synchronous cloud round of ``decision.edge_rounds`` edge rounds (module
    docstring); its outcome's ``tiers`` hold the edges' updates the cloud aggregated. In a
    changing world: :func:`_run_changing`."""
    if world.dynamic:
        return _run_changing(world, decision)
    env, tiers, meter = world.env, world.tiers, world.meter
    start = env.now
    before = meter.totals(start)
    nodes = tiers.nodes
    edges_before = meter.node_j_of(nodes, start)
    cloud_before = meter.node_j_of(np.array([world.aggregator_row]), start)
    work, kappa, rows, samples, edge_of = _round_inputs(world, decision)
    n = len(rows)
    active = np.unique(edge_of[rows])
    rounds = _EdgeRounds(world, rows, samples, edge_of, work, kappa)
    down_e, up_e = world.tier_routes.edge_tables()
    if rounds.in_arrays():
        path = "arrays"
        _backhaul(world, active, up_e, work.upload_bytes, False,
                  start_s=rounds.end_s[-1, active])
    else:
        path = "events"
        rounds.as_events(up_e)
    world.epochs_by_path[path] += kappa
    phases: list[dict] = [
        {"type": "edge-round", "tier": "device-edge", "round": j + 1,
         "start_s": float(np.min(rounds.start_s[j, active])),
         "end_s": float(np.max(rounds.end_s[j, active])), "path": path,
         "edges": int(len(active)), "participants": n} for j in range(kappa)]
    phases.append({"type": "backhaul-up", "tier": "edge-cloud",
                   "start_s": float(np.min(rounds.end_s[-1, active])), "end_s": env.now,
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
    updates = _edge_updates(world, decision, rows, edge_of, active, kappa)
    return EpochOutcome(
        start, end, energy, counted=None, tiers=TierOutcome(updates, kappa),
        bytes_backhaul=float(len(active)) * (work.upload_bytes + work.download_bytes),
        energy_backhaul_j=8.0 * float(np.sum(up_j[active]) * work.upload_bytes
                                      + np.sum(down_j[active]) * work.download_bytes),
        energy_edges_j=float(np.sum(meter.node_j_of(nodes, end) - edges_before)),
        energy_cloud_j=float(meter.node_j_of(np.array([world.aggregator_row]), end)[0]
                             - cloud_before[0]),
        phases=tuple(phases))


def _round_inputs(world: EpochWorld, decision: Decision
                  ) -> tuple[Workload, int, np.ndarray, np.ndarray, np.ndarray]:
    """A cloud round's workload, its kappa_2 (``decision.edge_rounds``), the participants'
    rows and samples (in the decision's order) and each device row's edge."""
    n, index = len(decision.participants), world.devices.index
    rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
    samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
    return (world.workload_of(decision), int(decision.edge_rounds or 1), rows, samples,
            world.edges_of(decision, rows))


def lower_bound_s(world: EpochWorld, decision: Decision) -> float:
    """A lower bound of :func:`run`'s duration (s) at a cost that follows the participants:
    the slowest edge's ``edge_rounds`` x its slowest participant's round with each transfer
    alone on its route to its edge (download, training, upload) and its backhaul up alone,
    plus the slowest backhaul down alone; aggregation left out. The run loop refuses a cloud round that cannot end by the
    deadline with it, before anything runs (the star's check: netsim.costs)."""
    n, index = len(decision.participants), world.devices.index
    if not n:
        return 0.0
    rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
    samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
    work = world.workload_of(decision)
    edge_of = world.edges_of(decision, rows)
    down, up = world.tier_routes.device_tables(rows, edge_of)
    round_s = 8.0 * work.download_bytes / down.cap_bps + down.latency_s \
        + samples * work.flop_per_sample / world.devices.flop_per_s[rows] \
        + 8.0 * work.upload_bytes / up.cap_bps + up.latency_s
    mine = edge_of[rows]
    slowest = np.full(world.tiers.n, -np.inf)  # per edge, its slowest participant's round
    np.maximum.at(slowest, mine, round_s)
    active = np.unique(mine)
    down_e, up_e = world.tier_routes.edge_tables()
    up_s = 8.0 * work.upload_bytes / up_e.cap_bps[active] + up_e.latency_s[active]
    down_s = 8.0 * work.download_bytes / down_e.cap_bps[active] + down_e.latency_s[active]
    return float(np.max(int(decision.edge_rounds or 1) * slowest[active] + up_s)) \
        + float(np.max(down_s))


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


class _EdgeRounds:
    """A cloud round's edge rounds (module docstring, 1): per round j and edge k when it
    started (``start_s[j, k]``) and when its aggregation ended (``end_s[j, k]``; NaN for an
    edge without participants), played in arrays (:meth:`in_arrays`) or as events
    (:meth:`as_events`, with the backhaul up)."""

    def __init__(self, world: EpochWorld, rows: np.ndarray, samples: np.ndarray,
                 edge_of: np.ndarray, work, kappa: int) -> None:
        self.world, self.rows, self.work, self.kappa = world, rows, work, kappa
        tiers = world.tiers
        self.mine = edge_of[rows]
        self.compute_s = samples * work.flop_per_sample / world.devices.flop_per_s[rows]
        self.tables = world.tier_routes.device_tables(rows, edge_of)
        counts = np.bincount(self.mine, minlength=tiers.n)
        self.active = np.flatnonzero(counts)
        self.took_s = np.zeros(tiers.n)  # each edge's aggregation of its round (s)
        self.took_s[self.active] = [work.aggregation_flop(int(counts[k]))
                                    / float(tiers.flop_per_s[k]) for k in self.active.tolist()]
        self.start_s = np.full((kappa, tiers.n), np.nan)
        self.end_s = np.full((kappa, tiers.n), np.nan)

    def _edges_apart(self) -> bool:
        """Whether no constraint is crossed by participants of two edges (then the edges'
        staggered rounds never meet, and each round can be played for every edge at once)."""
        edges = []
        hops = []
        for table in self.tables:
            owner, hop, _ = table.hops_of(np.arange(len(self.rows)))
            hops.append(hop)
            edges.append(self.mine[owner])
        pairs = np.unique(np.stack([np.concatenate(hops), np.concatenate(edges)]), axis=1)
        return not len(pairs[0]) or bool(np.all(np.diff(pairs[0]) > 0))

    def in_arrays(self) -> bool:
        """Play every round in arrays and book it, the clock left where it is (the backhaul
        is played from each edge's end); False, with nothing booked, where a round needs the
        event path."""
        world = self.world
        if not (world.fast_epochs and world.network.active_flows == 0 and self.work.symmetric
                and len(self.rows)) or (self.kappa > 1 and not self._edges_apart()):
            return False
        down, up = self.tables
        capacity = world.static_tables()[2]
        bits = 8.0 * self.work.download_bytes
        ready = np.full(world.tiers.n, float(world.env.now))
        plans = []
        for j in range(self.kappa):
            flow_start = ready[self.mine]
            plan = play_plain_epoch(flow_start, np.arange(len(self.rows)), self.compute_s,
                                    bits, down, up, capacity,
                                    onset_flows=world.devices.onset_flows)
            if plan is None:
                return False
            arrived = np.full(world.tiers.n, -np.inf)
            np.maximum.at(arrived, self.mine, plan.upload_arrival_s)
            self.start_s[j, self.active] = ready[self.active]
            ready[self.active] = arrived[self.active] + self.took_s[self.active]
            self.end_s[j, self.active] = ready[self.active]
            plans.append((plan, flow_start))
        nbytes, flops = self.work.download_bytes, world.devices.flop_per_s[self.rows]
        for plan, flow_start in plans:
            book(world, plan, self.rows, nbytes, tables=(down, up), start_s=flow_start)
            measure(world, plan, self.rows, flops, nbytes, flow_start,
                    (down.latency_s, up.latency_s))
        self._book_edges()
        return True

    def _book_edges(self) -> None:
        k = self.active
        self.world.meter.add_busy_many(self.world.tiers.nodes[k].tolist(),
                                       (self.kappa * self.took_s[k]).tolist())

    def _event_routes(self) -> tuple[list[int], list, list, list, EpochBarrier,
                                     list[np.ndarray]]:
        """What both event paths start from: the participants' rows, their download and
        upload routes to their edges, the edges' routes to the cloud, the cloud's barrier
        (one arrival per active edge) and each active edge's participants (positions)."""
        world = self.world
        routes = world.tier_routes
        rows, mine = self.rows.tolist(), self.mine.tolist()
        down_r = [routes.device_route(r, k, True) for r, k in zip(rows, mine, strict=True)]
        up_r = [routes.device_route(r, k, False) for r, k in zip(rows, mine, strict=True)]
        cloud = EpochBarrier(world.env, len(self.active))
        order = np.argsort(self.mine, kind="stable")
        members = np.split(order, np.searchsorted(self.mine[order], self.active[1:]))
        return rows, down_r, up_r, routes.edge_routes(False), cloud, members

    def as_events(self, up_e: RouteTable) -> None:
        """Every edge's rounds, then its backhaul upload, as one SimPy process per edge on the
        event path's participants; the clock ends when the last edge model has arrived."""
        world = self.world
        env, network, meter, work = world.env, world.network, world.meter, self.work
        rows, down_r, up_r, edge_routes, cloud, members = self._event_routes()

        def edge(k: int, group: np.ndarray):
            for j in range(self.kappa):
                self.start_s[j, k] = env.now
                barrier = EpochBarrier(env, len(group))
                context = EpochContext(env, network, meter, work.download_bytes, barrier,
                                       work.upload_bytes)
                with network.batch():
                    for m in group.tolist():
                        Participant(context, rows[m], float(self.compute_s[m]), down_r[m],
                                    up_r[m])
                yield barrier.event
                yield env.timeout(barrier.latest_s + self.took_s[k] - env.now)
                self.end_s[j, k] = env.now
            network.send_on(edge_routes[k], work.upload_bytes, cloud.arrived)

        for k, group in zip(self.active.tolist(), members, strict=True):
            env.process(edge(k, group))
        env.run(until=cloud.event)
        self._book_edges()


def _backhaul(world: EpochWorld, active: np.ndarray, table: RouteTable, nbytes: float,
              to_edge: bool, start_s: np.ndarray | None = None, arrays: bool = True) -> None:
    """The edges ``active`` each send (or receive, ``to_edge``) ``nbytes`` over the backhaul,
    from ``start_s`` (s, per edge, not before now; None: all now), shared max-min (module
    docstring, 2 and 4): in arrays by :func:`netsim.fastepoch.play_phase` when every transfer
    crosses at most one binding constraint (and ``arrays``: the capacities hold still), else
    as flows of the network (each started at its instant). The clock ends at the last
    arrival."""
    env = world.env
    if not len(active):
        return
    now = float(env.now)
    starts = np.full(len(active), now) if start_s is None \
        else np.maximum(np.asarray(start_s, dtype=float), now)
    hops = table.hops_of(active)
    played = None
    if arrays and world.fast_epochs and world.network.active_flows == 0:
        played = play_phase(starts, active, table, 8.0 * nbytes,
                            world.static_tables()[2], hops, world.devices.onset_flows)
    if played is not None:
        arrival = played[0] + table.latency_s[active]
        moving = active[table.hop_start[active + 1] > table.hop_start[active]]
        world.network.book(table.route_id[moving].tolist(), [nbytes] * len(moving))
        _book_radios(world, table, active, starts, arrival)
        end = float(np.max(arrival))
    else:
        routes = world.tier_routes.edge_routes(to_edge)
        barrier = EpochBarrier(env, len(active))

        def send(k: int, at: float):
            if at > env.now:
                yield env.timeout(at - env.now)
            world.network.send_on(routes[k], nbytes, barrier.arrived)

        if np.all(starts == now):
            with world.network.batch():
                for k in active.tolist():
                    world.network.send_on(routes[k], nbytes, barrier.arrived)
        else:
            for k, at in zip(active.tolist(), starts.tolist(), strict=True):
                env.process(send(k, at))
        env.run(until=barrier.event)
        end = float(env.now)
    if end > env.now:
        env.run(until=end)


def _book_radios(world: EpochWorld, table: RouteTable, rows: np.ndarray,
                 start_s: float | np.ndarray, arrival_s: np.ndarray) -> None:
    """A backhaul phase's radio periods (an edge's route may end on a radio link), from the
    phase's start to each transfer's arrival, as :func:`netsim.fastepoch.book_radios` books
    a plain epoch's."""
    radio, starts, ids = world.network.radio, table.radio_start, table.radio_ids
    if not radio or starts is None or ids is None or not len(ids):
        return
    counts = starts[rows + 1] - starts[rows]
    at = np.repeat(starts[rows] - (np.cumsum(counts) - counts), counts) \
        + np.arange(int(counts.sum()))
    begin = np.broadcast_to(np.asarray(start_s, dtype=float), (len(rows),))
    radio.play(ids[at], np.repeat(begin, counts), np.repeat(arrival_s, counts))


# -- a changing world (docs/hierarchical.md, "In a changing world") ---------------------------
def _run_changing(world: EpochWorld, decision: Decision) -> EpochOutcome:
    """:func:`run` in a changing world (netsim.dynamics): the participants of every edge
    round are the star's guarded participants (netsim.dynamics.epoch): each one stops when
    its session ends or its battery empties, as in a star epoch; one that stops is out of
    the cloud round (its edge goes on with the others), and so is one whose session ends or
    whose battery empties (at idle power) while it waits for its edge's next round
    (:func:`netsim.dynamics.epoch.stop_instant`). An edge closes a round at the last arrival
    or stop among its participants, aggregates the updates that arrived, and stops its rounds
    once nobody is left; it sends its model up if it aggregated any. The cloud waits for every
    edge's model or its last stop, aggregates the models and, if any, sends the new one down
    to every edge of the round. Edge rounds are played in arrays (the star's
    :func:`netsim.epochs.stopping.play_stopping`, each participant from its edge's start)
    under the static path's conditions, else as one SimPy process per edge; the backhaul in
    arrays while the capacities hold still, else as flows of the network. Edges are always
    on, mains powered, at their declared FLOP/s (netsim's formalization)."""
    env, tiers, meter, dyn = world.env, world.tiers, world.meter, world.dynamics
    start = env.now
    wait, _ = world.take_wait()  # (a wait belongs to the epoch)
    before = wait.totals() if wait is not None else meter.totals(start)
    nodes = tiers.nodes
    edges_before = meter.node_j_of(nodes, start)
    cloud_before = meter.node_j_of(np.array([world.aggregator_row]), start)
    work, kappa, rows, samples, edge_of = _round_inputs(world, decision)
    n = len(rows)
    flops = world.devices.flop_per_s
    if dyn.varies_compute:  # (one draw per cloud round: the star's per epoch)
        flops = flops * dyn.compute_factors()
    node_before = wait.node_j[rows] if wait is not None else meter.node_j_of(rows, start)
    offline_at = np.array(dyn.timeline.next_change_s[rows], dtype=float)
    left = np.full(n, math.inf)
    if dyn.batteries.any:
        left = np.nan_to_num(world.battery_left_of(rows, start), nan=math.inf)
    rounds = _ChangingRounds(world, rows, samples, edge_of, work, kappa, flops, offline_at,
                             left)
    active = rounds.active
    down_e, up_e = world.tier_routes.edge_tables()
    still = dyn.capacity.static
    world.arm_capacity_ticks()
    if rounds.in_arrays():
        path = "arrays"
        sent = rounds.sent()
        if len(sent):
            _backhaul(world, sent, up_e, work.upload_bytes, False,
                      start_s=rounds.done_s[sent], arrays=still)
        quiet = float(np.max(rounds.done_s[active]))  # (an edge with nothing: its last stop)
        if quiet > env.now:
            env.run(until=quiet)
    else:
        path = "events"
        rounds.as_events(up_e)
    world.epochs_by_path[path] += kappa
    sent = rounds.sent()
    played = [j for j in range(kappa) if np.any(~np.isnan(rounds.start_s[j, active]))]
    phases: list[dict] = [
        {"type": "edge-round", "tier": "device-edge", "round": j + 1,
         "start_s": float(np.nanmin(rounds.start_s[j, active])),
         "end_s": float(np.nanmax(rounds.end_s[j, active])), "path": path,
         "edges": int(np.count_nonzero(~np.isnan(rounds.start_s[j, active]))),
         "participants": int(np.count_nonzero(rounds.took_part[j]))} for j in played]
    phases.append({"type": "backhaul-up", "tier": "edge-cloud",
                   "start_s": float(np.min(rounds.done_s[sent])) if len(sent) else env.now,
                   "end_s": env.now, "edges": int(len(sent))})
    t0 = env.now
    world.aggregate(work, len(sent))
    phases.append({"type": "cloud-aggregation", "tier": "cloud", "start_s": t0,
                   "end_s": env.now, "edges": int(len(sent))})
    t0 = env.now
    down_to = active if len(sent) else active[:0]  # (no edge model: the model is unchanged)
    _backhaul(world, down_to, down_e, work.download_bytes, True, arrays=still)
    phases.append({"type": "backhaul-down", "tier": "edge-cloud", "start_s": t0,
                   "end_s": env.now, "edges": int(len(down_to))})
    world.end_capacity_ticks()
    end = env.now
    out = np.flatnonzero(rounds.battery_out)
    for r, at in zip(rows[out].tolist(), rounds.stopped_s[out].tolist(), strict=True):
        dyn.timeline.kill(r, at)
    meter.add_selected(rows, selected_s(start, end, offline_at, rounds.stopped_s))
    dyn.timeline.advance(end)
    energy = meter.totals(end) - before
    world.check_batteries_next(np.unique(rows))  # (they took part: checked next epoch)
    dropped = np.flatnonzero(rounds.dropped)
    ids = list(decision.participants)
    wasted_at = np.flatnonzero(rounds.dropped & ~rounds.reported.any(axis=0))
    wasted = meter.node_j_of(rows[wasted_at], end) - node_before[wasted_at]
    down_j, up_j = world.tier_routes.edge_backhaul_j_per_bit()
    return EpochOutcome(
        start, end, energy, counted=None, dropped=tuple(ids[m] for m in dropped.tolist()),
        wasted_j_by_row=dict(zip(rows[wasted_at].tolist(), wasted.tolist(), strict=True)),
        tiers=TierOutcome(rounds.edge_updates(ids, decision),
                          max((len(rounds.rounds_of(k)) for k in sent.tolist()), default=0)),
        bytes_backhaul=float(len(sent) * work.upload_bytes
                             + len(down_to) * work.download_bytes),
        energy_backhaul_j=8.0 * float(np.sum(up_j[sent]) * work.upload_bytes
                                      + np.sum(down_j[down_to]) * work.download_bytes),
        energy_edges_j=float(np.sum(meter.node_j_of(nodes, end) - edges_before)),
        energy_cloud_j=float(meter.node_j_of(np.array([world.aggregator_row]), end)[0]
                             - cloud_before[0]),
        phases=tuple(phases))


class _ChangingRounds(_EdgeRounds):
    """A cloud round's edge rounds in a changing world (:func:`_run_changing`). Per
    participant m: when it stopped (``stopped_s``, NaN: it did not), whether it dropped out
    and whether its battery emptied; per round j whether it took part and whether its update
    arrived (``took_part[j, m]``, ``reported[j, m]``); per edge when its rounds were done
    (``done_s``: its last aggregation's end, or its last participant's stop) and whether it
    holds a model to send (``model``)."""

    def __init__(self, world: EpochWorld, rows: np.ndarray, samples: np.ndarray,
                 edge_of: np.ndarray, work, kappa: int, flops: np.ndarray,
                 offline_at_s: np.ndarray, left_j: np.ndarray) -> None:
        super().__init__(world, rows, samples, edge_of, work, kappa)
        self.flops = flops
        self.compute_s = samples * work.flop_per_sample / flops[rows]
        self.offline_at_s, self.left_j = offline_at_s, left_j
        t = world.devices
        self.idle_w, self.busy_w = t.power_idle_w[rows], t.power_busy_w[rows]
        self.own_j_per_bit = world.own_up_j_per_bit[rows]
        n, n_edges = len(rows), world.tiers.n
        self.stopped_s = np.full(n, np.nan)
        self.dropped = np.zeros(n, dtype=bool)
        self.battery_out = np.zeros(n, dtype=bool)
        self.took_part = np.zeros((kappa, n), dtype=bool)
        self.reported = np.zeros((kappa, n), dtype=bool)
        self.done_s = np.full(n_edges, np.nan)
        self.model = np.zeros(n_edges, dtype=bool)
        self.busy_s = np.zeros(n_edges)  # each edge's aggregation time over its rounds (s)

    def sent(self) -> np.ndarray:
        """The edges that send a model to the cloud (ascending)."""
        return np.flatnonzero(self.model)

    def rounds_of(self, k: int) -> list[int]:
        """The rounds in which edge ``k`` aggregated updates."""
        mine = self.mine == k
        return [j for j in range(self.kappa) if np.any(self.reported[j] & mine)]

    def edge_updates(self, ids: list[str], decision: Decision) -> tuple[EdgeUpdate, ...]:
        """Per edge that sent its model, the updates each of its aggregations took."""
        tiers, dev_ids = self.world.tiers, self.world.devices.ids
        samples = np.fromiter(decision.participants.values(), dtype=np.int64,
                              count=len(self.rows))
        out = []
        for k in self.sent().tolist():
            taken = []
            for j in self.rounds_of(k):
                group = np.flatnonzero(self.reported[j] & (self.mine == k))
                taken.append(RoundUpdates(tuple(dev_ids[r] for r in self.rows[group].tolist()),
                                          samples[group], np.zeros(len(group), dtype=np.int64)))
            out.append(EdgeUpdate(tiers.ids[k], tuple(taken)))
        return tuple(out)

    def _drop(self, m: int | np.ndarray, at_s: float | np.ndarray,
              battery: bool | np.ndarray) -> None:
        self.dropped[m] = True
        self.stopped_s[m] = at_s
        self.battery_out[m] = battery

    def _book_edges(self) -> None:
        k = self.active
        self.world.meter.add_busy_many(self.world.tiers.nodes[k].tolist(),
                                       self.busy_s[k].tolist())

    def _took_s(self, k: int, updates: int) -> float:
        return self.work.aggregation_flop(updates) / float(self.world.tiers.flop_per_s[k])

    def in_arrays(self) -> bool:
        """Play every edge round in arrays and book it, the clock left where it is (the
        backhaul is played from each edge's end); False, with nothing booked or changed,
        where a round needs the event path."""
        world = self.world
        if not (world.fast_epochs and world.network.active_flows == 0 and self.work.symmetric
                and len(self.rows)) or (self.kappa > 1 and not self._edges_apart()):
            return False
        from netsim.epochs.guarded import _pieces  # (the star's capacities over time)

        down, up = self.tables
        pieces = None if world.dynamics.capacity.static else _pieces(world)
        bits = 8.0 * self.work.download_bytes
        n, n_edges = len(self.rows), world.tiers.n
        now = float(world.env.now)
        ready = np.full(n_edges, now)
        alive = np.ones(n, dtype=bool)
        left, since = self.left_j.copy(), np.full(n, now)
        stopped, dropped, battery = self.stopped_s.copy(), self.dropped.copy(), \
            self.battery_out.copy()
        start_s, end_s = self.start_s.copy(), self.end_s.copy()
        took_part, reported = self.took_part.copy(), self.reported.copy()
        done_s, model, busy_s = self.done_s.copy(), self.model.copy(), self.busy_s.copy()
        running = np.zeros(n_edges, dtype=bool)
        running[self.active] = True
        plays = []
        for j in range(self.kappa):
            t_round = ready[self.mine]
            if j:  # (stopped while waiting for its edge's next round: out)
                at, empty = stop_instants(since, left, self.idle_w, self.offline_at_s)
                gone = alive & (at <= t_round)
                stopped[gone], battery[gone], dropped[gone] = at[gone], empty[gone], True
                alive &= ~gone
                left = np.where(alive, left - self.idle_w * (t_round - since), left)
            has = np.zeros(n_edges, dtype=bool)
            has[self.mine[alive]] = True
            over = running & ~has  # (nobody left before this round: done at its start)
            done_s[over], running[over] = ready[over], False
            idx = np.flatnonzero(alive)
            if not len(idx):
                break
            epoch = play_stopping(t_round[idx], idx, self.compute_s[idx], bits, down, up,
                                  world.caps_now, pieces, world.devices.onset_flows,
                                  self.offline_at_s[idx], left[idx], self.idle_w[idx],
                                  self.busy_w[idx], self.own_j_per_bit[idx], math.inf)
            if epoch is None:
                return False
            e = self.mine[idx]
            took_part[j, idx] = True
            start_s[j, np.unique(e)] = ready[np.unique(e)]
            ends = np.where(epoch.reported, epoch.plan.upload_arrival_s, epoch.stopped_s)
            close = np.full(n_edges, -np.inf)
            np.maximum.at(close, e, ends)
            counts = np.bincount(e[epoch.reported], minlength=n_edges)
            gone_m = idx[epoch.dropped]
            stopped[gone_m] = epoch.stopped_s[epoch.dropped]
            battery[gone_m] = epoch.battery_out[epoch.dropped]
            dropped[gone_m] = True
            alive[gone_m] = False
            sent_m = idx[epoch.reported]
            reported[j, sent_m] = True
            f = epoch.reported
            left[sent_m] = left[sent_m] - self.idle_w[sent_m] * (
                epoch.plan.download_arrival_s[f] - t_round[sent_m]) \
                - self.busy_w[sent_m] * epoch.busy_s[f] - bits * self.own_j_per_bit[sent_m]
            since[sent_m] = epoch.plan.trained_s[f]
            for k in np.unique(e).tolist():
                if counts[k]:
                    took = self._took_s(k, int(counts[k]))
                    ready[k] = close[k] + took
                    end_s[j, k] = ready[k]
                    busy_s[k] += took
                    model[k] = True
                else:  # (everyone stopped: the edge is done)
                    end_s[j, k] = done_s[k] = close[k]
                    running[k] = False
            plays.append((epoch, idx, t_round[idx]))
        done_s[running] = ready[running]
        self.stopped_s, self.dropped, self.battery_out = stopped, dropped, battery
        self.start_s, self.end_s, self.took_part, self.reported = start_s, end_s, took_part, \
            reported
        self.done_s, self.model, self.busy_s = done_s, model, busy_s
        for epoch, idx, t0 in plays:
            self._book_round(epoch, idx, t0, pieces)
        self._book_edges()
        return True

    def _book_round(self, epoch: StoppingEpoch, idx: np.ndarray, t0: np.ndarray,
                    pieces: CapacityPieces | None) -> None:
        """Book one edge round played in arrays as the event path books it (the star's
        :func:`netsim.epochs.stopping.book_stopping` on the routes to the edges, each
        download from its edge's start), and measure those whose update left."""
        world, (down, up) = self.world, self.tables
        network, nbytes = world.network, float(self.work.download_bytes)
        order = np.argsort(t0, kind="stable")
        starts = None if pieces is None else t0
        book_moving(network, down, idx[order], np.full(len(idx), nbytes),
                    None if starts is None else starts[order], pieces)
        up_at = np.flatnonzero(epoch.uploading)
        up_order = up_at[np.argsort(epoch.plan.trained_s[up_at], kind="stable")]
        book_moving(network, up, idx[up_order], np.full(len(up_order), nbytes),
                    epoch.plan.trained_s[up_order], pieces)
        cut = order[np.isfinite(epoch.down_cut_bits[order]) & (epoch.down_cut_bits[order] > 0)]
        if len(cut):
            book_moving(network, down, idx[cut], -epoch.down_cut_bits[cut] / 8.0,
                        None if starts is None else starts[cut], pieces)
        cut = up_order[np.isfinite(epoch.up_cut_bits[up_order])
                       & (epoch.up_cut_bits[up_order] > 0.0)]
        if len(cut):
            book_moving(network, up, idx[cut], -epoch.up_cut_bits[cut] / 8.0,
                        epoch.plan.trained_s[cut], pieces)
        trained = np.flatnonzero(epoch.trained)
        world.meter.add_busy_many(self.rows[idx[trained]].tolist(),
                                  epoch.busy_s[trained].tolist())
        if nbytes > 0.0:
            book_radios(network.radio, t0, idx, down, up, epoch.plan, epoch.uploading)
        f = np.flatnonzero(epoch.reported)
        if len(f):
            p, m = epoch.plan, idx[f]
            measure(world, PlainEpoch(p.download_arrival_s[f], p.trained_s[f],
                                      p.upload_arrival_s[f]),
                    self.rows[m], self.flops[self.rows[m]], nbytes, t0[f],
                    (down.latency_s[m], up.latency_s[m]))

    def as_events(self, up_e: RouteTable) -> None:
        """Every edge's rounds, then its backhaul upload, as one SimPy process per edge on
        the event path's guarded participants (netsim.dynamics.epoch); the clock ends when
        the last edge model has arrived, or the last edge with nothing to send is done."""
        world = self.world
        env, network, meter, work = world.env, world.network, world.meter, self.work
        rows, down_r, up_r, edge_routes, cloud, members = self._event_routes()
        left, since = self.left_j.tolist(), [float(env.now)] * len(rows)
        offline = self.offline_at_s.tolist()
        idle, busy = self.idle_w.tolist(), self.busy_w.tolist()
        own = self.own_j_per_bit.tolist()
        flops = self.flops

        def edge(k: int, group: np.ndarray):
            alive = group.tolist()
            for j in range(self.kappa):
                now = float(env.now)
                if j:  # (stopped while waiting for the edge's next round: out)
                    still = []
                    for m in alive:
                        at, empty = stop_instant(since[m], left[m], idle[m], offline[m])
                        if at <= now:
                            self._drop(m, at, empty)
                        else:
                            left[m] -= idle[m] * (now - since[m])
                            still.append(m)
                    alive = still
                if not alive:
                    break
                self.start_s[j, k] = now
                self.took_part[j, alive] = True
                barrier = GuardedBarrier(env, len(alive), None, math.inf)
                with network.batch():
                    parts = [GuardedParticipant(
                        env, network, meter, barrier, m, rows[m], work.download_bytes,
                        float(self.compute_s[m]), down_r[m], up_r[m], offline[m], left[m],
                        idle[m], busy[m], own[m], work.upload_bytes) for m in alive]
                yield barrier.event
                arrived = [p for p in parts if p.phase == "sent"]
                for p in parts:
                    if p.phase == "gone":
                        self._drop(p.key, float(p.stopped_s if p.stopped_s is not None
                                                else env.now), p.battery_out)
                if not arrived:  # (everyone stopped: the edge is done)
                    self.end_s[j, k] = env.now
                    break
                keys = [p.key for p in arrived]
                self.reported[j, keys] = True
                at_rows = self.rows[keys]
                world.measure(at_rows, flops[at_rows], [p.down_bps for p in arrived],
                              [p.up_bps for p in arrived])
                for p in arrived:
                    left[p.key], since[p.key] = p.left_j, p.t_phase
                took = self._took_s(k, len(arrived))
                self.busy_s[k] += took
                self.model[k] = True
                yield env.timeout(took)
                self.end_s[j, k] = env.now
                alive = keys
            self.done_s[k] = env.now
            if self.model[k]:
                network.send_on(edge_routes[k], work.upload_bytes, cloud.arrived)
            else:
                cloud.arrived(float(env.now))

        for k, group in zip(self.active.tolist(), members, strict=True):
            env.process(edge(k, group))
        env.run(until=cloud.event)
        self._book_edges()
