"""The planning problem PACT and its exact reference solve (netsim's formalization).

Decision per epoch k: a variant v_k, participants S_k and samples d_ik <= D_i. Minimise the
predicted energy sum_k E_k subject to: the predictor's mean loss after the last epoch <= the
(effective) target, sum_k tau_k <= the time left (s), and at most ``epochs_left`` epochs.
E_k and tau_k are the engine's contention-free formulas (:mod:`netsim.costs`).

The state of training is the predictor's :class:`LossState` (effective samples ``n_eff`` and
the variant); the loss is a monotone function of it, so "loss <= target" is "n_eff >= the
variant's target samples" (:meth:`PlanningProblem.target_samples`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.devices import DeviceTable
from netsim.scenario.schema import ModelSpec, TrainingSpec
from netsim.training.loss import LossPredictor, LossState, PlanningCoverage


@dataclass(frozen=True)
class PlanningProblem:
    """One instance of the planning problem.

    Attributes
    ----------
    table: the devices (arrays, SI units).
    model: the model with its variants.
    predictor: the policy-side loss predictor (never the simulator's ground truth).
    target_loss: the mean loss the plan must reach (loss units; see :func:`effective_target`).
    time_left_s: time available until the deadline (s).
    epochs_left: epochs available (max_epochs minus epochs run).
    start: the training state now (effective samples, variant or None before the first epoch).
    usable: devices that may take part (bool over devices: available trainers).
    variants: variant indices the plan may use.
    allow_unprune: whether a later epoch may use a less compressed variant than an earlier one.
    memory_overhead: memory a device needs per model byte (training.memory_overhead).
    all_nodes: no node selection: every usable device trains on all its samples each epoch.
    coverage: under label skew, the policy's per-class state of what trained
        (:class:`netsim.training.loss.PlanningCoverage`): candidates' gains are weighted by
        the classes they train and plans are replayed through it (None: IID, the scalar
        state is exact). Read only here: what-ifs work on copies.
    """

    table: DeviceTable
    model: ModelSpec
    predictor: LossPredictor
    target_loss: float
    time_left_s: float
    epochs_left: int
    start: LossState
    usable: np.ndarray
    variants: tuple[int, ...]
    allow_unprune: bool = False
    memory_overhead: float = 3.0
    all_nodes: bool = False
    coverage: PlanningCoverage | None = None

    def target_samples(self, variant: int) -> float:
        """Effective samples at which ``variant``'s mean curve reaches the target (inf if never)."""
        return self.predictor.curves[variant].samples_for(self.target_loss)

    def fits(self, variant: int) -> np.ndarray:
        """Usable devices with memory for ``variant`` (model bytes x memory_overhead)."""
        need = self.model.model_bytes(variant) * self.memory_overhead
        return self.usable & (self.table.memory_bytes >= need)

    def allowed_next(self, current: int | None) -> list[int]:
        """Variants an epoch may use after one with ``current`` (None: nothing run yet)."""
        if current is None or self.allow_unprune:
            return list(self.variants)
        return [v for v in self.variants if v >= current]


def effective_target(training: TrainingSpec, predictor: LossPredictor) -> float:
    """The mean loss to plan for: ``target_loss``, or lower when ``target_probability`` asks the
    target to be met with that probability under the predictor's log-normal spread."""
    q = training.target_probability
    if q is None:
        return float(training.target_loss)
    return predictor.mean_for_quantile(float(training.target_loss), q)


def state_from_loss(predictor: LossPredictor, loss: float, variant: int | None) -> LossState:
    """The predictor's state matching an observed loss under ``variant`` (netsim's inversion:
    the effective samples at which the variant's mean curve passes through the observation)."""
    return predictor.state_at(loss, variant)  # (below the floor: far along)


def replay_states(problem: PlanningProblem, epochs) -> list[LossState]:
    """The progress model's state after each planned epoch (objects with ``variant``,
    ``samples`` and ``participants``) from the problem's start."""
    return problem.predictor.replay(problem.start, [(e.variant, e.samples, len(e.participants))
                                                    for e in epochs])


def replay_losses(problem: PlanningProblem, epochs) -> list[float]:
    """The predicted mean loss after each planned epoch (objects with ``variant`` and
    ``participants``, device index -> samples) from the problem's start: the scalar state's
    (:func:`replay_states`), or under label skew the per-class state's, stepped on a copy
    (the problem's own state is unchanged)."""
    if problem.coverage is None:
        return [problem.predictor.mean(s) for s in replay_states(problem, epochs)]
    return coverage_replay(problem.coverage, problem.table.ids, epochs)


def coverage_replay(coverage: PlanningCoverage, ids, epochs) -> list[float]:
    """The per-class state's mean loss after each of ``epochs`` (objects with ``variant`` and
    ``participants``, device row -> samples; ``ids``: the rows' device ids), stepped on a
    copy of ``coverage`` (unchanged)."""
    cov = coverage.copy()
    out = []
    for e in epochs:
        cov.commit({ids[i]: float(n) for i, n in e.participants.items()}, e.variant)
        out.append(cov.mean(e.variant))
    return out
