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
"""

from __future__ import annotations

import numpy as np

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
    kappa = int(decision.edge_rounds or 1)
    n, index = len(decision.participants), world.devices.index
    rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
    samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
    edge_of = world.edges_of(decision, rows)
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

    def as_events(self, up_e: RouteTable) -> None:
        """Every edge's rounds, then its backhaul upload, as one SimPy process per edge on the
        event path's participants; the clock ends when the last edge model has arrived."""
        world = self.world
        env, network, meter, work = world.env, world.network, world.meter, self.work
        routes = world.tier_routes
        rows, mine = self.rows.tolist(), self.mine.tolist()
        down_r = [routes.device_route(r, k, True) for r, k in zip(rows, mine, strict=True)]
        up_r = [routes.device_route(r, k, False) for r, k in zip(rows, mine, strict=True)]
        edge_routes = routes.edge_routes(False)
        cloud = EpochBarrier(env, len(self.active))
        order = np.argsort(self.mine, kind="stable")
        members = np.split(order, np.searchsorted(self.mine[order], self.active[1:]))

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
              to_edge: bool, start_s: np.ndarray | None = None) -> None:
    """The edges ``active`` each send (or receive, ``to_edge``) ``nbytes`` over the backhaul,
    from ``start_s`` (s, per edge, not before now; None: all now), shared max-min (module
    docstring, 2 and 4): in arrays by :func:`netsim.fastepoch.play_phase` when every transfer
    crosses at most one binding constraint, else as flows of the network (each started at its
    instant). The clock ends at the last arrival."""
    env = world.env
    if not len(active):
        return
    now = float(env.now)
    starts = np.full(len(active), now) if start_s is None \
        else np.maximum(np.asarray(start_s, dtype=float), now)
    hops = table.hops_of(active)
    played = None
    if world.fast_epochs and world.network.active_flows == 0:
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
