"""Tracking a run against the progress model, for online planners (PACT, DepL).

The tracker steps the one progress model (:class:`~netsim.training.loss.LossPredictor`) with
what was executed, so the training state is known exactly, not inverted from a noisy loss;
each observed loss then gives a log-residual against that state's mean. Under the surrogate
the residual of epoch k is ``s_k * z_run + sigma_epoch * z_k`` (``s_k`` the run spread at that
state, ``z_run`` the run's standard-normal draw), so the residuals give the posterior of
``z_run`` (:meth:`RunTracker.draw_posterior`): the run's persistent offset at any loss level.

Under label skew a planner may track which data trained
(:class:`~netsim.training.loss.PlanningCoverage`): the tracker then steps that per-class state
with the devices that trained, and its scalar state is the per-class state's equivalent: the
effective samples at which the variant's mean curve passes through the per-class state's mean
loss (:meth:`~netsim.training.loss.LossPredictor.state_at`; netsim's; so a planner over the scalar state, PACT's graph, starts where the classes
say training stands).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from netsim.training.loss import LossPredictor, LossState, PlanningCoverage


class RunTracker:
    """The tracked training state, the executed epoch awaiting its loss, and the residuals."""

    def __init__(self, predictor: LossPredictor,
                 coverage: PlanningCoverage | None = None) -> None:
        self.predictor = predictor
        self.coverage = coverage
        """The per-class state tracked beside the scalar one (None: the scalar state only)."""
        self.state = LossState()
        self.residuals: list[float] = []
        self.scales: list[float] = []
        self._pending: tuple[int, float, int, Mapping[str, float] | None] | None = None

    def executed(self, variant: int, samples: float, participants: int,
                 trained: Mapping[str, float] | None = None) -> None:
        """Record the epoch about to run (``samples`` in total over ``participants``;
        ``trained``: device id -> samples, what the per-class state steps with)."""
        self._pending = (variant, float(samples), int(participants), trained)

    def observe(self, loss: float) -> None:
        """Step the state with the epoch recorded by :meth:`executed` and record the observed
        ``loss``'s log-residual and the run spread at the new state; no-op without one."""
        if self._pending is None:
            return
        v, samples, parts, trained = self._pending
        self._pending = None
        pred, coverage = self.predictor, self.coverage
        if coverage is not None and trained is not None:
            coverage.commit(trained, v)
            self.state = pred.state_at(coverage.mean(v), v)
        else:
            self.state = pred.step(self.state, samples, v, participants=parts)
        self.residuals.append(math.log(loss / pred.mean(self.state)))
        self.scales.append(pred.run_sigma(self.state))

    def draw_posterior(self, upto: int | None = None) -> tuple[float, float]:
        """(mean, variance) of the run's noise draw ``z_run`` given the first ``upto``
        residuals (all by default): prior N(0, 1), residual k = s_k z_run + epoch noise of
        ``sigma_epoch``. With no epoch noise the latest residual gives it exactly."""
        r, s = self.residuals[:upto], self.scales[:upto]
        s_e = self.predictor.sigma_epoch
        if not r:
            return 0.0, 1.0
        if s_e <= 0.0:
            return (r[-1] / s[-1], 0.0) if s[-1] > 0 else (0.0, 0.0)
        prec = 1.0 + sum(x * x for x in s) / s_e ** 2
        return sum(a * b for a, b in zip(r, s, strict=True)) / s_e ** 2 / prec, 1.0 / prec

