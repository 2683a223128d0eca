"""Removing the slack that rounding leaves in a plan (netsim's addition to the DP).

A path of the graph is feasible because loss levels were rounded up; its exact replay under the
progress model usually overshoots the target by up to about eps of the work. The overshoot is
removed from the plan's *last* run of one variant (the epochs after its last switch), where the
final effective samples are exactly linear in each epoch's gain: no linearisation through a
switch (the switch rule is not linear), so the trimmed plan is exact, not approximate.

Within that segment samples are removed where they cost most per unit of progress (an
epoch's gain per sample, ``gain(D, P) / D`` for D samples over P participants), ties going
to the *latest* epoch, so the plan's first epochs stay whole (online PACT
runs a plan's first epoch: trimming it would make it keep executing its smallest epoch). A
participant is dropped whole only when its epoch's exact gain without it still covers the cut.
A participant's samples are cut as far as the epoch's exact gain allows (the largest cut whose
lost gain fits the slack, by bisection: the gain is not linear in the samples under local
training, whose steps follow a participant's samples). Every cut is checked against the exact
gain, so the plan stays feasible; the planner replays it through the progress model once more
before accepting it.
"""

from __future__ import annotations

import math

import numpy as np

from netsim.costs import estimate_epochs
from policies.pact.candidates import coefficients
from policies.pact.problem import PlanningProblem, replay_states


def trim(problem: PlanningProblem, epochs: list, make_epoch) -> list:
    """``epochs`` with the rounding slack removed from their last single-variant run;
    ``make_epoch(variant, participants)`` builds a planned epoch."""
    if not epochs:
        return epochs
    pred = problem.predictor
    v_last = epochs[-1].variant
    final = replay_states(problem, epochs)[-1]
    slack = final.n_eff - problem.target_samples(v_last)
    if not slack > 0 or not math.isfinite(slack):
        return epochs
    first = len(epochs)
    while first > 0 and epochs[first - 1].variant == v_last:
        first -= 1
    c = coefficients(problem, v_last)
    pos = {int(i): j for j, i in enumerate(c.idx)}
    out = [dict(e.participants) for e in epochs]
    cuts = []  # (cost per unit of progress, epoch, device): costliest, then latest, first
    for k in range(first, len(epochs)):
        total = sum(out[k].values())
        per_sample = pred.gain(total, len(out[k])) / total if total > 0 else 0.0
        for dev in out[k]:
            if c.j_per_sample[pos[dev]] > 0:
                cuts.append((c.j_per_sample[pos[dev]] / per_sample if per_sample > 0
                             else math.inf, k, dev))
    cuts.sort(reverse=True)
    for _, k, dev in cuts:
        if slack <= 0:
            break
        parts, have = out[k], out[k][dev]
        total, n_parts = sum(parts.values()), len(parts)
        gain_now = pred.gain(total, n_parts)
        if n_parts > 1:  # drop the participant whole if the epoch's exact gain allows it
            lost = gain_now - pred.gain(total - have, n_parts - 1)
            if lost <= slack * (1 - 1e-9):
                del parts[dev]
                slack -= lost
                continue
        drop = _largest_cut(lambda d, t=total, n=n_parts, g=gain_now: g - pred.gain(t - d, n),
                            have - 1, slack * (1 - 1e-9))
        if drop > 0:
            parts[dev] = have - drop
            slack -= gain_now - pred.gain(total - drop, n_parts)
    return [e if out[k] == e.participants else make_epoch(e.variant, out[k])
            for k, e in enumerate(epochs)]


def _largest_cut(lost, most: int, slack: float) -> int:
    """The largest ``d`` in 0..``most`` with ``lost(d) <= slack`` (``lost`` non-decreasing,
    ``lost(0) = 0``): bisection over whole samples."""
    if most <= 0 or lost(1) > slack:
        return 0
    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if lost(mid) <= slack:
            lo = mid
        else:
            hi = mid - 1
    return lo


def plan_costs(problem: PlanningProblem, epochs: list[tuple[int, dict[int, int]]]
               ) -> list[tuple[float, float]]:
    """(time_s, energy_j) of each epoch of a plan, ``epochs`` as (variant, device -> samples),
    run back to back: :func:`netsim.costs.estimate_epochs` (the engine's cost functions:
    shared links and media, radio tails carried from one epoch into the next)."""
    pairs = []
    for variant, participants in epochs:
        samples = np.zeros(problem.table.n)
        for i, s in participants.items():
            samples[i] = s
        pairs.append((variant, samples))
    return [(e.time_s, e.energy_j)
            for e in estimate_epochs(problem.table, problem.model, pairs)]
