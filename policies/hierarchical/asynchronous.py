"""Asynchronous hierarchical policies (netsim's formalization, docs/hierarchical.md).

- ``rfl-ha`` (RFL-HA, Wang et al., "Resource-Efficient Federated Learning with Hierarchical
  Aggregation in Edge Computing", INFOCOM 2021): synchronous edges, asynchronous cloud. Each
  idle edge starts a job with its devices (every one, or ``participants_per_edge`` drawn at
  random); the cloud aggregates every ``buffer_updates`` edge models (1: on each arrival),
  stale ones weighted by the progress model's staleness weight.
- ``async-hfl`` (Async-HFL, Yu et al., IoTDI 2023): asynchronous at both tiers. Each edge
  aggregates every ``edge_buffer_updates`` device updates, the cloud every ``buffer_updates``
  edge models. The paper selects devices per gateway by a learned utility and associates
  devices with gateways by an integer program (Gurobi); netsim's stand-ins, documented as
  ours: **association** (once, at the first epoch): devices with the fewest reachable edges
  first, each to the reachable edge with the shortest estimated round time (download, local
  training, upload at its route's bottleneck and latency) among edges below a load cap of
  ``ceil(1.25 x devices / edges some device reaches)``; **selection** per edge: its idle
  devices with the most data per second of estimated round time (samples / round time),
  ``participants_per_edge`` of them.

Options for Async-HFL's own baselines (``scripts/run_baseline_nycmesh.sh`` of its code; the
readings are ours): ``selection: random`` (its baselines' random selection: each edge's
idle devices in a random order), ``reassociate_every: N`` (its ``server.adjust_round``: the
association re-solved before every N-th cloud round, from each device's measured training
speed where one was measured, else its declared one), ``throughput_cap_bps`` (its
``gateways.throughput_ub``, server/clientSelection.py: a device's throughput is the model's
size over its estimated round time, and an edge starts devices, in selection order, only
while the throughputs of those it has training stay within the cap; a device whose own
throughput exceeds what is left is passed over, the first that would cross it after those
ends the edge's selection; rfl-ha takes it too, its devices in a random order at their
default edges, or with ``reassociate_every`` at the edges the same heuristic gives). Its hierarchical FedAsync-like baseline is
``async-hfl`` with ``selection: random, edge_buffer_updates: 1`` (each device update taken on
arrival); its semi-asynchronous FedBuff-like baseline ``selection: random`` with
``edge_buffer_updates`` K > 1 (experiments/hierarchical/run.py, ``paper_policies``).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from netsim.policy import Decision, Observation, register
from netsim.policy.requirements import EDGES
from netsim.scenario.schema import Scenario
from netsim.training.loss import LossPredictor, PlanningCoverage
from policies.baselines import FleetPolicy, all_samples, nobody_can_train
from policies.hierarchical.hierfavg import per_edge

#: Parameters added for Async-HFL's baselines (issue 56 item 2), with the value that means "as
#: before": left out of the parameters' data there, so the run ids of runs without them stay
#: what they were (as baechi's ``graph``).
_LATER_PARAMS: dict[str, Any] = {"selection": "utility", "reassociate_every": None,
                                 "throughput_cap_bps": None}


def _later_left_out(data: Any) -> Any:
    """``data`` (a parameters' dump) without the :data:`_LATER_PARAMS` at their defaults."""
    if isinstance(data, dict):
        for key, default in _LATER_PARAMS.items():
            if key in data and data[key] == default:
                del data[key]
    return data


class RflHaParams(BaseModel):
    """edge_rounds: kappa_2, synchronous edge aggregations per edge model sent to the cloud;
    participants_per_edge: devices per edge job, drawn at random (absent: every idle device
    of the edge); buffer_updates: the cloud aggregates every this many edge models;
    max_staleness: optional, edge models staler than this many cloud aggregations are
    discarded; throughput_cap_bps: optional, an edge's cap on its job's devices' summed
    model bits per second of estimated round time (bit/s); reassociate_every: optional,
    associate devices with edges by netsim's heuristic (:func:`associate_with_rounds`, as
    async-hfl) and re-solve it every this many cloud rounds, from the devices' measured
    training speeds after the first (the paper's RFL-HA re-solves every 10 rounds with its
    solver; absent: each device at its default edge, as before)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    edge_rounds: Annotated[int, Field(ge=1, le=10_000)] = 2
    participants_per_edge: Annotated[int, Field(ge=1)] | None = None
    buffer_updates: Annotated[int, Field(ge=1)] = 1
    max_staleness: Annotated[int, Field(ge=0)] | None = None
    throughput_cap_bps: Annotated[float, Field(gt=0)] | None = None
    reassociate_every: Annotated[int, Field(ge=1)] | None = None

    @model_serializer(mode="wrap")
    def _as_before(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The parameters' data, ``throughput_cap_bps`` left out while absent (run ids)."""
        return _later_left_out(handler(self))


class AsyncHflParams(BaseModel):
    """edge_rounds: edge aggregations per edge model sent to the cloud; participants_per_edge:
    devices training at once per edge; edge_buffer_updates: each edge aggregates every this
    many device updates (at most participants_per_edge); buffer_updates: the cloud aggregates
    every this many edge models; max_staleness: optional, at the cloud; selection: utility
    (netsim's data per second), random, or classes (the loss drop the policy's per-class
    state predicts from the device's data, per second: netsim's stand-in for the paper's
    gradient-diversity utility under label skew); reassociate_every: re-solve the association every
    this many cloud rounds (absent: once); throughput_cap_bps: optional, an edge's cap on
    its training devices' summed model bits per second of estimated round time (bit/s)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    edge_rounds: Annotated[int, Field(ge=1, le=10_000)] = 2
    participants_per_edge: Annotated[int, Field(ge=1)] = 10
    edge_buffer_updates: Annotated[int, Field(ge=1)] = 5
    buffer_updates: Annotated[int, Field(ge=1)] = 1
    max_staleness: Annotated[int, Field(ge=0)] | None = None
    selection: Literal["utility", "random", "classes"] = "utility"
    reassociate_every: Annotated[int, Field(ge=1)] | None = None
    throughput_cap_bps: Annotated[float, Field(gt=0)] | None = None

    @model_serializer(mode="wrap")
    def _as_before(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The parameters' data, the options added for the paper's baselines left out at
        their defaults (run ids)."""
        return _later_left_out(handler(self))


def _idle_edges(obs: Observation, idx: np.ndarray, edge: np.ndarray) -> np.ndarray:
    """Of devices ``idx`` with edges ``edge``: those idle whose edge is idle too (a mask)."""
    ok = np.ones(len(idx), dtype=bool)
    if obs.busy is not None:
        ok &= ~obs.busy[idx]
    if obs.edges_busy is not None:
        ok &= ~obs.edges_busy[edge]
    return ok


def _cloud_k(obs: Observation, started_edges: int, k: int) -> int:
    """The cloud's K: at most the edge models that can land."""
    busy = 0 if obs.edges_busy is None else int(np.count_nonzero(obs.edges_busy))
    return max(1, min(k, started_edges + busy))  # (busy: the buffered edge models' too)


@register("rfl-ha", "RFL-HA: synchronous edges (edge_rounds per edge model), asynchronous "
          "cloud aggregating every buffer_updates edge models", RflHaParams)
class RflHa(FleetPolicy):
    name = "rfl-ha"
    params: RflHaParams
    requires = frozenset({EDGES})

    def __init__(self, params: RflHaParams) -> None:
        super().__init__(params)
        self._association = Association()

    @property
    def associations(self) -> int:
        """How many times the association was solved (this run; 0 without
        ``reassociate_every``)."""
        return self._association.solved

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        super().reset(scenario, rng)
        self._association = Association()

    def _edges(self, obs: Observation) -> tuple[np.ndarray, np.ndarray | None]:
        """Each device row's edge and estimated round time (s): the default edges (round
        times None: :func:`default_round_s`) without ``reassociate_every``, else netsim's
        heuristic re-solved every ``reassociate_every`` cloud rounds (:class:`Association`,
        as async-hfl's)."""
        tiers, every = obs.tiers, self.params.reassociate_every
        assert tiers is not None
        if every is None:
            return tiers.default_edge, None
        edge, _, rounds = self._association.current(obs, every)
        return edge, rounds

    def decide(self, obs: Observation) -> Decision:
        p, tiers = self.params, obs.tiers
        if tiers is None:
            return Decision(stop=True, reason="rfl-ha needs edge aggregators")
        edge, rounds = self._edges(obs)
        idx = self._fits(obs)
        idx = idx[edge[idx] >= 0]
        idx = idx[_idle_edges(obs, idx, edge[idx])]
        if p.throughput_cap_bps is None:
            idx = per_edge(obs, idx, self._rng, p.participants_per_edge, edge)
        else:
            idx = self._capped(obs, idx, p.throughput_cap_bps, edge, rounds)
        busy = 0 if obs.edges_busy is None else int(np.count_nonzero(obs.edges_busy))
        if not len(idx) and not busy and not obs.buffered:
            return nobody_can_train(obs)
        started = len(np.unique(edge[idx]))
        ids = obs.devices.ids
        assoc = {ids[r]: tiers.ids[edge[r]] for r in idx.tolist()
                 if edge[r] != tiers.default_edge[r]}
        return Decision(participants=all_samples(obs, idx), edge_rounds=p.edge_rounds,
                        association=assoc or None,
                        buffer_updates=_cloud_k(obs, started, p.buffer_updates),
                        max_staleness=p.max_staleness)

    def _capped(self, obs: Observation, idx: np.ndarray, cap_bps: float,
                edge: np.ndarray, rounds: np.ndarray | None) -> np.ndarray:
        """Of devices ``idx``, each edge's (``edge``: per device row) under the throughput
        cap (module docstring), taken in a random order, at most ``participants_per_edge``;
        ``rounds``: the devices' estimated round times (s; None: at their default edges)."""
        thpt = 8.0 * obs.model.model_bytes(0) / (default_round_s(obs) if rounds is None
                                                 else rounds)
        chosen = [_within_cap(obs, self._rng.permutation(idx[edge[idx] == k]), edge, k, thpt,
                              cap_bps)[:self.params.participants_per_edge]
                  for k in np.unique(edge[idx]).tolist()]
        return np.sort(np.concatenate(chosen)) if chosen else idx[:0]


@register("async-hfl", "Async-HFL: asynchronous edges (every edge_buffer_updates device "
          "updates) and cloud (every buffer_updates edge models); association by estimated "
          "round time under a load cap, selection per edge by data per second (netsim's "
          "heuristics)", AsyncHflParams)
class AsyncHfl(FleetPolicy):
    name = "async-hfl"
    params: AsyncHflParams
    requires = frozenset({EDGES})

    def __init__(self, params: AsyncHflParams) -> None:
        super().__init__(params)
        self._association = Association()
        self._coverage: PlanningCoverage | None = None
        self._coverage_built = False

    @property
    def associations(self) -> int:
        """How many times the association was solved (this run)."""
        return self._association.solved

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        super().reset(scenario, rng)
        self._association = Association()
        self._coverage = None
        self._coverage_built = False

    def _class_utility(self, obs: Observation, rows: np.ndarray,
                       rounds: np.ndarray) -> np.ndarray | None:
        """``selection: classes``: each device row's predicted loss drop from training its
        samples once, by the policy's per-class state (the world's formula,
        :class:`netsim.training.loss.PlanningCoverage`), per second of its estimated round
        time ``rounds``; None where the data are IID (no per-class state: the data-per-second
        utility then ranks)."""
        if not self._coverage_built:
            self._coverage_built = True
            self._coverage = PlanningCoverage.of(
                LossPredictor(obs.model, obs.training), obs.model, obs.training,
                obs.devices.index, obs.devices.samples, obs.label_counts)
        cov = self._coverage
        if cov is None or not len(rows):
            return None
        held = obs.devices.samples[rows].astype(float)
        gains = np.asarray(cov.predictor.gain(held, np.ones(len(rows))), dtype=float)
        variant = cov.variant if cov.variant is not None else 0
        after = cov.repeat_means(rows, np.diag(held), gains, np.ones(len(rows)), variant)
        return (cov.mean(variant) - after) / rounds[rows]

    def decide(self, obs: Observation) -> Decision:
        p, tiers = self.params, obs.tiers
        if tiers is None:
            return Decision(stop=True, reason="async-hfl needs edge aggregators")
        edge, score, rounds = self._association.current(obs, p.reassociate_every)
        idx = self._fits(obs)
        idx = idx[edge[idx] >= 0]
        idx = idx[_idle_edges(obs, idx, edge[idx])]
        nbits = 8.0 * obs.model.model_bytes(0)
        chosen = []
        for k in np.unique(edge[idx]).tolist():
            mine = idx[edge[idx] == k]
            utility = self._class_utility(obs, mine, rounds) if p.selection == "classes" \
                else None
            if p.selection == "random":
                order = self._rng.permutation(mine)
            elif utility is not None:
                order = mine[np.argsort(-utility, kind="stable")]
            else:
                order = mine[np.argsort(-score[mine], kind="stable")]
            if p.throughput_cap_bps is not None:
                order = _within_cap(obs, order, edge, k, nbits / rounds, p.throughput_cap_bps)
            if len(order):
                chosen.append(order[:p.participants_per_edge])
        pick = np.sort(np.concatenate(chosen)) if chosen else idx[:0]
        busy = 0 if obs.edges_busy is None else int(np.count_nonzero(obs.edges_busy))
        if not len(pick) and not busy and not obs.buffered:
            return nobody_can_train(obs)
        ids = obs.devices.ids
        assoc = {ids[r]: tiers.ids[edge[r]] for r in pick.tolist()
                 if edge[r] != tiers.default_edge[r]}
        participants = all_samples(obs, pick)
        if self._coverage is not None and participants:  # (what it decided, as trained)
            self._coverage.commit(participants, 0)
        return Decision(participants=participants, edge_rounds=p.edge_rounds,
                        association=assoc or None,
                        edge_buffer_updates=min(p.edge_buffer_updates, p.participants_per_edge),
                        buffer_updates=_cloud_k(obs, len(chosen), p.buffer_updates),
                        max_staleness=p.max_staleness)


class Association:
    """netsim's association of devices with edges (:func:`associate_with_rounds`) as a run
    keeps it: solved at the first decision and re-solved before every ``every``-th cloud
    round (None: once), from the devices' measured training speeds after the first; a device
    still training stays with the edge it trains for (async-hfl's and rfl-ha's)."""

    def __init__(self) -> None:
        self.edge: np.ndarray | None = None
        self.score: np.ndarray | None = None
        self.round_s: np.ndarray | None = None
        self.solved = 0
        """How many times it was solved."""

    def current(self, obs: Observation, every: int | None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per device row its edge, selection score and estimated round time (s) for this
        decision, re-solved where ``every`` says so."""
        if self.edge is None or (every is not None and obs.epoch > 0
                                 and obs.epoch % every == 0):
            previous = self.edge
            edge, self.score, self.round_s = associate_with_rounds(
                obs, measured=previous is not None)
            self.solved += 1
            if previous is not None and obs.busy is not None:
                edge = np.where(obs.busy, previous, edge)
            self.edge = edge
        assert self.score is not None and self.round_s is not None
        return self.edge, self.score, self.round_s


def _within_cap(obs: Observation, order: np.ndarray, edge: np.ndarray, k: int,
                throughput_bps: np.ndarray, cap_bps: float) -> np.ndarray:
    """Of edge ``k``'s candidates ``order`` (in selection order), those it starts under the
    throughput cap (module docstring: Async-HFL's ``ClientSelection.select``): the cap less
    the throughputs of the edge's devices still training (``obs.busy``) is what is left; a
    candidate whose own throughput exceeds it is passed over; of the rest, the longest
    prefix whose throughputs sum within it."""
    left = cap_bps
    if obs.busy is not None:
        left -= float(throughput_bps[obs.busy & (edge == k)].sum())
    order = order[throughput_bps[order] < left]
    fits = np.cumsum(throughput_bps[order]) <= left
    return order[:int(np.argmin(fits)) if not fits.all() else len(order)]


def default_round_s(obs: Observation) -> np.ndarray:
    """Per device row, its estimated round time at its default edge (s: download, local
    training, upload at the route's bottleneck and latency, as :func:`associate` estimates
    it; inf for a device without an edge)."""
    tiers, t = obs.tiers, obs.devices
    assert tiers is not None
    nbits = 8.0 * obs.model.model_bytes(0)
    compute = t.samples * obs.model.flop_per_sample(0) / t.flop_per_s
    out = np.full(t.n, np.inf)
    has = np.diff(tiers.reach_start) > 0
    first = tiers.reach_start[:-1][has]  # (a device's default edge is its first reachable)
    out[has] = 2.0 * (nbits / tiers.reach_bps[first] + tiers.reach_latency_s[first]) \
        + compute[has]
    return out


def associate(obs: Observation) -> tuple[np.ndarray, np.ndarray]:
    """netsim's association heuristic (module docstring): per device row its edge (-1: none)
    and its selection score (samples per second of estimated round time at that edge)."""
    edge, score, _ = associate_with_rounds(obs)
    return edge, score


def associate_with_rounds(obs: Observation, measured: bool = False
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """netsim's association heuristic (module docstring): per device row its edge (-1: none),
    its selection score (samples per second of estimated round time at that edge) and that
    estimated round time (s; inf without an edge). ``measured``: a device's training speed
    is its last measured one where there is one (``obs.measured_flop_per_s``), else its
    declared one."""
    tiers, t = obs.tiers, obs.devices
    assert tiers is not None
    nbytes = obs.model.model_bytes(0)
    speed = np.asarray(t.flop_per_s, dtype=float)
    seen = getattr(obs, "measured_flop_per_s", None)
    if measured and seen is not None:
        seen = np.asarray(seen, dtype=float)
        speed = np.where(np.isfinite(seen) & (seen > 0), seen, speed)
    compute = t.samples * obs.model.flop_per_sample(0) / speed
    edge = np.full(t.n, -1, dtype=np.intp)
    score = np.zeros(t.n)
    round_s = np.full(t.n, np.inf)
    rows = [r for r in t.trainers.tolist() if tiers.reach_start[r + 1] > tiers.reach_start[r]]
    reachable = np.unique(np.concatenate(
        [tiers.reach_edges[tiers.reach_start[r]:tiers.reach_start[r + 1]] for r in rows]
        or [np.zeros(0, dtype=np.intp)]))
    cap = math.ceil(1.25 * len(rows) / max(len(reachable), 1))  # (over edges a trainer reaches)
    load = np.zeros(tiers.n, dtype=np.intp)
    counts = np.diff(tiers.reach_start)
    for r in sorted(rows, key=lambda r: (int(counts[r]), r)):
        lo, hi = int(tiers.reach_start[r]), int(tiers.reach_start[r + 1])
        edges = tiers.reach_edges[lo:hi]
        rounds = 2.0 * (8.0 * nbytes / tiers.reach_bps[lo:hi] + tiers.reach_latency_s[lo:hi]) \
            + compute[r]
        open_ = load[edges] < cap
        best = int(np.argmin(np.where(open_, rounds, np.inf))) if open_.any() \
            else int(np.argmin(rounds))
        edge[r] = edges[best]
        load[edges[best]] += 1
        score[r] = t.samples[r] / rounds[best]
        round_s[r] = rounds[best]
    return edge, score, round_s
