"""The World (SimPy environment, devices, network, meters) and the run loop.

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

import time
from collections.abc import Generator
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import simpy

from netsim.costs import estimate_epoch
from netsim.devices import DeviceTable, build_device_table
from netsim.energy import EnergyMeter, EnergySnapshot
from netsim.epoch import EpochBarrier, EpochContext, Participant
from netsim.fastepoch import RouteTable, play_plain_epoch
from netsim.gcpause import relaxed_gc
from netsim.network import FlowNetwork, Topology
from netsim.policy import (
    ClusterDecision,
    Decision,
    InvalidDecision,
    Observation,
    Policy,
    validate_decision,
)
from netsim.results.recorder import Recorder
from netsim.scenario.loading import ResolvedNetwork, resolve_network
from netsim.scenario.schema import ModelSpec, Scenario
from netsim.training.models import resolve_model


def resolve_scenario(scenario: Scenario, seed: int) -> Scenario:
    """The scenario with its network made explicit and its model a full spec (for policies)."""
    net = resolve_network(scenario, seed)
    return scenario.model_copy(update={
        "devices": tuple(net.devices), "links": tuple(net.links), "aggregator": net.aggregator,
        "generate": None, "model": resolve_model(scenario.model)})


@dataclass(frozen=True)
class EpochOutcome:
    """What one executed epoch cost: its interval (s) and the energy it used, per node."""

    start_s: float
    end_s: float
    energy: EnergySnapshot


class World:
    """Everything one run simulates; two Worlds never share state."""

    def __init__(self, scenario: Scenario, availability_rng: np.random.Generator,
                 fast_epochs: bool = True) -> None:
        """``fast_epochs``: play plain epochs forward in arrays when they can be
        (netsim.fastepoch); False runs every epoch as SimPy events (the reference)."""
        self.scenario = scenario
        self.fast_epochs = fast_epochs
        self.model: ModelSpec = scenario.model  # type: ignore[assignment]
        net = ResolvedNetwork(list(scenario.devices or []), list(scenario.links or []),
                              str(scenario.aggregator))
        self.node_ids = net.node_ids
        n_dev = len(net.devices)
        pad = [0.0] * (len(self.node_ids) - n_dev)
        self.env = simpy.Environment()
        self.topology = Topology(self.node_ids, net.links)
        self.meter = EnergyMeter([d.power_busy_w for d in net.devices] + pad,
                                 [d.power_idle_w for d in net.devices] + pad)
        self.network = FlowNetwork(self.env, self.topology, self.meter)
        self.devices: DeviceTable = build_device_table(scenario, self.topology)
        self._flops = [float(x) for x in self.devices.flop_per_s]
        agg_id = net.aggregator  # each device's routes from and to the aggregator, by index
        self._down = [self.topology.route(agg_id, d) for d in self.devices.ids]
        self._up = [self.topology.route(d, agg_id) for d in self.devices.ids]
        self._agg_id = net.aggregator
        self._agg = self.devices.aggregator
        self._rng = availability_rng
        self._always = bool(np.all(self.devices.availability >= 1.0))
        self._all_true = np.ones(n_dev, dtype=bool)
        self._all_true.setflags(write=False)
        self._tables: tuple[RouteTable, RouteTable, np.ndarray, np.ndarray] | None = None

    @property
    def now_s(self) -> float:
        """Simulated time now (s)."""
        return float(self.env.now)

    def draw_availability(self) -> np.ndarray:
        """Which devices are available this epoch (each with its ``availability`` probability)."""
        if self._always:
            return self._all_true
        available = self._rng.random(self.devices.n) < self.devices.availability
        available.setflags(write=False)
        return available

    def run_epoch(self, decision: Decision) -> EpochOutcome:
        """Execute one validated decision; returns the epoch's interval and energy."""
        env, model, v = self.env, self.model, decision.variant
        start = env.now
        before = self.meter.snapshot(start)
        model_bytes = model.model_bytes(v)
        flop_per_sample = model.flop_per_sample(v)
        if not (self.fast_epochs and decision.participants and not decision.clusters
                and self.network.active_flows == 0
                and self._play_plain(decision, model_bytes, flop_per_sample)):
            self._run_events(decision, model_bytes, flop_per_sample)
        n_part = len(decision.participants) + len(decision.clusters)
        agg_flop = 2.0 * model.params * model.variants[v].params_fraction * n_part
        self.meter.set_busy(self._agg, env.now)
        env.run(until=env.timeout(agg_flop / self._flops[self._agg]))
        self.meter.set_idle(self._agg, env.now)
        end = env.now
        return EpochOutcome(start, end, self.meter.snapshot(end) - before)

    def _run_events(self, decision: Decision, model_bytes: float,
                    flop_per_sample: float) -> None:
        """The epoch's transfers and training as SimPy events, up to the last update's
        arrival (the reference path: any decision, any network state)."""
        env = self.env
        barrier = EpochBarrier(env, len(decision.participants) + len(decision.clusters))
        ctx = EpochContext(env, self.network, self.meter, model_bytes, barrier)
        index, flops, down, up = self.devices.index, self._flops, self._down, self._up
        with self.network.batch():  # every download starts now: one rebalance per shared link
            for dev, samples in decision.participants.items():
                i = index[dev]
                Participant(ctx, i, samples * flop_per_sample / flops[i], down[i], up[i])
        for cluster in decision.clusters:
            env.process(self._cluster(cluster, flop_per_sample, model_bytes, barrier))
        env.run(until=barrier.event)

    def _play_plain(self, decision: Decision, model_bytes: float,
                    flop_per_sample: float) -> bool:
        """The plain epoch played forward in arrays up to the last update's arrival
        (netsim.fastepoch): bytes, energy and busy time booked as the event path books them.
        False, with nothing changed, when it needs the event path."""
        if self._tables is None:
            t = self.devices  # built by build_device_table, routes included
            assert t.down_routes is not None and t.up_routes is not None and t.capacity_bps is not None
            self._tables = (t.down_routes, t.up_routes, t.capacity_bps,
                            np.asarray(self._flops, dtype=float))
        down, up, capacity, flops = self._tables
        n, index = len(decision.participants), self.devices.index
        rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
        samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
        compute_s = samples * flop_per_sample / flops[rows]
        now = self.env.now
        plan = play_plain_epoch(now, rows, compute_s, 8.0 * model_bytes, down, up, capacity)
        if plan is None:
            return False
        # downloads start in participant order, uploads in the order training ends
        up_rows = rows[np.argsort(plan.trained_s, kind="stable")]
        for table, order in ((down, rows), (up, up_rows)):
            moving = order[table.hop_start[order + 1] > table.hop_start[order]]
            self.network.book(table.route_id[moving].tolist(), [model_bytes] * len(moving))
        self.meter.add_busy_many(rows.tolist(),
                                 (plan.trained_s - plan.download_arrival_s).tolist())
        end = float(plan.upload_arrival_s.max())
        if end > now:
            self.env.run(until=end)
        return True

    def _cluster(self, cluster: ClusterDecision, flop_per_sample: float, nbytes: float,
                 barrier: EpochBarrier) -> Generator[simpy.Event, Any, None]:
        env, head = self.env, cluster.devices[0]
        yield self.network.transfer(self._agg_id, head, nbytes)
        flop = cluster.samples * flop_per_sample
        act = cluster.samples * cluster.activation_bytes_per_sample / 2.0
        members = [env.process(self._member(dev, share * flop, act, head))
                   for dev, share in zip(cluster.devices, cluster.flop_share, strict=True)]
        yield env.all_of(members)
        yield self.network.transfer(head, self._agg_id, nbytes)
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


def _make_backend(resolved: Scenario, rng: np.random.Generator):
    model, training = resolved.model, resolved.training
    if training.backend == "real":
        from netsim.training.real import RealBackend

        ids = [d.id for d in resolved.devices or []]
        samples = [d.samples for d in resolved.devices or []]
        return RealBackend(model, ids, samples, training, rng)
    from netsim.training.loss import SurrogateLoss

    return SurrogateLoss(model, training, rng)  # type: ignore[arg-type]


def loss_source(resolved: Scenario) -> str:
    """Where the run's training curve comes from: real training, or the surrogate's loss
    parameters' ``source`` (fitted to measured curves, or an illustrative placeholder)."""
    if resolved.training.backend == "real":
        return "real training (netsim.training.real)"
    loss = resolved.model.loss  # type: ignore[union-attr]
    return (loss.source if loss is not None else "") or "explicit loss parameters"


def _samples_by_device(decision: Decision) -> dict[str, int]:
    if not decision.clusters:
        return dict(decision.participants)
    out = dict(decision.participants)
    for cluster in decision.clusters:
        out[cluster.devices[0]] = out.get(cluster.devices[0], 0) + cluster.samples
    return out


def _late_message(epoch: int, end_s: float, training: Any, ran: bool = False) -> str:
    what = ("ended (contention) at {:.6g} s, after the deadline ({:g} s); not recorded, its "
            "energy is in the run's totals") if ran else \
        "would end at {:.6g} s at the earliest, after the deadline ({:g} s); not run"
    return f"epoch {epoch} " + what.format(end_s, training.deadline_s)


def _contention_free(table: DeviceTable) -> DeviceTable:
    """The device table without its routes: :func:`estimate_epoch` then times each transfer
    alone on its route, a lower bound of the engine's epoch, at a fraction of the cost."""
    routed = {"down_routes", "up_routes", "capacity_bps"} & {f.name for f in fields(table)}
    cleared: dict[str, Any] = dict.fromkeys(routed)
    return replace(table, **cleared) if routed else table


def _ends_after(world: World, table: DeviceTable, decision: Decision, epoch: int,
                training: Any) -> str | None:
    """Why a data-parallel epoch cannot end by the deadline (its contention-free time, a lower
    bound of the engine's, already passes it), or None when it may."""
    if decision.clusters or not decision.participants:
        return None
    samples = np.zeros(table.n)
    n, index = len(decision.participants), table.index
    samples[np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)] = \
        np.fromiter(decision.participants.values(), dtype=float, count=n)
    end = world.now_s + estimate_epoch(table, world.model, decision.variant, samples).time_s
    if end <= training.deadline_s * (1.0 + 1e-9):
        return None
    return _late_message(epoch, end, training)


@relaxed_gc()
def run(scenario: Scenario, policy: Policy, seed: int, recorder: Recorder,
        progress: Any = None, raise_errors: bool = False, fast_epochs: bool = True) -> None:
    """Simulate one run of ``policy`` on ``scenario`` with ``seed``, recording into ``recorder``.

    Failures inside the run (an invalid decision, a policy error) end the run with status
    ``failed`` and the error; they are recorded, and re-raised only if ``raise_errors``.
    ``fast_epochs=False`` runs every epoch as SimPy events (see :class:`World`).
    """
    wall0 = time.perf_counter()
    streams = np.random.SeedSequence([seed, 0x6E73]).spawn(4)
    policy_rng, loss_rng, avail_rng, _spare = (np.random.default_rng(s) for s in streams)
    status, error = "target_missed", ""
    world = None
    try:
        resolved = resolve_scenario(scenario, seed)
        world = World(resolved, avail_rng, fast_epochs=fast_epochs)
        training = resolved.training
        recorder.start(world.node_ids, world.devices)
        backend = _make_backend(resolved, loss_rng)
        policy.reset(resolved, policy_rng)
        history = [backend.initial_loss()]
        variant: int | None = None
        recorder.initial_loss = history[0]
        bound_table = _contention_free(world.devices)
        recorder.loss_source = loss_source(resolved)
        for epoch in range(training.max_epochs):
            if world.now_s >= training.deadline_s:
                status = "deadline"
                break
            obs = Observation(epoch, world.now_s, training.deadline_s, recorder.energy_j,
                              tuple(history), variant, world.devices, world.draw_availability(),
                              world.model, training, resolved)
            decision = policy.decide(obs)
            validate_decision(decision, obs, policy.name)
            if decision.stop:
                status, error = "target_missed", decision.reason
                break
            late = _ends_after(world, bound_table, decision, epoch, training)
            if late is not None:  # the deadline is a hard stop: nothing runs past it
                status, error = "deadline", late
                break
            outcome = world.run_epoch(decision)
            if outcome.end_s > training.deadline_s:
                status, error = "deadline", _late_message(epoch, outcome.end_s, training, True)
                break
            step = backend.advance(_samples_by_device(decision), decision.variant)
            history.append(step.loss)
            variant = decision.variant
            recorder.epoch(epoch, outcome, step, decision, world.model)
            if progress is not None:
                progress(epoch, world.now_s)
            if step.loss <= training.target_loss:
                status = "ok"
                break
    except InvalidDecision as exc:
        status, error = "failed", str(exc)
        if raise_errors:
            raise
    except Exception as exc:  # a policy or backend bug: recorded, the caller decides
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        if raise_errors:
            raise
    finally:
        recorder.finish(status, error, world, time.perf_counter() - wall0)
