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
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import numpy as np
import simpy

from netsim.devices import DeviceTable, build_device_table, scenario_topology
from netsim.dynamics.buffered import UpdateBuffer
from netsim.dynamics.world import Dynamics, run_streams
from netsim.energy import EnergyMeter, EnergySnapshot
from netsim.epochs import arrays, buffered, events, guarded, hierarchy, tiered
from netsim.epochs.outcome import EpochOutcome
from netsim.fastepoch import RouteTable, route_caps
from netsim.measuring import resolved_model
from netsim.network import FlowNetwork
from netsim.policy import (
    Decision,
)
from netsim.scenario.network import ResolvedNetwork, network_of, resolve_network
from netsim.scenario.schema import ModelSpec, Scenario
from netsim.simclock import fire_after
from netsim.tiers import TierRoutes, Tiers, build_tiers
from netsim.workload import Workload


def resolve_scenario(scenario: Scenario, seed: int) -> Scenario:
    """The scenario with its network made explicit and its model a full spec (for policies)."""
    net = resolve_network(scenario, seed)
    fleet = net.fleet is not None  # a generated fleet keeps its arrays (lazy sequences)
    return scenario.model_copy(update={
        "devices": net.devices if fleet else tuple(net.devices),
        "links": net.links if fleet else tuple(net.links), "aggregator": net.aggregator,
        "media": tuple(net.media), "edges": tuple(net.edges), "generate": None,
        "model": epoch_model(resolved_model(scenario.model), scenario.training.local_epochs)})


def epoch_model(model: ModelSpec, local_epochs: int) -> ModelSpec:
    """The model as an epoch uses it: its training FLOP per sample per epoch, the model's per
    pass times the ``local_epochs`` each participant makes (what the engine and every planner
    read from the resolved scenario, so E local epochs cost E times the compute everywhere)."""
    if local_epochs == 1:
        return model
    return model.model_copy(update={
        "train_flop_per_sample": model.train_flop_per_sample * local_epochs})


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
        self.local_epochs = int(scenario.training.local_epochs)  # type: ignore[union-attr]
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
        self.tiers: Tiers | None = build_tiers(scenario, self.topology)
        """The edge aggregators (docs/hierarchical.md; None without edges)."""
        busy_pad, idle_pad = pad.copy(), pad.copy()
        if self.tiers is not None:  # an edge meters energy like a device, on its node
            busy_pad[self.tiers.nodes - n_dev] = self.tiers.power_busy_w
            idle_pad[self.tiers.nodes - n_dev] = self.tiers.power_idle_w
        self.meter = EnergyMeter(np.concatenate([self.devices.power_busy_w, busy_pad]),
                                 np.concatenate([self.devices.power_idle_w, idle_pad]),
                                 np.concatenate([sleep, np.full(len(pad), math.nan)]))
        self.network = FlowNetwork(self.env, self.topology, self.meter)
        self.dynamics = Dynamics(scenario.dynamics, net.devices, net.links, agg_row,
                                 self.topology.capacity_bps,
                                 dynamics_seed or run_streams(int(scenario.seed))[3],
                                 net.goodput_factor)
        self.dynamic = not self.dynamics.static or bool(np.any(~np.isnan(sleep)))
        """Whether epochs need the changing world's path (else: exactly the static engine)."""
        self._budgets = np.array(self.topology.constraint_capacity[len(self.topology.capacity_bps):],
                                 dtype=float)  # media's air-time budgets (after the links)
        self.caps_now = np.array(self.topology.constraint_capacity, dtype=float)
        self.caps_until = -math.inf  # the capacities in force hold until then (s)
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
        self._flops: list[float] | None = None  # (:attr:`flops`, made when first asked for)
        self._aggregator_flops = float(self.devices.flop_per_s[self.devices.aggregator])
        agg_id = net.aggregator  # each device's routes from and to the aggregator, by index
        self.routes_down = _RoutesByRow(self.topology, agg_id, self.devices.ids, to_device=True)
        self.routes_up = _RoutesByRow(self.topology, agg_id, self.devices.ids, to_device=False)
        self.aggregator_id = net.aggregator
        self.aggregator_row = self.devices.aggregator
        self._rng = availability_rng
        self._always = bool(np.all(self.devices.availability >= 1.0))
        self._all_true = np.ones(n_dev, dtype=bool)
        self._all_true.setflags(write=False)
        self._tables: tuple[RouteTable, RouteTable, np.ndarray, np.ndarray] | None = None
        self.own_up_j_per_bit = self._own_charges() if self.dynamic else np.zeros(n_dev)
        self._wait_from: EnergySnapshot | None = None  # the next epoch's energy starts here
        self._wait_ahead = 0.0  # the network's unsent_j() then
        self._busy = np.zeros(n_dev, dtype=bool)
        self.busy = _read_only_view(self._busy)
        """Devices with an asynchronous job in flight (read-only view; docs/async.md)."""
        self.buffer = UpdateBuffer(self.env, self._busy)
        self.epochs_by_path = {"arrays": 0, "events": 0}
        self.keeps_phase_times = bool(scenario.record_phase_times)
        """Whether static star epochs keep each participant's phase times (the players set
        :attr:`phase_times`, the epoch's outcome takes them)."""
        self.phase_times: tuple[np.ndarray, np.ndarray] | None = None
        """How many epochs of the changing world, and buffered epochs, ran on each path
        (benchmarks/dynamics.py, tests/test_buffered_arrays.py)."""
        self.events_why: dict[str, int] = {}
        """A changing world's epochs run as events, by why they could not play in arrays
        (netsim.epochs.guarded)."""
        self.buffered_player: Any = None
        """The run's buffered epochs in arrays (netsim.epochs.buffered_arrays), once the
        first buffered epoch has found they can play there; False when they cannot."""
        self._airtime_read = np.zeros(len(self.topology.media))
        self.tier_routes: TierRoutes | None = None
        """Routes between the tiers (built with the device table's routes)."""
        self._edges_busy = np.zeros(0 if self.tiers is None else self.tiers.n, dtype=bool)
        self.edges_busy = None if self.tiers is None else _read_only_view(self._edges_busy)
        """Edges with asynchronous hierarchical work in flight (read-only; None: no edges)."""
        self._tiered: tiered.Tiered | None = None
        if self.tiers is not None:
            t = self.devices
            assert t.down_routes is not None and t.up_routes is not None
            self.tier_routes = TierRoutes(self.topology, self.tiers, t.ids, self.aggregator_id,
                                          t.down_routes, t.up_routes)

    def airtime_by_medium(self) -> dict[str, float]:
        """Air time used since the last call (s), by medium id, for the media used (the
        others used none): what the recorder stores per epoch (``epochs.airtime_by_medium_s``,
        the media used only); empty without media."""
        if not len(self._airtime_read):
            return {}
        now = self.network.ledger.airtime_by_medium_s
        used = now - self._airtime_read
        self._airtime_read = now
        media = self.topology.media
        return {media[k].id: float(used[k]) for k in np.flatnonzero(used).tolist()}

    @property
    def flops(self) -> list[float]:
        """Each device's FLOP/s as Python floats (the event path's per-participant reads),
        made when first asked for (a fleet of a million whose epochs play in arrays never
        asks)."""
        if self._flops is None:
            self._flops = self.devices.flop_per_s.tolist()
        return self._flops

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
        books_of = getattr(self.topology, "root_books", None)
        if books_of is not None:  # a fleet's routes as arrays (netsim.network.tree)
            up = books_of(np.arange(n), upward=True)
            owner = np.repeat(np.arange(n), np.diff(up["charge_start"]))
            own = up["charge_node"] == owner
            return np.bincount(owner[own], weights=up["charge_j_per_bit"][own], minlength=n)
        out = np.zeros(n)
        for i in range(n):
            out[i] = sum(e for sender, e in self.routes_up[i].charges if sender == i)
        return out

    def battery_left_j(self, now_s: float | None = None) -> np.ndarray:
        """What each device's battery holds now (J; NaN: mains powered), never below 0."""
        return self.battery_left_of(np.arange(self.devices.n),
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
        if not dyn.capacity.static and now >= self.caps_until:  # (a new piece or row)
            dyn.capacity.forget_before(now)
            self._set_capacities(dyn.capacity.at(now), now)

    def battery_left_of(self, rows: np.ndarray, now_s: float,
                        node_j: np.ndarray | None = None) -> np.ndarray:
        """What the batteries of devices ``rows`` hold at ``now_s`` (J; NaN: mains), >= 0;
        ``node_j``: what they have drawn by then (J), when read already."""
        cap = self.dynamics.batteries.capacity_j[rows]
        drawn = self.meter.node_j_of(rows, now_s) if node_j is None else node_j
        return np.maximum(cap - drawn, 0.0)

    def _check_batteries(self, now: float) -> None:
        """Take offline the devices whose battery is empty now and mark those below their
        ``battery_min_fraction`` (they do not volunteer), checking only devices that took part
        since their last check or whose margin at the highest power they draw while not taking
        part may be used up (:attr:`_check_at`)."""
        b, timeline = self.dynamics.batteries, self.dynamics.timeline
        rows = np.flatnonzero(self._check_at <= now)
        if not len(rows):
            return
        left = self.battery_left_of(rows, now)
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

    def constraint_caps(self, link_caps: np.ndarray) -> np.ndarray:
        """Every constraint's capacity from the link directions' (bit/s): media after them."""
        return np.concatenate([np.asarray(link_caps, dtype=float), self._budgets])

    def _set_capacities(self, link_caps: np.ndarray, at_s: float) -> None:
        """The capacities in force from ``at_s`` (s) until the schedule's next change."""
        self.caps_until = self.dynamics.capacity.next_change_s(at_s)
        caps = self.constraint_caps(link_caps)
        changed = np.flatnonzero(caps != self.caps_now)
        if len(changed):
            self.network.set_capacities(changed.tolist(), caps[changed].tolist())
            self.caps_now = np.array(caps, dtype=float)
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
        """Execute one validated decision; returns the epoch's interval and energy. The kind
        of epoch (netsim.epochs): buffered when it aggregates every K updates, guarded in a
        changing world or with a cut (``keep_updates``, ``epoch_deadline_s``), else static:
        in arrays when plain, else as events."""
        if decision.edge_rounds is not None:
            if decision.buffer_updates is not None:
                return tiered.run(self, decision)
            return hierarchy.run(self, decision)
        if self.tiers is None:
            return self._run_star(decision)
        edges_before = self.meter.node_j_of(self.tiers.nodes, self.now_s)
        cloud_before = self.meter.node_j_of(np.array([self.aggregator_row]), self.now_s)
        outcome = self._run_star(decision)
        bytes_backhaul, energy_backhaul_j = self._star_backhaul(decision, outcome)
        return replace(outcome, bytes_backhaul=bytes_backhaul,
                       energy_backhaul_j=energy_backhaul_j,
                       energy_edges_j=float(np.sum(self.meter.node_j_of(
                           self.tiers.nodes, outcome.end_s) - edges_before)),
                       energy_cloud_j=float(self.meter.node_j_of(
                           np.array([self.aggregator_row]), outcome.end_s)[0]
                           - cloud_before[0]))

    def _star_backhaul(self, decision: Decision, outcome: EpochOutcome
                       ) -> tuple[float, float]:
        """A star epoch's transfers on the backhaul of a world with edges (they relay through
        it unaggregated): every participant's download (an asynchronous epoch: every job it
        started) and every upload that arrived or was cut late, of the devices whose routes
        cross a backhaul link, and the senders' per-bit energy there (netsim's count:
        clusters' traffic is not counted): (bytes, J)."""
        assert self.tier_routes is not None
        crosses, down_j, up_j = self.tier_routes.backhaul()
        index = self.devices.index
        work = self.workload_of(decision)
        started = np.fromiter((index[d] for d in decision.participants), dtype=np.intp,
                              count=len(decision.participants))
        if outcome.updates is not None:
            ups = [u.device for u in outcome.updates] + list(outcome.late)
        else:
            gone = set(outcome.dropped)
            ups = [d for d in decision.participants if d not in gone]
        sent = np.fromiter((index[d] for d in ups), dtype=np.intp, count=len(ups))
        down_in, up_in = started[crosses[started]], sent[crosses[sent]]
        return (float(len(down_in) * work.download_bytes + len(up_in) * work.upload_bytes),
                8.0 * float(np.sum(down_j[down_in]) * work.download_bytes
                            + np.sum(up_j[up_in]) * work.upload_bytes))

    def tiered(self) -> tiered.Tiered:
        """The run's asynchronous tiers (netsim.epochs.tiered), built at their first epoch."""
        if self._tiered is None:
            self._tiered = tiered.Tiered(self, self._edges_busy, self._busy)
        return self._tiered

    @property
    def buffered_now(self) -> int:
        """Updates waiting for the next aggregation: the star buffer's, or the edge models
        waiting in the cloud's (asynchronous tiers)."""
        return len(self.buffer.landed) + (0 if self._tiered is None else self._tiered.landed)

    def edges_of(self, decision: Decision, rows: np.ndarray) -> np.ndarray:
        """Per device row, the edge (index) it works with this epoch: the decision's
        ``association`` where it names one, else its default (validated before: every
        participant reaches an edge)."""
        assert self.tiers is not None
        if not decision.association:
            return self.tiers.default_edge
        out = np.array(self.tiers.default_edge)
        index, edge_index = self.devices.index, self.tiers.index
        for dev, edge in decision.association.items():
            out[index[dev]] = edge_index[edge]
        return out

    def _run_star(self, decision: Decision) -> EpochOutcome:
        """A star epoch (every participant with the cloud aggregator): its kind, below. In a
        static world, a cut that cuts nothing (``keep_updates`` of every update, no update
        later than ``epoch_deadline_s``: a Flower round's timeout) leaves the epoch a static
        one; the arrays find that out before they book anything, else it runs as guarded
        events."""
        if decision.buffer_updates is not None:
            return buffered.run(self, decision)
        keep, deadline = decision.keep_updates, decision.epoch_deadline_s
        cut = keep is not None or deadline is not None
        if self.dynamic or (cut and (keep is not None and keep < len(decision.participants)
                                     or decision.clusters or not self.fast_epochs)):
            return guarded.run(self, decision)
        env = self.env
        start = env.now
        before = self.meter.totals(start)  # (running sums: a static epoch visits no idle node)
        work = self.workload_of(decision)
        played = (self.fast_epochs and decision.participants and not decision.clusters
                  and self.network.active_flows == 0
                  and arrays.play(self, decision, work,
                                  math.inf if deadline is None else start + deadline))
        if not played:
            if cut:
                return guarded.run(self, decision)
            events.run(self, decision, work)
        self.aggregate(work, len(decision.participants) + len(decision.clusters),
                       devices=list(decision.participants))
        end = env.now
        times, self.phase_times = self.phase_times, None
        return EpochOutcome(start, end, self.meter.totals(end) - before, phase_times=times)

    def workload_of(self, decision: Decision) -> Workload:
        """What each participant of ``decision`` moves and computes: its own workload, else
        its variant's training (netsim.workload) at its local epochs (the resolved model's
        FLOP per sample are per epoch at the scenario's: :func:`epoch_model`)."""
        if decision.workload is not None:
            return decision.workload
        work = self.model.workload(decision.variant)
        if decision.local is not None and decision.local.epochs != self.local_epochs:
            work = replace(work, flop_per_sample=work.flop_per_sample * decision.local.epochs
                           / self.local_epochs)
        return work

    def aggregate(self, work: Workload, updates: int,
                  play_until: Callable[[float], None] | None = None,
                  devices: Iterable[str] | None = None) -> None:
        """The aggregator takes ``updates`` updates of ``work`` now (busy for their FLOP).
        ``play_until``: what else goes on meanwhile outside SimPy (buffered epochs in arrays),
        played up to the aggregation's end (s) before the clock moves there; ``devices``:
        whose updates they are (a workload with per-device figures counts theirs)."""
        env = self.env
        self.meter.set_busy(self.aggregator_row, env.now)
        took_s = work.aggregation_flop(updates, devices) / self._aggregator_flops
        if play_until is not None:
            play_until(env.now + took_s)
        env.run(until=env.timeout(took_s))
        self.meter.set_idle(self.aggregator_row, env.now)

    # -- the changing world's epoch (netsim.dynamics) ----------------------------------------
    def current_tables(self) -> tuple[RouteTable, RouteTable]:
        """The routes to and from the aggregator with their standalone rates under the
        current capacities."""
        if self._tables_now is None:
            self._tables_now = self.tables_under(self.caps_now)
        return self._tables_now

    # -- buffered asynchronous aggregation (netsim.dynamics.buffered, docs/async.md) ----------
    def static_tables(self) -> tuple[RouteTable, RouteTable, np.ndarray, np.ndarray]:
        """The routes to and from the aggregator, the constraints' capacities (bit/s) and the
        devices' FLOP/s, as the device table holds them (static epochs in arrays)."""
        if self._tables is None:
            t = self.devices  # built by build_device_table, routes included
            assert t.down_routes is not None and t.up_routes is not None \
                and t.capacity_bps is not None
            self._tables = (t.down_routes, t.up_routes, t.capacity_bps, t.flop_per_s)
        return self._tables

    def take_wait(self) -> tuple[EnergySnapshot | None, float]:
        """The energy snapshot taken when the world began to wait for someone to come online
        and the network's unsent energy then (J), or (None, 0): the wait belongs to the epoch
        that takes it."""
        wait, ahead = self._wait_from, self._wait_ahead
        self._wait_from, self._wait_ahead = None, 0.0
        return wait, ahead

    def check_batteries_next(self, rows: np.ndarray) -> None:
        """Devices ``rows`` took part: their batteries (if any) are checked at the next
        epoch's start."""
        self._check_at[rows] = np.where(np.isnan(self.dynamics.batteries.capacity_j[rows]),
                                        math.inf, -math.inf)

    def end_capacity_ticks(self) -> None:
        """The epoch is over: the capacity ticks it armed stop (:meth:`arm_capacity_ticks`)."""
        self._tick_token += 1

    def cut_in_flight(self) -> int:
        """The run stops: asynchronous jobs still in flight stop now (their energy counts, up
        to now); returns how many were cut."""
        cut = len(self.buffer.cut())
        return cut + (self._tiered.cut() if self._tiered is not None else 0)

    def tables_under(self, caps: np.ndarray) -> tuple[RouteTable, RouteTable]:
        """The routes to and from the aggregator with their standalone rates under ``caps``."""
        t = self.devices
        assert t.down_routes is not None and t.up_routes is not None
        return (replace(t.down_routes, cap_bps=route_caps(t.down_routes, caps)),
                replace(t.up_routes, cap_bps=route_caps(t.up_routes, caps)))

    def measure(self, rows: np.ndarray | list[int], flop_per_s: np.ndarray | list[float],
                 down_bps: np.ndarray | list[float], up_bps: np.ndarray | list[float]) -> None:
        """Per device of ``rows``, what its last epoch measured: its training speed (FLOP/s)
        and its download and upload throughputs (bit/s)."""
        m = self._measured
        m["flop_per_s"][rows] = flop_per_s
        m["down_bps"][rows] = down_bps
        m["up_bps"][rows] = up_bps

    def arm_capacity_ticks(self) -> None:
        """Re-share the links at each capacity change from now until the token moves on (the
        epoch's end: :meth:`end_capacity_ticks`)."""
        self._tick_token += 1
        env, capacity = self.env, self.dynamics.capacity
        if not capacity.static:
            token = self._tick_token
            nxt = capacity.next_change_s(env.now)
            if nxt < math.inf:
                fire_after(env, nxt - env.now, lambda _e: self._capacity_tick(token))

    def change_capacities(self, at_s: float) -> float:
        """A capacity tick at ``at_s`` (s; a new piece or trace row): the capacities in force
        set from the schedule (the network's, :attr:`caps_now`); returns the next tick's
        instant (s, after ``at_s``; inf: none). The events' ticks and the buffered arrays'
        (netsim.epochs.buffered_arrays, ahead of the clock) both call it."""
        cap = self.dynamics.capacity
        self._set_capacities(cap.at(at_s), at_s)
        return max(cap.next_change_s(at_s), math.nextafter(at_s, math.inf))

    def _capacity_tick(self, token: int) -> None:
        """Capacities change now (a new piece or trace row): links re-shared at once."""
        if token != self._tick_token:
            return
        env = self.env
        nxt = self.change_capacities(env.now)
        if nxt < math.inf:
            fire_after(env, nxt - env.now, lambda _e: self._capacity_tick(token))

def _anyone(available: np.ndarray, rows: np.ndarray, first: int = 1024) -> bool:
    """Whether any of ``rows`` is available (the first few looked at first: usually
    someone is, and a fleet's million need not be gathered)."""
    return bool(available[rows[:first]].any() or available[rows[first:]].any())


class _RoutesByRow:
    """Each device's route from (``to_device``) or to the aggregator, by device row, built
    when first asked for (a fleet of a million asks for its participants' only) and then
    kept by row (an epoch asks for every participant's)."""

    def __init__(self, topology, agg_id: str, ids: tuple[str, ...], to_device: bool) -> None:
        self._topology, self._agg_id, self._ids, self._to_device = topology, agg_id, ids, to_device
        self._by_row: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def of_rows(self, rows: list[int]) -> list:
        """The routes of device rows ``rows``, in order (one call for an epoch's
        participants: the routes kept are looked up without a method call each)."""
        get = self._by_row.get
        return [get(row) or self[row] for row in rows]

    def __getitem__(self, row: int):
        route = self._by_row.get(row)
        if route is not None:
            return route
        if not 0 <= row < len(self._ids):
            raise IndexError(row)
        if self._to_device:
            route = self._topology.route(self._agg_id, self._ids[row])
        else:
            route = self._topology.route(self._ids[row], self._agg_id)
        self._by_row[row] = route
        return route


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
