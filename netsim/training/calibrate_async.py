"""Calibrating the staleness exponent: real asynchronous runs (FedBuff on the digits MLP) and
the fit of ``staleness_exponent`` (docs/async.md).

A run (:func:`run_async_point`) trains ``mlp-digits`` with the real backend's asynchronous
aggregation (:meth:`netsim.training.real.RealBackend.advance_updates`: a client's update is
trained from the model version it downloaded and applied when it arrives) on a FedBuff
timeline: ``concurrency`` of the ``n_nodes`` devices train at once, the server aggregates
every ``buffer_updates`` arrivals and then tops the jobs up to ``concurrency`` with idle
devices drawn at random (as netsim's ``fedbuff`` policy does at each epoch). A job's duration
is its device's mean duration (log-normal over devices, ``spread_sigma``) times a log-normal
jitter per job (sigma 0.2): slow devices deliver stale updates. Aggregation takes no time
here, so an update's staleness is the aggregations between its job's start and its arrival.

Seed s gives the same test split, shards and initial weights in every configuration (the
backend's generator is ``default_rng(s)``; the timeline draws from ``default_rng([s, 1])``),
so configurations differ by their concurrency, buffer and data skew.

The fit (:func:`fit_staleness`) keeps every other constant of the model's loss parameters
(fitted to the synchronous curves) and finds the exponent ``a`` for which the one progress
model, :class:`netsim.training.loss.LossPredictor`, stepped with each aggregation's updates
(samples times ``(1 + staleness) ** -a``, the updates counting as participants) best matches
the log loss of the fit seeds; R² on held-out seeds says how well it predicts.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from netsim.dynamics.buffered import Update
from netsim.scenario.schema import LossParams, ModelSpec, TrainingSpec
from netsim.training.calibrate import FIT_SEEDS, MODEL_NAME, even_backend, run_tasks
from netsim.training.loss import LossPredictor
from netsim.training.real import RealTrainingConfig

#: Updates every run delivers in total (aggregations = this / buffer_updates).
UPDATES_PER_RUN = 240


@dataclass(frozen=True)
class AsyncPoint:
    """One asynchronous calibration configuration: FedBuff with ``concurrency`` jobs and a
    buffer of ``buffer_updates`` over ``n_nodes`` devices with equal shards (IID, or Dirichlet
    label skew ``dirichlet_alpha``); devices' mean job durations spread log-normally with
    ``spread_sigma``."""

    config: str
    concurrency: int
    buffer_updates: int
    dirichlet_alpha: float | None = None
    n_nodes: int = 40
    spread_sigma: float = 0.8


def async_grid() -> list[AsyncPoint]:
    """The default grid: IID and Dirichlet (alpha 0.3) shards, each with concurrency 10 and
    buffers of 10 (synchronous FedAvg of 10 clients: the control), 5, 2 and 1 (FedAsync), and
    concurrency 20 with buffers of 5 and 2 (12 configurations)."""
    points = []
    for alpha in (None, 0.3):
        tag = "" if alpha is None else f"-alpha{alpha:g}"
        for c, k in ((10, 10), (10, 5), (10, 2), (10, 1), (20, 5), (20, 2)):
            points.append(AsyncPoint(f"c{c}-k{k}{tag}", c, k, alpha))
    return points


def quick_async_grid() -> list[AsyncPoint]:
    """A tiny grid for smoke tests: the control and two buffers."""
    return [AsyncPoint("c10-k10", 10, 10), AsyncPoint("c10-k2", 10, 2),
            AsyncPoint("c10-k1", 10, 1)]


def run_async_point(point: AsyncPoint, seed: int, updates_total: int = UPDATES_PER_RUN,
                    config: RealTrainingConfig | None = None) -> list[dict]:
    """One asynchronous run (module docstring); one row per aggregation (0 = initial).

    Row fields: the point's fields, ``seed``, ``epoch`` (aggregation index), ``time``
    (arbitrary units), ``loss`` (nats), ``accuracy``, ``updates``, ``samples``,
    ``staleness_mean``, ``staleness_max``, and per update ``update_samples`` and
    ``update_staleness`` (lists, in arrival order).
    """
    config = config or RealTrainingConfig()
    backend, ids, declared = even_backend(point.n_nodes, point.dirichlet_alpha, config, seed)
    n = point.n_nodes
    timing = np.random.default_rng([seed, 1])
    mean_s = timing.lognormal(0.0, point.spread_sigma, n)
    base = asdict(point)
    rows = [dict(base, seed=seed, epoch=0, time=0.0, loss=backend.initial_loss(),
                 accuracy=math.nan, updates=0, samples=0, staleness_mean=math.nan,
                 staleness_max=0, update_samples=[], update_staleness=[])]
    heap: list[tuple[float, int, int, int]] = []
    busy = np.zeros(n, dtype=bool)
    now, version, seq, arrived = 0.0, 0, 0, 0
    buffer: list[tuple[int, int]] = []

    def top_up() -> None:
        nonlocal seq
        idle = np.flatnonzero(~busy)
        want = min(point.concurrency - int(busy.sum()), len(idle))
        for d in np.sort(timing.choice(idle, size=want, replace=False)).tolist():
            busy[d] = True
            seq += 1
            heapq.heappush(heap, (now + mean_s[d] * timing.lognormal(0.0, 0.2), seq, d, version))

    top_up()
    while arrived < updates_total:
        now, _, d, started = heapq.heappop(heap)
        busy[d] = False
        buffer.append((d, version - started))
        arrived += 1
        if len(buffer) < point.buffer_updates:
            continue
        step = backend.advance_updates(
            [Update(ids[i], declared[i], s) for i, s in buffer], 0)
        version += 1
        stale = [s for _, s in buffer]
        rows.append(dict(base, seed=seed, epoch=version, time=now, loss=step.loss,
                         accuracy=step.accuracy, updates=len(buffer),
                         samples=int(sum(declared[i] for i, _ in buffer)),
                         staleness_mean=float(np.mean(stale)), staleness_max=int(max(stale)),
                         update_samples=[declared[i] for i, _ in buffer],
                         update_staleness=stale))
        buffer = []
        top_up()
    return rows


def _run_task(task: tuple[AsyncPoint, int, int]) -> list[dict]:
    return run_async_point(*task)


def run_async_grid(points: Sequence[AsyncPoint], seeds: Iterable[int],
                   updates_total: int = UPDATES_PER_RUN, *, jobs: int = 1,
                   progress: bool = True) -> pd.DataFrame:
    """Every (point, seed) run; the long table, one row per aggregation. Results do not depend
    on ``jobs``."""
    tasks = [(p, s, updates_total) for p in points for s in seeds]
    table = pd.DataFrame(run_tasks(_run_task, tasks, jobs, "asynchronous runs", progress))
    table["dirichlet_alpha"] = table["dirichlet_alpha"].astype(float)
    return table.sort_values(["config", "seed", "epoch"], kind="stable").reset_index(drop=True)


# --- the fit ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StalenessFit:
    """The fitted ``staleness_exponent`` and its goodness of fit: ``report`` per configuration
    (R² of the seed-mean log loss, fit and held-out seeds, with the fitted exponent and with
    none; mean and largest staleness), ``r2_held_out`` the mean over configurations."""

    exponent: float
    report: pd.DataFrame
    r2_held_out: float
    r2_held_out_without: float


def _predictor(loss: LossParams, alpha: float | None, exponent: float) -> LossPredictor:
    """The progress model of ``loss`` with ``exponent`` on data of Dirichlet ``alpha`` (the
    model's size and FLOP play no part in it: any valid figures do)."""
    model = ModelSpec(name=MODEL_NAME, params=4810, train_flop_per_sample=1.0,
                      loss=loss.model_copy(update={"staleness_exponent": exponent}))
    return LossPredictor(model, TrainingSpec(target_loss=0.1, deadline_s=1.0,
                                             dirichlet_alpha=alpha))


def predicted_log_loss(table: pd.DataFrame, loss: LossParams, exponent: float) -> np.ndarray:
    """The progress model's log mean loss for every row of an asynchronous curves table with
    ``epoch`` >= 1 (in the table's order), each run stepped aggregation by aggregation."""
    out = np.empty(int((table["epoch"] >= 1).sum()))
    k = 0
    for (_, alpha), runs in table[table["epoch"] >= 1].groupby(
            ["config", "dirichlet_alpha"], dropna=False, sort=False):
        pred = _predictor(loss, None if math.isnan(alpha) else float(alpha), exponent)
        for _, run in runs.groupby("seed", sort=False):
            gains = np.array([pred.updates_gain(n, s) for n, s in zip(
                run["update_samples"], run["update_staleness"], strict=True)])
            out[k:k + len(run)] = np.log(pred.mean_of(0, np.cumsum(gains)))
            k += len(run)
    return out


def fit_staleness(table: pd.DataFrame, loss: LossParams,
                  fit_seeds: int = FIT_SEEDS) -> StalenessFit:
    """Fit ``staleness_exponent`` (0..10, scipy's bounded scalar minimiser) to the log loss of
    the runs with seed < ``fit_seeds``, every other constant kept (module docstring)."""
    trained = table[table["epoch"] >= 1].sort_values(["config", "seed", "epoch"], kind="stable")
    trained = trained.reset_index(drop=True)
    fit = trained[trained["seed"] < fit_seeds]
    exponent = _best_exponent(fit, loss)
    report = staleness_report(trained, loss, exponent, fit_seeds)
    held = report["r2_held_out"].to_numpy(dtype=float)
    without = report["r2_held_out_a0"].to_numpy(dtype=float)
    return StalenessFit(exponent, report,
                        float(np.nanmean(held)) if np.isfinite(held).any() else math.nan,
                        float(np.nanmean(without)) if np.isfinite(without).any() else math.nan)


def _best_exponent(rows: pd.DataFrame, loss: LossParams) -> float:
    """The exponent minimising the squared log residuals of ``rows``, every configuration
    weighing the same (a configuration with K = 1 has K times the rows of one with K = 1 x K)."""
    from scipy.optimize import minimize_scalar

    y = np.log(rows["loss"].to_numpy())
    weight = 1.0 / rows.groupby("config")["loss"].transform("size").to_numpy()

    def sse(a: float) -> float:
        return float(np.sum(weight * (predicted_log_loss(rows, loss, a) - y) ** 2))

    return float(minimize_scalar(sse, bounds=(0.0, 10.0), method="bounded",
                                 options={"xatol": 1e-4}).x)


def staleness_report(trained: pd.DataFrame, loss: LossParams, exponent: float,
                     fit_seeds: int) -> pd.DataFrame:
    """Per configuration: R² of the seed-mean log loss per aggregation against the seed-mean
    predicted log loss, on fit and held-out seeds, with ``exponent`` and with 0 (no staleness
    penalty); the mean and largest staleness; and the exponent that configuration's fit seeds
    alone would give (``exponent_alone``: how far one exponent is from each)."""
    trained = trained.reset_index(drop=True)
    with_a = trained.assign(pred=predicted_log_loss(trained, loss, exponent),
                            pred0=predicted_log_loss(trained, loss, 0.0),
                            meas=np.log(trained["loss"].to_numpy()))
    rows = []
    for config, grp in with_a.groupby("config", sort=True):
        row: dict = {"config": config, "staleness_mean": float(
            np.mean([s for run in grp["update_staleness"] for s in run])),
            "staleness_max": int(grp["staleness_max"].max()),
            "exponent_alone": _best_exponent(trained.loc[grp.index][grp["seed"] < fit_seeds],
                                             loss) if (grp["staleness_max"] > 0).any()
            else math.nan}
        for part, sel in (("fit", grp["seed"] < fit_seeds), ("held_out", grp["seed"] >= fit_seeds)):
            for col, suffix in (("pred", ""), ("pred0", "_a0")):
                if not sel.any():
                    row[f"r2_{part}{suffix}"] = math.nan
                    continue
                mean = grp[sel].groupby("epoch")[["meas", col]].mean()
                m, p = mean["meas"].to_numpy(), mean[col].to_numpy()
                row[f"r2_{part}{suffix}"] = 1.0 - float(np.sum((m - p) ** 2)
                                                        / np.sum((m - m.mean()) ** 2))
        rows.append(row)
    cols = ["config", "staleness_mean", "staleness_max", "exponent_alone", "r2_fit",
            "r2_held_out", "r2_fit_a0", "r2_held_out_a0"]
    return pd.DataFrame(rows)[cols]
