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
  ``ceil(1.25 x devices / edges)``; **selection** per edge: its idle devices with the most
  data per second of estimated round time (samples / round time), ``participants_per_edge``
  of them.
"""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from netsim.policy import Decision, Observation, register
from netsim.scenario.schema import Scenario
from policies.baselines import FleetPolicy, all_samples, nobody_can_train
from policies.hierarchical.hierfavg import per_edge


class RflHaParams(BaseModel):
    """edge_rounds: kappa_2, synchronous edge aggregations per edge model sent to the cloud;
    participants_per_edge: devices per edge job, drawn at random (absent: every idle device
    of the edge); buffer_updates: the cloud aggregates every this many edge models;
    max_staleness: optional, edge models staler than this many cloud aggregations are
    discarded."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    edge_rounds: Annotated[int, Field(ge=1, le=10_000)] = 2
    participants_per_edge: Annotated[int, Field(ge=1)] | None = None
    buffer_updates: Annotated[int, Field(ge=1)] = 1
    max_staleness: Annotated[int, Field(ge=0)] | None = None


class AsyncHflParams(BaseModel):
    """edge_rounds: edge aggregations per edge model sent to the cloud; participants_per_edge:
    devices training at once per edge; edge_buffer_updates: each edge aggregates every this
    many device updates (at most participants_per_edge); buffer_updates: the cloud aggregates
    every this many edge models; max_staleness: optional, at the cloud."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    edge_rounds: Annotated[int, Field(ge=1, le=10_000)] = 2
    participants_per_edge: Annotated[int, Field(ge=1)] = 10
    edge_buffer_updates: Annotated[int, Field(ge=1)] = 5
    buffer_updates: Annotated[int, Field(ge=1)] = 1
    max_staleness: Annotated[int, Field(ge=0)] | None = None


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

    def decide(self, obs: Observation) -> Decision:
        p, tiers = self.params, obs.tiers
        if tiers is None:
            return Decision(stop=True, reason="rfl-ha needs edge aggregators")
        idx = self._fits(obs)
        idx = idx[tiers.default_edge[idx] >= 0]
        idx = idx[_idle_edges(obs, idx, tiers.default_edge[idx])]
        idx = per_edge(obs, idx, self._rng, p.participants_per_edge)
        busy = 0 if obs.edges_busy is None else int(np.count_nonzero(obs.edges_busy))
        if not len(idx) and not busy and not obs.buffered:
            return nobody_can_train(obs)
        started = len(np.unique(tiers.default_edge[idx]))
        return Decision(participants=all_samples(obs, idx), edge_rounds=p.edge_rounds,
                        buffer_updates=_cloud_k(obs, started, p.buffer_updates),
                        max_staleness=p.max_staleness)


@register("async-hfl", "Async-HFL: asynchronous edges (every edge_buffer_updates device "
          "updates) and cloud (every buffer_updates edge models); association by estimated "
          "round time under a load cap, selection per edge by data per second (netsim's "
          "heuristics)", AsyncHflParams)
class AsyncHfl(FleetPolicy):
    name = "async-hfl"
    params: AsyncHflParams

    def __init__(self, params: AsyncHflParams) -> None:
        super().__init__(params)
        self._edge: np.ndarray | None = None
        self._score: np.ndarray | None = None

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        super().reset(scenario, rng)
        self._edge = self._score = None

    def decide(self, obs: Observation) -> Decision:
        p, tiers = self.params, obs.tiers
        if tiers is None:
            return Decision(stop=True, reason="async-hfl needs edge aggregators")
        if self._edge is None:
            self._edge, self._score = associate(obs)
        edge, score = self._edge, self._score
        assert score is not None
        idx = self._fits(obs)
        idx = idx[edge[idx] >= 0]
        idx = idx[_idle_edges(obs, idx, edge[idx])]
        chosen = []
        for k in np.unique(edge[idx]).tolist():
            mine = idx[edge[idx] == k]
            chosen.append(mine[np.argsort(-score[mine], kind="stable")[:p.participants_per_edge]])
        pick = np.sort(np.concatenate(chosen)) if chosen else idx[:0]
        busy = 0 if obs.edges_busy is None else int(np.count_nonzero(obs.edges_busy))
        if not len(pick) and not busy and not obs.buffered:
            return nobody_can_train(obs)
        ids = obs.devices.ids
        assoc = {ids[r]: tiers.ids[edge[r]] for r in pick.tolist()
                 if edge[r] != tiers.default_edge[r]}
        return Decision(participants=all_samples(obs, pick), edge_rounds=p.edge_rounds,
                        association=assoc or None,
                        edge_buffer_updates=min(p.edge_buffer_updates, p.participants_per_edge),
                        buffer_updates=_cloud_k(obs, len(chosen), p.buffer_updates),
                        max_staleness=p.max_staleness)


def associate(obs: Observation) -> tuple[np.ndarray, np.ndarray]:
    """netsim's association heuristic (module docstring): per device row its edge (-1: none)
    and its selection score (samples per second of estimated round time at that edge)."""
    tiers, t = obs.tiers, obs.devices
    assert tiers is not None
    nbytes = obs.model.model_bytes(0)
    compute = t.samples * obs.model.flop_per_sample(0) / t.flop_per_s
    edge = np.full(t.n, -1, dtype=np.intp)
    score = np.zeros(t.n)
    rows = [r for r in t.trainers.tolist() if tiers.reach_start[r + 1] > tiers.reach_start[r]]
    cap = math.ceil(1.25 * len(rows) / max(tiers.n, 1))
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
    return edge, score
