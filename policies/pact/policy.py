"""The PACT policy and its ablations (``pact``, ``pact-no-compression``, ``pact-all-nodes``)
and the ``compress-first`` baseline.

PACT (Malandrino et al., IEEE/ACM ToN 2024) decides jointly when and how much to compress the
model, which devices train and on how much data, for minimum energy under a loss target and a
deadline [paper]; the planning problem, graph and candidates are netsim's formalization
(docs: policies/pact/README.md). Online (``replan: true``, default) it keeps its plan while the
observations stay within the predicted band and re-plans from the tracked state, the estimated
noise offset and the time and epochs left otherwise (receding horizon, see :class:`_PactBase`);
offline (``replan: false``) it plans once at the first epoch and follows that plan, stopping
when it is used up.
"""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from netsim.policy import Decision, Observation, register
from netsim.scenario.schema import Scenario
from netsim.training.loss import LossPredictor, LossState, PlanningCoverage
from netsim.training.tracking import RunTracker
from policies.pact.planner import Plan, Planner
from policies.pact.problem import (
    PlanningProblem,
    coverage_replay,
    effective_target,
    state_from_loss,
)


class PactParams(BaseModel):
    """PACT's parameters.

    epsilon: relative step of the loss, time, sample and budget grids (accuracy knob; smaller
        is closer to the optimum and slower).
    replan: re-plan before every epoch from the observed loss (online); false plans once.
    allow_unprune: allow a later epoch to use a less compressed variant.
    variants: variant indices PACT may use (default: all).
    node_selection: choose participants and samples; false makes every usable device train
        on all its samples each epoch (the pact-all-nodes ablation).
    band_sigmas: online, keep the current plan while each observed loss stays within this
        many standard deviations of the per-epoch noise around the predicted loss (with the
        run's estimated offset) and its remaining epochs still reach the target.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    epsilon: Annotated[float, Field(gt=0.0, le=0.5)] = 0.025
    replan: bool = True
    allow_unprune: bool = False
    variants: list[Annotated[int, Field(ge=0)]] | None = None
    node_selection: bool = True
    band_sigmas: Annotated[float, Field(ge=0.0, le=10.0)] = 2.0


def observation_problem(obs: Observation, predictor: LossPredictor, variants: list[int] | None,
                        allow_unprune: bool, start: LossState | None = None,
                        target_loss: float | None = None,
                        coverage: PlanningCoverage | None = None) -> PlanningProblem:
    """The planning problem from the current observation: the training state ``start`` (by
    default inverted from the observed loss), the mean loss to reach ``target_loss`` (by
    default :func:`effective_target`) and, under label skew, the policy's per-class state
    ``coverage``."""
    table = obs.devices
    usable = np.asarray(obs.available, dtype=bool) & (table.samples > 0)
    usable[table.aggregator] = False
    n_var = len(obs.model.variants)
    allowed = tuple(sorted({v for v in (variants or range(n_var)) if v < n_var}))
    if obs.variant is not None and obs.variant not in allowed:
        allowed = tuple(sorted({*allowed, obs.variant}))
    return PlanningProblem(
        table=table, model=obs.model, predictor=predictor,
        target_loss=effective_target(obs.training, predictor) if target_loss is None
        else float(target_loss),
        time_left_s=float(obs.deadline_s - obs.now_s),
        epochs_left=int(obs.training.max_epochs - obs.epoch),
        start=state_from_loss(predictor, obs.loss, obs.variant) if start is None else start,
        usable=usable,
        variants=allowed, allow_unprune=allow_unprune,
        memory_overhead=float(obs.training.memory_overhead), coverage=coverage)


class _PactBase:
    """Shared logic; subclasses fix the name and may override the parameters.

    Online (netsim's formalization of the paper's receding horizon):

    - the training state is tracked by stepping the progress model with what was executed
      (samples, participants, variant), not inverted from a noisy loss;
    - each observed loss gives a log-residual against that state's predicted mean: the run's
      spread at that state times the run's noise draw, plus epoch noise; the posterior of the
      draw (normal prior) gives the run's persistent offset at any loss level, and plans
      target ``L* x exp(-offset at L*)``;
    - under label skew (the observation holds each device's label histogram,
      ``Observation.label_counts``) the tracked state is the policy's per-class state of
      what trained (:class:`netsim.training.loss.PlanningCoverage`, the world's formula),
      its scalar equivalent is where the graph starts, candidates are weighted by the
      classes they train and plans are replayed through it (netsim's extension: the paper
      assumes IID data; policies/pact/README.md);
    - the current plan is kept as the incumbent while the latest residual stays within the
      predicted band (``band_sigmas`` standard deviations of the per-epoch noise around the
      offset) and its remaining epochs still reach the target; otherwise PACT re-plans, and
      keeps the incumbent when its remaining epochs still reach the target more cheaply than
      the new plan (re-planning never returns a worse plan).
    """

    policy_name = "pact"

    def __init__(self, params: PactParams) -> None:
        self.name, self.params = self.policy_name, params
        self._planner = Planner(self._effective().epsilon)
        self._predictor: LossPredictor | None = None
        self.plans: list[Plan] = []
        self._reset_run()

    def _reset_run(self) -> None:
        self._plan: Plan | None = None
        self._cursor = 0
        self._last: tuple[int, dict[int, int]] | None = None  # last epoch: variant, samples
        self._tracker: RunTracker | None = None  # (built at the first observation)

    @property
    def _state(self) -> LossState:
        """The tracked training state (untrained before the first epoch)."""
        return self._tracker.state if self._tracker is not None else LossState()

    def _effective(self) -> PactParams:
        return self.params

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        p = self._effective()
        self._planner = Planner(p.epsilon)
        self._predictor = LossPredictor(scenario.model, scenario.training)  # type: ignore[arg-type]
        self.plans = []
        self._reset_run()

    # -- tracking the run (netsim.training.tracking) --------------------------------------
    def offset(self, loss: float | None = None) -> float:
        """The run's persistent log-noise offset at mean loss ``loss`` (default: the tracked
        state's), estimated from the residuals so far. Where the predictor expects no run
        noise at all, a persistent residual is the model being wrong: the latest is used."""
        pred, tracker = self._predictor, self._tracker
        if tracker is None or not tracker.residuals or pred is None:
            return 0.0
        r = tracker.residuals
        if pred.sigma_run <= 0.0:
            return float(np.mean(r)) if pred.sigma_epoch > 0 else r[-1]
        scale = pred.run_sigma(self._state) if loss is None else \
            float(pred.run_sigma_at(loss, self._state.variant or 0))
        return scale * tracker.draw_posterior()[0]

    def _in_band(self) -> bool:
        """Whether the latest residual lies within the band predicted before it."""
        pred, tracker = self._predictor, self._tracker
        if tracker is None or not tracker.residuals or pred is None:
            return True
        r, scale = tracker.residuals, tracker.scales[-1]
        if pred.sigma_run <= 0.0:
            prior = r[:-1]
            centre, var_centre = (float(np.mean(prior)) if prior else 0.0), 0.0
        else:
            m, v = tracker.draw_posterior(len(r) - 1)
            centre, var_centre = scale * m, scale ** 2 * v
        width = self.params.band_sigmas * math.sqrt(pred.sigma_epoch ** 2 + var_centre)
        return abs(r[-1] - centre) <= width + 1e-9 * max(1.0, abs(centre))

    def _remaining_loss(self, plan: Plan, obs: Observation | None = None) -> float:
        """The mean loss the rest of ``plan`` reaches from the tracked state (under label
        skew through the per-class state; ``obs`` gives the device ids)."""
        assert self._predictor is not None
        rest = plan.epochs[self._cursor:]
        coverage = self._tracker.coverage if self._tracker is not None else None
        if coverage is not None and obs is not None:
            return coverage_replay(coverage, obs.devices.ids, rest)[-1] if rest \
                else coverage.mean()
        states = self._predictor.replay(self._state, [(e.variant, e.samples,
                                                       len(e.participants)) for e in rest])
        return self._predictor.mean(states[-1] if states else self._state)

    # -- deciding -----------------------------------------------------------------------------
    def _replan(self, obs: Observation, target: float, keep_incumbent: bool = True) -> None:
        p = self._effective()
        assert self._predictor is not None
        now = self._predictor.mean(self._state)
        if obs.epoch > 0 and now <= target:
            # the model says the target is met, the observation that it is not (epoch noise):
            # aim one epoch-noise standard deviation below the model's loss now
            target = now * math.exp(-max(self._predictor.sigma_epoch, 1e-3))
        problem = observation_problem(obs, self._predictor, p.variants, p.allow_unprune,
                                      self._state, target,
                                      self._tracker.coverage if self._tracker else None)
        if not p.node_selection:
            problem = _all_nodes(problem)
        fresh = self._planner.plan(problem)
        self.plans.append(fresh)
        old = self._plan
        if keep_incumbent and old is not None and old.feasible \
                and self._cursor < len(old.epochs) \
                and self._remaining_loss(old, obs) <= target * (1 + 1e-9):
            rest = sum(e.energy_j for e in old.epochs[self._cursor:])
            if not fresh.feasible or rest <= fresh.energy_j:
                return  # the incumbent's rest is still feasible and no worse: keep it
        if not keep_incumbent and not fresh.feasible and old is not None and old.feasible:
            return  # under dynamics: no plan with the devices online now, go on with the old
        self._plan, self._cursor = fresh, 0

    def decide(self, obs: Observation) -> Decision:
        p = self._effective()
        if self._predictor is None:
            self._predictor = LossPredictor(obs.model, obs.training)
        if self._tracker is None:
            self._tracker = RunTracker(self._predictor, PlanningCoverage.of(
                self._predictor, obs.model, obs.training, obs.devices.index,
                obs.devices.samples, obs.label_counts))
        dropped = self._dropped(obs)
        self._tracker.observe(obs.loss)
        target = effective_target(obs.training, self._predictor)
        target *= math.exp(-self.offset(target))
        plan, why = self._plan, ""
        if plan is None:
            self._replan(obs, target)
        elif p.replan and plan.feasible and (dropped or self._offline(obs, plan)):
            why = "; ".join(
                ([f"{len(dropped)} participants of the last epoch dropped out"] if dropped
                 else []) + (["planned devices offline"] if self._offline(obs, plan) else []))
            self._replan(obs, target, keep_incumbent=False)
            if self._plan is plan:
                why += "; no plan with the devices online now, the old one followed"
        elif p.replan and plan.feasible and not (
                self._in_band() and self._cursor < len(plan.epochs)
                and self._remaining_loss(plan, obs) <= target * (1 + 1e-9)):
            self._replan(obs, target)
        plan = self._plan
        assert plan is not None
        if not plan.feasible:
            return Decision(stop=True, reason=f"{self.name}: {plan.reason}")
        if self._cursor >= len(plan.epochs):
            return Decision(stop=True, reason=f"{self.name}: plan of {len(plan.epochs)} "
                            f"epochs used up at loss {obs.loss:.4g} (predicted "
                            f"{plan.loss:.4g})")
        rest = plan.epochs[self._cursor:]
        ep = rest[0]
        self._cursor += 1
        ids = obs.devices.ids
        chosen = {i: int(s) for i, s in ep.participants.items() if obs.available[i]}
        if len(chosen) < len(ep.participants) and not why:
            why = "planned devices offline, left out (offline plan)"
        if not chosen:
            return Decision(stop=True, reason=f"{self.name}: no planned participant available")
        parts = {ids[i]: s for i, s in chosen.items()}
        self._last = (ep.variant, chosen)
        samples = float(sum(parts.values()))
        self._tracker.executed(ep.variant, samples, len(parts), parts)
        after = self._predictor.step(self._state, samples, ep.variant, participants=len(parts))
        coverage = self._tracker.coverage
        planned_mean = self._predictor.mean(after) if coverage is None \
            else coverage.mean_after(parts, ep.variant)
        info = {
            "planned_epochs": obs.epoch + len(rest),
            "planned_energy_j": obs.energy_j + float(sum(e.energy_j for e in rest)),
            "planned_time_s": obs.now_s + float(sum(e.time_s for e in rest)),
            "planned_loss": planned_mean * math.exp(self.offset(planned_mean)),
            "noise_offset": self.offset(), "replans": len(self.plans),
            "planning_s": plan.planning_s, "graph": plan.mode}
        if why:
            info["replanned"] = why
        return Decision(participants=parts, variant=ep.variant, info=info)

    # -- under dynamics (README "Under dynamics") ---------------------------------------------
    def _offline(self, obs: Observation, plan: Plan) -> bool:
        """Whether a device of the plan's next epoch is offline now."""
        if self._cursor >= len(plan.epochs):
            return False
        return not all(obs.available[i] for i in plan.epochs[self._cursor].participants)

    def _dropped(self, obs: Observation) -> list[int]:
        """Participants of the last epoch that are offline now: taken as dropped out (their
        samples did not count), so the epoch awaiting its loss in the tracker is corrected
        before the loss is observed. A device that left after its update was aggregated is
        indistinguishable here; the residual absorbs the difference either way."""
        if self._last is None or self._tracker is None:
            return []
        variant, chosen = self._last
        self._last = None
        gone = [i for i in chosen if not obs.available[i]]
        if gone:
            kept = {obs.devices.ids[i]: s for i, s in chosen.items() if obs.available[i]}
            self._tracker.executed(variant, float(sum(kept.values())), len(kept), kept)
        return gone


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
