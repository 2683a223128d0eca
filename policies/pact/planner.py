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

Under label skew (``problem.coverage``, netsim's extension: the paper assumes IID data) each
candidate's gain is weighted by the classes it trains
(:func:`policies.pact.candidates.coverage_weights`), the plan is replayed through the policy's
per-class state instead of the scalar one, and the slack is left in (trimming is exact for the
scalar state only). A rating that assumes one fill repeated can be optimistic for a plan that
mixes fills; when the replay misses the target, every gain is scaled by what the replay
reached of the work needed and the plan is made again (at most ``COVERAGE_ROUNDS`` times).

Work is polynomial: candidates O(V R n B G) for n devices, R = 3 rankings, B ~ log(range)/eps
time budgets and G ~ log(D)/eps sample amounts; the untimed DP O(V^2 J^2) with
J ~ log(1/eps)/eps levels; the timed DP O(V^2 J^2 / eps^2).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from policies.pact.candidates import VariantCandidates, build_candidates
from policies.pact.dp import Edge, solve_timed, solve_untimed
from policies.pact.graph import Levels, loss_levels, need_grid, run_costs, variant_needs
from policies.pact.problem import PlanningProblem, replay_losses
from policies.pact.repair import plan_costs, trim

_BISECTIONS = 12
MAX_EPOCH_SLOTS = 64  # epoch limits up to this are exact (epoch-slot graph); above, priced
COVERAGE_ROUNDS = 4  # under label skew: plans made at most, each replay's miss scaling gains


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

    def _prepare(self, problem: PlanningProblem, gain_scale: float = 1.0) -> None:
        cov = problem.coverage
        key = (problem.usable.tobytes(), problem.variants, problem.target_loss, gain_scale,
               None if cov is None else (cov.variant, cov.state.m.tobytes(),
                                         problem.start.n_eff, problem.epochs_left))
        if key == self._key:
            return
        self._key = key
        self._cands = {v: build_candidates(problem, v, self.eps) for v in problem.variants}
        if gain_scale != 1.0:
            self._cands = {v: replace(c, gain=c.gain * gain_scale)
                           for v, c in self._cands.items()}
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
        scale, rounds = 1.0, 1
        while problem.coverage is not None and not plan.feasible \
                and "replay_loss" in plan.info and rounds < COVERAGE_ROUNDS:
            scale *= _replay_shortfall(problem, plan)
            self._prepare(problem, scale)
            plan = self._plan(problem)
            rounds += 1
        if problem.coverage is not None and not plan.feasible and plan.epochs:
            plan = _extended(problem, plan)
        info = {**plan.info, "coverage_rounds": rounds} if problem.coverage is not None \
            else plan.info
        return Plan(**{**plan.__dict__, "planning_s": time.perf_counter() - t0, "info": info})

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
        cov = problem.coverage
        whole, trimmed = epochs, False
        if not problem.all_nodes and (cov is None or cov.state.classes == 1):
            trimmed = True
            # (trimming is exact for the scalar state; with one class the per-class state is
            # the scalar one until the data floor binds: checked by the replay below)
            epochs = trim(problem, epochs, lambda v, parts: PlannedEpoch(v, parts, 0.0, 0.0))
        epochs = _costed(problem, epochs)
        losses = replay_losses(problem, epochs)
        if cov is not None and trimmed and losses[-1] > problem.target_loss * (1 + 1e-9):
            epochs = _costed(problem, whole)  # the trim went below the data floor: untrimmed
            losses = replay_losses(problem, epochs)
        if losses[-1] > problem.target_loss * (1 + 1e-9):  # the replay is the plan's claim
            return Plan(epochs=tuple(epochs), mode=mode,
                        reason=f"the plan's replay through the progress model ends at "
                               f"{losses[-1]:.6g} > target {problem.target_loss:.6g}",
                        info={"replay_loss": losses[-1], "replay_epochs": len(epochs),
                              "replay_last_variant": epochs[-1].variant})
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


def _extended(problem: PlanningProblem, plan: Plan) -> Plan:
    """A plan whose replay through the per-class state still misses the target after the
    coverage rounds, extended until the replay reaches the target (within the epochs and
    time left), or the plan unchanged (still infeasible) if that does not reach it: the
    stationary weights' last shortfall is usually a hair. Each added epoch is the plan's
    last one, or every device that can train the variant on all its samples (the most
    distinct data, every class) where the last one lowers the loss by less than half as
    much (its classes saturate, or its data's floor binds)."""
    epochs = list(plan.epochs)
    cov, ids = problem.coverage, problem.table.ids
    assert cov is not None
    state, losses = cov.copy(), []
    for e in epochs:
        state.commit({ids[i]: float(n) for i, n in e.participants.items()}, e.variant)
        losses.append(state.mean(e.variant))
    last = epochs[-1]
    fits = np.flatnonzero(problem.fits(last.variant) & (problem.table.samples > 0))
    every = PlannedEpoch(last.variant, {int(i): int(problem.table.samples[i]) for i in fits},
                         0.0, 0.0)
    options = [(e, {ids[i]: float(n) for i, n in e.participants.items()})
               for e in (last, every)]
    while losses[-1] > problem.target_loss * (1 + 1e-9):
        if len(epochs) >= problem.epochs_left:
            return plan
        drops = [losses[-1] - state.mean_after(t, last.variant) for _, t in options]
        step, trained = options[0] if drops[0] >= 0.5 * drops[1] else options[1]
        state.commit(trained, last.variant)
        losses.append(state.mean(last.variant))
        epochs.append(step)
    epochs = _costed(problem, epochs)  # (the costs only: the losses stand)
    time_s = float(sum(e.time_s for e in epochs))
    if time_s > problem.time_left_s:
        return plan
    return Plan(tuple(epochs), float(sum(e.energy_j for e in epochs)), time_s, losses[-1], True,
                "", plan.mode, info={**plan.info, "extended_epochs":
                                     len(epochs) - len(plan.epochs)},
                losses=tuple(losses))


def _replay_shortfall(problem: PlanningProblem, plan: Plan) -> float:
    """What a plan whose replay missed the target reached of the work it needed, in the last
    variant's effective samples: (n(replay's loss) - n(start)) / (n(target) - n(start)),
    within [0.2, 0.95] (so each round asks for more, never for nothing)."""
    v = int(plan.info["replay_last_variant"])
    curve = problem.predictor.curves[v]
    n0 = problem.predictor.carry(problem.start.n_eff, problem.start.variant, v) \
        if problem.start.variant is not None else problem.start.n_eff
    reached = curve.samples_for(float(plan.info["replay_loss"])) - n0
    needed = problem.target_samples(v) - n0
    if not (needed > 0 and np.isfinite(needed)):
        return 0.5
    return float(np.clip(reached / needed, 0.2, 0.95))


def _start_vertex(problem: PlanningProblem, levels: Levels) -> tuple[int, int | None]:
    """The level at or below the start's effective samples (rounded down), and its variant."""
    j = int(np.searchsorted(levels.n, problem.start.n_eff * (1 + 1e-12), side="right")) - 1
    return max(j, 0), problem.start.variant
