"""DepL and its baselines as netsim policies (registered: depl, depl-mean, depl-margin,
full-model, never-switch).

All plan offline in ``reset`` with :func:`~policies.depl.planner.plan_training` and follow
the plan: epoch ``k`` runs the plan's variant on its cluster. DepL (``replan``, default) is
online: it tracks the training state, estimates the run's noise offset from the observed
losses, follows its plan while the world follows its model, and re-plans when the world
departs from it (dropouts, re-placed epochs, losses beyond ``band_sigmas``) and the rest of
its plan no longer meets pi given the observations (docs/depl.md, "Online"). When the plan is
spent without the engine having seen the target, the policy stops (status ``target_missed``,
reason "plan complete ..."); when no plan exists, it stops before the first epoch with the
planner's reason ("infeasible before training: ..."). A planned member that is unavailable at
run time is replaced by re-placing the epoch among the available devices; participants of the
last epoch now offline are taken as dropped out (README.md, "Under dynamics").

What differs between them is the goal (netsim's formalization of the papers' baselines):

* ``depl``: P(the run reaches L*) >= pi, the event the simulator scores (the first epoch at or
  below L*): planned for the pi-quantile of the final loss, then cut to the shortest prefix
  whose first-passage probability is >= pi (:meth:`DepL.shorten`);
* ``depl-mean``: the mean-curve loss <= L* (expectation-driven planning, the "state of the
  art" that ignores the distribution);
* ``depl-margin``: the mean-curve loss <= (1 - margin) L* (a fixed safety margin);
* ``full-model``: DepL's goal with the full model only;
* ``never-switch``: DepL's goal with the best single variant (no switches).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.special import ndtri

import netsim
from netsim.costs import estimate_epochs
from netsim.devices import DeviceTable, build_device_table
from netsim.policy import Decision, Observation, register
from netsim.scenario.schema import Scenario
from netsim.training.loss import LossPredictor, LossState, PlanningCoverage
from netsim.training.tracking import RunTracker
from policies.depl.placement import eligible_trainers, place_epoch
from policies.depl.planner import Goal, PlacementMemo, Plan, cluster_gain, plan_training
from policies.depl.predictor import (
    DistributionalPredictor,
    calibration_spread,
    first_passage_probability,
    montecarlo_spread,
)

CALIBRATION_CURVES = str(Path(netsim.__file__).parent / "data" / "calibration" / "curves.parquet")
DEFAULT_PI = 0.9  # used when neither the policy nor training.target_probability gives one
Fraction = Annotated[float, Field(gt=0, le=1)]


class DepLParams(BaseModel):
    """Parameters of DepL and its planning baselines.

    target_probability: pi (default: the scenario's training.target_probability, else 0.9).
    epsilon: grid step of the planned loss level (loss units, nats); 0 = exact labels.
    data_fractions: the grid of per-epoch data fractions phi the outer loop searches.
    data_rule: "cheapest" feasible phi (default) or the "smallest" feasible phi.
    spread: "analytic" (log-normal), "montecarlo" (draws of the surrogate's noise) or
        "empirical" (final-loss spread of the measured curves in netsim/data/calibration/).
    mc_draws / mc_seed: size and seed of the Monte Carlo spread.
    placement: cluster placement method ("auto", "greedy", "milp").
    switch_cost_j: extra energy per model switch (J).
    epoch_budget_s: time budget of one epoch (s); default deadline_s / max_epochs.
    margin: relative lowering of L* (depl-margin only).
    replan: online (default): follow the plan while the world follows the model, and re-plan
        from the tracked training state when it departs from it and the rest of the plan no
        longer reaches L* with probability pi given the observed losses; false follows the
        offline plan.
    band_sigmas: online, the observed losses depart from the model when the run's noise
        offset estimated from them lies more than ``band_sigmas`` of its spread above zero
        (worse than any plausible draw); dropouts and re-placed epochs are departures too.
        0 re-plans whenever the losses come out worse than planned (aiming at certainty, the
        rule before 0.4).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    target_probability: Annotated[float, Field(gt=0, lt=1)] | None = None
    epsilon: Annotated[float, Field(ge=0, le=1)] = 0.005
    data_fractions: Annotated[tuple[Fraction, ...], Field(min_length=1)] = (
        0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
    data_rule: Literal["cheapest", "smallest"] = "cheapest"
    spread: Literal["analytic", "montecarlo", "empirical"] = "analytic"
    mc_draws: Annotated[int, Field(ge=100, le=10_000_000)] = 100_000
    mc_seed: Annotated[int, Field(ge=0)] = 0
    placement: Literal["auto", "greedy", "milp"] = "auto"
    switch_cost_j: Annotated[float, Field(ge=0)] = 0.0
    epoch_budget_s: Annotated[float, Field(gt=0)] | None = None
    margin: Annotated[float, Field(ge=0, lt=1)] = 0.1
    replan: bool = True
    band_sigmas: Annotated[float, Field(ge=0, le=10)] = 3.0


def target_probability(params: DepLParams, scenario: Scenario) -> float:
    """pi: the policy's parameter, else the scenario's training.target_probability, else 0.9."""
    if params.target_probability is not None:
        return params.target_probability
    return scenario.training.target_probability or DEFAULT_PI


RELAXATIONS = (1.0, 1.03, 1.06, 1.1, 1.15, 1.2, 1.3)


def relaxed(goal: Goal, factor: float) -> Goal:
    """``goal`` with its level target ``factor`` times higher (see :meth:`DepL.relaxations`)."""
    return goal if factor == 1.0 else dataclasses.replace(
        goal, target_loss=goal.target_loss * factor, label=f"{goal.label} (level x{factor:g})")


def plan_spread(pred: LossPredictor, plan: Plan,
                start: LossState | None = None) -> tuple[list[float], list[float]]:
    """The predicted mean loss after each epoch of ``plan`` and the run spread (sigma of the
    log run noise) at each of those states."""
    if not plan.feasible:
        return [], []
    states, state = [], start or LossState()
    for c in plan.clusters:  # (cluster_gain: the coverage weight under label skew)
        state = pred.step_gain(state, cluster_gain(pred, c), c.variant)
        states.append(state)
    return [pred.mean(s) for s in states], [pred.run_sigma(s) for s in states]


class DepL:
    """DepL (chance-constrained planning); subclasses change the goal or the variants."""

    name = "depl"
    plans_with_classes = True
    """Under label skew (or a data floor), re-plan at the first epoch with each cluster
    weighted by the classes it trains (netsim's extension; the exact reference does not)."""

    def __init__(self, params: DepLParams) -> None:
        self.params = params
        self.plan: Plan | None = None
        self._cache: dict[str, Plan] = {}

    # -- what subclasses change -------------------------------------------------------
    def goal(self, scenario: Scenario, pred: DistributionalPredictor) -> Goal:
        """The planned level and target (DepL: the pi-quantile of the final loss <= L*)."""
        pi = target_probability(self.params, scenario)
        goal = Goal(scenario.training.target_loss, math.exp(pred.spread.quantile(pi)),
                    f"{pi:g}-quantile")
        # the spread at each state (level, variant): the model's sigma there times the
        # spread's pi-quantile in its own standard deviations (analytic: Phi^-1(pi); Monte
        # Carlo: that up to sampling error; empirical: the measured shape's)
        spread = pred.spread
        z = float(ndtri(pi)) if spread.draws is None or spread.sigma <= 0 \
            else spread.quantile(pi) / spread.sigma
        base = pred.base
        return dataclasses.replace(goal, level=lambda v, n: base.quantile_of(v, n, z))

    def variant_sets(self, n_variants: int) -> list[list[int] | None]:
        """The variant sets to plan with (None = all, switches allowed); cheapest wins."""
        return [None]

    # -- the Policy interface ---------------------------------------------------------
    def predictor(self, scenario: Scenario) -> DistributionalPredictor:
        """The policy's distributional predictor (analytic or Monte Carlo spread)."""
        model, training = scenario.model, scenario.training
        pred = DistributionalPredictor(model, training)  # type: ignore[arg-type]
        if self.params.spread == "montecarlo":
            rng = np.random.default_rng(self.params.mc_seed)
            pred.spread = montecarlo_spread(pred.sigma_run, pred.sigma_epoch, rng,
                                            self.params.mc_draws)
        elif self.params.spread == "empirical":
            pred.spread = calibration_spread(CALIBRATION_CURVES)
        return pred

    chance_constrained = True  # the goal is a probability (False: the mean baselines)

    def success_probability(self, plan: Plan, pred: DistributionalPredictor,
                            target_loss: float, epochs: int | None = None) -> float:
        """P(the run reaches ``target_loss`` within the plan's first ``epochs`` epochs): the
        event the simulator scores, under the predictor's run and epoch noise."""
        means, sigmas = plan_spread(pred.base, plan)
        return first_passage_probability(means[:epochs], target_loss, 0.0, 1.0,
                                         sigmas[:epochs], pred.sigma_epoch)

    def shorten(self, plan: Plan, scenario: Scenario, pred: DistributionalPredictor,
                start: LossState | None = None, offset: tuple[float, float] | None = None
                ) -> Plan:
        """The plan's shortest prefix whose success probability (first passage, the event the
        simulator scores) is >= pi (netsim's formalization).

        The graph plans for the pi-quantile of the *final* loss, which guarantees P(final
        loss <= L*) >= pi; the run succeeds at the first epoch at or below L*, which is at
        least as likely, so the tail the final-loss constraint adds beyond pi is cut here.
        Only for the normal (analytic, Monte Carlo) spreads; the empirical spread of final
        losses says nothing about single epochs, so its plans are kept whole. Online,
        ``start`` is the tracked state and ``offset`` the posterior (mean, variance) of the
        run's standard-normal noise draw."""
        if not (self.chance_constrained and plan.feasible) or self.params.spread == "empirical":
            return plan
        pi = target_probability(self.params, scenario)
        target = scenario.training.target_loss
        m, v = offset if offset is not None else (0.0, 1.0)
        means, sigmas = plan_spread(pred.base, plan, start)
        for k in range(1, len(means) + 1):
            if first_passage_probability(means[:k], target, m, v, sigmas[:k],
                                         pred.sigma_epoch) >= pi:
                break
        else:
            if plan.final_level <= target * (1 + 1e-9):
                return plan  # pi kept by the sufficient final-loss level (quadrature aside)
            # a plan for a relaxed level whose whole length does not keep pi
            return Plan(False, reason=f"no plan reaches {target:g} with probability {pi:g}")
        if k == len(means):
            return plan
        clusters = plan.clusters[:k]
        return dataclasses.replace(
            plan, variants=plan.variants[:k], clusters=clusters,
            cost_j=float(sum(c.energy_j for c in clusters)),
            final_level=pred.base.quantile_of(plan.variants[k - 1], pred.base.samples_for(
                plan.variants[k - 1], means[k - 1]), float(ndtri(pi))),
            final_mean=means[k - 1])

    def make_plan(self, scenario: Scenario, table: DeviceTable | None = None,
                  coverage: PlanningCoverage | None = None) -> Plan:
        """Plan for a resolved scenario (no caching); ``table``: its devices (default built
        from it); ``coverage``: under label skew, the per-class state the plan is weighted
        by (:func:`policies.depl.planner.weighted_clusters`; netsim's extension)."""
        p = self.params
        pred = self.predictor(scenario)
        goal = self.goal(scenario, pred)
        table = build_device_table(scenario) if table is None else table
        model = scenario.model
        best: Plan | None = None
        memo: PlacementMemo = {}  # every (phi, variant) placed once for all the plans below
        for variants in self.variant_sets(len(model.variants)):  # type: ignore[union-attr]
            for relax in self.relaxations():
                plan = plan_training(table, model, scenario.training,  # type: ignore[arg-type]
                                     relaxed(goal, relax), variants, p.data_fractions,
                                     p.epsilon, p.data_rule, p.switch_cost_j,
                                     p.epoch_budget_s, p.placement, pred.base, memo=memo,
                                     coverage=coverage)
                plan = self.shorten(plan, scenario, pred)
                if best is None or (plan.feasible and (not best.feasible
                                                       or plan.cost_j < best.cost_j)):
                    best = plan
        assert best is not None
        return best

    def relaxations(self) -> tuple[float, ...]:
        """Factors on L* for the graph's level target: the graph plans for the pi-quantile of
        the *final* loss, a sufficient condition for the first-passage event DepL promises;
        plans for a slightly higher level can still keep pi through earlier epochs
        (:meth:`shorten` keeps only those that do), and the cheapest kept plan wins
        (netsim's formalization). The mean-driven baselines plan for L* itself."""
        return RELAXATIONS if self.chance_constrained else (1.0,)

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        """Plan offline (plans are cached per resolved scenario on this instance)."""
        key = scenario.model_dump_json()
        if key not in self._cache:
            self._cache = {key: self.make_plan(scenario)}
        self.plan = self._cache[key]
        self._scenario = scenario
        self._pred = self.predictor(scenario)
        self._run_plan, self._k0 = self.plan, 0   # the plan followed now, from epoch _k0
        self._tracker = RunTracker(self._pred.base)
        self._classes_seen = False  # (the first observation's label histograms looked at)
        self.replans = 0
        self._last: tuple[int, np.ndarray] | None = None  # last epoch: variant, samples
        self._previous: tuple[int, np.ndarray] | None = None  # (the same, kept)
        self._sequence: tuple[Plan | None, np.ndarray] = (None, np.zeros(0))
        self._re_placed = False  # the last epoch ran on another cluster than planned

    # -- online (netsim's formalization) --------------------------------------------------
    @property
    def _state(self) -> LossState:
        """The tracked training state (netsim.training.tracking)."""
        return self._tracker.state

    def offset_posterior(self) -> tuple[float, float]:
        """(mean, variance) of the run's standard-normal noise draw given the losses observed
        so far (:meth:`netsim.training.tracking.RunTracker.draw_posterior`)."""
        return self._tracker.draw_posterior()

    def _rest_probability(self, obs: Observation) -> float:
        """P(the rest of the current plan reaches L*), given what was observed."""
        rest = self._run_plan.clusters[obs.epoch - self._k0:]
        if not rest:
            return 0.0
        means, sigmas = plan_spread(self._pred.base, dataclasses.replace(
            self._run_plan, clusters=rest), self._state)
        m, v = self.offset_posterior()
        return first_passage_probability(means, obs.training.target_loss, m, v, sigmas,
                                         self._pred.sigma_epoch)

    def _departure(self, dropped: list[int]) -> str:
        """Why the world departs from the model DepL planned with, or "" while it follows it
        (netsim's formalization): participants dropped out, the last epoch was re-placed, or
        the run's noise offset estimated from the observed losses lies more than
        ``band_sigmas`` of its spread above zero. While the world follows the model, the
        conditional success probability of the plan moves with the noise and averages to the
        plan's own (at least pi): re-planning then would aim every run at certainty and spend
        energy the promise does not ask for."""
        if dropped:
            return f"{len(dropped)} participants of the last epoch dropped out"
        if self._re_placed:
            return "the last epoch was re-placed"
        m, v = self.offset_posterior()
        spread = math.sqrt(max(1.0 - v, 0.0))  # the offset estimate's own spread under the model
        if m > self.params.band_sigmas * spread:
            return (f"losses worse than the model: run offset {m:.2f} against a spread of "
                    f"{spread:.2f}")
        return ""

    def _replan(self, obs: Observation) -> Plan:
        """A plan from the tracked state for P(reach L* | observations) >= pi."""
        p, pred, sc = self.params, self._pred, self._scenario
        pi = target_probability(p, sc)
        m, v = self.offset_posterior()
        z, base = float(ndtri(pi)), pred.base

        def level(variants, n_eff):  # the pi-quantile given the run so far
            mean = np.asarray(base.mean_of(variants, n_eff))
            s_r = np.asarray(base.run_sigma_at(mean, variants))
            return mean * np.exp(s_r * m + np.sqrt(s_r ** 2 * v + base.sigma_epoch ** 2) * z)

        goal = Goal(obs.training.target_loss, 1.0, f"{pi:g}-quantile given the run so far",
                    level)
        best: Plan | None = None
        memo: PlacementMemo = {}  # this observation's devices: placed once for every set
        for variants in self.variant_sets(len(obs.model.variants)):
            # online, the sufficient level only (no relaxations): re-plans must stay quick
            plan = plan_training(obs.devices, obs.model, obs.training, goal, variants,
                                 p.data_fractions, p.epsilon, p.data_rule, p.switch_cost_j,
                                 p.epoch_budget_s, p.placement, pred.base, self._state,
                                 obs.training.max_epochs - obs.epoch, memo,
                                 self._tracker.coverage)
            plan = self.shorten(plan, sc, pred, self._state, (m, v))
            if best is None or (plan.feasible and plan.cost_j < best.cost_j):
                best = plan
        assert best is not None
        return best

    def decide(self, obs: Observation) -> Decision:
        """Follow the plan: its next epoch's variant on its cluster; online, re-plan from the
        tracked state when the rest of the plan no longer reaches L* with probability pi
        given the observations (keeping the plan when no new one is feasible)."""
        assert self.plan is not None, "reset() was not called"
        if not self.plan.feasible:
            return Decision(stop=True, reason=self.plan.reason, variant=0)
        if obs.epoch == 0 and not self._classes_seen and self.plans_with_classes:
            self._classes_seen = True
            coverage = PlanningCoverage.of(self._pred.base, obs.model, obs.training,
                                           obs.devices.index, obs.devices.samples,
                                           obs.label_counts)
            if coverage is not None:  # label skew: plan with which data trains
                self._tracker = RunTracker(self._pred.base, coverage)
                self.plan = self._run_plan = self.make_plan(self._scenario, obs.devices,
                                                            coverage)
                self._k0 = 0
                if not self.plan.feasible:
                    return Decision(stop=True, reason=self.plan.reason, variant=0)
        dropped = self._dropped(obs)
        self._tracker.observe(obs.loss)
        replanned = ""  # why DepL re-planned before this epoch ("" if it did not)
        if (self.params.replan and self.chance_constrained and obs.epoch > 0
                and self.params.spread != "empirical"):
            departure = self._departure(dropped)
            if departure and self._rest_probability(obs) < target_probability(
                    self.params, self._scenario):
                fresh = self._replan(obs)
                if fresh.feasible:
                    self._run_plan, self._k0 = fresh, obs.epoch
                    self.replans += 1
                    replanned = departure
        plan, k = self._run_plan, obs.epoch - self._k0
        if k >= len(plan.variants):
            return Decision(stop=True, variant=0, reason=(
                f"plan complete after {obs.epoch} epochs: target "
                f"{obs.training.target_loss:g} not reached (planned level "
                f"{plan.final_level:.4g}, loss {obs.loss:.4g})"))
        cluster = plan.clusters[k]
        samples, why = cluster.samples, ""
        self._re_placed = False
        if dropped:
            why = f"{len(dropped)} participants of the last epoch dropped out"
        elif replanned:
            why = f"re-planned: {replanned}"
        if not obs.available[cluster.members].all():
            offline = int((~obs.available[cluster.members]).sum())
            again = self._replace(obs, cluster)
            if again is None:
                return Decision(stop=True, variant=0, reason=(
                    f"no available device can train epoch {obs.epoch}'s "
                    f"{obs.model.variants[cluster.variant].name!r} variant "
                    f"({offline} of its {len(cluster.members)} planned members offline)"))
            samples = again
            self._re_placed = True
            why = "; ".join(filter(None, [why, f"{offline} planned members offline: epoch "
                                         f"re-placed among the available devices"]))
        ids = obs.devices.ids
        members = np.flatnonzero(samples)
        parts = {ids[i]: int(samples[i]) for i in members}
        self._last = (cluster.variant, samples)
        energies = self._sequence_energies(obs, plan)
        self._previous = self._last
        self._tracker.executed(cluster.variant, float(samples.sum()), len(members), parts)
        base, coverage = self._pred.base, self._tracker.coverage
        after = base.step(self._state, float(samples.sum()), cluster.variant,
                          participants=len(members))
        planned_mean = base.mean(after) if coverage is None \
            else coverage.mean_after(parts, cluster.variant)
        rest = plan.clusters[k:]
        return Decision(participants=parts, variant=cluster.variant, info={
            "planned_epochs": obs.epoch + len(rest),
            "planned_energy_j": obs.energy_j + float(energies[k:].sum()),
            "planned_time_s": obs.now_s + float(sum(c.time_s for c in rest)),
            "planned_loss": planned_mean, "data_fraction": plan.data_fraction,
            "planned_level": plan.final_level, "switches": plan.switches,
            "replans": self.replans, **({"replanned": why} if why else {})})

    def _sequence_energies(self, obs: Observation, plan: Plan) -> np.ndarray:
        """Each planned epoch's energy (J) as the engine books it, the plan's epochs run back
        to back after the epoch executed before the plan (radio tails carried over from one
        epoch to the next, :func:`netsim.costs.estimate_epochs`): the plan's claim. A
        cluster's own ``energy_j`` is an epoch after one like it, which the planner compares;
        the first epoch of a run pays its radios' start in full. Computed once per plan."""
        if self._sequence[0] is not plan:
            prefix = [] if self._previous is None else [self._previous]
            est = estimate_epochs(obs.devices, obs.model,
                                  prefix + [(c.variant, c.samples) for c in plan.clusters])
            self._sequence = (plan, np.array([e.energy_j for e in est[len(prefix):]]))
        return self._sequence[1]

    # -- under dynamics (README "Under dynamics") ---------------------------------------------
    def _replace(self, obs: Observation, cluster) -> np.ndarray | None:
        """The epoch's samples re-placed among the available devices that hold the variant
        (as many samples as planned, or all they hold): within the epoch's time budget if
        possible, else within the time left; None when none of them can train."""
        cand = eligible_trainers(obs.devices, obs.model, cluster.variant,
                                 obs.training.memory_overhead, obs.available)
        total = int(min(cluster.samples.sum(), obs.devices.samples[cand].sum()))
        budget = self.params.epoch_budget_s or obs.deadline_s / obs.training.max_epochs
        for limit in (budget, max(obs.deadline_s - obs.now_s, budget), np.inf):
            again = place_epoch(obs.devices, obs.model, cluster.variant, total, limit, cand,
                                self.params.placement)
            if again is not None:
                return again.samples
        return None

    def _dropped(self, obs: Observation) -> list[int]:
        """Participants of the last epoch that are offline now: taken as dropped out (their
        samples did not count), so the epoch awaiting its loss in the tracker is corrected
        before the loss is observed; the lower progress then lowers the rest's success
        probability and triggers the re-plan. A device that left after its update was
        aggregated is indistinguishable here; the residual absorbs the difference."""
        if self._last is None:
            return []
        variant, samples = self._last
        self._last = None
        members = np.flatnonzero(samples)
        gone = [int(i) for i in members if not obs.available[i]]
        if gone:
            stay = members[obs.available[members]]
            kept = samples[stay]
            self._tracker.executed(variant, float(kept.sum()), len(kept),
                                   {obs.devices.ids[i]: float(samples[i]) for i in stay})
        return gone

    def describe(self) -> str:
        """The plan in one line (for logs and the benchmark)."""
        plan = self.plan
        if plan is None or not plan.feasible:
            return plan.reason if plan else "no plan"
        return (f"{len(plan.variants)} epochs, phi={plan.data_fraction:g}, "
                f"{plan.switches} switches, {plan.cost_j:.4g} J")


register("depl", "DepL: cheapest plan (data, model switches, clusters) whose final loss meets "
         "L* with probability pi", DepLParams)(DepL)


@register("depl-mean", "DepL's planner for the mean loss (expectation-driven baseline)",
          DepLParams)
class DepLMean(DepL):
    name = "depl-mean"
    chance_constrained = False

    def goal(self, scenario: Scenario, pred: DistributionalPredictor) -> Goal:
        return Goal(scenario.training.target_loss, 1.0, "mean")


@register("depl-margin", "DepL's planner for the mean loss with L* lowered by a fixed margin",
          DepLParams)
class DepLMargin(DepL):
    name = "depl-margin"
    chance_constrained = False

    def goal(self, scenario: Scenario, pred: DistributionalPredictor) -> Goal:
        target = scenario.training.target_loss * (1.0 - self.params.margin)
        return Goal(target, 1.0, f"mean (L* lowered by {self.params.margin:.0%})")


@register("full-model", "DepL's chance-constrained planner with the full model only", DepLParams)
class FullModel(DepL):
    name = "full-model"

    def variant_sets(self, n_variants: int) -> list[list[int] | None]:
        return [[0]]


@register("never-switch", "DepL's chance-constrained planner with the best single model "
          "(no switches)", DepLParams)
class NeverSwitch(DepL):
    name = "never-switch"

    def variant_sets(self, n_variants: int) -> list[list[int] | None]:
        return [[v] for v in range(n_variants)]

