"""Calibrating the coverage terms (netsim.training.coverage) from real training runs.

Two designed grids, each on a real backend (numpy for ``mlp-digits``, torch for the CNNs):

* **The data floor.** One device holds U IID samples (the others hold the rest and never
  train); it trains all of them every epoch for ``epochs`` epochs. The lowest test loss of
  the run is the loss training on U distinct samples can reach. A learning curve
  ``L(U) = c * U ** -data_exponent`` fitted to the lowest losses (least squares on their logs)
  gives ``data_floor = c * N_ref ** -data_exponent``: the floor's rise above the full data's
  ``data_floor * ((N_ref / U) ** data_exponent - 1)`` (``N_ref`` the data set's training
  split, ``reference_samples``).
* **Interference.** A fleet of ``n_devices`` equal devices under label skew (Dirichlet and
  shards); a fixed random set of k of them trains all its data every epoch. The run's lowest
  loss against the surrogate's lowest loss on the same label histograms (the backend's shards
  themselves), the same epochs and the model's curve with the fitted data floor: the grid
  point of (``class_interference``, ``interference_exponent``) with the least RMS log error
  over every epoch of every run.

Seeds are common random numbers across the grid's points (the same test split and initial
weights per seed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from netsim.scenario.schema import LossParams, ModelSpec, TrainingSpec
from netsim.training.coverage import CoverageState, coverage_loss
from netsim.training.loss import LossPredictor, shards_alpha, skew_efficiency

#: backend factory: (model name, device ids, samples, training dict, rng) -> a real backend
BackendFactory = Callable[[str, list[str], list[int], dict, np.random.Generator], object]

FLOOR_SIZES = (60, 120, 240, 480, 960)
QUICK_FLOOR_SIZES = (60, 240)
KS = (1, 2, 4, 8, 16, 40)
QUICK_KS = (2, 8)
SKEWS: tuple[dict, ...] = ({"dirichlet_alpha": 0.1}, {"dirichlet_alpha": 1.0},
                           {"shards_per_device": 2})
KAPPAS = (0.0, 0.2, 0.4, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0)
GAMMAS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0)


def default_backend(name: str, ids: list[str], samples: list[int], training: dict,
                    rng: np.random.Generator):
    """The numpy backend for ``mlp-digits``, the torch backend for the others."""
    model = {"name": name, "variants": [{"params_fraction": 1.0}]}
    if name == "mlp-digits" and training.get("backend", "real") == "real":
        from netsim.training.real import RealBackend

        return RealBackend(model, ids, samples, training, rng)
    from netsim.torchnet.backend import TorchBackend

    return TorchBackend(model, ids, samples, training, rng)


def training_size(name: str, factory: BackendFactory = default_backend,
                  backend: str = "real") -> int:
    """The backend's training split for ``name`` (samples)."""
    b = factory(name, ["a"], [1], {"backend": backend}, np.random.default_rng(0))
    return int(b.training_size)  # type: ignore[attr-defined]


def floor_runs(name: str, sizes: Sequence[int], seeds: Sequence[int], epochs: int,
               factory: BackendFactory = default_backend, backend: str = "real") -> pd.DataFrame:
    """The data-floor grid: one row per (U, seed) with the run's lowest and last loss."""
    total = training_size(name, factory, backend)
    rows = []
    for u in sizes:
        if not 0 < u < total:
            raise ValueError(f"a data-floor size {u} outside 1..{total - 1}")
        for seed in seeds:
            b = factory(name, ["a", "b"], [u, total - u], {"backend": backend},
                        np.random.default_rng(seed))
            losses = [b.advance({"a": u}, 0).loss for _ in range(epochs)]  # type: ignore[attr-defined]
            rows.append({"samples": u, "seed": seed, "lowest_loss": min(losses),
                         "last_loss": losses[-1], "epochs": epochs, "reference": total})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class FloorFit:
    """The data floor's two constants and how well they fit."""

    data_floor: float
    data_exponent: float
    reference_samples: float
    rms_log_error: float
    table: pd.DataFrame


def fit_floor(runs: pd.DataFrame) -> FloorFit:
    """``L(U) = c * U ** -g`` by least squares on log(lowest loss) over the runs' mean per U."""
    mean = runs.groupby("samples")["lowest_loss"].mean()
    x, y = np.log(mean.index.to_numpy(dtype=float)), np.log(mean.to_numpy())
    slope, intercept = np.polyfit(x, y, 1)
    exponent, c = -float(slope), math.exp(float(intercept))
    reference = float(runs["reference"].iloc[0])
    fitted = c * mean.index.to_numpy(dtype=float) ** -exponent
    table = pd.DataFrame({"samples": mean.index, "real_lowest_loss": mean.to_numpy(),
                          "fitted": fitted})
    rms = float(np.sqrt(np.mean((np.log(fitted) - y) ** 2)))
    return FloorFit(c * reference ** -exponent, exponent, reference, rms, table)


def interference_runs(name: str, ks: Sequence[int], seeds: Sequence[int], epochs: int,
                      n_devices: int = 40, samples: int = 35,
                      skews: Sequence[dict] = SKEWS, factory: BackendFactory = default_backend,
                      backend: str = "real") -> list[dict]:
    """The interference grid: per (skew, k, seed) the lowest loss of a fixed random set of k
    devices trained every epoch, with every device's label histogram and the set."""
    ids = [f"d{i}" for i in range(n_devices)]
    out = []
    for skew in skews:
        for k in ks:
            for seed in seeds:
                b = factory(name, ids, [samples] * n_devices, {"backend": backend, **skew},
                            np.random.default_rng(seed))
                hist = b.label_counts().astype(float)  # type: ignore[attr-defined]
                chosen = np.random.default_rng(100 + seed).choice(n_devices, size=min(k, n_devices),
                                                                  replace=False)
                used = {ids[i]: samples for i in chosen}
                losses = [b.advance(used, 0).loss for _ in range(epochs)]  # type: ignore[attr-defined]
                out.append({"skew": dict(skew), "k": int(k), "seed": seed,
                            "lowest_loss": min(losses), "losses": np.array(losses),
                            "histograms": hist, "chosen": chosen, "epochs": epochs})
    return out


@dataclass(frozen=True)
class InterferenceFit:
    """The interference term's two constants and how well they fit."""

    class_interference: float
    interference_exponent: float
    rms_log_error: float
    table: pd.DataFrame


def _surrogate_losses(model: ModelSpec, run: dict, kappa: float, gamma: float,
                      cache: dict) -> np.ndarray:
    """The surrogate's loss after each of a run's epochs (its states cached per run)."""
    key = id(run)
    if key not in cache:
        skew = run["skew"]
        training = TrainingSpec(target_loss=0.1, deadline_s=1.0, **skew)
        pred = LossPredictor(model, training)
        hist = run["histograms"]
        ids = {f"d{i}": i for i in range(len(hist))}
        loss = model.loss
        assert loss is not None
        cov = CoverageState(ids, hist.sum(axis=1), hist, loss.reference_samples)
        used = {f"d{i}": float(hist[i].sum()) for i in run["chosen"]}
        states = []
        for _ in range(run["epochs"]):
            cov.add(pred.gain(sum(used.values()), len(used)), cov.trained_mix(used))
            states.append((cov.population_samples().copy(), cov.distinct_population()))
        cache[key] = (pred, cov.share, states)
    pred, share, states = cache[key]
    c = pred.curves[0]
    loss = model.loss
    assert loss is not None
    return np.array([coverage_loss(n, u, share, floor=c.floor, half=c.samples_half,
                                   exponent=c.exponent, initial=pred.initial_loss,
                                   reference_samples=loss.reference_samples,
                                   data_floor=loss.data_floor,
                                   data_exponent=loss.data_exponent, interference=kappa,
                                   interference_exponent=gamma)
                     for n, u in states])


def _surrogate_lowest(model: ModelSpec, run: dict, kappa: float, gamma: float,
                      cache: dict) -> float:
    """The surrogate's lowest loss over a run's epochs."""
    return float(_surrogate_losses(model, run, kappa, gamma, cache).min())


def fit_interference(model: ModelSpec, runs: list[dict], kappas: Sequence[float] = KAPPAS,
                     gammas: Sequence[float] = GAMMAS) -> InterferenceFit:
    """The (kappa, gamma) of the grid with the least RMS log error over every epoch of every
    run (the whole trajectory: a policy that re-plans reads the losses on the way, not only
    the lowest); a run without its losses counts by its lowest loss."""
    cache: dict = {}
    real = np.array([r["lowest_loss"] for r in runs])
    best: tuple[float, float, float, np.ndarray] | None = None
    for kappa in kappas:
        for gamma in gammas:
            errors, lowest = [], []
            for r in runs:
                sur = _surrogate_losses(model, r, kappa, gamma, cache)
                lowest.append(float(sur.min()))
                seen = r.get("losses")
                errors.append(np.log(sur / seen) if seen is not None
                              else np.log([lowest[-1] / r["lowest_loss"]]))
            rms = float(np.sqrt(np.mean(np.concatenate(errors) ** 2)))
            if best is None or rms < best[0]:
                best = (rms, kappa, gamma, np.array(lowest))
    assert best is not None
    table = pd.DataFrame({"skew": [", ".join(f"{k} {v}" for k, v in r["skew"].items())
                                   for r in runs],
                          "k": [r["k"] for r in runs], "seed": [r["seed"] for r in runs],
                          "real_lowest_loss": real, "surrogate": best[3]})
    return InterferenceFit(best[1], best[2], best[0], table)


def with_floor(model: ModelSpec, fit: FloorFit) -> ModelSpec:
    """``model`` with the fitted data floor (interference off)."""
    loss = model.loss if model.loss is not None else LossParams(
        initial_loss=2.3, floor_full=0.05, samples_half=2e4, exponent=0.7)
    return model.model_copy(update={"loss": loss.model_copy(update={
        "reference_samples": fit.reference_samples, "data_floor": fit.data_floor,
        "data_exponent": fit.data_exponent, "class_interference": 0.0})})


#: The base-curve grid of a model that has no fitted curve (``--base-curve``): every node
#: trains all its data every epoch, the whole training split shared out evenly
BASE_POINTS = (("base", 10, None), ("nodes-5", 5, None), ("nodes-20", 20, None),
               ("alpha-1", 10, 1.0), ("alpha-0.1", 10, 0.1))
#: Run beside the base grid and never fitted: the held-back check of the participant
#: exponent, extrapolated from 5-20 nodes to 40
HELD_BACK_POINTS = (("nodes-40", 40, None),)


@dataclass(frozen=True)
class RecordedBase:
    """A model whose base curve was fitted to recorded federated runs (netsim/data/curves/):
    the setting those runs trained in, where the terms measured on a real backend are
    anchored (:func:`anchored_terms`)."""

    participants: int
    """Clients that trained every round of the recorded runs."""
    shards_per_device: int | None
    """Their label skew: McMahan's shards a client held (None: IID)."""
    training_samples: int
    """The recorded runs' training split (samples): the data floor's reference size."""


#: cnn-mnist's curve is McMahan's CNN in the Flower baseline: 100 clients every round, 2
#: shards each, MNIST's 60,000 training images (netsim/data/curves/SOURCE.md)
RECORDED_BASES = {"cnn-mnist": RecordedBase(participants=100, shards_per_device=2,
                                            training_samples=60_000)}


def recorded_scale(recorded: RecordedBase, classes: int, heterogeneity: float,
                   participant_exponent: float) -> float:
    """What the recorded setting's curve makes of a sample under these terms: its skew's
    efficiency (its shards at the equivalent concentration of
    :func:`netsim.training.loss.shards_alpha`) times ``participants ** -participant_exponent``;
    ``samples_half`` times this keeps the recorded curve there (netsim's formalization)."""
    alpha = None if recorded.shards_per_device is None else \
        shards_alpha(recorded.shards_per_device, classes)
    return skew_efficiency(heterogeneity, alpha) * recorded.participants ** -participant_exponent


def anchored_terms(loss: LossParams, recorded: RecordedBase, participant_exponent: float,
                   heterogeneity: float, floor: FloorFit) -> dict:
    """The terms a real backend measured, moved onto a recorded base curve (netsim's
    formalization): ``heterogeneity`` as measured; the participant exponent as measured less
    the recorded ``local_step_exponent`` (the base grid shares a fixed training split, so a
    participant's minibatch steps fall as ``1 / participants`` and the measured exponent holds
    both; the simulator charges the steps by their own term); ``samples_half`` rescaled so that
    the recorded setting (its participants, its skew at the equivalent concentration of
    :func:`netsim.training.loss.skew_alpha`) keeps exactly the recorded curve: ``samples_half
    x efficiency x participants ** -participant_exponent``; the data floor's learning curve
    ``c U ** -g`` (fitted on the backend's data set) referred to the recorded runs' training
    split, ``data_floor = c N ** -g``."""
    participant_exponent = max(0.0, participant_exponent - loss.local_step_exponent)
    scale = recorded_scale(recorded, loss.classes, heterogeneity, participant_exponent)
    c = floor.data_floor * floor.reference_samples ** floor.data_exponent
    n = float(recorded.training_samples)
    return {"participant_exponent": participant_exponent, "heterogeneity": heterogeneity,
            "samples_half": loss.samples_half * scale, "reference_samples": n,
            "data_floor": c * n ** -floor.data_exponent, "data_exponent": floor.data_exponent}


def base_curve_runs(name: str, seeds: Sequence[int], epochs: int,
                    backend: str = "torch",
                    points: Sequence[tuple] = BASE_POINTS + HELD_BACK_POINTS) -> pd.DataFrame:
    """The base-curve grid (:data:`BASE_POINTS`, and :data:`HELD_BACK_POINTS` to check it) on
    the real backend: the curves table of :func:`netsim.training.calibrate.run_point`, one row
    per epoch."""
    from netsim.training import calibrate as cal

    def factory(model, ids, samples, training, rng):
        return default_backend(str(model["name"]), ids, samples,
                               {"backend": backend, **training}, rng)

    rows: list[dict] = []
    for config, nodes, alpha in points:
        point = cal.GridPoint(config, n_nodes=nodes, dirichlet_alpha=alpha)
        for seed in seeds:
            rows += cal.run_point(point, seed, epochs, model_name=name, factory=factory)
    table = pd.DataFrame(rows)
    table["dirichlet_alpha"] = table["dirichlet_alpha"].astype(float)
    table["prune_epoch"] = table["prune_epoch"].astype("Int64")
    table["prune_fraction"] = table["prune_fraction"].astype(float)
    return table.sort_values(["config", "seed", "epoch"], kind="stable").reset_index(drop=True)


def with_base_curve(model: ModelSpec, fit) -> ModelSpec:
    """``model`` with a fitted base curve (:class:`netsim.training.calibrate.SurrogateFit`)."""
    loss = model.loss
    assert loss is not None
    full = fit.variants["full"]
    return model.model_copy(update={"loss": loss.model_copy(update={
        "initial_loss": fit.initial_loss, "floor_full": full[0], "samples_half": full[1],
        "exponent": full[2], "heterogeneity": fit.heterogeneity,
        "participant_exponent": fit.participant_exponent,
        "noise_run_sigma": fit.noise_run_sigma, "noise_epoch_sigma": fit.noise_epoch_sigma})})
