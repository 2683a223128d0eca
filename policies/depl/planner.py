"""DepL's planner: the outer loop over the amount of data, clusters, and the graph search.

netsim's formalization. The amount of data is the fraction ``phi`` of the trainers' samples
trained on in each epoch (``round(phi * N)`` samples). For each ``phi`` on a grid, ascending,
and each allowed variant, :func:`~policies.depl.placement.place_epoch` finds the epoch's
cluster (cheapest capacity within the epoch's time budget, by default ``deadline_s /
max_epochs`` so that any plan within the horizon meets the deadline); the expanded graph
(:mod:`policies.depl.graph`) then gives the cheapest variant sequence that meets the goal.
The outer loop records the smallest feasible ``phi`` (the papers' "smallest amount of data");
with ``data_rule="cheapest"`` (default) it keeps going and returns the cheapest feasible plan
over the grid, because in netsim less data per epoch means more epochs, whose fixed costs
(transfers, aggregation, idle power) can outweigh the saving.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np

from netsim.devices import DeviceTable
from netsim.scenario.schema import ModelSpec, TrainingSpec
from netsim.training.loss import LossPredictor, LossState, PlanningCoverage
from policies.depl.graph import search
from policies.depl.placement import Cluster, eligible_trainers, place_epoch


@dataclass(frozen=True)
class Goal:
    """What a plan must reach: ``factor * mean final loss <= target_loss``.

    DepL: ``factor = exp(pi-quantile of the log-spread)``; expectation-driven: 1; the
    safety-margin heuristic: 1 with a lowered ``target_loss``. ``label`` names the level in
    messages (e.g. "0.9-quantile").
    """

    target_loss: float
    factor: float
    label: str
    level: Callable | None = None  # (variants, n_eff) -> level; replaces factor when given


@dataclass(frozen=True)
class Plan:
    """A training plan (or the reason there is none).

    feasible: whether some plan meets the goal within the horizon.
    variants / clusters: the variant and the cluster of each epoch.
    data_fraction: phi of the plan; smallest_fraction: the smallest feasible phi found.
    cost_j: predicted energy (J); final_level: the planned level (e.g. the pi-quantile of the
    final loss); final_mean: the predicted mean-curve loss after the plan.
    reason: why no plan exists (empty when feasible). planning_s: wall time of planning (s).
    costs_by_fraction: the cheapest plan's cost (J) for each phi (inf = none).
    info: what an exact reference proved about the plan (depl-optimum: status, bound, gap).
    """

    feasible: bool
    variants: tuple[int, ...] = ()
    clusters: tuple[Cluster, ...] = ()
    data_fraction: float = float("nan")
    smallest_fraction: float = float("nan")
    cost_j: float = float("inf")
    final_level: float = float("nan")
    final_mean: float = float("nan")
    reason: str = ""
    planning_s: float = 0.0
    costs_by_fraction: dict[float, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def switches(self) -> int:
        """How many times the plan changes variant."""
        return sum(a != b for a, b in zip(self.variants, self.variants[1:], strict=False))


PlacementMemo = dict[tuple[int, int, float, str], Cluster | None]


def epoch_options(table: DeviceTable, model: ModelSpec, training: TrainingSpec,
                  fraction: float, variants: Sequence[int], budget_s: float,
                  placement: str = "auto", memo: PlacementMemo | None = None
                  ) -> tuple[int, list[Cluster | None]]:
    """Samples per epoch for ``fraction`` and the cheapest cluster of each variant (None where
    no placement meets the budget or memory).

    ``memo``: placements already solved, keyed by (variant, samples, budget, method), filled
    here; valid for one (table, model, training) only. A placement depends on nothing else,
    so DepL's planning (every relaxation and variant set over the same grid of phi) solves
    each distinct one once: on the 6-device x 3-variant instance 18 of its 126 placements
    are distinct."""
    total = int(table.samples[table.trainers].sum())
    samples = max(1, int(round(fraction * total)))
    out: list[Cluster | None] = [None] * len(model.variants)
    for v in variants:
        key = (int(v), samples, float(budget_s), placement)
        if memo is not None and key in memo:
            out[v] = memo[key]
            continue
        cand = eligible_trainers(table, model, v, training.memory_overhead)
        out[v] = place_epoch(table, model, v, samples, budget_s, cand, method=placement)
        if memo is not None:
            memo[key] = out[v]
    return samples, out


def cluster_gain(pred: LossPredictor, cluster: Cluster) -> float:
    """Effective samples one epoch on ``cluster`` adds: the progress model's gain for its
    samples and its participant count, times its coverage weight under label skew
    (``Cluster.gain_weight``)."""
    return float(pred.gain(cluster.samples.sum(), len(cluster.members))) * cluster.gain_weight


def epoch_gains(pred: LossPredictor, clusters: Sequence[Cluster | None]) -> list[float]:
    """:func:`cluster_gain` of each variant's cluster (0 where there is no cluster)."""
    return [0.0 if c is None else cluster_gain(pred, c) for c in clusters]


def weighted_clusters(pred: LossPredictor, coverage: PlanningCoverage,
                      clusters: Sequence[Cluster | None], target_mean: float, horizon: int
                      ) -> list[Cluster | None]:
    """The clusters with their coverage weights (netsim's extension of DepL, whose papers
    assume IID data): each cluster's epoch repeated toward the mean loss ``target_mean``
    (at most ``horizon`` epochs), rated by the policy's per-class state
    (:meth:`netsim.training.loss.PlanningCoverage.gain_weights`)."""
    out: list[Cluster | None] = []
    for c in clusters:
        if c is None:
            out.append(None)
            continue
        rows = c.members
        gain = np.array([float(pred.gain(c.samples.sum(), len(rows)))])
        target = pred.state_at(target_mean, c.variant).n_eff
        w = coverage.gain_weights(rows, c.samples[rows][None, :].astype(float), gain,
                                  c.variant, target, horizon)
        out.append(replace(c, gain_weight=float(w[0])))
    return out


def plan_training(table: DeviceTable, model: ModelSpec, training: TrainingSpec, goal: Goal,
                  variants: Sequence[int] | None = None,
                  fractions: Sequence[float] = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0),
                  epsilon: float = 0.005, data_rule: str = "cheapest",
                  switch_cost_j: float = 0.0, epoch_budget_s: float | None = None,
                  placement: str = "auto", predictor: LossPredictor | None = None,
                  start: LossState | None = None, horizon: int | None = None,
                  memo: PlacementMemo | None = None,
                  coverage: PlanningCoverage | None = None) -> Plan:
    """DepL's plan for ``goal`` (see the module docstring).

    Parameters
    ----------
    table, model, training: the resolved scenario's devices, model and training goal.
    goal: the level and target the plan must meet.
    variants: the variants a plan may use (default all); one variant = never switch.
    fractions: the grid of data fractions phi, in (0, 1].
    epsilon: grid step of the planned loss level (loss units).
    data_rule: ``"cheapest"`` or ``"smallest"`` (stop at the smallest feasible phi).
    switch_cost_j: extra energy per model switch (J).
    epoch_budget_s: time budget of one epoch (s); default deadline_s / max_epochs.
    placement: placement method (see :func:`~policies.depl.placement.place_epoch`).
    start, horizon: the state the plan starts from and the epochs it may use (online
        re-planning); default untrained and ``max_epochs``.
    memo: placements solved by earlier calls on the same table, model and training, reused
        and extended (see :func:`epoch_options`); None solves every placement afresh.
    coverage: under label skew, the policy's per-class state: each cluster's gain is
        weighted by the classes it trains (:func:`weighted_clusters`); None: IID.
    """
    t0 = time.perf_counter()
    pred = predictor or LossPredictor(model, training)
    allowed = list(range(len(model.variants))) if variants is None else list(variants)
    budget = epoch_budget_s or training.deadline_s / training.max_epochs
    horizon = training.max_epochs if horizon is None else horizon
    best, best_level, smallest, costs = None, np.inf, np.nan, {}
    for phi in sorted(fractions):
        samples, clusters = epoch_options(table, model, training, phi, allowed, budget,
                                          placement, memo)
        if coverage is not None:
            clusters = weighted_clusters(pred, coverage, clusters,
                                         goal.target_loss / goal.factor, horizon)
        cost = [c.energy_j if c is not None else np.inf for c in clusters]
        res = search(pred, cost, epoch_gains(pred, clusters), goal.target_loss, horizon,
                     goal.level or goal.factor, epsilon, switch_cost_j, start)
        best_level = min(best_level, res.best_level)
        costs[phi] = res.path.cost_j if res.path else np.inf
        if res.path is None:
            continue
        if np.isnan(smallest):
            smallest = phi
        if best is None or res.path.cost_j < best[0].cost_j:
            best = (res.path, clusters, phi)
        if data_rule == "smallest":
            break
    elapsed = time.perf_counter() - t0
    if best is None:
        reason = (f"infeasible before training: no plan within {horizon} epochs "
                  f"(epoch budget {budget:.3g} s) brings the {goal.label} of the final loss to "
                  f"{goal.target_loss:.4g}; the best reachable is {best_level:.4g}")
        return Plan(False, reason=reason, planning_s=elapsed, costs_by_fraction=costs)
    path, clusters, phi = best
    # a path only takes variants of finite cost, which have a cluster
    return Plan(True, path.variants, tuple(cast(Cluster, clusters[v]) for v in path.variants), phi, smallest,
                path.cost_j, path.final_level, path.final_mean, "", elapsed, costs)
