"""The World (SimPy environment, devices, network, meters) and its epochs (the run loop that
steps it: netsim.runloop).

One synchronous epoch (architecture spec): every participant, concurrently, downloads the
variant from the aggregator, trains its samples, and uploads its update; the aggregator then
averages (2 x params x participants FLOP). The epoch ends when aggregation ends.

Two ways to execute an epoch up to the last update's arrival, with the same results to rounding
(tests/test_fastepoch.py):

- played forward in arrays (netsim.fastepoch) when it is plain: participants only, on an idle
  network, each transfer crossing at most one link that can saturate. No SimPy event per
  participant: the clock moves to the last arrival in one step.
- as SimPy events otherwise, or with ``fast_epochs=False`` (the reference). A participant is a
  chain of callbacks, not a process: the network reports each transfer's arrival time as soon
  as its last bit leaves (FlowNetwork.send), so the end of training is scheduled directly.
  SimPy events per participant-epoch: the end of its training, plus the network's shared
  wake-ups (one per distinct instant at which transfers finish); pinned by
  tests/test_engine.py. Clusters (DepL) run as processes.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import simpy

from netsim.devices import DeviceTable, build_device_table, scenario_topology
from netsim.dynamics.buffered import Job, Update, UpdateBuffer
from netsim.dynamics.epoch import GuardedBarrier, GuardedParticipant, cancel_all
from netsim.dynamics.world import Dynamics, run_streams
from netsim.energy import EnergyMeter, EnergySnapshot, EnergyTotals
from netsim.epoch import EpochBarrier, EpochContext, Participant
from netsim.fastepoch import PlainEpoch, RouteTable, book_radios, play_plain_epoch, route_caps
from netsim.network import FlowNetwork
from netsim.policy import (
    ClusterDecision,
    Decision,
)
from netsim.scenario.network import ResolvedNetwork, network_of, resolve_network
from netsim.scenario.schema import ModelSpec, Scenario
from netsim.simclock import fire_after
from netsim.training.models import resolve_model
from netsim.workload import Workload


def resolve_scenario(scenario: Scenario, seed: int) -> Scenario:
    """The scenario with its network made explicit and its model a full spec (for policies)."""
    net = resolve_network(scenario, seed)
    fleet = net.fleet is not None  # a generated fleet keeps its arrays (lazy sequences)
    return scenario.model_copy(update={
        "devices": net.devices if fleet else tuple(net.devices),
        "links": net.links if fleet else tuple(net.links), "aggregator": net.aggregator,
        "media": tuple(net.media), "generate": None, "model": resolve_model(scenario.model)})


@dataclass(frozen=True)
class EpochOutcome:
    """What one executed epoch cost: its interval (s) and the energy it used by category; in a
    changing world also whose updates counted (``counted``: device -> samples, clusters by
    head; None: every participant's), who dropped out or was late, and the energy each of
    those drew in the epoch (``wasted_j_by_row``: device row -> J). An asynchronous epoch
    (docs/async.md) also gives the ``updates`` its aggregation took (with their staleness),
    how many jobs its decision ``started`` and how many are still ``in_flight`` at its end;
    its ``late`` are the updates discarded as too stale."""

    start_s: float
    end_s: float
    energy: EnergyTotals
    counted: dict[str, int] | None = None
    dropped: tuple[str, ...] = ()
    late: tuple[str, ...] = ()
    wasted_j_by_row: dict[int, float] = field(default_factory=dict)
    updates: tuple[Update, ...] | None = None
    started: int | None = None
    in_flight: int = 0

    @property
    def wasted_j(self) -> float:
        """Energy of the dropped and late participants in this epoch (J)."""
        return float(sum(self.wasted_j_by_row.values()))


class World:
    """Everything one run simulates; two Worlds never share state."""

    def __init__(self, scenario: Scenario, availability_rng: np.random.Generator,
                 fast_epochs: bool = True,
                 dynamics_seed: np.random.SeedSequence | None = None) -> None:
        """``fast_epochs``: play plain epochs forward in arrays when they can be
        (netsim.fastepoch); False runs every epoch as SimPy events (the reference).
        ``dynamics_seed``: the run's dynamics stream (:func:`netsim.dynamics.world.run_streams`)."""
        self.scenario = scenario
        self.fast_epochs = fast_epochs
        self.model: ModelSpec = scenario.model  # type: ignore[assignment]
        net = network_of(scenario)
        self.env = simpy.Environment()
        self.topology = scenario_topology(scenario)
        self.node_ids = self.topology.node_ids
        self.devices: DeviceTable = build_device_table(scenario, self.topology)
        n_dev = self.devices.n
        agg_row = self.devices.aggregator
        pad = np.zeros(len(self.node_ids) - n_dev)
        sleep = _sleep_powers(net)
        sleep[agg_row] = math.nan
        self.meter = EnergyMeter(np.concatenate([self.devices.power_busy_w, pad]),
                                 np.concatenate([self.devices.power_idle_w, pad]),
                                 np.concatenate([sleep, np.full(len(pad), math.nan)]))
        self.network = FlowNetwork(self.env, self.topology, self.meter)
        self.dynamics = Dynamics(scenario.dynamics, net.devices, net.links, agg_row,
                                 self.topology.capacity_bps,
                                 dynamics_seed or run_streams(int(scenario.seed))[3])
        self.dynamic = not self.dynamics.static or bool(np.any(~np.isnan(sleep)))
        """Whether epochs need the changing world's path (else: exactly the static engine)."""
        self._budgets = np.array(self.topology.constraint_capacity[len(self.topology.capacity_bps):],
                                 dtype=float)  # media's air-time budgets (after the links)
        self._caps_now = np.array(self.topology.constraint_capacity, dtype=float)
        self._caps_until = -math.inf  # the capacities in force hold until then (s)
        self._tables_now: tuple[RouteTable, RouteTable] | None = None
        self._tick_token = 0
        self._n_nodes = len(self.node_ids)
        self.tracks_online = not self.dynamics.timeline.static or self.dynamics.batteries.any
        """Whether devices can be offline (sessions, or a battery that empties)."""
        if self.tracks_online:
            timeline = self.dynamics.timeline
            has_sleep = ~np.isnan(sleep)
            timeline.track("idle", np.where(has_sleep, 0.0, self.devices.power_idle_w))
            timeline.track("sleep", np.where(has_sleep, np.nan_to_num(sleep), 0.0))
            self.meter.track_online(self._online_time_s, timeline.online_time_of,
                                    lambda t: (timeline.weighted_s("idle", t),
                                               timeline.weighted_s("sleep", t)))
        # batteries: which are low, and until when none can cross a threshold (s): a
        # device's power while not taking part is at most max(idle, sleep), so only those
        # whose margin may be used up, and those that took part, are checked each epoch
        cap = self.dynamics.batteries.capacity_j
        self._low = np.zeros(n_dev, dtype=bool)
        self._p_max = np.maximum(self.devices.power_idle_w, np.nan_to_num(sleep))
        with np.errstate(divide="ignore", invalid="ignore"):  # (full at 0: the margin to low)
            margin_s = cap * (1.0 - self.dynamics.batteries.min_fraction) / self._p_max
        self._check_at = np.where(np.isnan(cap), math.inf,
                                  np.where(self._p_max > 0.0, margin_s, math.inf))
        nan = np.full(n_dev, np.nan)
        self._measured = {"flop_per_s": nan.copy(), "down_bps": nan.copy(), "up_bps": nan.copy()}
        self.measured = {k: _read_only_view(v) for k, v in self._measured.items()}
        """Per device, the speed and throughputs measured in the last epoch it took part in
        (FLOP/s, bit/s; NaN before): read-only views of the world's arrays."""
        self._flops = self.devices.flop_per_s.tolist()
        agg_id = net.aggregator  # each device's routes from and to the aggregator, by index
        self._down = _RoutesByRow(self.topology, agg_id, self.devices.ids, to_device=True)
        self._up = _RoutesByRow(self.topology, agg_id, self.devices.ids, to_device=False)
        self._agg_id = net.aggregator
        self._agg = self.devices.aggregator
        self._rng = availability_rng
        self._always = bool(np.all(self.devices.availability >= 1.0))
        self._all_true = np.ones(n_dev, dtype=bool)
        self._all_true.setflags(write=False)
        self._tables: tuple[RouteTable, RouteTable, np.ndarray, np.ndarray] | None = None
        self._own_up_j_per_bit = self._own_charges() if self.dynamic else np.zeros(n_dev)
        self._wait_from: EnergySnapshot | None = None  # the next epoch's energy starts here
        self._wait_ahead = 0.0  # the network's unsent_j() then
        self._busy = np.zeros(n_dev, dtype=bool)
        self.busy = _read_only_view(self._busy)
        """Devices with an asynchronous job in flight (read-only view; docs/async.md)."""
        self.buffer = UpdateBuffer(self.env, self._busy)
        self.epochs_by_path = {"arrays": 0, "events": 0}
        """How many epochs of the changing world ran on each path (benchmarks/dynamics.py)."""
        self._airtime_read = np.zeros(len(self.topology.media))

    def airtime_by_medium(self) -> dict[str, float]:
        """Air time used since the last call (s), by medium id, for the media used (the
        others used none): what the recorder stores per epoch (``epochs.airtime_by_medium_s``,
        where every medium is listed); empty without media."""
        if not len(self._airtime_read):
            return {}
        now = self.network.ledger.airtime_by_medium_s
        used = now - self._airtime_read
        self._airtime_read = now
        media = self.topology.media
        return {media[k].id: float(used[k]) for k in np.flatnonzero(used).tolist()}

    @property
    def media_ids(self) -> list[str]:
        """The shared media's ids, in the topology's order."""
        return [m.id for m in self.topology.media]

    @property
    def now_s(self) -> float:
        """Simulated time now (s)."""
        return float(self.env.now)

    def _online_time_s(self, now_s: float) -> np.ndarray:
        online = self.dynamics.timeline.online_time_s(now_s)
        pad = self._n_nodes - len(online)
        return np.concatenate([online, np.full(pad, now_s)]) if pad else online

    def _own_charges(self) -> np.ndarray:
        """Per device, the J/bit its own upload costs itself (the links it sends on)."""
        n = self.devices.n
        books = getattr(self.topology, "root_books", None)
        if books is not None:  # a fleet's routes as arrays (netsim.network.tree)
            up = books["up"]
            owner = np.repeat(np.arange(n), np.diff(up["charge_start"]))
            own = up["charge_node"] == owner
            return np.bincount(owner[own], weights=up["charge_j_per_bit"][own], minlength=n)
        out = np.zeros(n)
        for i in range(n):
            out[i] = sum(e for sender, e in self._up[i].charges if sender == i)
        return out

    def battery_left_j(self, now_s: float | None = None) -> np.ndarray:
        """What each device's battery holds now (J; NaN: mains powered), never below 0."""
        return self._battery_left_of(np.arange(self.devices.n),
                                     self.now_s if now_s is None else now_s)

    def begin_epoch(self) -> None:
        """Bring the changing world to now: sessions, empty batteries, link capacities."""
        if not self.dynamic:
            return
        now = self.now_s
        dyn = self.dynamics
        dyn.timeline.advance(now)
        if dyn.batteries.any:
            self._check_batteries(now)
        if not dyn.capacity.static and now >= self._caps_until:  # (a new piece or row)
            dyn.capacity.forget_before(now)
            self._set_capacities(dyn.capacity.at(now), now)

    def _battery_left_of(self, rows: np.ndarray, now_s: float) -> np.ndarray:
        """What the batteries of devices ``rows`` hold at ``now_s`` (J; NaN: mains), >= 0."""
        cap = self.dynamics.batteries.capacity_j[rows]
        return np.maximum(cap - self.meter.node_j_of(rows, now_s), 0.0)

    def _check_batteries(self, now: float) -> None:
        """Take offline the devices whose battery is empty now and mark those below their
        ``battery_min_fraction`` (they do not volunteer), checking only devices that took part
        since their last check or whose margin at the highest power they draw while not taking
        part may be used up (:attr:`_check_at`)."""
        b, timeline = self.dynamics.batteries, self.dynamics.timeline
        rows = np.flatnonzero(self._check_at <= now)
        if not len(rows):
            return
        left = self._battery_left_of(rows, now)
        for d in rows[(left <= 0.0) & timeline.online[rows]].tolist():
            timeline.kill(d, now)  # (a sleeping device's empty battery is noticed at the next
            # epoch's start: netsim's formalization)
        floor = b.min_fraction[rows] * b.capacity_j[rows]
        low = left < floor
        self._low[rows] = low
        margin = np.where(low, left, left - floor)
        with np.errstate(divide="ignore", invalid="ignore"):
            wait = np.where(self._p_max[rows] > 0.0, margin / self._p_max[rows], math.inf)
        # empty and offline: taken offline for good when it next comes online (checked again
        # every epoch until then); killed: never again
        self._check_at[rows] = np.where(timeline.killed[rows], math.inf,
                                        np.where(left <= 0.0, now, now + wait))

    def wait_for_someone(self, available: np.ndarray, deadline_s: float) -> bool:
        """When no device that holds samples is available and sessions will change before
        ``deadline_s`` (s), let time pass to the next change (nobody trains; online devices
        sleep, the aggregator idles) and return True; else False (netsim's rule: the world
        waits rather than the policy being asked to choose among nobody)."""
        timeline = self.dynamics.timeline
        if timeline.static or self.buffer.in_flight or self.buffer.landed \
                or _anyone(available, self.devices.trainers):
            return False
        at = timeline.next_change_at()
        if not at < deadline_s:
            return False
        if self._wait_from is None:
            self._wait_from = self.meter.snapshot(self.now_s)
            self._wait_ahead = self.network.unsent_j()
        self.env.run(until=max(at, math.nextafter(self.env.now, math.inf)))
        return True

    def _constraint_caps(self, link_caps: np.ndarray) -> np.ndarray:
        """Every constraint's capacity from the link directions' (bit/s): media after them."""
        return np.concatenate([np.asarray(link_caps, dtype=float), self._budgets])

    def _set_capacities(self, link_caps: np.ndarray, at_s: float) -> None:
        """The capacities in force from ``at_s`` (s) until the schedule's next change."""
        self._caps_until = self.dynamics.capacity.next_change_s(at_s)
        caps = self._constraint_caps(link_caps)
        changed = np.flatnonzero(caps != self._caps_now)
        if len(changed):
            self.network.set_capacities(changed.tolist(), caps[changed].tolist())
            self._caps_now = np.array(caps, dtype=float)
            self._tables_now = None

    def draw_availability(self) -> np.ndarray:
        """Which devices are available this epoch: online now, with enough battery, and
        volunteering with their ``availability`` probability (bernoulli availability)."""
        dyn = self.dynamics
        changing = not dyn.timeline.static or dyn.batteries.any
        if dyn.bernoulli and not self._always:
            available = self._rng.random(self.devices.n) < self.devices.availability
        elif not changing:
            return self._all_true
        else:
            available = np.ones(self.devices.n, dtype=bool)
        if changing:
            available &= dyn.timeline.online
            if dyn.batteries.any:
                available &= ~self._low  # (as of this epoch's start: begin_epoch)
        available.setflags(write=False)
        return available

    def run_epoch(self, decision: Decision) -> EpochOutcome:
        """Execute one validated decision; returns the epoch's interval and energy."""
        if decision.buffer_updates is not None:
            return self._run_async_epoch(decision)
        if self.dynamic or decision.keep_updates is not None \
                or decision.epoch_deadline_s is not None:
            return self._run_changing_epoch(decision)
        env = self.env
        start = env.now
        before = self.meter.totals(start)  # (running sums: a static epoch visits no idle node)
        work = self.workload_of(decision)
        if not (self.fast_epochs and decision.participants and not decision.clusters
                and self.network.active_flows == 0 and work.symmetric
                and self._play_plain(decision, work.download_bytes, work.flop_per_sample)):
            self._run_events(decision, work)
        self._aggregate(work, len(decision.participants) + len(decision.clusters))
        end = env.now
        return EpochOutcome(start, end, self.meter.totals(end) - before)

    def workload_of(self, decision: Decision) -> Workload:
        """What each participant of ``decision`` moves and computes: its own workload, else
        its variant's training (netsim.workload)."""
        return decision.workload if decision.workload is not None \
            else self.model.workload(decision.variant)

    def _aggregate(self, work: Workload, updates: int) -> None:
        """The aggregator takes ``updates`` updates of ``work`` now (busy for their FLOP)."""
        env = self.env
        self.meter.set_busy(self._agg, env.now)
        env.run(until=env.timeout(work.aggregation_flop(updates) / self._flops[self._agg]))
        self.meter.set_idle(self._agg, env.now)

    def _run_events(self, decision: Decision, work: Workload) -> None:
        """The epoch's transfers and training as SimPy events, up to the last update's
        arrival (the reference path: any decision, any network state)."""
        env, fps, nbytes = self.env, work.flop_per_sample, work.download_bytes
        barrier = EpochBarrier(env, len(decision.participants) + len(decision.clusters))
        ctx = EpochContext(env, self.network, self.meter, nbytes, barrier, work.upload_bytes)
        index, flops, down, up = self.devices.index, self._flops, self._down, self._up
        with self.network.batch():  # every download starts now: one rebalance per shared link
            for dev, samples in decision.participants.items():
                i = index[dev]
                Participant(ctx, i, samples * fps / flops[i], down[i], up[i])
        for cluster in decision.clusters:
            env.process(self._cluster(cluster, fps, nbytes, barrier))
        env.run(until=barrier.event)

    def _play_plain(self, decision: Decision, model_bytes: float,
                    flop_per_sample: float) -> bool:
        """The plain epoch played forward in arrays up to the last update's arrival
        (netsim.fastepoch): bytes, energy and busy time booked as the event path books them.
        False, with nothing changed, when it needs the event path."""
        if self._tables is None:
            t = self.devices  # built by build_device_table, routes included
            assert t.down_routes is not None and t.up_routes is not None and t.capacity_bps is not None
            self._tables = (t.down_routes, t.up_routes, t.capacity_bps, t.flop_per_s)
        down, up, capacity, flops = self._tables
        n, index = len(decision.participants), self.devices.index
        rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
        samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
        compute_s = samples * flop_per_sample / flops[rows]
        now = self.env.now
        plan = play_plain_epoch(now, rows, compute_s, 8.0 * model_bytes, down, up, capacity,
                                onset_flows=self.devices.onset_flows)
        if plan is None:
            return False
        self._book_plain(plan, rows, model_bytes)
        self._measure_plain(plan, rows, flops[rows], model_bytes, now)
        end = float(plan.upload_arrival_s.max())
        if end > now:
            self.env.run(until=end)
        return True

    # -- the changing world's epoch (netsim.dynamics) ----------------------------------------
    def _current_tables(self) -> tuple[RouteTable, RouteTable]:
        """The routes to and from the aggregator with their standalone rates under the
        current capacities."""
        if self._tables_now is None:
            self._tables_now = self._tables_under(self._caps_now)
        return self._tables_now

    def _run_changing_epoch(self, decision: Decision) -> EpochOutcome:
        """One epoch in a changing world: played forward in arrays when nothing changes before
        its last update arrives (no session ends, no capacity change, no battery empties, no
        update cut by ``keep_updates`` or ``epoch_deadline_s``), else as guarded SimPy events
        (netsim.dynamics.epoch) in which participants drop out and links are re-shared."""
        env, dyn = self.env, self.dynamics
        start = env.now
        wait, self._wait_from = self._wait_from, None  # (a wait belongs to the epoch)
        before = wait.totals() if wait is not None else self.meter.totals(start)
        work = self.workload_of(decision)
        nbytes, fps = work.download_bytes, work.flop_per_sample
        flops = self.devices.flop_per_s
        if dyn.varies_compute:
            flops = flops * dyn.compute_factors()
        n, index = len(decision.participants), self.devices.index
        rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
        samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
        cluster_rows = [index[dev] for c in decision.clusters for dev in c.devices]
        taking_part = np.unique(np.concatenate([rows, np.array(cluster_rows, dtype=np.intp)]))
        node_before = wait.node_j[taking_part] if wait is not None \
            else self.meter.node_j_of(taking_part, start)
        compute_s = samples * fps / flops[rows]
        offline_at = dyn.timeline.next_change_s[rows]
        left = np.full(n, math.inf)
        if dyn.batteries.any:
            left = np.nan_to_num(self._battery_left_of(rows, start), nan=math.inf)
        deadline_at = start + decision.epoch_deadline_s if decision.epoch_deadline_s else math.inf
        keep = decision.keep_updates
        plan = None
        if self.fast_epochs and n and not decision.clusters and self.network.active_flows == 0 \
                and (keep is None or keep >= n) and work.symmetric:
            plan = self._plain_if_unchanged(rows, compute_s, nbytes, offline_at, left,
                                            deadline_at)
        self.epochs_by_path["arrays" if plan is not None else "events"] += 1
        if plan is not None:
            self._book_plain(plan, rows, nbytes)
            counted, dropped, late = None, list[str](), list[str]()
            self._measure_plain(plan, rows, flops[rows], nbytes, start)
            stopped = np.full(n, math.nan)
            end_run = float(plan.upload_arrival_s.max())
            if end_run > env.now:
                env.run(until=end_run)
        else:
            counted, dropped, late, stopped = self._run_guarded(
                decision, rows, compute_s, work, offline_at, left, deadline_at, flops)
        n_kept = (len(decision.participants) + len(decision.clusters)) if counted is None \
            else len(counted)
        self._aggregate(work, n_kept)
        end = env.now
        # selected until it stopped, else until the epoch's end or, if earlier, until it went
        # offline after its update had left (an offline device draws nothing)
        selected = np.where(np.isnan(stopped), np.minimum(end, np.maximum(offline_at, start)),
                            stopped) - start
        self.meter.add_selected(np.concatenate([rows, np.array(cluster_rows, dtype=np.intp)]),
                                np.concatenate([selected, np.full(len(cluster_rows), end - start)]))
        dyn.timeline.advance(end)
        energy = self.meter.totals(end) - before
        # devices that took part: their batteries are checked at the next epoch's start
        self._check_at[taking_part] = np.where(np.isnan(dyn.batteries.capacity_j[taking_part]),
                                               math.inf, -math.inf)
        wasted_rows = np.array([index[d] for d in dropped + late], dtype=np.intp)
        wasted = self.meter.node_j_of(wasted_rows, end) \
            - node_before[np.searchsorted(taking_part, wasted_rows)]
        return EpochOutcome(start, end, energy, counted, tuple(dropped), tuple(late),
                            dict(zip(wasted_rows.tolist(), wasted.tolist(), strict=True)))

    # -- buffered asynchronous aggregation (netsim.dynamics.buffered, docs/async.md) ----------
    def _run_async_epoch(self, decision: Decision) -> EpochOutcome:
        """One asynchronous epoch: the decision's participants start jobs from the current
        model version, jobs from earlier epochs go on, and the epoch ends at the aggregation
        that follows the K-th buffered update (or once nothing is in flight, or at the
        training deadline). Always guarded SimPy events: jobs outlive the epoch."""
        env, v, dyn, buf = self.env, decision.variant, self.dynamics, self.buffer
        start = env.now
        wait, self._wait_from = self._wait_from, None
        before = wait.totals() if wait is not None else self.meter.totals(start)
        ahead_before = self._wait_ahead if wait is not None else self.network.unsent_j()
        live = list(buf.jobs.values()) + self._start_jobs(decision, start)
        n = len(decision.participants)
        closed = buf.open(int(decision.buffer_updates or 1), decision.max_staleness,
                          float(self.scenario.training.deadline_s))  # type: ignore[union-attr]
        self._arm_capacity_ticks()
        if not closed.triggered:
            env.run(until=closed)
        updates = buf.take()
        self._aggregate(self.model.workload(v), len(updates))
        self._tick_token += 1
        buf.aggregated()
        end = env.now
        arrived, discarded, dropped = buf.drain()
        for job in dropped:
            if job.participant.battery_out:
                dyn.timeline.kill(job.row, float(job.ended_s if job.ended_s is not None else end))
        if arrived:
            p = [j.participant for j in arrived]
            self._measure(np.array([j.row for j in arrived], dtype=np.intp),
                          np.array([j.flop_per_s for j in arrived]),
                          np.array([q.down_bps for q in p]), np.array([q.up_bps for q in p]))
        if self.dynamic:  # selected: from a job's start (or the epoch's) to its end (or the
            # epoch's, or when its device went offline); every job of the epoch is in ``live``
            self.meter.add_selected(
                np.array([j.row for j in live], dtype=np.intp),
                np.array([max(min(end if j.ended_s is None else j.ended_s, end,
                                  j.participant.offline_at_s) - max(j.started_s, start), 0.0)
                          for j in live]))
            dyn.timeline.advance(end)
        energy = self.meter.totals(end) - before
        # transfers outlive epochs: an epoch is charged the bits sent in it (the ledger books a
        # transfer's bits at its start)
        energy = replace(energy, communication_j=energy.communication_j
                         - (self.network.unsent_j() - ahead_before))
        ended = np.array([j.row for j in arrived + dropped], dtype=np.intp)
        if len(ended):  # their batteries are checked at the next epoch's start
            self._check_at[ended] = np.where(np.isnan(dyn.batteries.capacity_j[ended]),
                                             math.inf, -math.inf)
        wasted = discarded + dropped
        wasted_rows = np.array([j.row for j in wasted], dtype=np.intp)
        spent = self.meter.node_j_of(wasted_rows, end) - np.array(
            [j.node_before_j for j in wasted], dtype=float)
        wasted_j: dict[int, float] = {}
        for r, joules in zip(wasted_rows.tolist(), spent.tolist(), strict=True):
            wasted_j[r] = wasted_j.get(r, 0.0) + joules
        counted: dict[str, int] = {}
        for u in updates:
            counted[u.device] = counted.get(u.device, 0) + u.samples
        return EpochOutcome(start, end, energy, counted, tuple(j.device for j in dropped),
                            tuple(j.device for j in discarded), wasted_j, tuple(updates), n,
                            buf.in_flight)

    def _start_jobs(self, decision: Decision, start: float) -> list[Job]:
        """Start a job for each of the decision's participants now, from the current model
        version (guarded participants: they drop out when their device goes offline or its
        battery empties); returns the jobs."""
        env, v, dyn, t, buf = self.env, decision.variant, self.dynamics, self.devices, self.buffer
        nbytes, fps = self.model.model_bytes(v), self.model.flop_per_sample(v)
        flops = t.flop_per_s * dyn.compute_factors() if dyn.varies_compute else t.flop_per_s
        n, index = len(decision.participants), t.index
        rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
        samples = list(decision.participants.values())
        compute_s = np.asarray(samples, dtype=float) * fps / flops[rows]
        offline_at = dyn.timeline.next_change_s[rows]
        left = np.full(n, math.inf)
        if dyn.batteries.any:
            left = np.nan_to_num(self._battery_left_of(rows, start), nan=math.inf)
        node_before = self.meter.node_j_of(rows, start)
        jobs = []
        with self.network.batch():
            for k, (dev, r) in enumerate(zip(decision.participants, rows.tolist(), strict=True)):
                job = Job(buf.new_key(), dev, r, int(samples[k]), buf.version, start,
                          float(node_before[k]), float(flops[r]))
                buf.add(job)
                jobs.append(job)
                job.participant = GuardedParticipant(
                    env, self.network, self.meter, buf, job.key, r, nbytes,
                    float(compute_s[k]), self._down[r], self._up[r], float(offline_at[k]),
                    float(left[k]), float(t.power_idle_w[r]), float(t.power_busy_w[r]),
                    float(self._own_up_j_per_bit[r]))
        return jobs

    def cut_in_flight(self) -> int:
        """The run stops: asynchronous jobs still in flight stop now (their energy counts, up
        to now); returns how many were cut."""
        return len(self.buffer.cut())

    def _tables_under(self, caps: np.ndarray) -> tuple[RouteTable, RouteTable]:
        """The routes to and from the aggregator with their standalone rates under ``caps``."""
        t = self.devices
        assert t.down_routes is not None and t.up_routes is not None
        return (replace(t.down_routes, cap_bps=route_caps(t.down_routes, caps)),
                replace(t.up_routes, cap_bps=route_caps(t.up_routes, caps)))

    def _plain_if_unchanged(self, rows: np.ndarray, compute_s: np.ndarray, nbytes: float,
                            offline_at: np.ndarray, left_j: np.ndarray,
                            deadline_at: float) -> PlainEpoch | None:
        """The epoch's array timeline if nothing changes while it matters: no session ends
        and no battery empties before a participant's update arrives, no deadline cuts an
        update, and no capacity changes while the downloads or the uploads are moving (a
        change while everyone trains only sets the capacities the uploads run under)."""
        down, up = self._current_tables()
        now, capacity = self.env.now, self.dynamics.capacity
        def uploads_under(t_s: float) -> tuple[RouteTable, np.ndarray]:
            if t_s < self._caps_until:  # the same piece: the tables in force now
                return up, self._caps_now
            caps = self._constraint_caps(capacity.at(t_s))
            return self._tables_under(caps)[1], caps

        plan = play_plain_epoch(now, rows, compute_s, 8.0 * nbytes, down, up, self._caps_now,
                                None if capacity.static else uploads_under,
                                self.devices.onset_flows)
        if plan is None:
            return None
        arrival = plan.upload_arrival_s
        last = float(arrival.max())
        if last > deadline_at or np.any(offline_at <= arrival):
            return None
        if not capacity.static:
            t = self.devices
            downloads_end = float((plan.download_arrival_s - t.down_latency_s[rows]).max())
            uploads_start = float(plan.trained_s.min())
            uploads_end = float((arrival - t.up_latency_s[rows]).max())
            if downloads_end >= capacity.next_change_s(now) \
                    or uploads_end >= capacity.next_change_s(uploads_start):
                return None
        if np.isfinite(left_j).any():
            t = self.devices
            spent = (t.power_busy_w[rows] * compute_s
                     + t.power_idle_w[rows] * (arrival - now - compute_s)
                     + 8.0 * nbytes * self._own_up_j_per_bit[rows])
            if np.any(spent >= left_j):
                return None
        return plan

    def _book_plain(self, plan: PlainEpoch, rows: np.ndarray, model_bytes: float) -> None:
        """Book a plain epoch's bytes, communication energy and busy time as the event path
        books them (downloads in participant order, uploads in the order training ends)."""
        down, up = self.devices.down_routes, self.devices.up_routes  # (ids and hops: any caps)
        assert down is not None and up is not None
        up_rows = rows[np.argsort(plan.trained_s, kind="stable")]
        for table, order in ((down, rows), (up, up_rows)):
            moving = order[table.hop_start[order + 1] > table.hop_start[order]]
            self.network.book(table.route_id[moving].tolist(), [model_bytes] * len(moving))
        self.meter.add_busy_many(rows.tolist(),
                                 (plan.trained_s - plan.download_arrival_s).tolist())
        if model_bytes > 0.0:
            book_radios(self.network.radio, float(self.env.now), rows, down, up, plan)

    def _measure_plain(self, plan: PlainEpoch, rows: np.ndarray, flop_per_s: np.ndarray,
                       nbytes: float, start_s: float) -> None:
        """What the participants of an array epoch achieved: their speed and the throughput
        of their download and upload (bits over the time the bits took, latency excluded)."""
        t = self.devices
        took = (plan.download_arrival_s - t.down_latency_s[rows] - start_s,
                plan.upload_arrival_s - t.up_latency_s[rows] - plan.trained_s)
        with np.errstate(divide="ignore", invalid="ignore"):  # (no bits to move: NaN)
            rates = [np.where(d > 0.0, 8.0 * nbytes / d, np.nan) for d in took]
        self._measure(rows, flop_per_s, rates[0], rates[1])

    def _measure(self, rows: np.ndarray, flop_per_s: np.ndarray, down_bps: np.ndarray,
                 up_bps: np.ndarray) -> None:
        m = self._measured
        m["flop_per_s"][rows] = flop_per_s
        m["down_bps"][rows] = down_bps
        m["up_bps"][rows] = up_bps

    def _run_guarded(self, decision: Decision, rows: np.ndarray, compute_s: np.ndarray,
                     work: Workload, offline_at: np.ndarray, left_j: np.ndarray,
                     deadline_at: float, flops: np.ndarray
                     ) -> tuple[dict[str, int], list[str], list[str], np.ndarray]:
        """The epoch as guarded events up to its close; returns (counted updates, dropped,
        late, when each participant stopped (s; NaN: it did not))."""
        env, t, dyn = self.env, self.devices, self.dynamics
        nbytes, fps = work.download_bytes, work.flop_per_sample
        barrier = GuardedBarrier(env, len(rows) + len(decision.clusters), decision.keep_updates,
                                 deadline_at)
        parts = []
        with self.network.batch():
            for k, (dev, r) in enumerate(zip(decision.participants, rows.tolist(), strict=True)):
                parts.append(GuardedParticipant(
                    env, self.network, self.meter, barrier, dev, r, nbytes, float(compute_s[k]),
                    self._down[r], self._up[r], float(offline_at[k]), float(left_j[k]),
                    float(t.power_idle_w[r]), float(t.power_busy_w[r]),
                    float(self._own_up_j_per_bit[r]), work.upload_bytes))
        for c, cluster in enumerate(decision.clusters):
            env.process(self._cluster(cluster, fps, nbytes, barrier, ("cluster", c)))
        self._arm_capacity_ticks()
        env.run(until=barrier.event)
        self._tick_token += 1  # the epoch's capacity ticks end with it
        dropped = [p for p in parts if p.phase == "gone"]
        late = cancel_all(parts, lambda key: key in barrier.kept)
        for p in dropped:
            if p.battery_out:
                dyn.timeline.kill(p.node, float(p.stopped_s or env.now))
        finished = [p for p in parts if not math.isnan(p.up_bps)]
        self._measure(np.array([p.node for p in finished], dtype=np.intp),
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

    def _arm_capacity_ticks(self) -> None:
        """Re-share the links at each capacity change from now until the token moves on (the
        epoch's end: ``self._tick_token += 1``)."""
        self._tick_token += 1
        env, capacity = self.env, self.dynamics.capacity
        if not capacity.static:
            token = self._tick_token
            nxt = capacity.next_change_s(env.now)
            if nxt < math.inf:
                fire_after(env, nxt - env.now, lambda _e: self._capacity_tick(token))

    def _capacity_tick(self, token: int) -> None:
        """Capacities change now (a new piece or trace row): links re-shared at once."""
        if token != self._tick_token:
            return
        env, cap = self.env, self.dynamics.capacity
        self._set_capacities(cap.at(env.now), env.now)
        nxt = max(cap.next_change_s(env.now), math.nextafter(env.now, math.inf))
        if nxt < math.inf:
            fire_after(env, nxt - env.now, lambda _e: self._capacity_tick(token))

    def _cluster(self, cluster: ClusterDecision, flop_per_sample: float, nbytes: float,
                 barrier: EpochBarrier | GuardedBarrier,
                 key: Any = None) -> Generator[simpy.Event, Any, None]:
        env, head = self.env, cluster.devices[0]
        yield self.network.transfer(self._agg_id, head, nbytes)
        flop = cluster.samples * flop_per_sample
        act = cluster.samples * cluster.activation_bytes_per_sample / 2.0
        members = [env.process(self._member(dev, share * flop, act, head))
                   for dev, share in zip(cluster.devices, cluster.flop_share, strict=True)]
        yield env.all_of(members)
        yield self.network.transfer(head, self._agg_id, nbytes)
        if isinstance(barrier, GuardedBarrier):
            barrier.arrived(env.now, key)
        else:
            barrier.arrived(env.now)

    def _member(self, dev: str, flop: float, act_bytes: float,
                head: str) -> Generator[simpy.Event, Any, None]:
        env, i = self.env, self.devices.index[dev]
        if dev != head and act_bytes > 0:
            yield self.network.transfer(head, dev, act_bytes)
        self.meter.set_busy(i, env.now)
        yield env.timeout(flop / self._flops[i])
        self.meter.set_idle(i, env.now)
        if dev != head and act_bytes > 0:
            yield self.network.transfer(dev, head, act_bytes)


def _anyone(available: np.ndarray, rows: np.ndarray, first: int = 1024) -> bool:
    """Whether any of ``rows`` is available (the first few looked at first: usually
    someone is, and a fleet's million need not be gathered)."""
    return bool(available[rows[:first]].any() or available[rows[first:]].any())


class _RoutesByRow:
    """Each device's route from (``to_device``) or to the aggregator, by device row, built
    when first asked for (a fleet of a million asks for its participants' only)."""

    def __init__(self, topology, agg_id: str, ids: tuple[str, ...], to_device: bool) -> None:
        self._topology, self._agg, self._ids, self._down = topology, agg_id, ids, to_device

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, row: int):
        if not 0 <= row < len(self._ids):
            raise IndexError(row)
        if self._down:
            return self._topology.route(self._agg, self._ids[row])
        return self._topology.route(self._ids[row], self._agg)


def _sleep_powers(net: ResolvedNetwork) -> np.ndarray:
    """Each device's ``power_sleep_w`` (W; NaN: none)."""
    if net.fleet is not None:
        return net.fleet.power_sleep_w.copy()
    return np.array([math.nan if d.power_sleep_w is None else d.power_sleep_w
                     for d in net.devices], dtype=float)


def _read_only_view(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.setflags(write=False)
    return view
