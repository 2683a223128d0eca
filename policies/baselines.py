"""Baseline policies: fedavg-all, random-k, fastest-k, greedy-energy and overselect."""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from netsim.costs import device_epoch_times, estimate_epoch
from netsim.policy import Decision, NoParams, Observation, register
from netsim.scenario.schema import Scenario
from netsim.training.loss import LossPredictor, LossState, PlanningCoverage


def can_hold(obs: Observation, variant: int = 0) -> np.ndarray:
    """Mask over devices: trainers (not the aggregator, holding samples) whose memory holds
    ``variant`` for training (its bytes x ``training.memory_overhead``)."""
    t = obs.devices.trainers
    need = obs.model.model_bytes(variant) * obs.training.memory_overhead
    mask = np.zeros(obs.devices.n, dtype=bool)
    mask[t[obs.devices.memory_bytes[t] >= need]] = True
    return mask


def trainers_that_fit(obs: Observation, variant: int = 0) -> np.ndarray:
    """Indices of devices available now that can train ``variant`` (:func:`can_hold`),
    ascending."""
    return np.flatnonzero(can_hold(obs, variant) & obs.available)


class FitMemo:
    """:func:`trainers_that_fit` per variant, remembered while the world hands the same
    availability array (a static world gives the same read-only array every epoch): a fleet
    of a million is scanned once, not every epoch. One per policy instance (per run)."""

    def __init__(self) -> None:
        self._available: np.ndarray | None = None
        self._fits: dict[int, np.ndarray] = {}
        self._masks: dict[int, np.ndarray] = {}  # per variant: the fits as a mask over devices
        self._can_hold: dict[int, np.ndarray] = {}  # per variant: mask of trainers with memory

    def __call__(self, obs: Observation, variant: int = 0) -> np.ndarray:
        if obs.available is not self._available or obs.available.flags.writeable:
            self._available, self._fits, self._masks = obs.available, {}, {}
        if variant not in self._fits:
            if variant not in self._can_hold:  # (the devices' memory does not change)
                self._can_hold[variant] = can_hold(obs, variant)
            mask = self._can_hold[variant] & obs.available
            mask.setflags(write=False)
            fits = np.flatnonzero(mask)  # trainers_that_fit
            fits.setflags(write=False)
            self._fits[variant], self._masks[variant] = fits, mask
        return self._fits[variant]

    def mask(self, obs: Observation, variant: int = 0) -> np.ndarray:
        """:meth:`__call__`'s devices as a read-only mask over devices."""
        self(obs, variant)
        return self._masks[variant]


class FleetPolicy:
    """What every policy that picks among the trainers that fit keeps per run: its
    parameters, the :class:`FitMemo` and its own generator (the run's, from :meth:`reset`;
    a fixed one before). Subclasses set ``name`` and write ``decide``."""

    name: str

    def __init__(self, params: Any) -> None:
        self.params = params
        self._fits = FitMemo()
        self._rng = np.random.default_rng(0)

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        self._fits = FitMemo()
        self._rng = rng


def nobody_can_train(obs: Observation, variant: int = 0) -> Decision:
    """The stop decision of a baseline when no device can train this epoch, with the reason."""
    t = obs.devices.trainers
    held = len(t)
    available = int(obs.available[t].sum())
    need = obs.model.model_bytes(variant) * obs.training.memory_overhead
    reason = (f"no device can train in epoch {obs.epoch}: {held} hold samples, {available} of "
              f"them available, none of those with the {need:.3g} bytes the "
              f"{obs.model.variants[variant].name!r} variant needs")
    if not available:
        reason = f"no device can train in epoch {obs.epoch}: none of the {held} holding " \
                 "samples is available"
    return Decision(stop=True, reason=reason)


def at_most(rng: np.random.Generator, idx: np.ndarray, size: int) -> np.ndarray:
    """``idx`` itself when it has at most ``size`` entries, else ``size`` of them drawn at
    random without replacement (sorted)."""
    if len(idx) <= size:
        return idx
    return np.sort(rng.choice(idx, size=size, replace=False))


def all_samples(obs: Observation, idx: np.ndarray) -> dict[str, int]:
    """Participants ``idx`` each training on all its samples."""
    ids, samples = obs.devices.ids, obs.devices.samples
    rows = np.asarray(idx, dtype=np.intp)
    return dict(zip(map(ids.__getitem__, rows.tolist()), samples[rows].astype(int).tolist(),
                    strict=True))


@register("fedavg-all", "Federated averaging: every available device that can hold the model, "
          "full model, all its samples")
class FedAvgAll(FleetPolicy):
    name = "fedavg-all"
    params: NoParams

    def decide(self, obs: Observation) -> Decision:
        idx = self._fits(obs)
        if not len(idx):
            return nobody_can_train(obs)
        return Decision(participants=all_samples(obs, idx), variant=0)


class KParams(BaseModel):
    """k: how many devices take part each epoch (fewer if fewer are available)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    k: Annotated[int, Field(ge=1)] = 10


@register("random-k", "k devices drawn at random each epoch, full model, all their samples", KParams)
class RandomK(FleetPolicy):
    name = "random-k"
    params: KParams

    def decide(self, obs: Observation) -> Decision:
        idx = self._fits(obs)
        if not len(idx):
            return nobody_can_train(obs)
        idx = at_most(self._rng, idx, self.params.k)
        return Decision(participants=all_samples(obs, idx), variant=0)


class OverselectParams(BaseModel):
    """k: how many updates are kept each epoch (the first k to arrive); overselect: the
    over-selection x, ceil((1 + x) k) available devices are selected at random (all of them if
    fewer are available, keeping at most that many updates); epoch_deadline_s: optional, seconds
    after the epoch's start after which updates are discarded (None: no deadline, the epoch
    waits for the k-th update or for the last participant)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    k: Annotated[int, Field(ge=1)] = 10
    overselect: Annotated[float, Field(ge=0.0, le=10.0)] = 0.3
    epoch_deadline_s: Annotated[float | None, Field(gt=0.0, allow_inf_nan=False)] = None


@register("overselect", "ceil((1 + x) k) devices drawn at random each epoch, the first k updates "
          "kept (optional epoch deadline), full model, all their samples", OverselectParams)
class Overselect(FleetPolicy):
    """Over-selection as production federated learning does it (Bonawitz et al., 2019): select
    more devices than needed so that dropouts and stragglers cost time, not the round; the
    engine stops waiting at the k-th arrival (``Decision.keep_updates``) and discards the late
    ones. Draws with the policy's own generator, like random-k."""

    name = "overselect"
    params: OverselectParams

    def decide(self, obs: Observation) -> Decision:
        idx = self._fits(obs)
        if not len(idx):
            return nobody_can_train(obs)
        k = self.params.k
        select = math.ceil(round((1.0 + self.params.overselect) * k, 9))
        idx = at_most(self._rng, idx, select)
        return Decision(participants=all_samples(obs, idx), variant=0,
                        epoch_deadline_s=self.params.epoch_deadline_s,
                        keep_updates=min(k, len(idx)),
                        info={"selected": len(idx), "keep_updates": min(k, len(idx))})


@register("fastest-k", "the k devices with the shortest predicted epoch time, full model", KParams)
class FastestK(FleetPolicy):
    name = "fastest-k"
    params: KParams

    def decide(self, obs: Observation) -> Decision:
        idx = self._fits(obs)
        if not len(idx):
            return nobody_can_train(obs)
        transfer, compute, _ = device_epoch_times(obs.devices, obs.model, 0, obs.devices.samples)
        order = idx[np.argsort((transfer + compute)[idx], kind="stable")]
        return Decision(participants=all_samples(obs, order[: self.params.k]), variant=0)


@register("greedy-energy", "each epoch, the participants and variant with the lowest predicted "
          "energy per unit of predicted loss drop")
class GreedyEnergy:
    """Myopic: candidates are, per variant, the k devices cheapest per sample (k = 1, 2, 4, ...);
    the predictor (policy-side, anchored on the observed loss) rates each candidate's loss drop.
    Variants whose predicted floor is not below the loss target are left out (they can never
    reach it), unless no variant can; only devices that can hold a variant are its candidates,
    and when none can train it stops with the reason.

    Under label skew (the observation holds each device's label histogram,
    ``Observation.label_counts``) the predicted drop counts which classes a candidate adds:
    the policy keeps its own per-class state of what it trained
    (:class:`netsim.training.loss.PlanningCoverage`, the world's formula) and rates each
    candidate by the loss that state predicts after it, so a cheap set that leaves classes
    out is rated by what leaving them out costs (netsim's extension; docs/curves.md). Such
    epochs record ``planned_loss`` and ``planned_classes`` (classes the run will have
    trained) in their info. IID data (no ``training.dirichlet_alpha`` or
    ``shards_per_device``), on every backend: the scalar state, as before."""

    def __init__(self, params: NoParams) -> None:
        self.name, self.params = "greedy-energy", params
        self._predictor: LossPredictor | None = None
        self._coverage: PlanningCoverage | None = None

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        self._predictor = None
        self._coverage = None

    def decide(self, obs: Observation) -> Decision:
        if self._predictor is None:
            self._predictor = LossPredictor(obs.model, obs.training)
            self._coverage = PlanningCoverage.of(self._predictor, obs.model, obs.training,
                                                 obs.devices.index, obs.devices.samples,
                                                 obs.label_counts)
        pred, table, coverage = self._predictor, obs.devices, self._coverage
        current = obs.variant if obs.variant is not None else 0
        n_eff = pred.curves[current].samples_for(obs.loss) if obs.epoch else 0.0
        state = LossState(0.0 if not np.isfinite(n_eff) else n_eff, obs.variant)
        best, best_score, best_loss = None, np.inf, math.nan
        variants = [v for v in range(len(obs.model.variants))
                    if pred.curves[v].floor < obs.training.target_loss] or \
            list(range(len(obs.model.variants)))
        for v in variants:
            idx = trainers_that_fit(obs, v)
            if not len(idx):
                continue
            _, compute, comm = device_epoch_times(table, obs.model, v, table.samples)
            per_sample = (comm + compute * table.power_busy_w) / np.maximum(table.samples, 1)
            order = idx[np.argsort(per_sample[idx], kind="stable")]
            k = 1
            while True:
                chosen = order[:k]
                samples = np.zeros(table.n)
                samples[chosen] = table.samples[chosen]
                est = estimate_epoch(table, obs.model, v, samples)
                if coverage is None:
                    after = pred.step(state, samples.sum(), v, participants=len(chosen))
                    drop = pred.mean(state) - pred.mean(after)
                    predicted = math.nan
                else:  # which classes the candidate trains (PlanningCoverage)
                    predicted = coverage.predict(all_samples(obs, chosen), v, obs.loss)
                    drop = obs.loss - predicted
                score = est.energy_j / drop if drop > 0 else np.inf
                if score < best_score:
                    best, best_score, best_loss = (v, chosen), score, predicted
                if k >= len(order):
                    break
                k = min(2 * k, len(order))
        if best is None:
            fallback = trainers_that_fit(obs, current)
            if not len(fallback):
                return nobody_can_train(obs, current)
            participants = all_samples(obs, fallback)
            if coverage is not None:
                coverage.commit(participants, current)
            return Decision(participants=participants, variant=current)
        v, chosen = best
        participants = all_samples(obs, chosen)
        if coverage is None:
            return Decision(participants=participants, variant=v)
        coverage.commit(participants, v)
        return Decision(participants=participants, variant=v,
                        info={"planned_loss": best_loss,
                              "planned_classes": coverage.classes_after({})})
