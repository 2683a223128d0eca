"""The surrogate loss model (the simulator's ground truth) and the policies' predictor.

Formula (netsim's; constants fitted by ``netsim calibrate``, stored in
netsim/data/loss_params.yaml). For a variant keeping a fraction ``f`` of the parameters::

    floor(f) = floor_full + floor_prune * (1 - f) ** floor_exponent      (per-variant override)
    mean(n, f) = floor(f) + (initial_loss - floor(f)) * (1 + n / samples_half) ** -exponent
    loss_k = mean(n_k, f_k) * exp(s_run(mean_k, f_k) * z_run + noise_epoch_sigma * z_k)
    s_run(m, f) = noise_run_sigma * (1 + noise_heterogeneity / dirichlet_alpha)   (IID: 1)
                  * (m / initial_loss) ** -noise_level_exponent * (1 + noise_prune * (1 - f))

``n`` is the cumulative *effective* samples: each epoch adds the samples trained on (an
asynchronous update of staleness ``s`` counts its samples times ``(1 + s) **
-staleness_exponent``, docs/async.md; a hierarchical cloud round counts each edge round after
its first times ``rho = edge_round_efficiency / (1 + edge_heterogeneity / dirichlet_alpha)``,
:meth:`LossPredictor.tiers_gain`, docs/hierarchical.md) times the
data-heterogeneity efficiency ``1 / (1 + heterogeneity / dirichlet_alpha)`` (1 for IID data)
times ``participants ** -participant_exponent``: under federated averaging, progress per round
follows the samples *per participant* more than their total (measured: b = 0.93 for
mlp-digits; 0 counts the total, the default where nothing was measured), times the local
training's factor ``steps ** local_step_exponent * E ** local_epoch_exponent``: each
participant makes E local passes over the n samples it uses in minibatches of B, ``steps = E *
ceil(n / B)`` local SGD steps (B = n when the whole local data is one batch; n the epoch's
samples per participant), so a round of many small steps moves further than one of a single
full-batch step, with diminishing returns, and passes over the same data count less than
fresh steps when ``local_epoch_exponent`` < 0 (netsim's formalization, fitted to real FedAvg
runs: docs/curves.md; both 0, the factor is 1, where nothing was fitted).
A change of variant keeps what the model has learned, its loss: the new variant starts at the
effective samples where its own curve reaches the current loss (never more than the samples
seen), then loses ``exp(-prune_progress_loss * |f_new - f_old|)`` of them: the loss jump,
recovered by further training. Pruning (the pruned curve lies above) thus keeps the samples
minus the penalty; growing a pruned model back starts from the pruned model's loss, so training
a tiny model to its floor buys the full model nothing beyond that loss. ``z_run`` is drawn
once per run (run-to-run spread), ``z_k`` each epoch; both standard normal from the run's
seeded generator. The run-to-run spread depends on where training stands, as repeated real
runs say (fitted by ``netsim calibrate``, netsim/data/calibration/): skewed (non-IID) data
spreads runs more, runs spread more as their loss falls (``noise_level_exponent``), and a
pruned variant's by ``noise_prune`` per pruned fraction (0 for both: one constant spread).
The loss after an epoch is therefore log-normal around the mean curve, so its quantiles are
analytic: ``mean * exp(sqrt(s_run(mean, f)**2 + noise_epoch_sigma**2) * Phi^-1(q))``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from netsim.scenario.schema import LossParams, ModelSpec, TrainingSpec
from netsim.smallsum import FEW_IN_ORDER, sum_in_order
from netsim.training.coverage import CoverageState, coverage_loss
from netsim.training.labels import bias_terms
from netsim.training.progress import EpochProgress
from netsim.workload import LocalTraining


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


def skew_alpha(training: TrainingSpec, classes: int = 10) -> float | None:
    """The label skew as a Dirichlet concentration: ``dirichlet_alpha``, or for McMahan's
    shards ``shards_per_device / classes`` (netsim's equivalence: a device holding s of C
    classes as a Dirichlet(s / C) draw holds about s; not fitted), for Async-HFL's label
    bias the same with the classes a device effectively holds, ``1 / sum_c f_c^2`` of its
    class fractions f (ours; 0.8 / 0.2 of 10 classes: 1.47 classes, 0.147), None for IID
    data."""
    if training.shards_per_device is not None:
        return shards_alpha(training.shards_per_device, classes)
    bias = getattr(training, "label_bias", None)
    if bias is not None and classes > 1:
        p, s, _ = bias_terms(bias)
        rest = (1.0 - p - s) / (classes - 1)
        simpson = p * p + (s + rest) ** 2 + (classes - 2) * rest * rest
        return 1.0 / (simpson * classes)
    return training.dirichlet_alpha


def shards_alpha(shards_per_device: int, classes: int) -> float:
    """McMahan's shards as a Dirichlet concentration, ``shards_per_device / classes``
    (netsim's equivalence, :func:`skew_alpha`)."""
    return shards_per_device / classes


def skew_efficiency(heterogeneity: float, alpha: float | None) -> float:
    """Effective samples per sample trained on under label skew of concentration ``alpha``:
    ``1 / (1 + heterogeneity / alpha)`` (None, IID data: 1)."""
    return 1.0 if alpha is None else 1.0 / (1.0 + heterogeneity / alpha)


def data_efficiency(model: ModelSpec, training: TrainingSpec) -> float:
    """Effective samples per sample trained on, from data heterogeneity (1 for IID)."""
    alpha = skew_alpha(training, model.loss.classes if model.loss is not None else 10)
    return skew_efficiency(model.loss.heterogeneity if model.loss is not None else 0.0, alpha)


def edge_round_weight(model: ModelSpec, training: TrainingSpec) -> float:
    """rho: what each edge round after a cloud round's first counts per sample, relative to
    the first (docs/hierarchical.md, netsim's formalization): ``edge_round_efficiency / (1 +
    edge_heterogeneity / dirichlet_alpha)`` (IID: ``edge_round_efficiency``)."""
    loss = model.loss
    if loss is None:
        return 1.0
    alpha = training.dirichlet_alpha
    skew = 1.0 if alpha is None else 1.0 + loss.edge_heterogeneity / alpha
    return loss.edge_round_efficiency / skew


@dataclass(frozen=True)
class LossState:
    """Where training stands: effective samples so far and the variant in use (None: none yet)."""

    n_eff: float = 0.0
    variant: int | None = None


class LossPredictor:
    """The one progress model (netsim's formula, module docstring): its state, its step, its
    switch rule and its mean curves, used by the simulator's ground truth
    (:class:`SurrogateLoss`), by every planner and by calibration.

    A policy's predictor is this model with the policy's constants and no hidden noise; the
    world's truth is the same model with the scenario's constants plus seeded noise
    (:class:`SurrogateLoss`). Where truth and prediction should differ, that is an explicit
    parameter of the scenario (``training.truth_sample_efficiency``), never divergent code.
    Every method that takes arrays is numpy-vectorised, so planners evaluate many states at
    once with the same code the simulator runs.
    """

    def __init__(self, model: ModelSpec, training: TrainingSpec) -> None:
        loss = model.loss
        curves = [curve_params(model, v) for v in range(len(model.variants))]
        self._setup(curves, [v.params_fraction for v in model.variants],
                    data_efficiency(model, training),
                    loss.prune_progress_loss if loss else 0.0,
                    loss.participant_exponent if loss else 0.0)
        self.model: ModelSpec | None = model  # None when built from explicit curves
        self.sigma_run = run_noise_sigma(model, training)
        self.sigma_epoch = loss.noise_epoch_sigma if loss else 0.0
        self.sigma = math.hypot(self.sigma_run, self.sigma_epoch)
        self.noise_level_exponent = loss.noise_level_exponent if loss else 0.0
        self.noise_prune = loss.noise_prune if loss else 0.0
        self.initial_loss = loss.initial_loss if loss else self.curves[0].initial_loss
        self.staleness_exponent = loss.staleness_exponent if loss else 0.0
        self.local_step_exponent = loss.local_step_exponent if loss else 0.0
        self.local_epoch_exponent = loss.local_epoch_exponent if loss else 0.0
        self.local = LocalTraining(training.local_epochs, training.batch_size)
        """The scenario's local training (what :meth:`gain` assumes unless told)."""
        self.edge_round_weight = edge_round_weight(model, training)
        """rho: what an edge round after a cloud round's first counts (docs/hierarchical.md)."""
        self.data_floor = loss.data_floor if loss else 0.0
        self.data_exponent = loss.data_exponent if loss else 0.5
        self.class_interference = loss.class_interference if loss else 0.0
        self.interference_exponent = loss.interference_exponent if loss else 1.0

    @classmethod
    def from_curves(cls, curves: list[CurveParams], params_fractions: list[float],
                    efficiency: float, prune_progress_loss: float,
                    participant_exponent: float,
                    staleness_exponent: float = 0.0, local_step_exponent: float = 0.0,
                    local_epoch_exponent: float = 0.0) -> LossPredictor:
        """The model from explicit curves (one per variant, all with one initial loss) and
        constants, without noise (calibration fits its constants through this)."""
        self = cls.__new__(cls)
        self._setup(curves, params_fractions, efficiency, prune_progress_loss,
                    participant_exponent)
        self.model = None
        self.sigma_run = self.sigma_epoch = self.sigma = 0.0
        self.noise_level_exponent = self.noise_prune = 0.0
        self.initial_loss = curves[0].initial_loss
        self.staleness_exponent = float(staleness_exponent)
        self.local_step_exponent = float(local_step_exponent)
        self.local_epoch_exponent = float(local_epoch_exponent)
        self.local = LocalTraining()
        self.edge_round_weight = 1.0
        self.data_floor, self.data_exponent, self.class_interference = 0.0, 0.5, 0.0
        self.interference_exponent = 1.0
        return self

    def _setup(self, curves: list[CurveParams], fractions: list[float], efficiency: float,
               prune_progress_loss: float, participant_exponent: float) -> None:
        self.curves = list(curves)
        self.efficiency = float(efficiency)
        self.prune_progress_loss = float(prune_progress_loss)
        self.participant_exponent = float(participant_exponent)
        self._floor = np.array([c.floor for c in curves])
        self._half = np.array([c.samples_half for c in curves])
        self._exponent = np.array([c.exponent for c in curves])
        self._fraction = np.array(fractions, dtype=float)
        self._initial = curves[0].initial_loss

    def gain(self, samples, participants, local: LocalTraining | None = None, *,
             samples_per_participant=None):
        """Effective samples one epoch adds: ``samples`` trained in total by ``participants``
        devices (clusters count one each), each training as ``local`` says (default: the
        scenario's). numpy-vectorised; scalars give a float.

        ``samples x efficiency x participants ** -participant_exponent x`` the local
        training's factor (:meth:`local_factor`; module docstring). The local steps count the
        samples a participant really holds: ``samples_per_participant`` where ``samples`` is
        already weighted (stale updates, the surrogate's truth efficiency), else
        ``samples / participants``."""
        p = np.maximum(np.asarray(participants, dtype=float), 1.0)
        s = np.asarray(samples, dtype=float)
        out = s * self.efficiency * p ** -self.participant_exponent
        if self.local_step_exponent or self.local_epoch_exponent:
            n = s / p if samples_per_participant is None else samples_per_participant
            out = out * self.local_factor(n, local)
        return float(out) if out.ndim == 0 else out

    def updates_gain(self, samples, staleness, local: LocalTraining | None = None,
                     sample_scale: float = 1.0) -> float:
        """Effective samples an asynchronous aggregation adds: updates of ``samples`` samples
        and ``staleness`` aggregations (sequences), counting as participants. Staleness
        discounts each update's samples once (:meth:`stale_samples`); the local steps follow
        the samples the devices trained (their mean), not the discounted ones.
        ``sample_scale``: the surrogate's truth efficiency."""
        raw = np.asarray(samples, dtype=float)
        if raw.size == 0:
            return 0.0
        stale = self.stale_samples(raw, staleness)
        if raw.size < FEW_IN_ORDER:  # (numpy's sums of so few, in Python: netsim.smallsum)
            weighted, mean = sum_in_order(stale.tolist()), sum_in_order(raw.tolist()) / raw.size
        else:
            weighted, mean = float(np.sum(stale)), float(raw.mean())
        return float(self.gain(weighted * sample_scale, raw.size, local,
                               samples_per_participant=mean))

    def tiers_gain(self, edge_updates, local: LocalTraining | None = None,
                   sample_scale: float = 1.0) -> float:
        """Effective samples a cloud aggregation of hierarchical ``edge_updates`` adds
        (docs/hierarchical.md, netsim's formalization; each edge update's ``rounds`` hold
        arrays ``devices``, ``samples``, ``staleness``): each edge update's device updates,
        each discounted by its staleness at the edge (:meth:`stale_samples`), its edge rounds
        after the first weighted by rho (:attr:`edge_round_weight`), and the whole discounted
        by the edge update's staleness at the cloud; the sum is one :meth:`gain` step in which
        the distinct devices count as participants and their local steps follow the samples
        they trained (the mean of the updates'). One edge round, every staleness 0: a
        synchronous epoch's :meth:`gain` of the same updates. ``sample_scale``: the
        surrogate's truth efficiency."""
        samples, staleness, weight = [], [], []  # per device update, all edges at once
        devices: set[str] = set()
        for e in edge_updates:
            at_cloud = float(self.stale_samples(1.0, e.staleness))
            for j, r in enumerate(e.rounds):
                if not len(r):
                    continue
                samples.append(np.asarray(r.samples, dtype=float))
                staleness.append(np.asarray(r.staleness, dtype=float))
                weight.append(np.full(len(r), at_cloud if j == 0
                                      else at_cloud * self.edge_round_weight))
                devices.update(r.devices)
        if not samples:
            return 0.0
        s = np.concatenate(samples)
        weighted = float(np.sum(self.stale_samples(s, np.concatenate(staleness))
                                * np.concatenate(weight)))
        return float(self.gain(weighted * sample_scale, len(devices), local,
                               samples_per_participant=float(s.sum()) / len(s)))

    def local_factor(self, samples_per_participant, local: LocalTraining | None = None):
        """``steps ** local_step_exponent * E ** local_epoch_exponent`` with ``steps = E *
        ceil(n / B)`` for ``n`` samples per participant (vectorised; 1 with both exponents 0).
        ``local``: E and B (default: the scenario's)."""
        local = local or self.local
        n = np.maximum(np.asarray(samples_per_participant, dtype=float), 1.0)
        batches = 1.0 if local.batch_size is None else np.ceil(n / local.batch_size)
        steps = local.epochs * batches
        out = np.power(steps, self.local_step_exponent) \
            * float(local.epochs) ** self.local_epoch_exponent
        return float(out) if np.ndim(out) == 0 else out

    def stale_samples(self, samples, staleness):
        """What updates of ``samples`` samples and ``staleness`` aggregations count as
        (vectorised): ``samples * (1 + staleness) ** -staleness_exponent`` (docs/async.md);
        their sum is the ``samples`` of :meth:`gain` and :meth:`step`."""
        s = np.asarray(staleness, dtype=float)
        out = np.asarray(samples, dtype=float) * (1.0 + s) ** -self.staleness_exponent
        return float(out) if out.ndim == 0 else out

    def mean_of(self, variant, n_eff):
        """Mean loss of ``variant`` after ``n_eff`` effective samples (vectorised over both)."""
        v = np.asarray(variant)
        n = np.asarray(n_eff, dtype=float)
        floor = self._floor[v]
        out = floor + (self._initial - floor) * (1.0 + n / self._half[v]) ** -self._exponent[v]
        return float(out) if out.ndim == 0 else out

    def carry(self, n_eff, v_from, v_to):
        """Effective samples right after switching ``v_from`` -> ``v_to`` (numpy-vectorised
        over arrays of the same shape; scalars too). See the module docstring."""
        n = np.asarray(n_eff, dtype=float)
        a, b = np.asarray(v_from), np.asarray(v_to)
        floor, half, expo = self._floor, self._half, self._exponent
        loss = floor[a] + (self._initial - floor[a]) * (1.0 + n / half[a]) ** -expo[a]
        equiv = self.samples_of(b, loss)
        keep = np.exp(-self.prune_progress_loss * np.abs(self._fraction[b] - self._fraction[a]))
        out = np.where(a == b, n, np.minimum(equiv, n) * keep)
        return float(out) if out.ndim == 0 else out

    def samples_of(self, variant, loss):
        """Effective samples at which ``variant``'s mean curve reaches ``loss`` (vectorised
        over both, the inverse of :meth:`mean_of`): 0 at or above the initial loss, inf at or
        below the variant's floor."""
        v = np.asarray(variant)
        floor = self._floor[v]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (np.asarray(loss, dtype=float) - floor) / (self._initial - floor)
            out = np.where(ratio <= 0.0, np.inf,
                           self._half[v] * (np.minimum(ratio, 1.0) ** (-1.0 / self._exponent[v])
                                            - 1.0))
        return float(out) if out.ndim == 0 else out

    def state_at(self, loss: float, variant: int | None) -> LossState:
        """The state whose mean loss under ``variant`` is ``loss`` (netsim's inversion of a
        loss; None: untrained). At or below the variant's floor: far along, 1,000
        half-samples."""
        if variant is None:
            return LossState(0.0, None)
        n = self.curves[variant].samples_for(float(loss))
        if not math.isfinite(n):
            n = 1.0e3 * self.curves[variant].samples_half
        return LossState(float(n), variant)

    def switch(self, state: LossState, variant: int) -> LossState:
        """State right after moving to ``variant`` (progress carried as loss, see module)."""
        if state.variant is None or state.variant == variant:
            return LossState(state.n_eff, variant)
        return LossState(self.carry(state.n_eff, state.variant, variant), variant)

    def step(self, state: LossState, samples: float, variant: int, *,
             participants: int, local: LocalTraining | None = None,
             samples_per_participant: float | None = None) -> LossState:
        """State after one epoch in which ``participants`` devices (clusters count one each)
        trained ``samples`` samples in total with ``variant`` (and ``local`` training, default
        the scenario's): the switch, then the gain (:meth:`gain`)."""
        s = self.switch(state, variant)
        return LossState(s.n_eff + self.gain(samples, participants, local,
                                             samples_per_participant=samples_per_participant),
                         variant)

    def step_gain(self, state: LossState, gain: float, variant: int) -> LossState:
        """State after an epoch whose effective samples ``gain`` are known: the switch, then
        the gain (asynchronous aggregations, :meth:`updates_gain`)."""
        s = self.switch(state, variant)
        return LossState(s.n_eff + float(gain), variant)

    def replay(self, state: LossState, epochs) -> list[LossState]:
        """The states after each of ``epochs`` = [(variant, samples, participants), ...]."""
        out = []
        for v, samples, participants in epochs:
            state = self.step(state, samples, v, participants=participants)
            out.append(state)
        return out

    def mean(self, state: LossState) -> float:
        """Predicted mean loss in ``state``."""
        if state.variant is None:
            return self.initial_loss
        return float(self.mean_of(state.variant, state.n_eff))

    def samples_for(self, variant: int, loss: float) -> float:
        """Effective samples at which ``variant``'s mean curve reaches ``loss`` (inf if at or
        below its floor, 0 at or above the initial loss)."""
        return self.curves[variant].samples_for(loss)

    def coverage_mean(self, variant: int, coverage: CoverageState,
                      m: np.ndarray | None = None, distinct: np.ndarray | None = None):
        """Mean loss of a per-class state (:func:`netsim.training.coverage.coverage_loss`) with
        this model's curve for ``variant`` and its coverage constants: ``coverage``'s own, or
        with its effective samples per class ``m`` and distinct samples per class
        ``distinct`` (samples) in their place (a planner's what-if, :class:`PlanningCoverage`;
        ``m`` and ``distinct`` of shape (K, C) rate K what-ifs at once: an array of K)."""
        c = self.curves[variant]
        return coverage_loss(coverage.population_samples(m),
                             coverage.distinct_population(distinct),
                             coverage.share, floor=c.floor, half=c.samples_half, exponent=c.exponent,
                             initial=self._initial, reference_samples=coverage.reference_samples,
                             data_floor=self.data_floor, data_exponent=self.data_exponent,
                             interference=self.class_interference,
                             interference_exponent=self.interference_exponent)

    def run_sigma_at(self, loss, variant):
        """Sigma of the run-to-run log noise at mean loss ``loss`` with ``variant``
        (vectorised): ``sigma_run`` (the spread at the initial loss, full model) scaled by the
        level and pruning terms of the module docstring."""
        f = self._fraction[np.asarray(variant)]
        ratio = np.asarray(loss, dtype=float) / self.initial_loss
        out = self.sigma_run * ratio ** -self.noise_level_exponent * (
            1.0 + self.noise_prune * (1.0 - f))
        return float(out) if out.ndim == 0 else out

    def run_sigma(self, state: LossState) -> float:
        """Sigma of the run-to-run log noise in ``state``."""
        return float(self.run_sigma_at(self.mean(state), state.variant or 0))

    def quantile(self, state: LossState, q: float) -> float:
        """Predicted ``q``-quantile of the loss in ``state`` (log-normal spread)."""
        sigma = math.hypot(self.run_sigma(state), self.sigma_epoch)
        return self.mean(state) * math.exp(sigma * float(ndtri(q)))

    def mean_for_quantile(self, loss: float, q: float, variant: int = 0) -> float:
        """The mean loss whose ``q``-quantile is ``loss`` (the run spread depends on the mean:
        solved by fixed-point iteration)."""
        z, mean = float(ndtri(q)), float(loss)
        for _ in range(50):
            sigma = math.hypot(float(self.run_sigma_at(mean, variant)), self.sigma_epoch)
            nxt = float(loss) * math.exp(-sigma * z)
            if abs(nxt - mean) <= 1e-12 * mean:
                break
            mean = nxt
        return mean

    def quantile_of(self, variant, n_eff, z: float):
        """The loss ``mean * exp(sqrt(s_run**2 + s_epoch**2) * z)`` after ``n_eff`` effective
        samples of ``variant`` (vectorised; ``z`` = Phi^-1(q) for the q-quantile)."""
        mean = np.asarray(self.mean_of(variant, n_eff))
        sigma = np.hypot(self.run_sigma_at(mean, variant), self.sigma_epoch)
        out = mean * np.exp(sigma * z)
        return float(out) if out.ndim == 0 else out


#: the least :meth:`PlanningCoverage.gain_weights` gives (a positive gain keeps a planner's
#: tables finite; such an epoch needs a million times the epochs, out of any plan)
MIN_GAIN_WEIGHT = 1e-6


class PlanningCoverage:
    """A policy's predictor that knows which data trained: its own per-class state
    (:class:`netsim.training.coverage.CoverageState`, built from the observed label
    histograms, ``Observation.label_counts``) that the policy advances with its own decisions,
    rated by the truth's formula (:meth:`LossPredictor.coverage_mean`, which calls
    :func:`netsim.training.coverage.coverage_loss`: no second copy) with the policy's
    predictor's constants and no noise.

    Anchored on the observed loss: the world's loss is its mean times a log-normal factor
    whose run term persists (module docstring), so the loss after an epoch is predicted as
    ``observed * mean(after) / mean(now)`` (:meth:`predict`): the observed level, moved by
    what the formula says the epoch changes. The state follows what the policy decided, not
    what counted: a participant that dropped out or was late is counted as trained (the
    anchor absorbs the level, not the class mix), and the scenario's hidden
    ``training.truth_sample_efficiency`` is not known to it. IID data (no histograms): use
    the scalar state (:meth:`LossPredictor.step`), which is exact there.

    Parameters
    ----------
    predictor: the policy's :class:`LossPredictor`.
    ids_index: device id -> row (``Observation.devices.index``).
    samples: each device's samples, by row (``Observation.devices.samples``).
    histograms: each device's label histogram, (N, classes), by row
        (``Observation.label_counts``).
    reference_samples: the data floor's N_ref (samples; None: no data floor).
    """

    def __init__(self, predictor: LossPredictor, ids_index: Mapping[str, int],
                 samples: np.ndarray, histograms: np.ndarray,
                 reference_samples: float | None) -> None:
        self.predictor = predictor
        self.state = CoverageState(ids_index, samples, np.asarray(histograms, dtype=float),
                                   reference_samples)
        self.variant: int | None = None
        """The variant of the last committed epoch (None before the first)."""

    @classmethod
    def of(cls, predictor: LossPredictor, model: ModelSpec, training: TrainingSpec,
           ids_index: Mapping[str, int], samples: np.ndarray,
           label_counts: np.ndarray | None) -> PlanningCoverage | None:
        """The planning state for an observation's devices and label histograms, with the
        data floor where the model's loss parameters have one (as the world's truth,
        :func:`netsim.training.coverage.coverage_for`). None where the scenario's data is
        IID (no ``training.dirichlet_alpha``, ``shards_per_device`` or ``label_bias``; the
        formula then holds one class, so a real backend's near-uniform shards are planned as
        the surrogate's IID data is, with the scalar state), without histograms, or without
        loss parameters.

        IID data with a data floor is planned with the scalar state, not with the truth's
        one-class state: measured on the fidelity fleet (docs/curves.md), planning with the
        floor has PACT and greedy-energy rotate single devices, which the surrogate rates as
        reaching the target (2.16 s, 2.34 s) where real training never does (0.56, 1.29):
        the truth flatters single-participant epochs, so the planners would be flattered
        too; not adopted until the truth holds there."""
        loss = model.loss
        if label_counts is None or loss is None or not training.label_skewed:
            return None
        floor_on = loss.reference_samples is not None and loss.data_floor > 0
        return cls(predictor, ids_index, samples, label_counts,
                   loss.reference_samples if floor_on else None)

    def _carried(self, variant: int) -> np.ndarray:
        """The effective samples per class once the state moves to ``variant`` (the switch's
        carry, class by class, :meth:`LossPredictor.carry`; the state's own if no switch)."""
        state = self.state
        if self.variant is None or self.variant == variant:
            return state.m
        a, b = np.full(state.classes, self.variant), np.full(state.classes, variant)
        return np.asarray(self.predictor.carry(state.population_samples(), a, b),
                          dtype=float) * state.share

    def _after(self, trained: Mapping[str, float], variant: int,
               local: LocalTraining | None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The effective and distinct samples per class after an epoch that trains
        ``trained`` (device id -> samples) with ``variant``, and the rows and samples the
        state records as each device's most trained (nothing changed)."""
        pred, state = self.predictor, self.state
        m = self._carried(variant)
        if not trained:
            return m, state.distinct, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        raw = float(sum(trained.values()))
        gain = float(pred.gain(raw, len(trained), local))
        mix, distinct, rows, used = state.preview(trained)
        return m + gain * mix, distinct, rows, used

    def copy(self) -> PlanningCoverage:
        """An independent copy (a what-if replay of a plan; the original is unchanged)."""
        other = object.__new__(PlanningCoverage)
        other.predictor, other.state, other.variant = \
            self.predictor, self.state.copy(), self.variant
        return other

    def repeat_means(self, rows: np.ndarray, takes: np.ndarray, gains: np.ndarray,
                     repeats: np.ndarray, variant: int) -> np.ndarray:
        """The formula's mean loss after each of K what-if runs, changing nothing: run k
        repeats ``repeats[k]`` epochs with ``variant``, each training ``takes[k, j]`` samples
        of device row ``rows[j]`` and adding ``gains[k]`` effective samples split by that
        epoch's class mix (:meth:`netsim.training.coverage.CoverageState.preview_many`; the
        distinct samples are those of one epoch: a repeat trains the same data). Vectorised:
        one :func:`netsim.training.coverage.coverage_loss` call over the K states."""
        state, pred = self.state, self.predictor
        m = self._carried(variant)
        mix, distinct = state.preview_many(rows, takes)
        m_after = m[None, :] + (np.asarray(gains, float) * np.asarray(repeats, float))[:, None] \
            * mix
        return np.asarray(pred.coverage_mean(variant, state, m_after, distinct), dtype=float)

    def equivalent_samples(self, variant: int) -> float:
        """The effective samples at which ``variant``'s mean curve passes through this
        state's mean loss under ``variant`` (its carry applied; 0 at or above the initial
        loss, and where the curve never gets that low)."""
        n0 = self.predictor.curves[variant].samples_for(self.mean_after({}, variant))
        return n0 if math.isfinite(n0) else 0.0

    def gain_weights(self, rows: np.ndarray, takes: np.ndarray, gains: np.ndarray,
                     variant: int, target_samples: float, horizon: int,
                     start_samples: float | None = None) -> np.ndarray:
        """What each of K candidate epochs is worth per effective sample the scalar model
        gives it, under label skew (netsim's, for planners over the scalar state: PACT's
        graph, DepL's): epoch k (``takes[k, j]`` samples of device row ``rows[j]``, scalar
        gain ``gains[k]``) repeated for the epochs the scalar model says it needs to reach
        ``target_samples`` (``variant``'s effective samples; at least 1, at most
        ``horizon``), rated by this state (:meth:`repeat_means`), its mean loss turned back
        into the variant's effective samples, over the scalar gain of those epochs. A set
        that trains few of the classes is worth little (its classes saturate, the others
        lag: the formula's own terms); one that trains the population's mix about 1. In
        [``MIN_GAIN_WEIGHT``, 1]. Stationary: it rates each epoch repeated, not mixed with
        others; a planner replays its plan through this state to check it.
        ``start_samples``: :meth:`equivalent_samples` of ``variant`` where the caller has it
        (many calls from one state)."""
        gains = np.asarray(gains, dtype=float)
        n0 = self.equivalent_samples(variant) if start_samples is None else start_samples
        repeats = np.clip(np.ceil(max(target_samples - n0, 0.0) / np.maximum(gains, 1e-300)),
                          1.0, max(1, int(horizon)))
        means = self.repeat_means(rows, takes, gains, repeats, variant)
        n_after = np.asarray(self.predictor.samples_of(variant, means), dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            weight = (n_after - n0) / (repeats * gains)
        weight = np.where(np.isfinite(n_after), weight, 1.0)
        return np.clip(np.nan_to_num(weight, nan=0.0), MIN_GAIN_WEIGHT, 1.0)

    def mean(self, variant: int | None = None) -> float:
        """The formula's mean loss of the state so far, with ``variant`` (default: the last
        committed one; the initial loss before any)."""
        v = self.variant if variant is None else variant
        if v is None:
            return self.predictor.initial_loss
        return self.predictor.coverage_mean(v, self.state)

    def mean_after(self, trained: Mapping[str, float], variant: int,
                   local: LocalTraining | None = None) -> float:
        """The formula's mean loss after an epoch that trains ``trained`` (device id ->
        samples) with ``variant`` and ``local`` training (default the scenario's); nothing
        changes."""
        m, distinct, _, _ = self._after(trained, variant, local)
        return self.predictor.coverage_mean(variant, self.state, m, distinct)

    def predict(self, trained: Mapping[str, float], variant: int, observed_loss: float,
                local: LocalTraining | None = None) -> float:
        """The loss predicted after an epoch that trains ``trained`` with ``variant``,
        anchored on ``observed_loss`` (the latest observed loss): ``observed_loss *
        mean_after / mean`` (class docstring)."""
        now = self.mean()
        return float(observed_loss) * self.mean_after(trained, variant, local) / now \
            if now > 0 else self.mean_after(trained, variant, local)

    def classes_after(self, trained: Mapping[str, float], share: float = 0.0) -> int:
        """How many classes the state would have trained after ``trained``: classes whose
        effective samples exceed ``share`` of the mean class's (0: any at all)."""
        m, _, _, _ = self._after(trained, self.variant if self.variant is not None else 0,
                                 None)
        n = self.state.population_samples(m)
        mean = float(self.state.share @ n)
        return int(np.count_nonzero(n > share * mean)) if mean > 0 else 0

    def commit(self, trained: Mapping[str, float], variant: int,
               local: LocalTraining | None = None) -> None:
        """Advance the state by the epoch the policy decided (``trained``: device id ->
        samples; ``variant``; ``local``: as decided)."""
        m, distinct, rows, used = self._after(trained, variant, local)
        state = self.state
        state.m = m
        state.record(rows, used, distinct)
        self.variant = variant


class SurrogateLoss:
    """The simulator's ground truth under ``training.backend: surrogate``. ``coverage``: the
    run's per-class state (:mod:`netsim.training.coverage`: which data trained); None where
    no coverage term can act (IID data without a data floor), the scalar state then exact."""

    def __init__(self, model: ModelSpec, training: TrainingSpec, rng: np.random.Generator,
                 coverage: CoverageState | None = None) -> None:
        self._predictor = LossPredictor(model, training)
        self._coverage = coverage
        self._truth_efficiency = training.truth_sample_efficiency
        loss = model.loss
        self._accuracy_map = loss.accuracy if loss is not None else None
        self._sigma_epoch = loss.noise_epoch_sigma if loss else 0.0
        self._z_run = float(rng.standard_normal())
        self._rng = rng
        self.state = LossState()

    def initial_loss(self) -> float:
        """Loss of the untrained model."""
        return self._predictor.initial_loss

    def label_counts(self) -> np.ndarray | None:
        """Each device's drawn label histogram (N, classes; float counts summing to its
        samples), None for IID data (netsim.training.labels)."""
        coverage = self._coverage
        return None if coverage is None else coverage.histograms

    def advance(self, samples_by_device: dict[str, int], variant_index: int,
                local: LocalTraining | None = None) -> EpochProgress:
        """Loss after an epoch in which each device trained on its given samples (``local``:
        how; default the scenario's)."""
        raw = float(sum(samples_by_device.values()))
        n = len(samples_by_device)
        gain = self._predictor.gain(raw * self._truth_efficiency, n, local,
                                    samples_per_participant=raw / max(n, 1))
        return self._step(gain, variant_index, samples_by_device)

    def advance_tiers(self, edge_updates, variant_index: int) -> EpochProgress:
        """Loss after a cloud aggregation of hierarchical ``edge_updates`` (each with its
        edge rounds' device updates and its staleness): :meth:`LossPredictor.tiers_gain`."""
        gain = self._predictor.tiers_gain(edge_updates, sample_scale=self._truth_efficiency)
        trained: dict[str, float] | None = None
        if self._coverage is not None:
            trained = {}
            for e in edge_updates:
                for r in e.rounds:
                    for d, x in zip(r.devices, np.asarray(r.samples).tolist(), strict=True):
                        trained[d] = trained.get(d, 0.0) + x
        return self._step(gain, variant_index, trained)

    def advance_updates(self, updates, variant_index: int) -> EpochProgress:
        """Loss after an asynchronous aggregation of ``updates`` (each with ``samples`` and
        ``staleness``): :meth:`LossPredictor.updates_gain`, the updates counting as
        participants."""
        gain = self._predictor.updates_gain([u.samples for u in updates],
                                            [u.staleness for u in updates],
                                            sample_scale=self._truth_efficiency)
        trained: dict[str, float] | None = None
        if self._coverage is not None:
            trained = {}
            for u in updates:
                trained[u.device] = trained.get(u.device, 0.0) + u.samples
        return self._step(gain, variant_index, trained)

    def _step(self, gain: float, variant_index: int,
              trained: Mapping[str, float] | None = None) -> EpochProgress:
        predictor, coverage = self._predictor, self._coverage
        if coverage is not None and trained is not None:
            previous = self.state.variant
            if previous is not None and previous != variant_index:
                coverage.carry(predictor, previous, variant_index)
            coverage.add(gain, coverage.trained_mix(trained))
        self.state = state = predictor.step_gain(self.state, gain, variant_index)
        # (once: run_sigma's mean and the loss's)
        mean = predictor.mean(state) if coverage is None \
            else predictor.coverage_mean(variant_index, coverage)
        run = float(predictor.run_sigma_at(mean, state.variant or 0)) * self._z_run
        noise = run + self._sigma_epoch * float(self._rng.standard_normal())
        loss = mean * math.exp(noise)
        return EpochProgress(loss=loss, accuracy=self._accuracy(loss))

    def _accuracy(self, loss: float) -> float | None:
        """The model's accuracy at ``loss`` by its fitted map (None without one)."""
        accuracy = self._accuracy_map
        return None if accuracy is None else accuracy.accuracy(loss)
