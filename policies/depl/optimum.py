"""The exact reference for DepL's problem on small instances (registered as depl-optimum).

Enumerates every plan of DepL's decision space (netsim's formalization): a data fraction phi
from the same grid, and a variant for each epoch (every sequence of every length up to the
horizon), each epoch on the same cluster DepL's placement gives for (phi, variant). Each plan's
success probability P(final loss <= L*) is estimated by Monte Carlo over the surrogate's noise
with the same predictor (common random numbers for all plans); the cheapest plan whose
estimate is >= pi wins. Cost grows as (variants ^ horizon), so it refuses instances with more
than ``max_sequences`` sequences per phi.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Annotated, Literal, cast

import numpy as np
from pydantic import Field

from netsim.devices import DeviceTable, build_device_table
from netsim.policy import register
from netsim.scenario.schema import ModelSpec, Scenario, TrainingSpec
from policies.depl.placement import Cluster
from policies.depl.planner import Plan, epoch_gains, epoch_options
from policies.depl.policy import DepL, DepLParams, target_probability
from policies.depl.predictor import DistributionalPredictor, montecarlo_spread


def enumerate_plans(pred: DistributionalPredictor, epoch_cost_j: Sequence[float],
                    epoch_gain: Sequence[float], horizon: int, max_sequences: int = 2_000_000):
    """Every variant sequence up to ``horizon`` epochs, layer by layer.

    Yields, for each length ``k`` = 1..horizon, ``(seqs, final_mean, cost_j)``: the sequences
    (array k x count of variant indices), their predicted mean final loss and energy (J).
    Variants with an infinite cost are left out. ``epoch_gain``: effective samples an epoch of
    each variant adds (the progress model's gain, :func:`policies.depl.planner.epoch_gains`).
    """
    usable = np.flatnonzero(np.isfinite(np.asarray(epoch_cost_j, dtype=float)))
    total = sum(len(usable) ** k for k in range(1, horizon + 1))
    if total > max_sequences:
        raise ValueError(f"instance too large for enumeration: {total} sequences "
                         f"(> max_sequences={max_sequences})")
    base = pred.base
    cost_m = np.asarray(epoch_cost_j, dtype=float)
    gain = np.asarray(epoch_gain, dtype=float)
    seqs = usable[None, :].copy()
    n = gain[usable].copy()
    cost = cost_m[usable]
    for k in range(1, horizon + 1):
        last = seqs[-1]
        means = np.asarray(base.mean_of(last, n))
        yield seqs, means, cost
        if k == horizon:
            break
        count = len(n)
        src = np.repeat(np.arange(count), len(usable))
        dst = np.tile(usable, count)
        n = base.carry(n[src], last[src], dst) + gain[dst]
        cost = cost[src] + cost_m[dst]
        seqs = np.vstack([seqs[:, src], dst[None, :]])


def optimum_plan(table: DeviceTable, model: ModelSpec, training: TrainingSpec, pi: float,
                 pred: DistributionalPredictor, fractions: Sequence[float],
                 horizon: int | None = None, epoch_budget_s: float | None = None,
                 placement: str = "auto", max_sequences: int = 2_000_000) -> Plan:
    """The cheapest plan whose Monte Carlo success probability is >= ``pi``.

    ``pred.spread`` should hold Monte Carlo draws (see
    :func:`~policies.depl.predictor.montecarlo_spread`); the analytic spread also works.
    """
    t0 = time.perf_counter()
    horizon = horizon or training.max_epochs
    budget = epoch_budget_s or training.deadline_s / training.max_epochs
    variants = list(range(len(model.variants)))
    best, best_p, costs = None, 0.0, {}
    for phi in sorted(fractions):
        samples, clusters = epoch_options(table, model, training, phi, variants, budget, placement)
        cost_m = [c.energy_j if c is not None else np.inf for c in clusters]
        costs[phi] = np.inf
        for seqs, means, cost in enumerate_plans(pred, cost_m, epoch_gains(pred.base, clusters),
                                                 horizon, max_sequences):
            prob = pred.success_probability(means, training.target_loss)
            best_p = max(best_p, float(prob.max(initial=0.0)))
            ok = np.flatnonzero(prob >= pi)
            if len(ok) == 0:
                continue
            j = ok[np.argmin(cost[ok])]
            costs[phi] = min(costs[phi], float(cost[j]))
            if best is None or cost[j] < best[0]:
                best = (float(cost[j]), tuple(int(v) for v in seqs[:, j]), clusters, phi,
                        float(means[j]))
    elapsed = time.perf_counter() - t0
    if best is None:
        return Plan(False, reason=(f"infeasible before training: no plan within {horizon} "
                                   f"epochs reaches {training.target_loss:g} with probability "
                                   f"{pi:g} (best {best_p:.3f})"),
                    planning_s=elapsed, costs_by_fraction=costs)
    cost, seq, clusters, phi, mean = best
    feasible = [p for p, c in costs.items() if np.isfinite(c)]
    level = mean * math.exp(pred.spread.quantile(pi))
    # a sequence only takes variants of finite cost, which have a cluster
    return Plan(True, seq, tuple(cast(Cluster, clusters[v]) for v in seq), phi, min(feasible), cost, level,
                mean, "", elapsed, costs)


class OptimumParams(DepLParams):
    """DepL's parameters plus: max_plan_epochs (enumeration horizon, default max_epochs) and
    max_sequences (refuse larger instances). The spread defaults to Monte Carlo."""

    spread: Literal["analytic", "montecarlo"] = "montecarlo"
    max_plan_epochs: Annotated[int, Field(ge=1)] | None = None
    max_sequences: Annotated[int, Field(ge=1)] = 2_000_000


@register("depl-optimum", "exact reference for DepL's problem on small instances: enumerate "
          "plans, Monte Carlo success probability, cheapest meeting pi", OptimumParams)
class DepLOptimum(DepL):
    name = "depl-optimum"
    params: OptimumParams

    def make_plan(self, scenario: Scenario) -> Plan:
        p = self.params
        pred = self.predictor(scenario)
        if pred.spread.draws is None:
            pred.spread = montecarlo_spread(pred.sigma_run, pred.sigma_epoch,
                                            np.random.default_rng(p.mc_seed), p.mc_draws)
        return optimum_plan(build_device_table(scenario), scenario.model, scenario.training,  # type: ignore[arg-type]
                            target_probability(p, scenario), pred, p.data_fractions,
                            p.max_plan_epochs, p.epoch_budget_s, p.placement, p.max_sequences)

