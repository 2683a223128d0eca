"""The progress model fitted to recorded federated runs (netsim/data/curves/, docs/curves.md).

Two tables of real runs ship with netsim (copied from Flower's published baselines; source,
licence and changes in netsim/data/curves/SOURCE.md):

* ``mnist``: McMahan et al.'s MNIST CNN (``cnn-mnist``), FedAvg over 100 clients of 600
  examples each (two-shard label skew), every client every round, local batch B in {10, 50,
  inf} and local epochs E in {1, 5, 20}; one run per setting, 1,000 rounds.
* ``cifar``: VGG-11 on CIFAR-10 (``vgg11-cifar10``), 16 clients, Dirichlet(0.1) label skew,
  batch 32, E = 2 for every client or drawn uniformly in 2..5 per client and round, FedAvg or
  FedNova aggregation, vanilla / momentum / proximal local SGD; 3 to 6 seeds, 100 rounds.

How the progress model sees a recorded round (netsim.training.loss): one round is one epoch in
which every client trains its n samples, so the epoch adds ``gain = clients x n x
efficiency x clients ** -participant_exponent x steps ** local_step_exponent x E **
local_epoch_exponent`` effective samples (``steps = E x ceil(n / B)``). A setting whose clients
draw E per round (``variable_local_epochs``) adds the mean of that gain over the E values
(FedAvg averages the clients' updates; netsim's modelling choice). The rounds of a setting are
identical, so the state after k rounds is k gains, exactly what ``LossPredictor.replay`` of the
setting's schedule gives (a test checks it); the fit evaluates that vectorised.

Only one skew level is recorded per model, so its efficiency cannot be separated from
``samples_half``: the fit keeps ``heterogeneity`` and ``noise_heterogeneity`` at 0 (the skew is
in the curve itself) and every client participates, so ``participant_exponent`` stays 0.

The fit (:func:`fit_recorded`): scipy least squares on the log of the seed-mean test loss of
the settings fitted (rounds 1..``fit_rounds``; log-spaced rounds where there are many, so the
early rounds that decide when a target is reached weigh as much as the plateau), through
:meth:`LossPredictor.from_curves` and its gain and mean; unknowns: floor, samples_half,
exponent, local_step_exponent, local_epoch_exponent (and the initial loss when round 0 was not
recorded). Then the loss-to-accuracy map (:class:`AccuracyMap`, chance fixed at 1 / classes)
by robust least squares both ways on the fitted settings' (loss, accuracy) pairs
(:func:`fit_accuracy_map`), and the run-to-run spread of the fitted settings' runs around the
fitted curve (:func:`fit_spread`; with one run per setting, as for MNIST, that is the curve's
misfit: an upper bound). A run whose loss became NaN (diverged) is left out of every fit and
reported; a transient blow-up (the loss above 10 x its best so far) is reported and kept.

The prediction (:func:`predict`) uses the entry as written (rounded), through the class the
simulator builds, :class:`LossPredictor` of a :class:`ModelSpec` with those loss parameters.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from scipy.special import ndtri

from netsim.scenario.schema import AccuracyMap, LossParams, ModelSpec, TrainingSpec
from netsim.training.loss import CurveParams, LossPredictor, LossState
from netsim.workload import LocalTraining

#: Where the recorded curves live in the package.
CURVES_DIR = os.path.join(os.path.dirname(__file__), "..", "data", "curves")
#: A run blew up where its loss exceeds this many times its best loss so far.
BLOW_UP = 10.0
#: The band the prediction reports (quantiles of the loss, hence of the accuracy).
BAND = (0.1, 0.9)


@dataclass(frozen=True)
class Setting:
    """One recorded setting: how every round trains, as the progress model sees it.

    ``local_epochs`` holds one E, or several when each client draws one uniformly per round;
    ``group`` names what netsim does not model (aggregation and local optimizer), and
    ``modelled`` says whether the progress model covers it (plain local SGD under FedAvg)."""

    label: str
    clients: int
    samples_per_client: float
    batch_size: int | None
    local_epochs: tuple[int, ...]
    group: str = "fedavg"
    modelled: bool = True

    @property
    def samples(self) -> float:
        """Samples trained in a round (every client, all its samples)."""
        return self.clients * self.samples_per_client

    def locals(self) -> list[LocalTraining]:
        """The local training of each E a client may draw."""
        return [LocalTraining(e, self.batch_size) for e in self.local_epochs]

    def schedule(self, rounds: int) -> list[tuple[int, float, int]]:
        """``rounds`` rounds as :meth:`LossPredictor.replay` takes them (full model)."""
        return [(0, self.samples, self.clients)] * rounds

    def describe(self) -> str:
        """B and E in words."""
        b = "inf" if self.batch_size is None else str(self.batch_size)
        e = (str(self.local_epochs[0]) if len(self.local_epochs) == 1
             else f"{self.local_epochs[0]}..{self.local_epochs[-1]}")
        return f"B={b} E={e}"


@dataclass(frozen=True)
class Recorded:
    """A table of recorded runs and what the fit needs to know about it.

    ``table``: one row per (setting, seed, round) with ``loss`` (test cross-entropy, NaN
    where not kept or diverged) and ``accuracy``. ``target``: ``rounds`` (rounds to
    ``target_accuracy``) or ``accuracy`` (accuracy at ``target_rounds``)."""

    name: str
    model: str
    file: str
    table: pd.DataFrame
    settings: dict[str, Setting]
    hold_out: tuple[str, ...]
    chance: float
    fit_rounds: int
    target: Literal["rounds", "accuracy"]
    target_accuracy: float = 0.97
    target_rounds: tuple[int, ...] = (25, 50, 100)
    fixed: dict[str, float] = field(default_factory=dict)
    """Constants the data cannot identify, held at these values (and said why in ``notes``)."""
    unmeasured: dict[str, float] = field(default_factory=dict)
    """Constants no recorded run measures (pruning, staleness): the entry's values (said so in
    its ``source``)."""
    unmeasured_from: str = ""
    notes: tuple[str, ...] = ()

    @property
    def modelled(self) -> list[str]:
        """Settings the progress model covers (those a fit may use)."""
        return [k for k, s in self.settings.items() if s.modelled]

    @property
    def path(self) -> str:
        return os.path.join(CURVES_DIR, self.file)


# --- the two tables --------------------------------------------------------------------------

#: Pruning and staleness constants no recorded run measures (loss_params.yaml's small-cnn and
#: resnet18 pruning values, mlp-digits' fitted staleness exponent).
UNMEASURED_CNN = {"floor_prune": 0.5, "floor_exponent": 2.0, "prune_progress_loss": 1.0,
                  "staleness_exponent": 0.3354}
UNMEASURED_VGG = {"floor_prune": 0.8, "floor_exponent": 2.0, "prune_progress_loss": 1.0,
                  "staleness_exponent": 0.3354}
MNIST_FILE = "fedavg_mnist_cnn.csv"
CIFAR_FILE = "fednova_vgg11_cifar10.csv"


def mnist_label(batch_size: int | None, epochs: int) -> str:
    """``B10-E1``, ``Binf-E20``: a MNIST setting's label."""
    return f"B{'inf' if batch_size is None else batch_size}-E{epochs}"


def load_mnist(path: str | None = None) -> Recorded:
    """The MNIST CNN runs (FedAvg, 100 clients x 600 examples, all every round)."""
    path = path or os.path.join(CURVES_DIR, MNIST_FILE)
    raw = pd.read_csv(path)
    rows, settings = [], {}
    for (b, e), grp in raw.groupby(["batch_size", "local_epochs"], sort=True):
        batch = None if math.isinf(float(b)) else int(b)
        label = mnist_label(batch, int(e))
        settings[label] = Setting(label, 100, 600.0, batch, (int(e),))
        rows.append(pd.DataFrame({"setting": label, "seed": 0, "round": grp["round"].to_numpy(),
                                  "loss": grp["test_cross_entropy"].to_numpy(float),
                                  "accuracy": grp["accuracy"].to_numpy(float)}))
    order = sorted(settings, key=lambda k: (settings[k].batch_size or 10**9,
                                            settings[k].local_epochs))
    return Recorded(
        name="mnist", model="cnn-mnist", file=os.path.basename(path),
        table=pd.concat(rows, ignore_index=True), settings={k: settings[k] for k in order},
        hold_out=("B50-E1", "B10-E5"), chance=0.1, fit_rounds=300, target="rounds",
        unmeasured=UNMEASURED_CNN, unmeasured_from="small-cnn's illustrative values",
        notes=("B10-E5 kept accuracy only (no loss): it can only be predicted, never fitted",))


def cifar_label(strategy: str, optimizer: str, variable: bool, mu_file: float | None) -> str:
    """``fedavg-vanilla-fixed``, ``fedavg-proximal-var-mu0.001``: a CIFAR setting's label."""
    mu = "" if mu_file is None or (isinstance(mu_file, float) and math.isnan(mu_file)) \
        else f"-mu{mu_file:g}"
    return f"{strategy}-{optimizer}-{'var' if variable else 'fixed'}{mu}"


def load_cifar(path: str | None = None) -> Recorded:
    """The VGG-11 runs (16 clients of ~3,125 CIFAR-10 images, Dirichlet(0.1), batch 32)."""
    path = path or os.path.join(CURVES_DIR, CIFAR_FILE)
    raw = pd.read_csv(path)
    raw["variable_local_epochs"] = raw["variable_local_epochs"].astype(str).str.lower() == "true"
    keys = ["strategy", "local_optimizer", "variable_local_epochs", "proximal_mu_file"]
    rows, settings = [], {}
    for (strategy, optimizer, variable, mu), grp in raw.groupby(keys, sort=True, dropna=False):
        label = cifar_label(strategy, optimizer, bool(variable), mu)
        modelled = strategy == "fedavg" and optimizer in ("vanilla", "proximal")
        settings[label] = Setting(label, 16, 50_000 / 16, 32,
                                  (2, 3, 4, 5) if variable else (2,),
                                  group=f"{strategy}/{optimizer}", modelled=modelled)
        rows.append(pd.DataFrame({"setting": label, "seed": grp["seed"].to_numpy(int),
                                  "round": grp["round"].to_numpy(int),
                                  "loss": grp["test_cross_entropy"].to_numpy(float),
                                  "accuracy": grp["accuracy"].to_numpy(float)}))
    order = sorted(settings, key=lambda k: (not settings[k].modelled, k))
    return Recorded(
        name="cifar", model="vgg11-cifar10", file=os.path.basename(path),
        table=pd.concat(rows, ignore_index=True), settings={k: settings[k] for k in order},
        hold_out=("fedavg-vanilla-fixed",), chance=0.1, fit_rounds=100, target="accuracy",
        fixed={"local_epoch_exponent": 0.0},
        unmeasured=UNMEASURED_VGG, unmeasured_from="resnet18's illustrative values",
        notes=("B and n are the same in every run, so steps = E x 98 and only the sum of the two "
               "local exponents is identified: local_epoch_exponent is held at 0 and "
               "local_step_exponent carries E's effect",
               "momentum SGD and FedNova's aggregation are outside the progress model (it has "
               "no optimizer or aggregation rule): shown for comparison, never fitted",
               "proximal runs (FedProx term: mu 0.005 by the baseline's proximal config, 0.001 "
               "where the file names it) are plain SGD plus a small pull to the global model: "
               "fitted as plain SGD"))


LOADERS = {"mnist": load_mnist, "cifar": load_cifar}


def load(name: str) -> Recorded:
    """The recorded table ``mnist`` or ``cifar``."""
    if name not in LOADERS:
        raise ValueError(f"unknown recorded table {name!r}: one of {', '.join(LOADERS)}")
    return LOADERS[name]()


# --- runs that diverged or blew up ------------------------------------------------------------

@dataclass(frozen=True)
class Incident:
    """A run the fit leaves out: ``kind`` ``diverged`` (NaN loss from ``round`` on, accuracy
    ``accuracy_after`` at the end) or ``blew up`` (loss ``loss`` > 10 x its best so far at
    ``round``)."""

    setting: str
    seed: int
    kind: str
    round: int
    loss: float
    accuracy_after: float


def incidents(data: Recorded) -> list[Incident]:
    """Every diverged or blown-up run of ``data`` (settings where the loss was kept)."""
    out = []
    for (setting, seed), grp in data.table.groupby(["setting", "seed"], sort=False):
        grp = grp.sort_values("round")
        loss = grp["loss"].to_numpy(float)
        if np.isnan(loss).all():
            continue  # no loss kept (B10-E5): nothing to judge by
        rounds, acc = grp["round"].to_numpy(int), grp["accuracy"].to_numpy(float)
        bad = np.flatnonzero(np.isnan(loss))
        if len(bad):
            out.append(Incident(setting, int(seed), "diverged", int(rounds[bad[0]]),
                                math.nan, float(acc[-1])))
            continue
        best = np.minimum.accumulate(loss)
        jump = np.flatnonzero(loss[1:] > BLOW_UP * best[:-1])
        if len(jump):
            k = jump[0] + 1
            out.append(Incident(setting, int(seed), "blew up", int(rounds[k]), float(loss[k]),
                                float(acc[k])))
    return out


def clean_runs(data: Recorded) -> pd.DataFrame:
    """``data.table`` without the runs that diverged (a run that blew up and recovered
    stays: it is a run of the setting, however rough)."""
    bad = {(i.setting, i.seed) for i in incidents(data) if i.kind == "diverged"}
    keep = [(s, d) not in bad for s, d in zip(data.table["setting"], data.table["seed"],
                                               strict=True)]
    return data.table[keep]


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


# --- prediction and the report ----------------------------------------------------------------

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


def first_round(accuracy: np.ndarray, rounds: np.ndarray, level: float) -> int | None:
    """The first round whose accuracy is at or above ``level`` (None: never)."""
    hit = np.flatnonzero(np.asarray(accuracy) >= level)
    return int(rounds[hit[0]]) if len(hit) else None


def _role(fit: RecordedFit, label: str, bad: dict[str, list[Incident]]) -> str:
    if label in fit.fit_settings:
        return "fit"
    if label in fit.held_out:
        return "held back"
    if not fit.data.settings[label].modelled:
        return "not modelled"
    return "not fitted" + (" (diverged)" if label in bad else "")


def report(fit: RecordedFit, entry: LossParams | None = None) -> pd.DataFrame:
    """Predicted against real per setting (rounds to the target accuracy, or the accuracy at
    the target rounds with the band and its coverage of the seeds); ``entry``: the constants
    to judge (default: the fit's, rounded as written)."""
    data = fit.data
    entry = entry or fit.entry()
    bad: dict[str, list[Incident]] = {}
    for i in incidents(data):
        bad.setdefault(i.setting, []).append(i)
    runs = clean_runs(data)
    rows = []
    for label, setting in data.settings.items():
        role = _role(fit, label, bad)
        runs_of = runs[runs["setting"] == label]
        if data.target == "rounds":
            # a diverged single run still reached the target before it diverged: judge that
            grp = data.table[data.table["setting"] == label]
            real = first_round(grp["accuracy"].to_numpy(), grp["round"].to_numpy(),
                               data.target_accuracy)
            last = int(data.table["round"].max())
            pred = predict(entry, setting, last)
            got = first_round(pred.accuracy, pred.rounds, data.target_accuracy)
            err = (got - real) / real if got is not None and real else math.nan
            rows.append({"setting": label, "B,E": setting.describe(), "role": role,
                         "real": real, "predicted": got, "rel_error": err,
                         "within": _yes(abs(err) <= 0.35) if role == "held back" else "-",
                         "note": _note(bad.get(label))})
            continue
        pred = predict(entry, setting, max(data.target_rounds))
        for r in data.target_rounds:
            at = runs_of[runs_of["round"] == r]
            acc, loss = at["accuracy"].to_numpy(float), at["loss"].to_numpy(float)
            if not len(acc):
                continue
            loss_in = (loss >= pred.loss_low[r - 1]) & (loss <= pred.loss_high[r - 1])
            p, lo, hi = (float(a[r - 1]) for a in (pred.accuracy, pred.accuracy_low,
                                                   pred.accuracy_high))
            inside = float(acc.min()) - 0.03 <= p <= float(acc.max()) + 0.03
            covered = int(np.sum((acc >= lo) & (acc <= hi)))
            rows.append({"setting": label, "E": setting.describe().split()[1], "role": role,
                         "round": r, "seeds": len(acc), "real_min": float(acc.min()),
                         "real_mean": float(acc.mean()), "real_max": float(acc.max()),
                         "predicted": p, "band_lo": lo, "band_hi": hi,
                         "within": _yes(inside) if role == "held back" else "-",
                         "covered": f"{covered}/{len(acc)}",
                         "loss_covered": f"{int(np.sum(loss_in))}/{len(loss)}",
                         "note": _note(bad.get(label))})
    return pd.DataFrame(rows)


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def _note(found: list[Incident] | None) -> str:
    if not found:
        return ""
    return "; ".join(f"seed {i.seed} {i.kind} at {i.round}" if i.seed or len(found) > 1
                     else f"{i.kind} at round {i.round}" for i in found)


@dataclass(frozen=True)
class MapError:
    """The accuracy map's error on recorded (loss, accuracy) pairs."""

    pairs: int
    rms: float
    mean_abs: float
    max_abs: float
    within: float  # fraction of pairs within 0.02


def map_error(amap: AccuracyMap, runs: pd.DataFrame) -> MapError:
    """:class:`MapError` of ``amap`` on every pair of ``runs`` with a loss and an accuracy."""
    rows = runs.dropna(subset=["loss", "accuracy"])
    got = np.asarray(amap.accuracy(rows["loss"].to_numpy(float)), dtype=float)
    err = np.abs(got - rows["accuracy"].to_numpy(float))
    return MapError(len(err), float(np.sqrt(np.mean(err ** 2))), float(err.mean()),
                    float(err.max()), float(np.mean(err <= 0.02)))


def coverage(table: pd.DataFrame, roles: Iterable[str], column: str = "covered"
             ) -> tuple[int, int]:
    """(covered, seeds) of a CIFAR report's rows with these roles (``column``: ``covered``,
    the accuracies in the accuracy band, or ``loss_covered``, the losses in the loss band)."""
    rows = table[table["role"].isin(list(roles))]
    pairs = [tuple(int(v) for v in c.split("/")) for c in rows[column]]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def check_replay(constants: Constants, setting: Setting, rounds: int) -> float:
    """Largest relative difference between :func:`mean_curve` and ``LossPredictor.replay``
    of the setting's schedule (fixed E; a test's check that the fit runs the model)."""
    predictor = constants.predictor()
    predictor.local = setting.locals()[0]
    states = predictor.replay(LossState(), setting.schedule(rounds))
    slow = np.array([predictor.mean(s) for s in states])
    fast = mean_curve(predictor, setting, np.arange(1, rounds + 1))
    return float(np.max(np.abs(fast / slow - 1.0)))
