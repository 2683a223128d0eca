"""PACT's planner: candidates -> time-expanded graph -> dynamic program -> plan.

``Planner(eps).plan(problem)`` returns a :class:`Plan` (a list of epochs with participants and
their samples) of minimum predicted energy that reaches the loss target within the time and
epoch limits under the policy's predictor, or an infeasible plan with the reason.

Steps (netsim's formalization of the paper's method):
1. candidate epochs per variant (:mod:`policies.pact.candidates`);
2. the graph's grids and run tables (:mod:`policies.pact.graph`);
3. the DP without the time coordinate; if its path meets the deadline and the epoch limit it
   is optimal in the time-expanded graph too and is returned;
4. if only the epoch limit is violated (and it is at most MAX_EPOCH_SLOTS), the DP over the
   graph whose slots are epochs (exact epoch limit);
5. otherwise the DP over the time-expanded graph (slots of width time-left / round(1/eps));
   if that path is too long in epochs, a price per epoch is added to every edge and raised
   (doubling, then bisection) until the cheapest path fits: a Lagrangian treatment;
6. the slack the rounding left is removed (:mod:`policies.pact.repair`).

Work is polynomial: candidates O(V R n B G) for n devices, R = 3 rankings, B ~ log(range)/eps
time budgets and G ~ log(D)/eps sample amounts; the untimed DP O(V^2 J^2) with
J ~ log(1/eps)/eps levels; the timed DP O(V^2 J^2 / eps^2).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from policies.pact.candidates import VariantCandidates, build_candidates
from policies.pact.dp import Edge, solve_timed, solve_untimed
from policies.pact.graph import Levels, loss_levels, need_grid, run_costs, variant_needs
from policies.pact.problem import PlanningProblem, replay_states
from policies.pact.repair import plan_costs, trim

_BISECTIONS = 12
MAX_EPOCH_SLOTS = 64  # epoch limits up to this are exact (epoch-slot graph); above, priced


@dataclass(frozen=True)
class PlannedEpoch:
    """One planned epoch: variant, device index -> samples, predicted duration (s), energy (J)."""

    variant: int
    participants: dict[int, int]
    time_s: float
    energy_j: float

    @property
    def samples(self) -> int:
        """Samples trained on in the epoch."""
        return int(sum(self.participants.values()))


@dataclass(frozen=True)
class Plan:
    """A plan and its predicted totals (energy J, time s, final mean loss), or why none."""

    epochs: tuple[PlannedEpoch, ...] = ()
    energy_j: float = np.inf
    time_s: float = np.inf
    loss: float = np.inf
    feasible: bool = False
    reason: str = ""
    mode: str = ""          # which graph gave the plan: untimed, timed or epochs
    planning_s: float = 0.0
    info: dict = field(default_factory=dict)
    losses: tuple[float, ...] = ()  # predicted mean loss after each epoch (the progress model)


class Planner:
    """Plans with accuracy ``eps``; caches candidates while the usable devices do not change."""

    def __init__(self, eps: float) -> None:
        self.eps = float(eps)
        self._cands: dict[int, VariantCandidates] = {}
        self._key: tuple | None = None
        self._graph: tuple[Levels, dict[int, np.ndarray], dict[tuple[int, int], np.ndarray]] | None = None

    def _prepare(self, problem: PlanningProblem) -> None:
        key = (problem.usable.tobytes(), problem.variants, problem.target_loss)
        if key == self._key:
            return
        self._key = key
        self._cands = {v: build_candidates(problem, v, self.eps) for v in problem.variants}
        levels = loss_levels(problem, self.eps)
        base = need_grid(levels, self.eps)
        need, nidx = {}, {}
        for b in problem.variants:
            need[b], by_old = variant_needs(problem, levels, base, b, list(problem.variants))
            nidx.update({(a, b): m for a, m in by_old.items()})
        self._graph = (levels, need, nidx)

    def plan(self, problem: PlanningProblem) -> Plan:
        """The minimum-energy plan of ``problem`` (see the module docstring)."""
        t0 = time.perf_counter()
        self._prepare(problem)
        plan = self._plan(problem)
        return Plan(**{**plan.__dict__, "planning_s": time.perf_counter() - t0})

    def _plan(self, problem: PlanningProblem) -> Plan:
        if problem.epochs_left <= 0 or problem.time_left_s <= 0:
            return Plan(reason="no time or epochs left")
        plan = self._solve(problem, "untimed", 0.0)
        if not plan.feasible:
            return plan
        h, t = problem.epochs_left, problem.time_left_s
        if len(plan.epochs) <= h and plan.time_s <= t:
            return plan
        if plan.time_s <= t and h <= MAX_EPOCH_SLOTS:
            plan = self._solve(problem, "epochs", 0.0)
            if not plan.feasible:  # the epoch limit alone already rules every plan out
                return Plan(reason=f"no plan reaches mean loss {problem.target_loss:.4g} "
                                   f"within {h} epochs under the predictor (eps {self.eps:g})")
            if plan.time_s <= t:
                return plan
        elif plan.time_s <= t:
            plan = self._with_epoch_limit(problem, "untimed")
            if plan.feasible and plan.time_s <= t:
                return plan
        plan = self._with_epoch_limit(problem, "timed")
        if plan.feasible:
            return plan
        return Plan(reason=f"no plan reaches mean loss {problem.target_loss:.4g} within "
                           f"{t:.4g} s and {h} epochs under the predictor (eps {self.eps:g})")

    def _with_epoch_limit(self, problem: PlanningProblem, mode: str) -> Plan:
        plan = self._solve(problem, mode, 0.0)
        if not plan.feasible or len(plan.epochs) <= problem.epochs_left:
            return plan
        scale = float(np.median(np.concatenate([c.energy_j for c in self._cands.values()])))
        lo, hi, best = 0.0, scale, None
        for _ in range(30):
            trial = self._solve(problem, mode, hi)
            if not trial.feasible:
                return trial
            if len(trial.epochs) <= problem.epochs_left:
                best = trial
                break
            lo, hi = hi, hi * 2.0
        if best is None:
            return Plan(reason=f"no plan within {problem.epochs_left} epochs")
        for _ in range(_BISECTIONS):
            mid = 0.5 * (lo + hi)
            trial = self._solve(problem, mode, mid)
            if trial.feasible and len(trial.epochs) <= problem.epochs_left:
                hi = mid
                if trial.energy_j < best.energy_j:
                    best = trial
            else:
                lo = mid
        return best

    def _solve(self, problem: PlanningProblem, mode: str, penalty_j: float) -> Plan:
        """One DP: ``mode`` "untimed" (no time coordinate), "timed" (time slots) or "epochs"
        (slots of one epoch each, so the epoch limit is exact)."""
        assert self._graph is not None  # _prepare(problem) ran first
        levels, need, nidx = self._graph
        h = problem.epochs_left
        variants = sorted(problem.variants)
        start = _start_vertex(problem, levels)
        if mode == "untimed":
            runs = {v: run_costs(self._cands[v], need[v], h, penalty_j) for v in variants}
            _, edges = solve_untimed(levels, runs, nidx, variants, start, problem.allow_unprune)
        else:
            n_slots = h if mode == "epochs" else max(1, int(round(1.0 / self.eps)))
            slot_s = None if mode == "epochs" else problem.time_left_s / n_slots
            runs = {v: run_costs(self._cands[v], need[v], h, penalty_j, slot_s, n_slots)
                    for v in variants}
            _, edges = solve_timed(levels, runs, nidx, variants, start, problem.allow_unprune,
                                   n_slots)
        if not edges:
            return Plan(reason=f"no plan reaches mean loss {problem.target_loss:.4g} under the "
                               "predictor with the usable devices and variants")
        return self._expand(problem, edges, runs, mode)

    def _expand(self, problem: PlanningProblem, edges: list[Edge], runs, mode: str) -> Plan:
        epochs: list[PlannedEpoch] = []
        for edge in edges:
            table = runs[edge.variant]
            at = edge.k if mode == "untimed" else (edge.k, edge.slots - 1)
            c, m = int(table.cand[at]), int(table.epochs[at])
            cands = self._cands[edge.variant]
            ep = PlannedEpoch(edge.variant, cands.participants(c), float(cands.time_s[c]),
                              float(cands.energy_j[c]))
            epochs += [ep] * m
        graph_energy = float(sum(e.energy_j for e in epochs))
        if not problem.all_nodes:
            epochs = trim(problem, epochs, lambda v, parts: PlannedEpoch(v, parts, 0.0, 0.0))
        epochs = _costed(problem, epochs)
        losses = [problem.predictor.mean(s) for s in replay_states(problem, epochs)]
        if losses[-1] > problem.target_loss * (1 + 1e-9):  # the replay is the plan's claim
            return Plan(reason=f"the plan's replay through the progress model ends at "
                               f"{losses[-1]:.6g} > target {problem.target_loss:.6g}")
        return Plan(tuple(epochs), float(sum(e.energy_j for e in epochs)),
                    float(sum(e.time_s for e in epochs)), losses[-1],
                    True, "", mode, info={"graph_energy_j": graph_energy},
                    losses=tuple(losses))


def _costed(problem: PlanningProblem, epochs: list[PlannedEpoch]) -> list[PlannedEpoch]:
    """The epochs with time and energy from the engine's cost functions, shared links, media
    and radio tails carried from one epoch into the next included
    (:func:`policies.pact.repair.plan_costs`)."""
    costs = plan_costs(problem, [(ep.variant, ep.participants) for ep in epochs])
    return [PlannedEpoch(ep.variant, ep.participants, t, e)
            for ep, (t, e) in zip(epochs, costs, strict=True)]


def _start_vertex(problem: PlanningProblem, levels: Levels) -> tuple[int, int | None]:
    """The level at or below the start's effective samples (rounded down), and its variant."""
    j = int(np.searchsorted(levels.n, problem.start.n_eff * (1 + 1e-12), side="right")) - 1
    return max(j, 0), problem.start.variant
