"""The exact reference for DepL's problem (registered as depl-optimum).

The decision space is DepL's (netsim's formalization): a data fraction phi from the same grid,
and a variant for each epoch (every sequence of every length up to the horizon), each epoch on
the same cluster DepL's placement gives for (phi, variant). A plan's success probability,
P(the run reaches L* at some epoch) (the event the simulator scores and DepL plans for), is
computed with the same predictor and its state-dependent spread, the same Gauss-Hermite
quadrature for every plan; the cheapest plan whose probability is >= pi wins.

:func:`search_plans` (:mod:`policies.depl.plan_search`) finds it by an exact best-first search
over the states of sequences (option, last variant, effective samples, per-node log failure so
far, depth, cost) with dominance and bound pruning (:mod:`policies.depl.plan_bounds`; netsim's
formulation, see its docstring); :func:`enumerate_plans` (:mod:`policies.depl.plan_success`:
every sequence, layer by layer; ``variants ^ horizon`` of them) is kept for small instances
and the tests. When the search stops at its time or state limit it returns its best plan with
the proven lower bound: ``Plan.info`` carries ``status`` ("optimal", "time_limit",
"state_limit"), ``bound_j`` and ``gap``, which the policy records as ``plan_status``,
``plan_gap`` and ``plan_bound_j``; with no plan found it raises, so the run is recorded as
failed with the bound, never as a result.

This module is the policy side (:func:`optimum_plan`, :class:`OptimumParams`,
:class:`DepLOptimum`); the search's public names are re-exported here.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Annotated, Literal, cast

import numpy as np
from pydantic import Field
from scipy.special import ndtri

from netsim.devices import DeviceTable, build_device_table
from netsim.policy import Decision, Observation, register
from netsim.scenario.schema import ModelSpec, Scenario, TrainingSpec
from netsim.training.loss import PlanningCoverage
from policies.depl.placement import Cluster
from policies.depl.plan_bounds import dominance_slack  # noqa: F401  (re-exported)
from policies.depl.plan_search import (  # noqa: F401  (re-exported: their old home)
    STATUS_OPTIMAL,
    STATUS_STATES,
    STATUS_TIME,
    SearchResult,
    search_plans,
)
from policies.depl.plan_success import EpochOption, enumerate_plans  # noqa: F401  (re-exported)
from policies.depl.planner import Plan, epoch_gains, epoch_options
from policies.depl.policy import DepL, DepLParams, target_probability
from policies.depl.predictor import DistributionalPredictor, montecarlo_spread


def optimum_plan(table: DeviceTable, model: ModelSpec, training: TrainingSpec, pi: float,
                 pred: DistributionalPredictor, fractions: Sequence[float],
                 horizon: int | None = None, epoch_budget_s: float | None = None,
                 placement: str = "auto", time_limit_s: float = 60.0,
                 max_states: int = 200_000) -> Plan:
    """The cheapest plan whose success probability (reaching L* at some epoch: the event
    the simulator scores and DepL plans for, under the predictor's state-dependent spread) is
    >= ``pi``, by :func:`search_plans` over every data fraction at once.

    ``plan.info``: ``status`` ("optimal", "time_limit", "state_limit"), ``bound_j`` (proven
    lower bound on the optimum's energy, J), ``gap`` ((plan - bound) / plan), ``dominance``,
    ``expanded`` and ``stored`` states. ``costs_by_fraction``: the cheapest plan found per
    phi (not each phi's optimum: one incumbent prunes them all).

    Raises
    ------
    ValueError
        When the search stops at a limit without any plan (the message gives the bound).
    """
    t0 = time.perf_counter()
    horizon = horizon or training.max_epochs
    budget = epoch_budget_s or training.deadline_s / training.max_epochs
    variants = list(range(len(model.variants)))
    phis = sorted(fractions)
    options, clusters_of = [], []
    for phi in phis:
        _, clusters = epoch_options(table, model, training, phi, variants, budget, placement)
        cost_m = np.array([c.energy_j if c is not None else np.inf for c in clusters])
        options.append(EpochOption(cost_m, np.asarray(epoch_gains(pred.base, clusters))))
        clusters_of.append(clusters)
    res = search_plans(pred.base, options, horizon, training.target_loss, pi, time_limit_s,
                       max_states)
    elapsed = time.perf_counter() - t0
    costs = dict(zip(phis, res.found_j, strict=True))
    if res.option < 0:
        if res.status == STATUS_OPTIMAL:
            return Plan(False, reason=(f"infeasible before training: no plan within {horizon} "
                                       f"epochs reaches {training.target_loss:g} with "
                                       f"probability {pi:g} (best found "
                                       f"{res.best_success:.3f})"),
                        planning_s=elapsed, costs_by_fraction=costs,
                        info={"status": res.status, "bound_j": math.inf, "gap": 0.0})
        raise ValueError(f"depl-optimum: no plan found before the search's "
                         f"{res.status.replace('_', ' ')} ({elapsed:.3g} s, {res.stored} "
                         f"states); proven lower bound {res.bound_j:.6g} J")
    seq, phi, mean = res.variants, phis[res.option], res.final_mean
    clusters = clusters_of[res.option]
    feasible = [p for p, c in costs.items() if np.isfinite(c)]
    level = float(pred.base.quantile_of(seq[-1], pred.base.samples_for(seq[-1], mean),
                                        float(ndtri(pi))))
    info = {"status": res.status, "bound_j": res.bound_j, "gap": res.gap,
            "success": res.success, "dominance": res.dominance, "expanded": res.expanded,
            "stored": res.stored}
    # a sequence only takes variants of finite cost, which have a cluster
    return Plan(True, seq, tuple(cast(Cluster, clusters[v]) for v in seq), phi, min(feasible),
                res.cost_j, level, mean, "", elapsed, costs, info)


class OptimumParams(DepLParams):
    """DepL's parameters plus: max_plan_epochs (the search's horizon, default max_epochs),
    time_limit_s (the search stops there with its best plan and a proven bound) and
    max_states (it stops there too: the states it keeps in memory, about 1 kB each). The
    spread defaults to Monte Carlo."""

    spread: Literal["analytic", "montecarlo"] = "montecarlo"
    max_plan_epochs: Annotated[int, Field(ge=1)] | None = None
    time_limit_s: Annotated[float, Field(gt=0)] = 60.0
    max_states: Annotated[int, Field(ge=1)] = 200_000


@register("depl-optimum", "exact reference for DepL's problem: best-first search over plan "
          "states with dominance, cheapest meeting pi; at its time limit, its best plan and a "
          "proven bound", OptimumParams)
class DepLOptimum(DepL):
    name = "depl-optimum"
    params: OptimumParams

    plans_with_classes = False  # the exact reference of the IID problem: the scalar state

    def make_plan(self, scenario: Scenario, table: DeviceTable | None = None,
                  coverage: PlanningCoverage | None = None) -> Plan:
        """The exact reference's plan (``table`` and ``coverage`` unused: it solves the
        problem as its paper states it, on the scalar state)."""
        p = self.params
        pred = self.predictor(scenario)
        if pred.spread.draws is None:
            pred.spread = montecarlo_spread(pred.sigma_run, pred.sigma_epoch,
                                            np.random.default_rng(p.mc_seed), p.mc_draws)
        return optimum_plan(build_device_table(scenario), scenario.model, scenario.training,  # type: ignore[arg-type]
                            target_probability(p, scenario), pred, p.data_fractions,
                            p.max_plan_epochs, p.epoch_budget_s, p.placement, p.time_limit_s,
                            p.max_states)

    def decide(self, obs: Observation) -> Decision:
        """DepL's decision, with what the search proved about the plan: ``plan_status``,
        ``plan_gap`` and ``plan_bound_j`` (J) in ``info``, as pact-optimum records them."""
        d = super().decide(obs)
        if self.plan is None or not self.plan.feasible:
            return d
        info = self.plan.info
        return dataclasses.replace(d, info={
            **d.info, "plan_status": info.get("status", ""), "plan_gap": info.get("gap", 0.0),
            "plan_bound_j": info.get("bound_j", math.nan)})
