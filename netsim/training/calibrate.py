"""Calibration: measure real-training loss curves over a grid, fit the surrogate to them.

The grid varies one factor at a time around a base configuration (10 nodes with equal
data, full model, all data every epoch, IID shards, 30 epochs):

* pruning level from the start (params_fraction 0.5, 0.25, 0.1),
* fraction of each node's data used per epoch (0.5, 0.25),
* number of nodes (5, 20),
* Dirichlet label skew (alpha 1.0, 0.1),
* pruning at a later epoch (to 0.5 or 0.25 after epoch 15),

each with ``seeds`` seeds (default 25; the fit uses the first 20, the rest are held out).
Seed s is the same ``numpy.random.default_rng(s)`` in every configuration (common random
numbers: same test split and initial weights), so configurations differ by their factor.

Calibration devices declare as samples their share of the training split, so that declared
samples equal the samples trained on (the surrogate counts declared samples).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd

from netsim.training.loss import CurveParams, LossPredictor, LossState, skew_efficiency
from netsim.training.real import RealBackend, RealTrainingConfig

T = TypeVar("T")

#: Where the measured curves live in the repository.
CURVES_PATH = os.path.join(os.path.dirname(__file__), "..", "data", "calibration", "curves.parquet")
MODEL_NAME = "mlp-digits"
#: Seeds below this are used by the fit; the rest are held out for validation.
FIT_SEEDS = 20


def fit_seed_count(seeds: int) -> int:
    """How many of ``seeds`` seeds (0, 1, ...) a fit uses: four in five, at least 2 (the
    run-to-run spread is measured across seeds) and at most :data:`FIT_SEEDS`; the rest are
    held out."""
    return min(FIT_SEEDS, max(2, seeds * 4 // 5))


@dataclass(frozen=True)
class GridPoint:
    """One calibration configuration.

    Attributes
    ----------
    config: label of the configuration.
    params_fraction: variant used from epoch 1 (1.0 = full model).
    data_fraction: fraction of each node's samples used every epoch, in (0, 1].
    n_nodes: number of training nodes, equal declared samples.
    dirichlet_alpha: label-skew concentration, None for IID.
    prune_epoch: after this epoch the model is pruned to ``prune_fraction`` (None: never).
    prune_fraction: params_fraction after the late pruning.
    """

    config: str
    params_fraction: float = 1.0
    data_fraction: float = 1.0
    n_nodes: int = 10
    dirichlet_alpha: float | None = None
    prune_epoch: int | None = None
    prune_fraction: float | None = None


def default_grid(prune_epoch: int = 15) -> list[GridPoint]:
    """The default one-factor-at-a-time grid (12 configurations)."""
    points = [GridPoint("base")]
    points += [GridPoint(f"prune-{f:g}", params_fraction=f) for f in (0.5, 0.25, 0.1)]
    points += [GridPoint(f"data-{f:g}", data_fraction=f) for f in (0.5, 0.25)]
    points += [GridPoint(f"nodes-{n}", n_nodes=n) for n in (5, 20)]
    points += [GridPoint(f"alpha-{a:g}", dirichlet_alpha=a) for a in (1.0, 0.1)]
    points += [
        GridPoint(f"late-prune-{f:g}", prune_epoch=prune_epoch, prune_fraction=f)
        for f in (0.5, 0.25)
    ]
    return points


def quick_grid(prune_epoch: int = 5) -> list[GridPoint]:
    """A tiny grid for smoke tests: base, one pruning level, one late pruning."""
    return [
        GridPoint("base"),
        GridPoint("prune-0.25", params_fraction=0.25),
        GridPoint("late-prune-0.25", prune_epoch=prune_epoch, prune_fraction=0.25),
    ]


def run_point(
    point: GridPoint, seed: int, epochs: int, config: RealTrainingConfig | None = None,
    model_name: str = MODEL_NAME, factory: Callable[..., object] | None = None,
) -> list[dict]:
    """Run the real backend on one configuration and seed; one row per epoch (0 = initial).

    Row fields: the grid point's fields, ``seed``, ``epoch``, ``loss`` (nats),
    ``accuracy``, ``variant_fraction`` (params_fraction in force), ``samples`` (trained
    this epoch) and ``cumulative_samples``.
    """
    config = config or RealTrainingConfig()
    rng = np.random.default_rng(seed)
    make = factory or RealBackend
    n_train = _train_size(config) if factory is None else int(make(  # type: ignore[attr-defined]
        {"name": model_name, "variants": [{"params_fraction": 1.0}]}, ["a"], [1],
        {"real": config}, np.random.default_rng(0)).training_size)
    declared = [n_train // point.n_nodes] * point.n_nodes
    for i in range(n_train % point.n_nodes):
        declared[i] += 1
    # a late-pruning point names its fraction (GridPoint: prune_fraction goes with prune_epoch)
    second = cast(float, point.prune_fraction) if point.prune_epoch is not None else point.params_fraction
    model = {
        "name": model_name,
        "variants": [{"params_fraction": 1.0}, {"params_fraction": float(second)}],
    }
    ids = [f"n{i}" for i in range(point.n_nodes)]
    training = {"dirichlet_alpha": point.dirichlet_alpha, "real": config}
    backend: Any = make(model, ids, declared, training, rng)
    plan = {d: max(1, round(point.data_fraction * s)) for d, s in zip(ids, declared, strict=True)}
    per_epoch = int(sum(plan.values()))
    base = asdict(point)
    rows = [dict(base, seed=seed, epoch=0, loss=backend.initial_loss(), accuracy=math.nan,
                 variant_fraction=1.0, samples=0, cumulative_samples=0)]
    for epoch in range(1, epochs + 1):
        if point.prune_epoch is None:
            variant = 1 if point.params_fraction < 1.0 else 0
        else:
            variant = 1 if epoch > point.prune_epoch else 0
        progress = backend.advance(plan, variant)
        rows.append(dict(base, seed=seed, epoch=epoch, loss=progress.loss,
                         accuracy=progress.accuracy, variant_fraction=backend.params_fraction,
                         samples=per_epoch, cumulative_samples=per_epoch * epoch))
    return rows


def _train_size(config: RealTrainingConfig) -> int:
    from netsim.training.real import _digits, stratified_split

    _, y = _digits()
    return len(stratified_split(y, config.test_fraction, np.random.default_rng(0))[0])


def even_backend(n_nodes: int, dirichlet_alpha: float | None, config: RealTrainingConfig,
                 seed: int) -> tuple[RealBackend, list[str], list[int]]:
    """The digits MLP's real backend over ``n_nodes`` nodes ``n0``, ``n1``, ... that share the
    training split as evenly as it divides (the first ``n_train % n_nodes`` one sample more),
    their shards drawn with ``dirichlet_alpha`` (None: IID) from ``seed``. Returns the backend,
    the node ids and each node's declared samples (the asynchronous and the hierarchical
    calibrations' runs)."""
    n_train = _train_size(config)
    declared = [n_train // n_nodes + (1 if i < n_train % n_nodes else 0) for i in range(n_nodes)]
    ids = [f"n{i}" for i in range(n_nodes)]
    model = {"name": MODEL_NAME, "variants": [{"params_fraction": 1.0}]}
    training = {"dirichlet_alpha": dirichlet_alpha, "real": config}
    return RealBackend(model, ids, declared, training, np.random.default_rng(seed)), ids, declared


def run_tasks(run: Callable[[T], list[dict]], tasks: Sequence[T], jobs: int, desc: str,
              progress: bool, chunksize: int = 2) -> list[dict]:
    """The rows of ``run(task)`` for every task, in the tasks' order, on ``jobs`` processes
    (1: this one), with a progress bar (``desc``); the calibrations' runs (real training,
    each independent of the others)."""
    from tqdm import tqdm

    rows: list[dict] = []
    with tqdm(total=len(tasks), desc=desc, unit="run", disable=not progress) as bar:
        if jobs <= 1:
            for task in tasks:
                rows.extend(run(task))
                bar.update()
        else:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                for result in pool.map(run, tasks, chunksize=chunksize):
                    rows.extend(result)
                    bar.update()
    return rows


def _run_task(task: tuple[GridPoint, int, int, RealTrainingConfig]) -> list[dict]:
    return run_point(*task)


def run_grid(
    points: Sequence[GridPoint],
    seeds: Iterable[int],
    epochs: int,
    *,
    jobs: int = 1,
    config: RealTrainingConfig | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Run every (point, seed) pair; returns the long curves table (one row per epoch).

    ``jobs`` > 1 fans runs out to a process pool; results do not depend on ``jobs``.
    """

    config = config or RealTrainingConfig()
    tasks = [(p, s, epochs, config) for p in points for s in seeds]
    table = pd.DataFrame(run_tasks(_run_task, tasks, jobs, "calibration runs", progress,
                                   chunksize=4))
    table["dirichlet_alpha"] = table["dirichlet_alpha"].astype(float)
    table["prune_epoch"] = table["prune_epoch"].astype("Int64")
    table["prune_fraction"] = table["prune_fraction"].astype(float)
    return table.sort_values(["config", "seed", "epoch"], kind="stable").reset_index(drop=True)


# --- fitting the surrogate (formula: netsim/training/loss.py) -----------------------------

#: Variant name of each calibrated params_fraction (names of models.yaml's mlp-digits).
VARIANT_NAMES = {1.0: "full", 0.5: "pruned-50", 0.25: "pruned-75", 0.1: "pruned-90"}


@dataclass(frozen=True)
class SurrogateFit:
    """Fitted surrogate constants (the fields of loss_params.yaml) and goodness of fit.

    ``variants`` maps a variant name to its (floor, samples_half, exponent) curve.
    ``report`` has one row per configuration: R² of the mean curve and RMS log-residual
    on the fit seeds and on the held-out seeds.
    """

    initial_loss: float
    variants: dict[str, tuple[float, float, float]]
    floor_full: float
    floor_prune: float
    floor_exponent: float
    prune_progress_loss: float
    heterogeneity: float
    participant_exponent: float
    noise_run_sigma: float
    noise_epoch_sigma: float
    noise_heterogeneity: float
    report: pd.DataFrame
    noise_level_exponent: float = 0.0
    noise_prune: float = 0.0

    def loss_params(self, source: str) -> dict:
        """The loss_params.yaml entry (plain types)."""
        full = self.variants["full"]
        return {
            "initial_loss": _r(self.initial_loss), "floor_full": _r(self.floor_full),
            "floor_prune": _r(self.floor_prune), "floor_exponent": _r(self.floor_exponent),
            "samples_half": _r(full[1]), "exponent": _r(full[2]),
            "prune_progress_loss": _r(self.prune_progress_loss),
            "heterogeneity": _r(self.heterogeneity),
            **({"participant_exponent": _r(self.participant_exponent)}
               if self.participant_exponent else {}),
            "noise_run_sigma": _r(self.noise_run_sigma),
            "noise_epoch_sigma": _r(self.noise_epoch_sigma),
            "noise_heterogeneity": _r(self.noise_heterogeneity),
            **({"noise_level_exponent": _r(self.noise_level_exponent),
                "noise_prune": _r(self.noise_prune)}
               if self.noise_level_exponent or self.noise_prune else {}),
            "variants": {name: {"floor": _r(c[0]), "samples_half": _r(c[1]), "exponent": _r(c[2])}
                         for name, c in self.variants.items() if name != "full"},
            "source": source,
        }


def _r(x: float) -> float:
    return float(f"{x:.4g}")


def surrogate_mean(
    schedule: pd.DataFrame, initial_loss: float, curves: dict[float, tuple[float, float, float]],
    prune_progress_loss: float, heterogeneity: float, participant_exponent: float = 0.0,
) -> np.ndarray:
    """The surrogate's mean loss (nats) after each epoch of one run's schedule.

    ``schedule`` has per epoch (>= 1, in order) ``samples``, ``variant_fraction``,
    ``dirichlet_alpha`` (NaN = IID) and ``n_nodes`` (participants); ``curves`` maps
    params_fraction -> (floor, samples_half, exponent). Evaluated by the one progress model,
    :class:`netsim.training.loss.LossPredictor` (its step and switch rule), built from these
    constants: calibration fits exactly what the simulator and the planners run.
    """
    alpha = schedule["dirichlet_alpha"].iloc[0]
    iid = alpha is None or math.isnan(float(alpha))
    eff = skew_efficiency(heterogeneity, None if iid else float(alpha))
    fractions = sorted(curves, reverse=True)
    model = LossPredictor.from_curves(
        [CurveParams(initial_loss, *curves[f]) for f in fractions], fractions, eff,
        prune_progress_loss, participant_exponent)
    index = {f: v for v, f in enumerate(fractions)}
    epochs = [(index[f], float(samples), int(nodes)) for samples, f, nodes in
              zip(schedule["samples"], schedule["variant_fraction"], schedule["n_nodes"],
                  strict=True)]
    return np.array([model.mean(state) for state in model.replay(LossState(), epochs)])


SCHEDULE_COLUMNS = ["samples", "variant_fraction", "dirichlet_alpha", "n_nodes"]


def _schedules(table: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """Per config: its epoch schedule (epochs >= 1) and its rows (epochs >= 1)."""
    trained = table[table["epoch"] >= 1]
    return {config: (grp.groupby("epoch")[SCHEDULE_COLUMNS].first(), grp)
            for config, grp in trained.groupby("config", sort=True)}


def _fit_curves(
    targets: dict, initial_loss: float, n_per_epoch: float, fit_beta: bool
) -> tuple[dict, float, float, float]:
    """Least squares on log loss: (curves by fraction, prune_progress_loss, heterogeneity,
    participant_exponent). Floors are parametrised as increments, so a more pruned variant
    never has a lower floor than a less pruned one."""
    from scipy.optimize import least_squares

    fractions = sorted({f for s, _ in targets.values() for f in s["variant_fraction"]},
                       reverse=True)

    def unpack(x: np.ndarray) -> tuple[dict, float, float, float]:
        e = np.exp(x)
        floors = np.cumsum(e[0 : 3 * len(fractions) : 3])  # more pruned, floor no lower
        curves = {f: (float(floors[i]), float(e[3 * i + 1]), float(e[3 * i + 2]))
                  for i, f in enumerate(fractions)}
        beta = float(x[-1]) if fit_beta else 0.0
        return curves, float(e[3 * len(fractions)]), float(e[3 * len(fractions) + 1]), beta

    def residuals(x: np.ndarray) -> np.ndarray:
        curves, ppl, het, beta = unpack(x)
        return np.concatenate([
            np.log(surrogate_mean(s, initial_loss, curves, ppl, het, beta)) - y
            for s, y in targets.values()])

    per = [(0.05, 5 * n_per_epoch, 1.0), (1e-4, 10.0, 0.1), (initial_loss, 1e9, 4.0)]
    x0, lower, upper = ([np.log(v) for _ in fractions for v in b] for b in per)
    x0 += [0.0, np.log(0.2)] + ([0.0] if fit_beta else [])
    lower += [np.log(1e-3), np.log(1e-4)] + ([0.0] if fit_beta else [])  # b >= 0 (schema)
    upper += [np.log(50.0), np.log(100.0)] + ([2.0] if fit_beta else [])
    sol = least_squares(residuals, np.array(x0), bounds=(lower, upper))
    return unpack(sol.x)


def participant_counts(table: pd.DataFrame) -> list[int]:
    """The participant counts an epoch of a curves table's runs train (after epoch 0)."""
    return sorted({int(n) for n in table.loc[table["epoch"] >= 1, "n_nodes"]})


def fit_surrogate(
    table: pd.DataFrame, fit_seeds: int = FIT_SEEDS, fit_participant_exponent: bool = False
) -> SurrogateFit:
    """Fit the surrogate's constants to a curves table with scipy.optimize.least_squares.

    Mean curves: least squares on the log of the loss (the surrogate's noise is
    multiplicative) against the seed-mean log loss of each configuration and epoch, seeds
    < ``fit_seeds`` only; unknowns: (floor, samples_half, exponent) per variant,
    prune_progress_loss and heterogeneity. The surrogate counts total samples whatever
    the number of participants, so unless ``fit_participant_exponent`` the fit uses only
    the configurations with the base node count (and where every configuration trains one
    count, the exponent is not identified and stays 0). Then floor(f) = floor_full + floor_prune
    * (1 - f) ** floor_exponent is fitted to the variants' floors. Noise: detrended
    log-loss z (minus the configuration's seed-mean at that epoch); per-epoch sigma from
    var(z_k - z_{k-1}) / 2, per-run sigma from the rest of var(z) over the last half of
    the epochs.
    """
    from scipy.optimize import least_squares

    fit = table[table["seed"] < fit_seeds]
    if fit["seed"].nunique() < 2:
        raise ValueError(f"the fit's seeds (< {fit_seeds}) are {fit['seed'].nunique()}; it "
                         "needs at least 2 (the run-to-run spread is measured across seeds)")
    initial_loss = float(np.exp(np.log(fit.loc[fit["epoch"] == 0, "loss"]).mean()))
    base_nodes = GridPoint("base").n_nodes
    targets = {c: (s, np.log(g["loss"]).groupby(g["epoch"]).mean().to_numpy())
               for c, (s, g) in _schedules(fit).items()
               if fit_participant_exponent or (s["n_nodes"] == base_nodes).all()}
    # (one participant count leaves the exponent unidentified: it stays 0, not fitted)
    fit_participant_exponent = fit_participant_exponent and len(participant_counts(fit)) > 1
    n_per_epoch = float(np.median(fit.loc[fit["epoch"] >= 1, "samples"]))
    curves, ppl, het, beta = _fit_curves(targets, initial_loss, n_per_epoch,
                                         fit_participant_exponent)
    floor_full = curves[1.0][0]
    prune_f = [f for f in curves if f < 1.0]

    def floor_res(p: np.ndarray) -> np.ndarray:
        return np.array([floor_full + p[0] * (1 - f) ** p[1] - curves[f][0] for f in prune_f])

    # no pruned variant measured (curves of recorded runs): no floor increase to fit
    floor_x = least_squares(floor_res, [0.5, 2.0], bounds=([0.0, 0.05], [100.0, 20.0])).x \
        if prune_f else np.array([0.0, 2.0])
    _, sigma_epoch, _ = _noise_sigmas(fit)
    spread = fit_spread(fit, initial_loss, sigma_epoch)
    sigma_run, noise_het = spread.sigma_run, spread.heterogeneity
    return SurrogateFit(
        initial_loss=initial_loss,
        variants={VARIANT_NAMES.get(f, f"pf-{f:g}"): c for f, c in curves.items()},
        floor_full=floor_full, floor_prune=float(floor_x[0]),
        floor_exponent=float(floor_x[1]), prune_progress_loss=ppl, heterogeneity=het,
        participant_exponent=beta, noise_run_sigma=sigma_run, noise_epoch_sigma=sigma_epoch,
        noise_heterogeneity=noise_het,
        report=fit_report(table, initial_loss, curves, ppl, het, beta, fit_seeds),
        noise_level_exponent=spread.level_exponent, noise_prune=spread.prune,
    )


@dataclass(frozen=True)
class SpreadFit:
    """The run-to-run spread of the log loss as a function of the training state:
    ``sigma_run * (1 + heterogeneity / alpha) * (mean / initial_loss) ** -level_exponent *
    (1 + prune * (1 - f))`` (netsim.training.loss), fitted to the across-seed standard
    deviation of the log loss of every configuration and epoch; ``r2`` is the fit's R² on
    the log of those standard deviations, ``participant_exponent`` the exponent a further
    ``(participants / 10) ** -c`` factor gets when fitted too (reported, not used: measured
    about 0 once the loss level is in the model)."""

    sigma_run: float
    heterogeneity: float
    level_exponent: float
    prune: float
    r2: float
    participant_exponent: float


def fit_spread(table: pd.DataFrame, initial_loss: float, sigma_epoch: float,
               min_epoch: int = 3) -> SpreadFit:
    """Fit :class:`SpreadFit` to a curves table (seeds as given; epochs >= ``min_epoch``):
    least squares on log(sqrt(sd**2 - sigma_epoch**2)) per configuration and epoch."""
    from scipy.optimize import least_squares

    t = table[table["epoch"] >= min_epoch].assign(log_loss=lambda d: np.log(d["loss"]))
    g = t.groupby(["config", "epoch"]).agg(
        sd=("log_loss", lambda x: x.std(ddof=1)), level=("log_loss", "mean"),
        nodes=("n_nodes", "first"), alpha=("dirichlet_alpha", "first"),
        fraction=("variant_fraction", "first")).reset_index()
    y = 0.5 * np.log(np.maximum(g["sd"].to_numpy() ** 2 - sigma_epoch ** 2, 1e-10))
    alpha = g["alpha"].astype(float).to_numpy()
    inv_alpha = np.where(np.isnan(alpha), 0.0, 1.0 / np.where(np.isnan(alpha), 1.0, alpha))
    level = g["level"].to_numpy() - math.log(initial_loss)
    pruned = 1.0 - g["fraction"].to_numpy()
    parts = np.log(g["nodes"].to_numpy() / 10.0)

    def model(x: np.ndarray, with_parts: bool) -> np.ndarray:
        out = x[0] + np.log1p(x[1] * inv_alpha) - x[2] * level + np.log1p(x[3] * pruned)
        return out - x[4] * parts if with_parts else out

    lo, hi = [-10.0, 0.0, 0.0, -0.99, -2.0], [2.0, 20.0, 5.0, 20.0, 2.0]
    sol = least_squares(lambda x: model(x, False) - y, [math.log(0.07), 0.1, 0.1, 0.0, 0.0],
                        bounds=(lo, hi))
    with_parts = least_squares(lambda x: model(x, True) - y, sol.x, bounds=(lo, hi))
    spread_ss = float(np.sum((y - y.mean()) ** 2))  # (0 where the seeds never differ)
    r2 = 1.0 - float(np.sum(sol.fun ** 2)) / spread_ss if spread_ss > 0 else math.nan
    return SpreadFit(float(math.exp(sol.x[0])), float(sol.x[1]), float(sol.x[2]),
                     float(sol.x[3]), r2, float(with_parts.x[4]))


def _noise_sigmas(table: pd.DataFrame) -> tuple[float, float, float]:
    """(per-run sigma, per-epoch sigma, noise_heterogeneity) of the log loss around each
    configuration's seed mean: per-run sigma from the IID configurations (all if none), and
    k in sigma_run * (1 + k / alpha) from the Dirichlet ones (least squares, k >= 0)."""
    t = table[table["epoch"] >= 1].copy()
    logs = np.log(t["loss"])
    t["z"] = logs - logs.groupby([t["config"], t["epoch"]]).transform("mean")
    t = t.sort_values(["config", "seed", "epoch"])
    dz = t.groupby(["config", "seed"])["z"].diff().dropna()
    var_epoch = 0.5 * float(np.mean(dz**2))
    late = t[t["epoch"] > t["epoch"].max() / 2]
    n_seeds = t["seed"].nunique()
    var = late.groupby("config")["z"].apply(lambda z: float(np.mean(z**2))) * n_seeds / max(1, n_seeds - 1)
    alpha = late.groupby("config")["dirichlet_alpha"].first().astype(float)
    iid = alpha.isna()
    var_iid = float(var[iid].mean()) if iid.any() else float(var.mean())
    sigma_run = math.sqrt(max(0.0, var_iid - var_epoch))
    xs = (1.0 / alpha[~iid]).to_numpy()
    ys = (np.sqrt(np.maximum(var[~iid] - var_epoch, 0.0)) / sigma_run - 1.0).to_numpy() \
        if sigma_run > 0 else np.zeros(0)
    k = max(0.0, float(np.dot(xs, ys) / np.dot(xs, xs))) if len(xs) else 0.0
    return sigma_run, math.sqrt(var_epoch), k


def fit_report(
    table: pd.DataFrame, initial_loss: float, curves: dict, ppl: float, het: float,
    beta: float, fit_seeds: int,
) -> pd.DataFrame:
    """Per configuration: R² of the seed-mean curve (loss scale) and RMS log-residual, on fit
    seeds and on held-out seeds (NaN where there are none); sd of the log final loss."""
    rows = []
    for config, (schedule, grp) in _schedules(table).items():
        pred = surrogate_mean(schedule, initial_loss, curves, ppl, het, beta)
        row: dict = {"config": config}
        for part, sel in (("fit", grp["seed"] < fit_seeds), ("held_out", grp["seed"] >= fit_seeds)):
            if not sel.any():
                row[f"r2_{part}"] = row[f"rms_log_{part}"] = math.nan
                continue
            mean = grp[sel].groupby("epoch")["loss"].mean().to_numpy()
            row[f"r2_{part}"] = 1.0 - np.sum((mean - pred) ** 2) / np.sum((mean - mean.mean()) ** 2)
            row[f"rms_log_{part}"] = float(np.sqrt(np.mean((np.log(pred) - np.log(mean)) ** 2)))
        final = grp[grp["epoch"] == grp["epoch"].max()]["loss"]
        row["final_log_sd"] = float(np.log(final).std(ddof=1)) if len(final) > 1 else math.nan
        rows.append(row)
    return pd.DataFrame(rows)
