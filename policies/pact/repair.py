"""Removing the slack that rounding leaves in a plan (netsim's addition to the DP).

A path of the graph is feasible because loss levels were rounded up; its exact replay under the
predictor usually overshoots the target by up to about eps of the work. Within a run of
variants the final effective samples are linear in each epoch's samples (weight: efficiency x
the progress kept through later switches), so the overshoot converts into samples that can be
removed. They are removed where a sample costs most (largest marginal energy per unit of
final progress first); a participant whose samples all go is dropped (saving its transfer).
Energy and time never increase and the plan stays feasible.
"""

from __future__ import annotations

import math

import numpy as np

from netsim.costs import estimate_epoch
from policies.pact.candidates import coefficients
from policies.pact.problem import PlanningProblem


def progress_weights(problem: PlanningProblem, variants: list[int]) -> np.ndarray:
    """Final effective samples added per sample trained in each epoch of the variant sequence."""
    pred, f = problem.predictor, problem.model.variants
    w = np.empty(len(variants))
    keep = 1.0
    for k in range(len(variants) - 1, -1, -1):
        w[k] = pred.efficiency * keep
        if k > 0 and variants[k - 1] != variants[k]:
            keep *= math.exp(-pred.prune_progress_loss
                             * abs(f[variants[k]].params_fraction - f[variants[k - 1]].params_fraction))
    return w


def trim(problem: PlanningProblem, epochs: list, make_epoch) -> list:
    """``epochs`` with the rounding slack removed; ``make_epoch(variant, participants)`` builds
    a planned epoch (its time and energy evaluated with :func:`netsim.costs.estimate_epoch`)."""
    if not epochs:
        return epochs
    variants = [e.variant for e in epochs]
    v_last = variants[-1]
    state = problem.start
    for e in epochs:
        state = problem.predictor.step(state, e.samples, e.variant)
    slack = state.n_eff - problem.target_samples(v_last)
    if not slack > 0:
        return epochs
    w = progress_weights(problem, variants)
    marginal = {v: coefficients(problem, v) for v in set(variants)}
    cuts = []  # (cost per unit progress, epoch, device)
    for k, e in enumerate(epochs):
        c = marginal[e.variant]
        pos = {int(i): j for j, i in enumerate(c.idx)}
        for dev in e.participants:
            if c.j_per_sample[pos[dev]] <= 0:
                continue
            cuts.append((c.j_per_sample[pos[dev]] / w[k], k, dev))
    cuts.sort(key=lambda x: -x[0])
    out = [dict(e.participants) for e in epochs]
    for _, k, dev in cuts:
        if slack <= 0:
            break
        have = out[k][dev]
        can = int(math.floor(slack / w[k] * (1 - 1e-9)))
        if can <= 0:
            continue
        drop = have if can >= have and len(out[k]) > 1 else min(can, have - 1)
        if drop <= 0:
            continue
        out[k][dev] = have - drop
        if out[k][dev] == 0:
            del out[k][dev]
        slack -= drop * w[k]
    return [e if out[k] == e.participants else make_epoch(e.variant, out[k])
            for k, e in enumerate(epochs)]


def epoch_cost(problem: PlanningProblem, variant: int, participants: dict[int, int]):
    """(time_s, energy_j) of one epoch from :func:`netsim.costs.estimate_epoch`."""
    samples = np.zeros(problem.table.n)
    for i, s in participants.items():
        samples[i] = s
    est = estimate_epoch(problem.table, problem.model, variant, samples)
    return est.time_s, est.energy_j
