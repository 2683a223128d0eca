"""PACT's time-expanded graph: its vertex grids and its edges (netsim's formalization).

A vertex is (time slot s, loss level j, variant v). Loss levels: the loss is a decreasing
function of the predictor's effective samples n under each variant, so a level is a point
n_j of a grid of effective samples with relative step eps (from eps * N* up to N*, N* the
samples a variant needs to reach the target; each variant's own N* is a grid point so the
target is hit exactly). Grids are anchored at their top with ratio exp(eps) (a relative step
of about eps), so halving eps refines every grid: the graph of eps/2 contains the graph of
eps and its best path is never worse; the vertex's loss is mean_v(n_j). Rounding the loss *up* is rounding
n *down* to the grid, so a path's predicted loss is never better than the truth of the
predictor: any path that ends at a target vertex is feasible for the predictor.

Time slots have width eps * (time left) and an edge of duration t occupies ceil(t / width)
slots (rounded up), so a path within the slots meets the deadline.

An edge is a *run*: m >= 1 consecutive epochs of one candidate (variant v', samples D over P
participants, each epoch adding the progress model's gain(D, P)), from (s, j, v) to
(s + slots, j', v') where m is the fewest epochs that lift the state from n_j (carried through
the variant switch by the progress model's own rule, ``LossPredictor.carry``) to n_j'. Runs keep the number of roundings per
path small (one per edge, not one per epoch). The work still needed, n_j' - switch(n_j), is
rounded *up* on a grid of relative step eps before the cheapest run for it is looked up in a
per-variant table (:func:`run_costs`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policies.pact.candidates import VariantCandidates
from policies.pact.problem import PlanningProblem


@dataclass(frozen=True)
class Levels:
    """The loss levels: effective samples n (ascending, n[0] = 0) and, per variant, the first
    level at or past its target (``terminal[v]``; len(n) if the variant cannot reach it)."""

    n: np.ndarray
    terminal: np.ndarray


def loss_levels(problem: PlanningProblem, eps: float) -> Levels:
    """Grid of effective samples with relative step ``eps`` (see the module docstring)."""
    targets = np.array([problem.target_samples(v) for v in range(len(problem.model.variants))])
    usable = np.array([v in problem.variants for v in range(len(targets))])
    finite = targets[np.isfinite(targets) & usable]
    top = float(finite.max()) if len(finite) else 1.0
    k = int(np.floor(np.log(1.0 / eps) / eps + 1e-9))     # down to top * eps
    grid = np.concatenate([[0.0], top * np.exp(-eps * np.arange(k + 1)), finite])
    n = np.unique(grid[grid <= top])
    terminal = np.array([int(np.searchsorted(n, t)) if np.isfinite(t) and usable[v] else len(n)
                         for v, t in enumerate(targets)])
    return Levels(n, terminal)


def need_grid(levels: Levels, eps: float) -> np.ndarray:
    """Grid of work amounts (effective samples, ascending); entry 0 stands for 'any positive
    amount' (one epoch of any candidate)."""
    top = float(levels.n[-1]) if levels.n[-1] > 0 else 1.0
    k = int(np.floor(2.0 * np.log(1.0 / eps) / eps + 1e-9))  # down to top * eps^2
    return np.concatenate([[1e-12], top * np.exp(-eps * np.arange(k, -1, -1))])


@dataclass(frozen=True)
class RunTable:
    """Cheapest run per work amount (and slot budget) for one variant.

    ``energy_j[k(, s)]``: energy of the cheapest run doing at least need[k] effective samples
    (within s + 1 slots); ``cand`` the candidate; ``epochs`` its length m. Inf where none.
    """

    energy_j: np.ndarray
    cand: np.ndarray
    epochs: np.ndarray


def run_costs(cands: VariantCandidates, need: np.ndarray, max_epochs: int,
              penalty_j: float = 0.0, slot_s: float | None = None,
              n_slots: int = 0) -> RunTable:
    """Cheapest run of ``cands`` for each work amount (effective samples: each epoch adds the
    candidate's gain, the progress model's); ``penalty_j`` is added per epoch (the
    epoch-limit multiplier). With ``n_slots`` > 0, tables are per slot budget 1..n_slots, a
    run taking ceil(duration / slot_s) slots, or, with ``slot_s`` None, one slot per epoch."""
    if len(cands) == 0:
        shape = (len(need),) if n_slots <= 0 else (len(need), n_slots)
        return RunTable(np.full(shape, np.inf), np.zeros(shape, int), np.zeros(shape, int))
    per_epoch = cands.gain
    m = np.maximum(np.ceil(need[None, :] / per_epoch[:, None] * (1 - 1e-12)), 1.0)  # C x K
    cost = m * (cands.energy_j + penalty_j)[:, None]
    cost[m > max_epochs] = np.inf
    m = np.minimum(m, max_epochs + 1.0)  # (those are out anyway; keeps the casts finite)
    if n_slots <= 0:
        c = np.argmin(cost, axis=0)
        k = np.arange(len(need))
        return RunTable(cost[c, k], c, m[c, k].astype(int))
    if slot_s is None:
        slots = m.astype(np.int64)
    else:
        slots = np.ceil(m * cands.time_s[:, None] / slot_s * (1 - 1e-12)).astype(np.int64)
        slots = np.maximum(slots, 1)
    ok = (slots <= n_slots) & np.isfinite(cost)
    ci, ki = np.nonzero(ok)
    if len(ci) == 0:
        shape = (len(need), n_slots)
        return RunTable(np.full(shape, np.inf), np.zeros(shape, int), np.zeros(shape, int))
    flat = ki * n_slots + (slots[ci, ki] - 1)
    order = np.lexsort((cost[ci, ki], flat))           # cheapest first within each cell
    flat, ci, ki = flat[order], ci[order], ki[order]
    first = np.concatenate([[True], flat[1:] != flat[:-1]])
    table: np.ndarray = np.full(len(need) * n_slots, np.inf)
    cand: np.ndarray = np.zeros(len(need) * n_slots, dtype=np.int64)
    table[flat[first]] = cost[ci[first], ki[first]]
    cand[flat[first]] = ci[first]
    table, cand = table.reshape(len(need), n_slots), cand.reshape(len(need), n_slots)
    # "within s + 1 slots": running minimum over the slot budget
    best = np.minimum.accumulate(table, axis=1)
    pos = np.where(table == best, np.arange(n_slots)[None, :], 0)
    pos = np.maximum.accumulate(pos, axis=1)
    cand = np.take_along_axis(cand, pos, axis=1)
    epochs = m.astype(np.int64)[cand, np.arange(len(need))[:, None]]
    return RunTable(best, cand, epochs)


def carried(problem: PlanningProblem, n: np.ndarray, old: int, new: int) -> np.ndarray:
    """Effective samples kept from levels ``n`` of variant ``old`` when moving to ``new``: the
    progress model's own switch rule (:meth:`netsim.training.loss.LossPredictor.carry`),
    monotone in ``n``, so a state rounded down stays rounded down through a switch."""
    if old == new:
        return n
    return np.asarray(problem.predictor.carry(n, np.full(len(n), old), np.full(len(n), new)))


def need_index(problem: PlanningProblem, levels: Levels, need: np.ndarray, old: int,
               new: int) -> np.ndarray:
    """J x J indices into ``need`` of the work from level j (variant old) to level j' (new),
    rounded up; -1 where the edge is useless (same variant, not upward)."""
    kept = carried(problem, levels.n, old, new)
    work = levels.n[None, :] - kept[:, None]
    idx = np.searchsorted(need, work * (1 - 1e-12), side="left")
    idx = np.where(work <= 0, 0, idx)
    idx = np.minimum(idx, len(need) - 1)
    if old == new:
        idx = np.where(work > 0, idx, -1)
    over = work > need[-1]
    return np.where(over, -1, idx)


def variant_needs(problem: PlanningProblem, levels: Levels, base: np.ndarray, new: int,
                  olds: list[int]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Work amounts for runs in variant ``new``: the rounded grid ``base`` followed by the exact
    work from every level of every ``olds`` variant to ``new``'s target level (edges into the
    target are not rounded), and, per old variant, the J x J need-index matrix."""
    t = levels.terminal[new]
    extra, nidx = [], {}
    for a, old in enumerate(olds):
        idx = need_index(problem, levels, base, old, new)
        if t < len(levels.n):
            work = levels.n[t] - carried(problem, levels.n, old, new)
            exact = len(base) + a * len(levels.n) + np.arange(len(levels.n))
            useful = (work > 0) | (old != new)
            idx[:, t] = np.where(useful, exact, -1)
            extra.append(np.maximum(work, base[0]))
        else:
            extra.append(np.full(len(levels.n), base[-1]))
        nidx[old] = idx
    return np.concatenate([base, *extra]), nidx
