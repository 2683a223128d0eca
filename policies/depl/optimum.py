"""The exact reference for DepL's problem on small instances (registered as depl-optimum).

Enumerates every plan of DepL's decision space (netsim's formalization): a data fraction phi
from the same grid, and a variant for each epoch (every sequence of every length up to the
horizon), each epoch on the same cluster DepL's placement gives for (phi, variant). Each plan's
success probability, P(the run reaches L* at some epoch) (the event the simulator scores and
DepL plans for), is computed with the same predictor and its state-dependent spread, the same
quadrature for every plan; the cheapest plan whose probability is >= pi wins. Cost grows as
(variants ^ horizon), so it refuses instances with more than ``max_sequences`` sequences per
phi: the run is then recorded as failed with the reason, never as a result.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Annotated, Literal, cast

import numpy as np
from pydantic import Field
from scipy.special import log_ndtr, ndtri

from netsim.devices import DeviceTable, build_device_table
from netsim.policy import register
from netsim.scenario.schema import ModelSpec, Scenario, TrainingSpec
from policies.depl.placement import Cluster
from policies.depl.planner import Plan, epoch_gains, epoch_options
from policies.depl.policy import DepL, DepLParams, target_probability
from policies.depl.predictor import (
    QUADRATURE_NODES,
    DistributionalPredictor,
    montecarlo_spread,
)


def enumerate_plans(pred: DistributionalPredictor, epoch_cost_j: Sequence[float],
                    epoch_gain: Sequence[float], horizon: int, max_sequences: int = 2_000_000,
                    target_loss: float | None = None):
    """Every variant sequence up to ``horizon`` epochs, layer by layer.

    Yields, for each length ``k`` = 1..horizon, ``(seqs, final_mean, cost_j, success)``: the
    sequences (array k x count of variant indices), their predicted mean final loss, energy
    (J) and, given ``target_loss``, the probability that a run following the sequence reaches
    it at some epoch (the event the simulator scores; the same formula as
    :func:`~policies.depl.predictor.first_passage_probability`, accumulated epoch by epoch over
    the quadrature nodes of the run's noise draw; NaN without a target). Variants with an
    infinite cost are left out. ``epoch_gain``: effective samples an epoch of each variant
    adds (the progress model's gain, :func:`policies.depl.planner.epoch_gains`).
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
    x, w = np.polynomial.hermite_e.hermegauss(QUADRATURE_NODES)
    w = w / w.sum()
    log_fail = np.zeros((len(n), len(x)))
    for k in range(1, horizon + 1):
        last = seqs[-1]
        means = np.asarray(base.mean_of(last, n))
        success = np.full(len(n), np.nan)
        if target_loss is not None:
            sigma = np.asarray(base.run_sigma_at(means, last))
            gap = (math.log(target_loss) - np.log(means))[:, None] - sigma[:, None] * x[None, :]
            if base.sigma_epoch > 0:
                log_fail = log_fail + log_ndtr(-gap / base.sigma_epoch)
            else:
                log_fail = np.where(gap >= 0, -np.inf, log_fail)
            success = 1.0 - np.exp(log_fail) @ w
        yield seqs, means, cost, success
        if k == horizon:
            break
        count = len(n)
        src = np.repeat(np.arange(count), len(usable))
        dst = np.tile(usable, count)
        log_fail = log_fail[src]
        n = base.carry(n[src], last[src], dst) + gain[dst]
        cost = cost[src] + cost_m[dst]
        seqs = np.vstack([seqs[:, src], dst[None, :]])


def optimum_plan(table: DeviceTable, model: ModelSpec, training: TrainingSpec, pi: float,
                 pred: DistributionalPredictor, fractions: Sequence[float],
                 horizon: int | None = None, epoch_budget_s: float | None = None,
                 placement: str = "auto", max_sequences: int = 2_000_000) -> Plan:
    """The cheapest plan whose success probability (reaching L* at some epoch: the event
    the simulator scores and DepL plans for, under the predictor's state-dependent spread) is
    >= ``pi``."""
    t0 = time.perf_counter()
    horizon = horizon or training.max_epochs
    budget = epoch_budget_s or training.deadline_s / training.max_epochs
    variants = list(range(len(model.variants)))
    best, best_p, costs = None, 0.0, {}
    for phi in sorted(fractions):
        samples, clusters = epoch_options(table, model, training, phi, variants, budget, placement)
        cost_m = [c.energy_j if c is not None else np.inf for c in clusters]
        costs[phi] = np.inf
        for seqs, means, cost, prob in enumerate_plans(
                pred, cost_m, epoch_gains(pred.base, clusters), horizon, max_sequences,
                training.target_loss):
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
    level = float(pred.base.quantile_of(seq[-1], pred.base.samples_for(seq[-1], mean),
                                        float(ndtri(pi))))
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

