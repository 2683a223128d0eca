"""``pact-optimum``: the exact optimum of PACT's planning problem on small instances.

Same decision space as PACT without its restrictions (no candidate sets, no rounding): each
epoch any variant (forward only), any participant set and any integer samples d_i <= D_i; same
cost formulas and the same predictor. Solved as mixed-integer linear programs with HiGHS
(scipy.optimize.milp), one per choice of the last variant v_L (netsim's formulation):

- With variants moving forward and params fractions non-increasing in the index, the
  predictor's final effective samples are linear in the samples: an epoch of variant u
  contributes eff * d * exp(-kappa (f_u - f_L)) (the switch losses compose), so "mean loss <=
  target" is sum_k sum_u w_u D_ku >= N*_L.
- Epoch energy is separable (see :mod:`policies.pact.candidates`): sum a_ui d_kui + b_ui x_kui
  + P_idle tau_k with tau_k >= T_ui x_kui + g_ui d_kui + t_agg,u sum_j x_kuj for every device.
- Epochs are then interchangeable: a plan is a multiset of epoch configurations (variant,
  participant set), which :mod:`policies.pact.configurations` counts and aggregates, so the
  number of epochs is only a bound and the relaxation is each configuration's convex hull.

Instances too large (more than ``MAX_CONFIGURATIONS`` variants x participant sets), problems
outside the formulation (``allow_unprune``, fractions increasing with the index, no node
selection, networks where its linear cost is not the simulator's: shared media or links whose
contention binds, radio energy) are refused with a ValueError naming the reason; the policy lets it propagate, so the run is
recorded as ``failed`` with that reason and never reads as a result.
"""

from __future__ import annotations

import math
import time

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from netsim.costs import estimate_epoch
from netsim.policy import Decision, Observation, register
from netsim.scenario.schema import Scenario
from netsim.training.loss import LossPredictor
from policies.pact.candidates import coefficients
from policies.pact.configurations import (
    MAX_CONFIGURATIONS,
    OPTIMAL_GAP,
    linear_epoch,
    n_configurations,
    solve_configurations,
)
from policies.pact.planner import Plan, PlannedEpoch, Planner
from policies.pact.policy import observation_problem
from policies.pact.problem import PlanningProblem, replay_states

MIP_REL_GAP = OPTIMAL_GAP  # "optimal": within this relative gap of the proven bound (1e-4)


def check_size(problem: PlanningProblem) -> None:
    """Raise ValueError if the exact solver does not take ``problem`` (with the reason)."""
    if problem.allow_unprune:
        raise ValueError("pact-optimum: allow_unprune is outside the exact formulation")
    if problem.all_nodes:
        raise ValueError("pact-optimum: no-node-selection problems are not supported")
    f = [problem.model.variants[v].params_fraction for v in sorted(problem.variants)]
    if any(b > a for a, b in zip(f, f[1:], strict=False)):
        raise ValueError("pact-optimum: params_fraction must not increase with the variant index")
    n = int(problem.usable.sum())
    if n > 20 or n_configurations(problem, list(problem.variants)) > MAX_CONFIGURATIONS:
        raise ValueError(f"pact-optimum: instance too large for the exact search: "
                         f"{len(problem.variants)} variants x participant sets of {n} devices "
                         f"> {MAX_CONFIGURATIONS} configurations")
    check_linear(problem)
    check_cost_model(problem)


def check_linear(problem: PlanningProblem) -> None:
    """Raise ValueError where the MILP's linear progress is not the progress model's.

    The MILP counts ``eff * d * exp(-kappa (f_u - f_L))`` per sample: exact when the
    participant exponent is 0 and the local steps do not follow the samples (no
    ``local_step_exponent`` with a batch size: an epoch's gain is linear in its samples) and when every
    forward switch keeps ``n * exp(-kappa |df|)``, i.e. the progress model's switch rule
    (:meth:`~netsim.training.loss.LossPredictor.carry`) never binds on the loss (a more pruned
    curve never lies below a less pruned one). Both are checked here, the second on a grid of
    effective samples up to every variant's target, so the MILP never reads as an optimum of
    a problem it does not model.
    """
    pred = problem.predictor
    if pred.participant_exponent != 0:
        raise ValueError("pact-optimum: the MILP is linear in the samples only with "
                         f"participant_exponent 0 (this model's is {pred.participant_exponent:g})")
    if pred.local_step_exponent != 0 and pred.local.batch_size is not None:
        raise ValueError("pact-optimum: the MILP is linear in the samples only when the local "
                         "steps do not follow them: local_step_exponent "
                         f"{pred.local_step_exponent:g} with batch_size {pred.local.batch_size:g} "
                         "(set local_step_exponent 0 or batch_size inf)")
    variants = sorted(problem.variants)
    top = max((t for t in (problem.target_samples(v) for v in variants) if math.isfinite(t)),
              default=1.0)
    n = np.concatenate([[0.0], top * np.logspace(-6, 1, 200)])
    for a in variants:
        for b in variants:
            if b <= a:
                continue
            keep = math.exp(-pred.prune_progress_loss * abs(
                problem.model.variants[b].params_fraction
                - problem.model.variants[a].params_fraction))
            got = np.asarray(pred.carry(n, np.full(len(n), a), np.full(len(n), b)))
            if not np.allclose(got, n * keep, rtol=1e-9, atol=0.0):
                raise ValueError(f"pact-optimum: switching variant {a} -> {b} carries progress "
                                 "as loss (their curves cross), which the MILP's linear "
                                 "weights do not model")


def milp_energy(problem: PlanningProblem, plan: Plan) -> float:
    """A plan's energy (J) in the MILP's linear cost model (the objective its cutoffs and
    bounds are in): per epoch, each participant's fixed and per-sample energy plus the idle
    power of every device over the epoch's duration, the slowest participant's transfer and
    compute (at least the busy time of a medium or link they share) plus the aggregation of
    every update."""
    total = 0.0
    for ep in plan.epochs:
        c = coefficients(problem, ep.variant)
        pos = {int(i): j for j, i in enumerate(c.idx)}
        at = np.array([pos[i] for i in ep.participants])
        d = np.array([float(s) for s in ep.participants.values()])
        total += linear_epoch(c, at, d)[1]
    return total


def check_cost_model(problem: PlanningProblem) -> None:
    """Raise ValueError where the linear cost model is not the simulator's: per variant, an
    epoch of every device on all its samples and an epoch of each device alone, costed both
    ways (:func:`netsim.costs.estimate_epoch`), must agree to a relative 1e-6. Shared media
    and links whose contention binds, and radio energy beyond the per-bit cost, fail it."""
    for v in problem.variants:
        c = coefficients(problem, v)
        groups = [np.arange(len(c.idx))] + [np.array([j]) for j in range(len(c.idx))]
        for at in groups if len(c.idx) else []:
            samples = np.zeros(problem.table.n)
            samples[c.idx[at]] = c.samples[at]
            sim = estimate_epoch(problem.table, problem.model, v, samples).energy_j
            lin = linear_epoch(c, at, c.samples[at])[1]
            if abs(sim - lin) > 1e-6 * max(abs(sim), 1e-12):
                raise ValueError(
                    f"pact-optimum: the exact formulation's linear cost differs from the "
                    f"simulator's on this network ({lin:.6g} J vs {sim:.6g} J for an epoch of "
                    f"variant {v} on {len(at)} device(s)): shared media or links whose "
                    "contention binds, or radio energy, are outside it")


def solve_optimum(problem: PlanningProblem, time_limit_s: float = 120.0,
                  incumbent: Plan | None = None) -> Plan:
    """The minimum-energy plan of ``problem`` (infeasible Plan with a reason if none).

    One configuration MILP per last variant v_L, compressed first
    (:func:`policies.pact.configurations.solve_configurations`); the best plan so far is every
    later MILP's cutoff. ``incumbent``: a feasible plan known beforehand (PACT's own): its
    energy is the cutoff from the start, and it is the answer when no MILP finds a cheaper
    plan, so the reference is never worse than it (``source`` "incumbent").

    ``plan.info`` says what was proven: ``bound_j`` a proven lower bound of the optimum's MILP
    energy (J), ``gap`` the relative distance of the plan's MILP energy ``milp_j`` to it, and
    ``status`` "optimal" when that gap is at most ``MIP_REL_GAP``, else "time_limit" (HiGHS
    stopped at ``time_limit_s`` on some MILP: the plan is the best one found) or "gap" (every
    MILP finished but the integer split of its samples left a gap). A reference that cannot
    finish reports its bound; it never reads as an optimum.

    Raises
    ------
    ValueError
        If the instance is too large or outside the formulation, or HiGHS found no plan
        within ``time_limit_s`` without proving that none exists (the message gives the bound).
    """
    check_size(problem)
    t0 = time.perf_counter()
    pred = problem.predictor
    kappa = pred.prune_progress_loss
    v_s = problem.start.variant
    allowed = [v for v in sorted(problem.variants) if v_s is None or v >= v_s]
    f = {u: problem.model.variants[u].params_fraction for u in allowed}
    best: Plan | None = None
    if incumbent is not None and incumbent.feasible and incumbent.epochs:
        best = Plan(**{**incumbent.__dict__, "info": {
            "milp_j": milp_energy(problem, incumbent), "source": "incumbent"}})
    lowers: list[float] = []
    stopped = False
    for v_last in allowed[::-1]:  # compressed first: usually cheap, a cutoff for the rest
        n_star = problem.target_samples(v_last)
        if not math.isfinite(n_star):
            continue
        used = [u for u in allowed if u <= v_last]
        weight = {u: pred.efficiency * math.exp(-kappa * (f[u] - f[v_last])) for u in used}
        have = 0.0 if v_s is None else problem.start.n_eff * math.exp(
            -kappa * abs(problem.model.variants[v_s].params_fraction - f[v_last]))
        cutoff = np.inf if best is None else best.info["milp_j"]
        left = max(time_limit_s - (time.perf_counter() - t0), 1e-3)
        found = solve_configurations(problem, used, v_last, weight, n_star - have, left, cutoff)
        stopped |= found.status == "time_limit"
        lowers.append(found.lower_j)
        if found.epochs is not None:
            plan = plan_of(problem, found.epochs)
            plan = Plan(**{**plan.__dict__, "info": {"milp_j": milp_energy(problem, plan),
                                                     "source": "milp"}})
            if best is None or plan.info["milp_j"] < best.info["milp_j"]:
                best = plan
    if best is None:
        if stopped:
            raise ValueError(f"pact-optimum: HiGHS found no plan within {time_limit_s:g} s; "
                             f"proven lower bound {min(lowers):.6g} J")
        return Plan(reason=f"no plan reaches mean loss {problem.target_loss:.4g} within "
                           f"{problem.time_left_s:.4g} s and {problem.epochs_left} epochs",
                    planning_s=time.perf_counter() - t0)
    milp_j = float(best.info["milp_j"])
    bound = min([milp_j, *lowers])
    gap = (milp_j - bound) / milp_j if milp_j > 0 else 0.0
    status = "optimal" if gap <= MIP_REL_GAP else "time_limit" if stopped else "gap"
    info = {**best.info, "status": status, "bound_j": bound, "gap": gap}
    return Plan(**{**best.__dict__, "planning_s": time.perf_counter() - t0, "info": info})


def plan_of(problem: PlanningProblem, epochs: list[tuple[int, dict[int, int]]]) -> Plan:
    """The plan of epochs (variant, device index -> samples), its energy and time evaluated
    with netsim.costs and its losses with the progress model."""
    planned = []
    for u, parts in epochs:
        samples = np.zeros(problem.table.n)
        for i, s in parts.items():
            samples[i] = s
        est = estimate_epoch(problem.table, problem.model, u, samples)
        planned.append(PlannedEpoch(u, dict(parts), est.time_s, est.energy_j))
    losses = [problem.predictor.mean(s) for s in replay_states(problem, planned)]
    return Plan(tuple(planned), float(sum(e.energy_j for e in planned)),
                float(sum(e.time_s for e in planned)), losses[-1] if losses else np.inf, True,
                losses=tuple(losses))


class OptimumParams(BaseModel):
    """time_limit_s: time limit of the whole search (s); incumbent_epsilon: the accuracy of the
    PACT plan that seeds the search as its incumbent (0: none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    time_limit_s: float = Field(default=120.0, gt=0)
    incumbent_epsilon: float = Field(default=0.025, ge=0, le=1)


@register("pact-optimum", "exact optimum of PACT's planning problem (configuration MILP, "
          "HiGHS); variants x participant sets <= 4096; follows its plan, re-plans only "
          "when the plan is used up before the target or a participant is unavailable",
          OptimumParams)
class PactOptimum:
    def __init__(self, params: OptimumParams) -> None:
        self.name, self.params = "pact-optimum", params
        self._plan: Plan | None = None
        self._cursor = 0
        self._replans = 0
        self._predictor: LossPredictor | None = None

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        self._plan, self._cursor, self._replans = None, 0, 0
        self._predictor = LossPredictor(scenario.model, scenario.training)  # type: ignore[arg-type]

    def decide(self, obs: Observation) -> Decision:
        if self._predictor is None:
            self._predictor = LossPredictor(obs.model, obs.training)
        departed = self._departure(obs)
        if self._plan is None or departed:
            # an instance it cannot solve exactly raises: the run is recorded as failed with
            # the reason, never as a result (a 0 J "target_missed")
            problem = observation_problem(obs, self._predictor, None, False)
            # PACT's own plan is the incumbent: the reference is never worse than PACT
            incumbent = Planner(self.params.incumbent_epsilon).plan(problem) \
                if self.params.incumbent_epsilon > 0 else None
            self._plan, self._cursor = solve_optimum(problem, self.params.time_limit_s,
                                                     incumbent), 0
            self._replans += departed is not None
        plan = self._plan
        if not plan.feasible:
            return Decision(stop=True, reason=f"pact-optimum: {plan.reason}")
        ep = plan.epochs[self._cursor]
        self._cursor += 1
        rest = plan.epochs[self._cursor - 1:]
        ids = obs.devices.ids
        return Decision(participants={ids[i]: s for i, s in ep.participants.items()},
                        variant=ep.variant, info={
                            "planned_epochs": obs.epoch + len(rest),
                            "planned_energy_j": obs.energy_j + sum(e.energy_j for e in rest),
                            "planned_time_s": obs.now_s + sum(e.time_s for e in rest),
                            "planned_loss": plan.losses[self._cursor - 1],
                            "plan_status": plan.info.get("status", ""),
                            "plan_gap": plan.info.get("gap", 0.0),
                            "plan_bound_j": plan.info.get("bound_j", float("nan")),
                            "replans": self._replans})

    def _departure(self, obs: Observation) -> str | None:
        """Why the world has left the plan (None while it follows it): the plan is used up
        before the target (the run's noise made it slower than the model), or a participant
        of the next planned epoch is not available."""
        plan = self._plan
        if plan is None or not plan.feasible:
            return None
        if self._cursor >= len(plan.epochs):
            return "used up"
        available = np.asarray(obs.available, dtype=bool)
        if not all(available[i] for i in plan.epochs[self._cursor].participants):
            return "participant unavailable"
        return None
