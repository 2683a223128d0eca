"""The success probability of DepL's plans, exactly as the reference computes it.

A plan is a variant per epoch on one data fraction; one epoch of each variant costs energy (J)
and adds effective samples (:class:`EpochOption`). Its success probability, P(the run reaches
L* at some epoch), is accumulated epoch by epoch over the Gauss-Hermite nodes of the run's
noise draw (:func:`quadrature`), one epoch's per-node log failure at a time
(:func:`increment`). :func:`enumerate_plans` scores every sequence up to the horizon this way
(``variants ^ horizon`` of them: small instances and the tests); the search of
:mod:`policies.depl.plan_search` scores its states with the same arithmetic. The problem and
the reference: :mod:`policies.depl.optimum`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr

from netsim.training.loss import LossPredictor
from policies.depl.predictor import QUADRATURE_NODES, DistributionalPredictor, gauss_hermite


def enumerate_plans(pred: DistributionalPredictor, epoch_cost_j: Sequence[float],
                    epoch_gain: Sequence[float], horizon: int, max_sequences: int = 2_000_000,
                    target_loss: float | None = None):
    """Every variant sequence up to ``horizon`` epochs, layer by layer.

    Yields, for each length ``k`` = 1..horizon, ``(seqs, final_mean, cost_j, success)``: the
    sequences (array k x count of variant indices), their predicted mean final loss, energy
    (J) and, given ``target_loss``, the probability that a run following the sequence reaches
    it at some epoch (the event the simulator scores; the same formula as
    :func:`~policies.depl.predictor.first_passage_probability`, accumulated epoch by epoch over
    the quadrature nodes of the run's noise draw; NaN without a target). Variants with an
    infinite cost are left out. ``epoch_gain``: effective samples an epoch of each variant
    adds (the progress model's gain, :func:`policies.depl.planner.epoch_gains`).
    """
    usable = np.flatnonzero(np.isfinite(np.asarray(epoch_cost_j, dtype=float)))
    total = sum(len(usable) ** k for k in range(1, horizon + 1))
    if total > max_sequences:
        raise ValueError(f"instance too large for enumeration: {total} sequences "
                         f"(> max_sequences={max_sequences})")
    base = pred.base
    cost_m = np.asarray(epoch_cost_j, dtype=float)
    gain = np.asarray(epoch_gain, dtype=float)
    seqs = usable[None, :].copy()
    n = gain[usable].copy()
    cost = cost_m[usable]
    x, w = gauss_hermite(QUADRATURE_NODES)
    log_fail = np.zeros((len(n), len(x)))
    for k in range(1, horizon + 1):
        last = seqs[-1]
        means = np.asarray(base.mean_of(last, n))
        success = np.full(len(n), np.nan)
        if target_loss is not None:
            sigma = np.asarray(base.run_sigma_at(means, last))
            gap = (math.log(target_loss) - np.log(means))[:, None] - sigma[:, None] * x[None, :]
            if base.sigma_epoch > 0:
                log_fail = log_fail + log_ndtr(-gap / base.sigma_epoch)
            else:
                log_fail = np.where(gap >= 0, -np.inf, log_fail)
            success = 1.0 - np.exp(log_fail) @ w
        yield seqs, means, cost, success
        if k == horizon:
            break
        count = len(n)
        src = np.repeat(np.arange(count), len(usable))
        dst = np.tile(usable, count)
        log_fail = log_fail[src]
        n = base.carry(n[src], last[src], dst) + gain[dst]
        cost = cost[src] + cost_m[dst]
        seqs = np.vstack([seqs[:, src], dst[None, :]])


@dataclass(frozen=True)
class EpochOption:
    """One data fraction's epoch choices: the energy (J; inf = no cluster) and the effective
    samples gained (:func:`~policies.depl.planner.epoch_gains`) of one epoch of each variant."""

    cost_j: np.ndarray
    gain: np.ndarray


def quadrature() -> tuple[np.ndarray, np.ndarray]:
    """The Gauss-Hermite nodes and normalised weights of :func:`enumerate_plans`."""
    return gauss_hermite(QUADRATURE_NODES)


def increment(base: LossPredictor, x: np.ndarray, target_loss: float, variants: np.ndarray,
               n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean loss, per-node log failure) of epochs ending in ``(variants, n)``: the same
    arithmetic as :func:`enumerate_plans`."""
    means = np.asarray(base.mean_of(variants, n), dtype=float)
    sigma = np.asarray(base.run_sigma_at(means, variants), dtype=float)
    gap = (math.log(target_loss) - np.log(means))[:, None] - sigma[:, None] * x[None, :]
    if base.sigma_epoch > 0:
        return means, log_ndtr(-gap / base.sigma_epoch)
    return means, np.where(gap >= 0, -np.inf, 0.0)
