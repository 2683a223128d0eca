"""The fit of the progress model to recorded runs, and the fitted entry's prediction.

:func:`fit_recorded` fits the constants (:func:`fit_constants`), the loss-to-accuracy map
(:func:`fit_accuracy_map`) and the run-to-run spread (:func:`fit_spread`) to a
:class:`~netsim.training.recorded_data.Recorded` table's settings; :func:`predict` gives an
entry's mean loss and accuracy after each round with the :data:`BAND` quantiles. The method
(what is fitted, on which rounds, in which units): :mod:`netsim.training.recorded`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtri

from netsim.scenario.schema import AccuracyMap, LossParams, ModelSpec, TrainingSpec
from netsim.training.loss import CurveParams, LossPredictor
from netsim.training.recorded_data import Recorded, Setting, clean_runs

#: The band the prediction reports (quantiles of the loss, hence of the accuracy).
BAND = (0.1, 0.9)


# --- the fit ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Constants:
    """The fitted constants of the progress model (one variant, the full model)."""

    initial_loss: float
    floor: float
    samples_half: float
    exponent: float
    local_step_exponent: float
    local_epoch_exponent: float

    def predictor(self) -> LossPredictor:
        """The noiseless progress model with these constants (what the fit evaluates)."""
        return LossPredictor.from_curves(
            [CurveParams(self.initial_loss, self.floor, self.samples_half, self.exponent)],
            [1.0], efficiency=1.0, prune_progress_loss=0.0, participant_exponent=0.0,
            local_step_exponent=self.local_step_exponent,
            local_epoch_exponent=self.local_epoch_exponent)


def round_gain(predictor: LossPredictor, setting: Setting) -> float:
    """Effective samples one round of ``setting`` adds (mean over the E a client may draw)."""
    return float(np.mean([predictor.gain(setting.samples, setting.clients, local)
                          for local in setting.locals()]))


def mean_curve(predictor: LossPredictor, setting: Setting, rounds: np.ndarray) -> np.ndarray:
    """The predicted mean loss after each of ``rounds`` (round numbers >= 0)."""
    n_eff = np.asarray(rounds, dtype=float) * round_gain(predictor, setting)
    return np.asarray(predictor.mean_of(0, n_eff), dtype=float)


def fit_rounds_grid(last: int, points: int = 80) -> np.ndarray:
    """Rounds 1..``last`` the fit uses: all of them up to ``points``, else log-spaced."""
    if last <= points:
        return np.arange(1, last + 1)
    return np.unique(np.round(np.geomspace(1, last, points)).astype(int))


def _targets(runs: pd.DataFrame, settings: Iterable[str], last: int) -> dict[str, tuple]:
    """Per setting: (rounds, seed-mean log loss) on the fit's rounds where a loss exists."""
    grid = fit_rounds_grid(last)
    out = {}
    for label in settings:
        grp = runs[(runs["setting"] == label) & runs["round"].isin(grid)].dropna(subset=["loss"])
        if grp.empty:
            continue
        y = np.log(grp["loss"]).groupby(grp["round"]).mean()
        out[label] = (y.index.to_numpy(int), y.to_numpy(float))
    return out


PARAMETERS = ("initial_loss", "floor", "samples_half", "exponent", "local_step_exponent",
              "local_epoch_exponent")


def fit_constants(data: Recorded, fit_settings: Sequence[str],
                  runs: pd.DataFrame | None = None) -> Constants:
    """Least squares on the log of the seed-mean loss of ``fit_settings`` (module docstring).
    ``runs``: the rows to fit (default: ``data``'s clean runs)."""
    from scipy.optimize import least_squares

    runs = clean_runs(data) if runs is None else runs
    targets = _targets(runs, fit_settings, data.fit_rounds)
    if not targets:
        raise ValueError("no setting with recorded losses left to fit")
    start = runs[runs["setting"].isin(list(targets)) & (runs["round"] == 0)]["loss"].dropna()
    fixed = dict(data.fixed)
    if len(start):
        fixed["initial_loss"] = float(np.exp(np.log(start).mean()))
    low_loss = min(float(np.exp(y.min())) for _, y in targets.values())
    per_round = max(s.samples for k, s in data.settings.items() if k in targets)
    # (start, low, high) of each unknown; positive ones are fitted on the log scale
    space = {
        "initial_loss": (math.log(10.0), 1.5, 4.0, True),
        "floor": (0.5 * low_loss, 1e-4, low_loss, True),
        "samples_half": (10 * per_round, 1.0, 1e12, True),
        "exponent": (1.0, 0.05, 5.0, True),
        "local_step_exponent": (0.3, 0.0, 2.0, False),
        "local_epoch_exponent": (0.0, -2.0, 2.0, False),
    }
    free = [p for p in PARAMETERS if p not in fixed]

    def scale(p: str, v: float) -> float:
        return math.log(v) if space[p][3] else v

    x0 = [scale(p, space[p][0]) for p in free]
    lower = [scale(p, space[p][1]) for p in free]
    upper = [scale(p, space[p][2]) for p in free]

    def unpack(x: np.ndarray) -> Constants:
        values = dict(fixed)
        for p, v in zip(free, x, strict=True):
            values[p] = math.exp(v) if space[p][3] else float(v)
        return Constants(**{p: values[p] for p in PARAMETERS})

    def residuals(x: np.ndarray) -> np.ndarray:
        predictor = unpack(x).predictor()
        return np.concatenate([
            np.log(mean_curve(predictor, data.settings[k], rounds)) - y
            for k, (rounds, y) in targets.items()])

    sol = least_squares(residuals, np.clip(x0, lower, upper), bounds=(lower, upper),
                        x_scale="jac")
    return unpack(sol.x)


def fit_accuracy_map(losses: np.ndarray, accuracies: np.ndarray, chance: float) -> AccuracyMap:
    """:class:`AccuracyMap` (chance fixed; top, loss_mid, exponent and the cutoff exponent
    fitted) to (loss, accuracy) pairs both ways: the accuracy at each recorded loss (residual /
    0.01) and the log loss at each recorded accuracy (residual / 0.1), robust least squares
    (soft L1). The map serves both ways (the accuracy of a predicted loss, the loss of a target
    accuracy); an accuracy-only fit lets a long plateau's pairs pull the loss of a high target
    far off (MNIST: 97 % at 0.35 nats instead of the recorded 0.09-0.10). The cutoff takes the
    map to chance at the loss of a uniform guess (MNIST's first rounds); where the pairs do not
    ask for it its exponent runs to its bound, and the cutoff then acts only there."""
    from scipy.optimize import least_squares

    loss = np.asarray(losses, dtype=float)
    acc = np.asarray(accuracies, dtype=float)
    ok = np.isfinite(loss) & np.isfinite(acc) & (loss > 0)
    loss, acc = loss[ok], acc[ok]
    if len(loss) < 4:
        raise ValueError("too few (loss, accuracy) pairs to fit an accuracy map")

    def amap(x: np.ndarray) -> AccuracyMap:
        top, mid, k, q = (float(v) for v in x)
        return AccuracyMap(chance=chance, top=top, loss_mid=mid, exponent=k, cutoff_exponent=q)

    def residuals(x: np.ndarray) -> np.ndarray:
        m = amap(x)
        vertical = m.accuracy(loss) - acc
        a = np.clip(acc, chance + 1e-4, m.top - 1e-5)
        horizontal = np.log(np.maximum(m.loss_for(a), 1e-12)) - np.log(loss)
        return np.concatenate([vertical / 0.01, horizontal / 0.1])

    x0 = [min(0.995, float(acc.max()) + 0.01), 1.0, 1.5, 20.0]
    sol = least_squares(residuals, x0, bounds=([chance + 1e-3, 1e-4, 0.1, 1.0],
                                               [1.0, 100.0, 100.0, 1000.0]), loss="soft_l1")
    return amap(sol.x)


@dataclass(frozen=True)
class Spread:
    """The run-to-run spread (netsim.training.loss): sigma per run and per epoch, the level
    exponent, and how it was measured."""

    noise_run_sigma: float
    noise_epoch_sigma: float
    noise_level_exponent: float
    how: str


def fit_spread(runs: pd.DataFrame, settings: Sequence[str], data: Recorded,
               predictor: LossPredictor | None = None, window: int = 10) -> Spread:
    """The spread of the log loss of the ``settings``' runs (rounds 1..fit_rounds) around the
    fitted mean curve (``predictor``), or around each setting's seed mean (None: settings with
    two or more seeds only), as netsim's noise model has it: a per-epoch part, from the
    round-to-round jitter of each run (half the mean squared difference, as
    netsim.training.calibrate measures it), and a per-run part ``noise_run_sigma x (mean /
    initial_loss) ** -noise_level_exponent``, by least squares on the log of the variance
    pooled per ``window`` rounds (variance = run part + epoch part).

    Around the curve is the spread a prediction meets (the seeds' scatter and the curve's
    misfit together): what the entry keeps. (The calibration's ``fit_spread`` subtracts the
    epoch variance from each round's across-seed sd instead, which with 2 to 6 seeds is often
    below it: its log then blows up.)"""
    from scipy.optimize import least_squares

    rows = runs[runs["setting"].isin(list(settings)) & (runs["round"] >= 1)
                & (runs["round"] <= data.fit_rounds)].dropna(subset=["loss"])
    rows = rows.sort_values(["setting", "seed", "round"])
    log_loss = np.log(rows["loss"].to_numpy(float))
    keys = [rows["setting"], rows["round"]]
    if predictor is None:
        seeds = rows.groupby("setting")["seed"].transform("nunique").to_numpy()
        rows, log_loss = rows[seeds > 1], log_loss[seeds > 1]
        keys = [rows["setting"], rows["round"]]
        center = pd.Series(log_loss, index=rows.index).groupby(keys).transform("mean").to_numpy()
        dof = 1.0 - 1.0 / pd.Series(log_loss, index=rows.index).groupby(keys).transform(
            "size").to_numpy()
    else:
        center = np.log(np.concatenate([
            mean_curve(predictor, data.settings[k], g["round"].to_numpy(int))
            for k, g in rows.groupby("setting", sort=False)]))
        dof = np.ones(len(rows))
    if rows.empty:
        raise ValueError("no runs to measure a spread on")
    z = log_loss - center
    run_id = (rows["setting"].astype(str) + "/" + rows["seed"].astype(str)).to_numpy()
    same = run_id[1:] == run_id[:-1]
    sigma_epoch = math.sqrt(0.5 * float(np.mean(np.diff(z)[same] ** 2)))
    cell = pd.DataFrame({"z2": z ** 2, "dof": dof, "level": center,
                         "window": ((rows["round"] - 1) // window).to_numpy()})
    pooled = cell.groupby("window").agg(z2=("z2", "sum"), dof=("dof", "sum"),
                                        level=("level", "mean"))
    var = (pooled["z2"] / pooled["dof"]).to_numpy(float)
    initial = predictor.initial_loss if predictor is not None else float(np.exp(center.max()))
    level = pooled["level"].to_numpy(float) - math.log(initial)

    def residuals(x: np.ndarray) -> np.ndarray:
        sigma, gamma = math.exp(x[0]), x[1]
        return np.log(sigma ** 2 * np.exp(-2.0 * gamma * level) + sigma_epoch ** 2) - np.log(var)

    sol = least_squares(residuals, [math.log(0.02), 0.5], bounds=([-12.0, 0.0], [1.0, 5.0]))
    r2 = 1.0 - float(np.sum(sol.fun ** 2) / np.sum((np.log(var) - np.log(var).mean()) ** 2))
    runs_n = len(set(run_id))
    return Spread(math.exp(float(sol.x[0])), sigma_epoch, float(sol.x[1]),
                  f"{runs_n} runs of {rows['setting'].nunique()} settings around "
                  f"{'the fitted curve' if predictor is not None else 'their seed mean'} "
                  f"(R² {r2:.2f} on the log of the variance pooled per {window} rounds)")


@dataclass(frozen=True)
class RecordedFit:
    """What :func:`fit_recorded` found: constants, accuracy map, spread, the settings used."""

    data: Recorded
    constants: Constants
    accuracy: AccuracyMap
    spread: Spread
    fit_settings: tuple[str, ...]
    held_out: tuple[str, ...]
    seconds: float = 0.0
    seed_spread: Spread | None = None
    """The seeds' own spread around their mean (reported; None with one run per setting)."""

    def loss_params(self, source: str) -> dict:
        """The loss_params.yaml entry (plain types); the constants these runs do not measure
        (pruning, staleness) as ``data.unmeasured`` declares them."""
        c, a, s = self.constants, self.accuracy, self.spread
        keep = self.data.unmeasured
        level = _r(s.noise_level_exponent) if s.noise_level_exponent >= 1e-4 else 0.0
        return {
            "initial_loss": _r(c.initial_loss), "floor_full": _r(c.floor),
            "floor_prune": keep["floor_prune"], "floor_exponent": keep["floor_exponent"],
            "samples_half": _r(c.samples_half), "exponent": _r(c.exponent),
            "prune_progress_loss": keep["prune_progress_loss"],
            "heterogeneity": 0.0,
            "noise_run_sigma": _r(s.noise_run_sigma),
            "noise_epoch_sigma": _r(s.noise_epoch_sigma),
            "noise_heterogeneity": 0.0,
            **({"noise_level_exponent": level} if level else {}),
            "staleness_exponent": keep["staleness_exponent"],
            "local_step_exponent": _r(c.local_step_exponent),
            "local_epoch_exponent": _r(c.local_epoch_exponent),
            "accuracy": {"chance": _r(a.chance), "top": _r(a.top), "loss_mid": _r(a.loss_mid),
                         "exponent": _r(a.exponent),
                         **({"cutoff_exponent": _r(a.cutoff_exponent)}
                            if a.cutoff_exponent is not None else {})},
            "source": source,
        }

    def entry(self) -> LossParams:
        """The fitted constants as the (rounded) :class:`LossParams` the simulator reads."""
        return LossParams.model_validate({k: v for k, v in self.loss_params("").items()})


def _r(x: float) -> float:
    return float(f"{x:.4g}")


def fit_recorded(data: Recorded, hold_out: Sequence[str] | None = None) -> RecordedFit:
    """Fit the progress model, its accuracy map and its spread to ``data``'s modelled settings
    except ``hold_out`` (default ``data.hold_out``) and their clean runs."""
    import time

    began = time.perf_counter()
    held = tuple(data.hold_out if hold_out is None else hold_out)
    unknown = [h for h in held if h not in data.settings]
    if unknown:
        raise ValueError(f"unknown setting(s) {', '.join(unknown)}; {data.name} has "
                         f"{', '.join(data.settings)}")
    runs = clean_runs(data)
    with_loss = set(runs.dropna(subset=["loss"])["setting"])
    fit = tuple(k for k in data.modelled if k not in held and k in with_loss)
    if not fit:
        raise ValueError("every setting with recorded losses is held back: nothing to fit")
    constants = fit_constants(data, fit, runs)
    pairs = runs[runs["setting"].isin(fit)]
    accuracy = fit_accuracy_map(pairs["loss"].to_numpy(), pairs["accuracy"].to_numpy(),
                                data.chance)
    spread = fit_spread(runs, fit, data, constants.predictor())
    seeds = None
    if runs[runs["setting"].isin(fit)].groupby("setting")["seed"].nunique().max() > 1:
        seeds = fit_spread(runs, fit, data)
    return RecordedFit(data, constants, accuracy, spread, fit, held,
                       time.perf_counter() - began, seeds)


# --- prediction -------------------------------------------------------------------------------

def entry_predictor(entry: LossParams, setting: Setting) -> LossPredictor:
    """The simulator's progress model with ``entry`` for one setting (its noise included)."""
    model = ModelSpec(name="recorded", params=1.0, train_flop_per_sample=1.0, loss=entry)
    training = TrainingSpec(target_loss=0.1, deadline_s=1.0,
                            local_epochs=setting.local_epochs[0],
                            batch_size=setting.batch_size)
    return LossPredictor(model, training)


@dataclass(frozen=True)
class Prediction:
    """Predicted mean loss and accuracy after rounds 1..len, with the accuracy band."""

    rounds: np.ndarray
    loss: np.ndarray
    loss_low: np.ndarray
    loss_high: np.ndarray
    accuracy: np.ndarray
    accuracy_low: np.ndarray
    accuracy_high: np.ndarray


def predict(entry: LossParams, setting: Setting, rounds: int) -> Prediction:
    """The entry's prediction for ``rounds`` rounds of ``setting`` (band: :data:`BAND`)."""
    if entry.accuracy is None:
        raise ValueError("the entry has no accuracy map")
    amap = entry.accuracy
    predictor = entry_predictor(entry, setting)
    r = np.arange(1, rounds + 1)
    n_eff = r * round_gain(predictor, setting)
    mean = np.asarray(predictor.mean_of(0, n_eff), dtype=float)
    q_low, q_high = (np.asarray(predictor.quantile_of(0, n_eff, float(ndtri(q))), dtype=float)
                     for q in BAND)

    def acc(losses: np.ndarray) -> np.ndarray:
        return np.asarray(amap.accuracy(losses), dtype=float)

    # a higher loss is a lower accuracy: the loss's upper quantile is the accuracy's lower one
    return Prediction(r, mean, q_low, q_high, acc(mean), acc(q_high), acc(q_low))
