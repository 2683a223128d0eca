"""Removing the slack that rounding leaves in a plan (netsim's addition to the DP).

A path of the graph is feasible because loss levels were rounded up; its exact replay under the
progress model usually overshoots the target by up to about eps of the work. The overshoot is
removed from the plan's *last* run of one variant (the epochs after its last switch), where the
final effective samples are exactly linear in each epoch's gain: no linearisation through a
switch (the switch rule is not linear), so the trimmed plan is exact, not approximate.

Within that segment a sample trained by a participant that stays adds ``gain(1, P)`` effective
samples (P the epoch's participants); samples are removed where they cost most per unit of
progress, ties going to the *latest* epoch, so the plan's first epochs stay whole (online PACT
runs a plan's first epoch: trimming it would make it keep executing its smallest epoch). A
participant is dropped whole only when its epoch's exact gain without it still covers the cut.
Every cut is checked against the exact gain, so the plan stays feasible; the planner replays it
through the progress model once more before accepting it.
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
        per_sample = pred.gain(1.0, len(out[k]))
        for dev in out[k]:
            if c.j_per_sample[pos[dev]] > 0:
                cuts.append((c.j_per_sample[pos[dev]] / per_sample, k, dev))
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
        per_sample = pred.gain(1.0, n_parts)
        drop = min(int(math.floor(slack / per_sample * (1 - 1e-9))), have - 1)
        if drop > 0:
            parts[dev] = have - drop
            slack -= drop * per_sample
    return [e if out[k] == e.participants else make_epoch(e.variant, out[k])
            for k, e in enumerate(epochs)]


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
