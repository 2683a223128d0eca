"""The surrogate loss model (the simulator's ground truth) and the policies' predictor.

Formula (netsim's; constants fitted by ``netsim calibrate``, stored in
netsim/data/loss_params.yaml). For a variant keeping a fraction ``f`` of the parameters::

    floor(f) = floor_full + floor_prune * (1 - f) ** floor_exponent      (per-variant override)
    mean(n, f) = floor(f) + (initial_loss - floor(f)) * (1 + n / samples_half) ** -exponent
    loss_k = mean(n_k, f_k) * exp(s_run * z_run + noise_epoch_sigma * z_k)
    s_run = noise_run_sigma * (1 + noise_heterogeneity / dirichlet_alpha)   (IID: noise_run_sigma)

``n`` is the cumulative *effective* samples: each epoch adds the samples trained on times the
data-heterogeneity efficiency ``1 / (1 + heterogeneity / dirichlet_alpha)`` (1 for IID data)
times ``participants ** -participant_exponent``: under federated averaging, progress per round
follows the samples *per participant* more than their total (measured: b = 0.93 for
mlp-digits; 0 counts the total, the default where nothing was measured).
A change of variant keeps what the model has learned, its loss: the new variant starts at the
effective samples where its own curve reaches the current loss (never more than the samples
seen), then loses ``exp(-prune_progress_loss * |f_new - f_old|)`` of them: the loss jump,
recovered by further training. Pruning (the pruned curve lies above) thus keeps the samples
minus the penalty; growing a pruned model back starts from the pruned model's loss, so training
a tiny model to its floor buys the full model nothing beyond that loss. ``z_run`` is drawn
once per run (run-to-run spread), ``z_k`` each epoch; both standard normal from the run's
seeded generator; skewed (non-IID) data spreads runs more, as measured. The final loss is
therefore log-normal around the mean curve, so its quantiles are analytic:
``mean * exp(sqrt(s_run**2 + noise_epoch_sigma**2) * Phi^-1(q))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from netsim.scenario.schema import LossParams, ModelSpec, TrainingSpec
from netsim.training.progress import EpochProgress


@dataclass(frozen=True)
class CurveParams:
    """The mean curve of one variant: floor (loss), samples_half (samples), exponent."""

    initial_loss: float
    floor: float
    samples_half: float
    exponent: float

    def mean(self, n_eff: float | np.ndarray) -> float | np.ndarray:
        """Mean loss after ``n_eff`` effective samples."""
        return self.floor + (self.initial_loss - self.floor) * (1.0 + n_eff / self.samples_half) ** (
            -self.exponent
        )

    def samples_for(self, loss: float) -> float:
        """Effective samples at which the mean curve reaches ``loss`` (inf if at/below floor)."""
        if loss >= self.initial_loss:
            return 0.0
        if loss <= self.floor:
            return math.inf
        ratio = (loss - self.floor) / (self.initial_loss - self.floor)
        return self.samples_half * (ratio ** (-1.0 / self.exponent) - 1.0)


def curve_params(model: ModelSpec, variant: int) -> CurveParams:
    """Mean-curve parameters of ``model``'s variant (per-variant overrides applied)."""
    p: LossParams = model.loss  # type: ignore[assignment]
    if p is None:
        raise ValueError(f"model {model.name!r} has no loss parameters (use resolve_model)")
    v = model.variants[variant]
    floor = p.floor_full + p.floor_prune * (1.0 - v.params_fraction) ** p.floor_exponent
    half, exponent = p.samples_half, p.exponent
    override = p.variants.get(v.name)
    if override is not None:
        floor = override.floor if override.floor is not None else floor
        half = override.samples_half if override.samples_half is not None else half
        exponent = override.exponent if override.exponent is not None else exponent
    return CurveParams(p.initial_loss, floor, half, exponent)


def run_noise_sigma(model: ModelSpec, training: TrainingSpec) -> float:
    """Per-run sigma of the log loss, widened for non-IID data."""
    loss = model.loss
    if loss is None:
        return 0.0
    alpha = training.dirichlet_alpha
    return loss.noise_run_sigma * (1.0 if alpha is None else 1.0 + loss.noise_heterogeneity / alpha)


def data_efficiency(model: ModelSpec, training: TrainingSpec) -> float:
    """Effective samples per sample trained on, from data heterogeneity (1 for IID)."""
    alpha = training.dirichlet_alpha
    het = model.loss.heterogeneity if model.loss is not None else 0.0
    return 1.0 if alpha is None else 1.0 / (1.0 + het / alpha)


@dataclass(frozen=True)
class LossState:
    """Where training stands: effective samples so far and the variant in use (None: none yet)."""

    n_eff: float = 0.0
    variant: int | None = None


class LossPredictor:
    """The policies' view of training progress: the surrogate's mean curve and its spread.

    Separate from the simulator's ground truth (:class:`SurrogateLoss`), which adds noise and
    may use other constants, so a policy can be wrong about the future.
    """

    def __init__(self, model: ModelSpec, training: TrainingSpec) -> None:
        self.model = model
        self.efficiency = data_efficiency(model, training)
        self.curves = [curve_params(model, v) for v in range(len(model.variants))]
        self._floor = np.array([c.floor for c in self.curves])
        self._half = np.array([c.samples_half for c in self.curves])
        self._exponent = np.array([c.exponent for c in self.curves])
        self._fraction = np.array([v.params_fraction for v in model.variants])
        loss = model.loss
        self.prune_progress_loss = loss.prune_progress_loss if loss else 0.0
        self.participant_exponent = loss.participant_exponent if loss else 0.0
        self.sigma_run = run_noise_sigma(model, training)
        self.sigma_epoch = loss.noise_epoch_sigma if loss else 0.0
        self.sigma = math.hypot(self.sigma_run, self.sigma_epoch)
        self.initial_loss = loss.initial_loss if loss else self.curves[0].initial_loss

    def carry(self, n_eff, v_from, v_to):
        """Effective samples right after switching ``v_from`` -> ``v_to`` (numpy-vectorised
        over arrays of the same shape; scalars too). See the module docstring."""
        n = np.asarray(n_eff, dtype=float)
        a, b = np.asarray(v_from), np.asarray(v_to)
        floor, half, expo = self._floor, self._half, self._exponent
        loss = floor[a] + (self.initial_loss - floor[a]) * (1.0 + n / half[a]) ** -expo[a]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (loss - floor[b]) / (self.initial_loss - floor[b])
            equiv = np.where(ratio <= 0.0, np.inf,
                             half[b] * (np.minimum(ratio, 1.0) ** (-1.0 / expo[b]) - 1.0))
        keep = np.exp(-self.prune_progress_loss * np.abs(self._fraction[b] - self._fraction[a]))
        out = np.where(a == b, n, np.minimum(equiv, n) * keep)
        return float(out) if out.ndim == 0 else out

    def switch(self, state: LossState, variant: int) -> LossState:
        """State right after moving to ``variant`` (progress carried as loss, see module)."""
        if state.variant is None or state.variant == variant:
            return LossState(state.n_eff, variant)
        return LossState(self.carry(state.n_eff, state.variant, variant), variant)

    def step(self, state: LossState, samples: float, variant: int,
             participants: int = 1) -> LossState:
        """State after one epoch in which ``participants`` devices trained ``samples`` samples
        in total with ``variant``."""
        s = self.switch(state, variant)
        gain = samples * self.efficiency
        if self.participant_exponent and participants > 1:
            gain *= participants ** -self.participant_exponent
        return LossState(s.n_eff + gain, variant)

    def mean(self, state: LossState) -> float:
        """Predicted mean loss in ``state``."""
        if state.variant is None:
            return self.initial_loss
        return float(self.curves[state.variant].mean(state.n_eff))

    def quantile(self, state: LossState, q: float) -> float:
        """Predicted ``q``-quantile of the loss in ``state`` (log-normal spread)."""
        return self.mean(state) * math.exp(self.sigma * float(ndtri(q)))


class SurrogateLoss:
    """The simulator's ground truth under ``training.backend: surrogate``."""

    def __init__(self, model: ModelSpec, training: TrainingSpec, rng: np.random.Generator) -> None:
        self._predictor = LossPredictor(model, training)
        self._truth_efficiency = training.truth_sample_efficiency
        loss = model.loss
        self._sigma_epoch = loss.noise_epoch_sigma if loss else 0.0
        self._run_noise = run_noise_sigma(model, training) * float(rng.standard_normal())
        self._rng = rng
        self.state = LossState()

    def initial_loss(self) -> float:
        """Loss of the untrained model."""
        return self._predictor.initial_loss

    def advance(self, samples_by_device: dict[str, int], variant_index: int) -> EpochProgress:
        """Loss after an epoch in which each device trained on its given samples."""
        samples = float(sum(samples_by_device.values())) * self._truth_efficiency
        self.state = self._predictor.step(self.state, samples, variant_index,
                                          participants=len(samples_by_device))
        noise = self._run_noise + self._sigma_epoch * float(self._rng.standard_normal())
        return EpochProgress(loss=self._predictor.mean(self.state) * math.exp(noise), accuracy=None)
