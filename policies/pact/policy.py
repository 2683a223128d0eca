"""The PACT policy and its ablations (``pact``, ``pact-no-compression``, ``pact-all-nodes``)
and the ``compress-first`` baseline.

PACT (Malandrino et al., IEEE/ACM ToN 2024) decides jointly when and how much to compress the
model, which devices train and on how much data, for minimum energy under a loss target and a
deadline [paper]; the planning problem, graph and candidates are netsim's formalization
(docs: policies/pact/README.md). Online (``replan: true``, default) it re-plans before every
epoch from the *observed* loss and the time and epochs left (receding horizon) and runs the
plan's first epoch; offline (``replan: false``) it plans once at the first epoch and follows
that plan, stopping when it is used up.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from netsim.policy import Decision, Observation, register
from netsim.scenario.schema import Scenario
from netsim.training.loss import LossPredictor
from policies.pact.planner import Plan, Planner
from policies.pact.problem import PlanningProblem, effective_target, state_from_loss


class PactParams(BaseModel):
    """PACT's parameters.

    epsilon: relative step of the loss, time, sample and budget grids (accuracy knob; smaller
        is closer to the optimum and slower).
    replan: re-plan before every epoch from the observed loss (online); false plans once.
    allow_unprune: allow a later epoch to use a less compressed variant.
    variants: variant indices PACT may use (default: all).
    node_selection: choose participants and samples; false makes every usable device train
        on all its samples each epoch (the pact-all-nodes ablation).
    replan_tolerance: online, keep the current plan while the observed loss and time stay
        within this relative distance of the plan's predictions (0: re-plan every epoch).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    epsilon: Annotated[float, Field(gt=0.0, le=0.5)] = 0.05
    replan: bool = True
    allow_unprune: bool = False
    variants: list[Annotated[int, Field(ge=0)]] | None = None
    node_selection: bool = True
    replan_tolerance: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0


def observation_problem(obs: Observation, predictor: LossPredictor, variants: list[int] | None,
                        allow_unprune: bool) -> PlanningProblem:
    """The planning problem from the current observation (state from the observed loss)."""
    table = obs.devices
    usable = np.asarray(obs.available, dtype=bool) & (table.samples > 0)
    usable[table.aggregator] = False
    n_var = len(obs.model.variants)
    allowed = tuple(sorted({v for v in (variants or range(n_var)) if v < n_var}))
    if obs.variant is not None and obs.variant not in allowed:
        allowed = tuple(sorted({*allowed, obs.variant}))
    return PlanningProblem(
        table=table, model=obs.model, predictor=predictor,
        target_loss=effective_target(obs.training, predictor),
        time_left_s=float(obs.deadline_s - obs.now_s),
        epochs_left=int(obs.training.max_epochs - obs.epoch),
        start=state_from_loss(predictor, obs.loss, obs.variant), usable=usable,
        variants=allowed, allow_unprune=allow_unprune,
        memory_overhead=float(obs.training.memory_overhead))


class _PactBase:
    """Shared logic; subclasses fix the name and may override the parameters."""

    policy_name = "pact"

    def __init__(self, params: PactParams) -> None:
        self.name, self.params = self.policy_name, params
        self._planner = Planner(self._effective().epsilon)
        self._predictor: LossPredictor | None = None
        self._plan: Plan | None = None
        self._cursor = 0
        self._plan_start: tuple = (0.0, None)
        self.plans: list[Plan] = []

    def _effective(self) -> PactParams:
        return self.params

    def _on_track(self, obs: Observation, tol: float) -> bool:
        """Whether the observed loss and time are within ``tol`` of the current plan."""
        plan = self._plan
        if tol <= 0 or plan is None or not plan.feasible or self._cursor >= len(plan.epochs):
            return False
        t0, start = self._plan_start
        loss, elapsed = _predicted(plan, self._predictor, start, self._cursor)
        left = max(obs.deadline_s - t0 - elapsed, 1e-9)
        return (abs(obs.loss - loss) <= tol * loss
                and abs(obs.now_s - t0 - elapsed) <= tol * left)

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        p = self._effective()
        self._planner = Planner(p.epsilon)
        self._predictor = LossPredictor(scenario.model, scenario.training)  # type: ignore[arg-type]
        self._plan, self._cursor, self.plans = None, 0, []

    def decide(self, obs: Observation) -> Decision:
        p = self._effective()
        if self._predictor is None:
            self._predictor = LossPredictor(obs.model, obs.training)
        if self._plan is None or (p.replan and not self._on_track(obs, p.replan_tolerance)):
            problem = observation_problem(obs, self._predictor, p.variants, p.allow_unprune)
            if not p.node_selection:
                problem = _all_nodes(problem)
            self._plan, self._cursor = self._planner.plan(problem), 0
            self._plan_start = (obs.now_s, problem.start)
            self.plans.append(self._plan)
        plan = self._plan
        if not plan.feasible:
            return Decision(stop=True, reason=f"{self.name}: {plan.reason}")
        if self._cursor >= len(plan.epochs):
            return Decision(stop=True, reason=f"{self.name}: offline plan of {len(plan.epochs)} "
                            f"epochs used up at loss {obs.loss:.4g} (predicted "
                            f"{plan.loss:.4g})")
        ep = plan.epochs[self._cursor]
        self._cursor += 1
        ids = obs.devices.ids
        parts = {ids[i]: int(s) for i, s in ep.participants.items() if obs.available[i]}
        if not parts:
            return Decision(stop=True, reason=f"{self.name}: no planned participant available")
        return Decision(participants=parts, variant=ep.variant, info={
            "planned_energy_j": plan.energy_j, "planned_epochs": len(plan.epochs),
            "planned_loss": plan.loss, "planning_s": plan.planning_s, "graph": plan.mode})


def _predicted(plan: Plan, predictor: LossPredictor, start, upto: int) -> tuple[float, float]:
    """Predicted (mean loss, elapsed s) after the plan's first ``upto`` epochs."""
    state, elapsed = start, 0.0
    for ep in plan.epochs[:upto]:
        state = predictor.step(state, ep.samples, ep.variant)
        elapsed += ep.time_s
    return predictor.mean(state), elapsed


def _all_nodes(problem: PlanningProblem) -> PlanningProblem:
    """Mark the problem so candidates are only 'every usable device, all its samples'."""
    from dataclasses import replace

    return replace(problem, all_nodes=True)


@register("pact", "PACT: plans compression schedule, participants and samples for minimum "
          "energy under the loss target and deadline (time-expanded graph + DP)", PactParams)
class Pact(_PactBase):
    policy_name = "pact"


@register("pact-no-compression", "PACT ablation: full model only (variant 0)", PactParams)
class PactNoCompression(_PactBase):
    policy_name = "pact-no-compression"

    def _effective(self) -> PactParams:
        return self.params.model_copy(update={"variants": [0]})


@register("pact-all-nodes", "PACT ablation: no node selection (every device, all its samples, "
          "each epoch); compression still planned", PactParams)
class PactAllNodes(_PactBase):
    policy_name = "pact-all-nodes"

    def _effective(self) -> PactParams:
        return self.params.model_copy(update={"node_selection": False})


@register("compress-first", "most compressed variant from the first epoch, every device, all "
          "its samples")
class CompressFirst:
    def __init__(self, params: BaseModel) -> None:
        self.name, self.params = "compress-first", params

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        pass

    def decide(self, obs: Observation) -> Decision:
        table = obs.devices
        v = len(obs.model.variants) - 1
        need = obs.model.model_bytes(v) * obs.training.memory_overhead
        ok = np.asarray(obs.available, bool) & (table.samples > 0) & (table.memory_bytes >= need)
        ok[table.aggregator] = False
        parts = {table.ids[i]: int(table.samples[i]) for i in np.flatnonzero(ok)}
        if not parts:
            return Decision(stop=True, reason="compress-first: no device can train the variant")
        return Decision(participants=parts, variant=v)
