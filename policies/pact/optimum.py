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
- Epochs are interchangeable, so they are ordered (used epochs first, variants ascending) to
  cut symmetric branches.

Instances too large (more than ``MAX_BINARIES`` participation binaries) and problems outside
the formulation (``allow_unprune``, fractions increasing with the index, no node selection)
are refused with a ValueError naming the reason; the policy lets it propagate, so the run is
recorded as ``failed`` with that reason and never reads as a result.
"""

from __future__ import annotations

import math
import time

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from netsim.costs import estimate_epoch
from netsim.policy import Decision, Observation, register
from netsim.scenario.schema import Scenario
from netsim.training.loss import LossPredictor
from policies.pact.candidates import coefficients
from policies.pact.planner import Plan, PlannedEpoch, Planner
from policies.pact.policy import observation_problem
from policies.pact.problem import PlanningProblem, replay_states

MAX_BINARIES = 800
MIP_REL_GAP = 1e-6  # HiGHS's optimality tolerance: the optimum is exact to this relative gap


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
    size = problem.epochs_left * len(problem.variants) * n
    if size > MAX_BINARIES:
        raise ValueError(f"pact-optimum: instance too large for the exact search: "
                         f"{problem.epochs_left} epochs x {len(problem.variants)} variants x "
                         f"{n} devices = {size} binaries > {MAX_BINARIES}")
    check_linear(problem)


def check_linear(problem: PlanningProblem) -> None:
    """Raise ValueError where the MILP's linear progress is not the progress model's.

    The MILP counts ``eff * d * exp(-kappa (f_u - f_L))`` per sample: exact when the
    participant exponent is 0 (an epoch's gain is linear in its samples) and when every
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
    compute plus the aggregation of every update."""
    total = 0.0
    for ep in plan.epochs:
        c = coefficients(problem, ep.variant)
        pos = {int(i): j for j, i in enumerate(c.idx)}
        at = np.array([pos[i] for i in ep.participants])
        d = np.array([float(s) for s in ep.participants.values()])
        duration = float(np.max(c.transfer_s[at] + c.s_per_sample[at] * d)) + c.agg_s * len(at)
        total += float(np.sum(c.fixed_j[at] + c.j_per_sample[at] * d)) + c.idle_w * duration
    return total


def solve_optimum(problem: PlanningProblem, time_limit_s: float = 120.0,
                  incumbent: Plan | None = None) -> Plan:
    """The minimum-energy plan of ``problem`` (infeasible Plan with a reason if none).

    ``incumbent``: a feasible plan known beforehand (PACT's own): its energy is every MILP's
    cutoff from the start, and it is the answer when no MILP finds a cheaper plan, so the
    reference is never worse than it. When every MILP then proves that no cheaper plan exists,
    the incumbent is optimal (``status`` "optimal", ``source`` "incumbent").

    ``plan.info`` says what was proven: ``status`` "optimal" (within ``MIP_REL_GAP``), or
    "time_limit" when HiGHS stopped at ``time_limit_s`` on some MILP: then the plan is the
    best one found, ``bound_j`` a proven lower bound on the optimum's MILP energy (J) and
    ``gap`` the relative distance between them. A reference that cannot finish reports its
    bound; it never reads as an optimum.

    Raises
    ------
    ValueError
        If the instance is too large or outside the formulation, or HiGHS found no plan
        within ``time_limit_s`` without proving that none exists (the message gives the bound).
    """
    check_size(problem)
    t0 = time.perf_counter()
    v_s = problem.start.variant
    allowed = [v for v in sorted(problem.variants) if v_s is None or v >= v_s]
    best: Plan | None = None
    if incumbent is not None and incumbent.feasible and incumbent.epochs:
        best = Plan(**{**incumbent.__dict__, "info": {
            "milp_j": milp_energy(problem, incumbent), "source": "incumbent"}})
    bounds: list[float] = []  # lower bounds of MILPs stopped at the time limit
    for v_last in allowed[::-1]:  # compressed first: usually cheap, a cutoff for the rest
        n_star = problem.target_samples(v_last)
        if not math.isfinite(n_star):
            continue
        cutoff = np.inf if best is None else best.info["milp_j"]
        plan, bound = _solve_last(problem, [u for u in allowed if u <= v_last], v_last,
                                  n_star, time_limit_s, cutoff)
        if bound is not None:
            bounds.append(bound)
        if plan is not None and (best is None or plan.info["milp_j"] < best.info["milp_j"]):
            best = plan
    if best is None:
        if bounds:
            raise ValueError(f"pact-optimum: HiGHS found no plan within {time_limit_s:g} s "
                             f"per MILP; proven lower bound {min(bounds):.6g} J")
        return Plan(reason=f"no plan reaches mean loss {problem.target_loss:.4g} within "
                           f"{problem.time_left_s:.4g} s and {problem.epochs_left} epochs",
                    planning_s=time.perf_counter() - t0)
    milp_j = float(best.info["milp_j"])
    bound = min([milp_j, *bounds])
    info = {"source": "milp", **best.info, "status": "time_limit" if bounds else "optimal",
            "bound_j": bound, "gap": (milp_j - bound) / milp_j if milp_j > 0 else 0.0}
    return Plan(**{**best.__dict__, "planning_s": time.perf_counter() - t0, "info": info})


def _solve_last(problem: PlanningProblem, used: list[int], v_last: int, n_star: float,
                time_limit_s: float, cutoff_j: float = np.inf) -> tuple[Plan | None, float | None]:
    """The MILP for plans ending in ``v_last``: (its plan or None if proven infeasible,
    the proven lower bound of its objective (J) if HiGHS stopped at the time limit, else
    None)."""
    pred = problem.predictor
    K, V, dev = problem.epochs_left, len(used), np.flatnonzero(problem.usable)
    n = len(dev)
    f = {u: problem.model.variants[u].params_fraction for u in used}
    kappa = pred.prune_progress_loss
    weight = {u: pred.efficiency * math.exp(-kappa * (f[u] - f[v_last])) for u in used}
    start = problem.start
    have = 0.0 if start.variant is None else start.n_eff * math.exp(
        -kappa * abs(problem.model.variants[start.variant].params_fraction - f[v_last]))
    coef = {}
    for u in used:
        c = coefficients(problem, u)
        index_of = {int(i): j for j, i in enumerate(c.idx)}
        coef[u] = c, np.array([index_of.get(int(i), -1) for i in dev])
    nx = K * V * n
    X = lambda k, a, i: (k * V + a) * n + i          # noqa: E731
    D = lambda k, a, i: nx + X(k, a, i)              # noqa: E731
    Y = lambda k, a: 2 * nx + k * V + a               # noqa: E731
    T = lambda k: 2 * nx + K * V + k                  # noqa: E731
    nvar = 2 * nx + K * V + K
    cost, lo, hi = np.zeros(nvar), np.zeros(nvar), np.ones(nvar)
    integrality = np.ones(nvar)
    rows: list[tuple[dict[int, float], float, float]] = []
    for k in range(K):
        hi[T(k)], integrality[T(k)] = np.inf, 0
        cost[T(k)] = coef[used[0]][0].idle_w
        rows.append(({Y(k, a): 1.0 for a in range(V)}, -np.inf, 1.0))
        for a, u in enumerate(used):
            c, pos = coef[u]
            for i in range(n):
                p = pos[i]
                if p < 0:
                    hi[X(k, a, i)] = hi[D(k, a, i)] = 0
                    continue
                hi[D(k, a, i)] = c.samples[p]
                cost[X(k, a, i)], cost[D(k, a, i)] = c.fixed_j[p], c.j_per_sample[p]
                rows.append(({D(k, a, i): 1.0, X(k, a, i): -c.samples[p]}, -np.inf, 0.0))
                rows.append(({D(k, a, i): 1.0, X(k, a, i): -1.0}, 0.0, np.inf))
                rows.append(({X(k, a, i): 1.0, Y(k, a): -1.0}, -np.inf, 0.0))
                row = {T(k): 1.0, D(k, a, i): -c.s_per_sample[p]}
                for j in range(n):
                    if pos[j] >= 0:
                        row[X(k, a, j)] = row.get(X(k, a, j), 0.0) - c.agg_s
                row[X(k, a, i)] = row.get(X(k, a, i), 0.0) - c.transfer_s[p]
                rows.append((row, 0.0, np.inf))
        if k + 1 < K:  # symmetry: used epochs first, variants ascending
            rows.append(({**{Y(k, a): 1.0 for a in range(V)},
                          **{Y(k + 1, a): -1.0 for a in range(V)}}, 0.0, np.inf))
            row = {Y(k, a): float(a) for a in range(V)}
            for a in range(V):
                row[Y(k + 1, a)] = float(V - a)
            rows.append((row, -np.inf, float(V)))
            big = float(sum(c.samples.sum() for c, _ in coef.values()))
            for a in range(V):  # same variant: more samples first
                row = {D(k, a, i): 1.0 for i in range(n)}
                row.update({D(k + 1, a, i): -1.0 for i in range(n)})
                row.update({Y(k, a): -big, Y(k + 1, a): -big})
                rows.append((row, -2.0 * big, np.inf))
    rows.append(({T(k): 1.0 for k in range(K)}, -np.inf, problem.time_left_s))
    rows.append(({Y(k, V - 1): 1.0 for k in range(K)}, 1.0, np.inf))
    rows.append(({D(k, a, i): weight[u] for k in range(K) for a, u in enumerate(used)
                  for i in range(n)}, n_star - have, np.inf))
    if np.isfinite(cutoff_j):  # only plans cheaper than the best so far
        rows.append(({j: float(cost[j]) for j in np.flatnonzero(cost).tolist()}, -np.inf, cutoff_j))
    r_idx, c_idx, vals, lb, ub = [], [], [], [], []
    for r, (row, lo_r, hi_r) in enumerate(rows):
        for col, val in row.items():
            r_idx.append(r)
            c_idx.append(col)
            vals.append(val)
        lb.append(lo_r)
        ub.append(hi_r)
    a_mat = coo_matrix((vals, (r_idx, c_idx)), shape=(len(rows), nvar)).tocsr()
    res = milp(cost, integrality=integrality, bounds=Bounds(lo, hi),
               constraints=LinearConstraint(a_mat, lb, ub),
               options={"mip_rel_gap": MIP_REL_GAP, "time_limit": time_limit_s})
    if res.status == 2:  # proven infeasible
        return None, None
    if res.status == 1:  # time (or iteration) limit: the incumbent, if any, and the bound
        bound = getattr(res, "mip_dual_bound", None)
        bound = float(bound) if bound is not None and np.isfinite(bound) else 0.0
        if res.x is None:
            return None, bound
        plan = _plan_from(problem, used, dev, np.round(res.x[nx:2 * nx]).reshape(K, V, n))
        return Plan(**{**plan.__dict__, "info": {"milp_j": float(res.fun)}}), bound
    if res.x is None:
        raise ValueError(f"pact-optimum: HiGHS failed ({res.message})")
    plan = _plan_from(problem, used, dev, np.round(res.x[nx:2 * nx]).reshape(K, V, n))
    return Plan(**{**plan.__dict__, "info": {"milp_j": float(res.fun)}}), None


def _plan_from(problem: PlanningProblem, used: list[int], dev: np.ndarray,
               d: np.ndarray) -> Plan:
    """The plan of a MILP solution, its energy and time re-evaluated with netsim.costs."""
    epochs = []
    for k in range(d.shape[0]):
        for a, u in enumerate(used):
            if d[k, a].sum() < 0.5:
                continue
            samples = np.zeros(problem.table.n)
            samples[dev] = d[k, a]
            est = estimate_epoch(problem.table, problem.model, u, samples)
            parts = {int(i): int(s) for i, s in zip(dev, d[k, a], strict=True) if s > 0}
            epochs.append(PlannedEpoch(u, parts, est.time_s, est.energy_j))
    losses = [problem.predictor.mean(s) for s in replay_states(problem, epochs)]
    return Plan(tuple(epochs), float(sum(e.energy_j for e in epochs)),
                float(sum(e.time_s for e in epochs)), losses[-1] if losses else np.inf, True,
                losses=tuple(losses))


class OptimumParams(BaseModel):
    """time_limit_s: HiGHS time limit per MILP (s); incumbent_epsilon: the accuracy of the
    PACT plan that seeds the search as its incumbent (0: none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    time_limit_s: float = Field(default=120.0, gt=0)
    incumbent_epsilon: float = Field(default=0.025, ge=0, le=1)


@register("pact-optimum", "exact optimum of PACT's planning problem (MILP, HiGHS); small "
          "instances only, plans once and follows the plan", OptimumParams)
class PactOptimum:
    def __init__(self, params: OptimumParams) -> None:
        self.name, self.params = "pact-optimum", params
        self._plan: Plan | None = None
        self._cursor = 0
        self._predictor: LossPredictor | None = None

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        self._plan, self._cursor = None, 0
        self._predictor = LossPredictor(scenario.model, scenario.training)  # type: ignore[arg-type]

    def decide(self, obs: Observation) -> Decision:
        if self._predictor is None:
            self._predictor = LossPredictor(obs.model, obs.training)
        if self._plan is None:
            problem = observation_problem(obs, self._predictor, None, False)
            # an instance it cannot solve exactly raises: the run is recorded as failed with
            # the reason, never as a result (a 0 J "target_missed")
            # PACT's own plan is the incumbent: the reference is never worse than PACT
            incumbent = Planner(self.params.incumbent_epsilon).plan(problem) \
                if self.params.incumbent_epsilon > 0 else None
            self._plan = solve_optimum(problem, self.params.time_limit_s, incumbent)
        plan = self._plan
        if not plan.feasible:
            return Decision(stop=True, reason=f"pact-optimum: {plan.reason}")
        if self._cursor >= len(plan.epochs):
            return Decision(stop=True, reason=f"pact-optimum: plan used up at loss {obs.loss:.4g}")
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
                            "plan_bound_j": plan.info.get("bound_j", float("nan"))})
