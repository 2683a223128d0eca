"""Calibrating the progress model's edge-round term (docs/hierarchical.md): real hierarchical
runs of the digits MLP over kappa_2 and data skew, and the fit of ``edge_round_efficiency``
and ``edge_heterogeneity``.

A run (:func:`run_tier_point`) trains ``mlp-digits`` with the real backend's synchronous
tiers (:meth:`netsim.training.real.RealBackend.advance_tiers`: each edge averages its devices'
models after every edge round, the cloud averages the edges' models): ``n_nodes`` devices with
equal shards (IID or Dirichlet label skew ``dirichlet_alpha``), every device in every round,
grouped into ``n_edges`` edges **by their shards' majority label** (netsim's choice: devices
with alike data share an edge, as neighbours do, so edges are non-IID where devices are),
``edge_rounds`` edge rounds per cloud round, ``EDGE_ROUND_BUDGET / edge_rounds`` cloud rounds
(every configuration trains as many edge rounds). One row per cloud round.

The fit (:func:`fit_tiers`) keeps every other constant of the model's loss parameters and
finds the two constants of rho = ``edge_round_efficiency / (1 + edge_heterogeneity /
dirichlet_alpha)`` for which the one progress model
(:meth:`netsim.training.loss.LossPredictor.tiers_gain`) best matches the seed-mean log loss of
the fit configurations. The model's base curve was fitted to other runs (other device counts
and participation) and is off in this setting by itself; so that the edge term is measured
on its own, each skew level gets a sample scale (a nuisance constant, not stored), which its
kappa_2 = 1 configuration pins (rho plays no part there: one edge round per cloud round is
federated averaging). The held-back configurations say how well it predicts settings it did
not see: R² of their seed-mean log loss and the cloud rounds to a target loss, predicted
against real (with their skew's scale; and with none, the model as shipped).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from netsim.epochs.outcome import EdgeUpdate, RoundUpdates
from netsim.scenario.schema import LossParams, ModelSpec, TrainingSpec
from netsim.training.calibrate import MODEL_NAME, even_backend, run_tasks
from netsim.training.loss import LossPredictor
from netsim.training.real import RealTrainingConfig

EDGE_ROUND_BUDGET = 48
"""Edge rounds every run trains (cloud rounds = this / kappa_2)."""
TARGET_LOSS = 0.6
"""The loss whose cloud rounds the held-back check compares (nats; every configuration's
seed-mean curve reaches it within the budget)."""


@dataclass(frozen=True)
class TierPoint:
    """One configuration: ``edge_rounds`` (kappa_2), Dirichlet skew (None: IID), devices and
    edges; ``held_back``: left out of the fit (predicted, then compared)."""

    config: str
    edge_rounds: int
    dirichlet_alpha: float | None = None
    n_nodes: int = 40
    n_edges: int = 4
    held_back: bool = False


def tier_grid() -> list[TierPoint]:
    """kappa_2 in 1, 2, 4, 8 x skew in IID, Dirichlet 1.0, 0.3, 0.1 (16 configurations); four
    held back in a checkerboard: (2, IID), (4, 1.0), (2, 0.3), (4, 0.1)."""
    held = {(2, None), (4, 1.0), (2, 0.3), (4, 0.1)}
    points = []
    for alpha in (None, 1.0, 0.3, 0.1):
        for k in (1, 2, 4, 8):
            tag = "iid" if alpha is None else f"alpha{alpha:g}"
            points.append(TierPoint(f"k{k}-{tag}", k, alpha, held_back=(k, alpha) in held))
    return points


def quick_tier_grid() -> list[TierPoint]:
    """A tiny grid for smoke tests."""
    return [TierPoint("k1-alpha0.3", 1, 0.3), TierPoint("k4-alpha0.3", 4, 0.3),
            TierPoint("k2-alpha0.3", 2, 0.3, held_back=True)]


def edge_groups(shards: Sequence[np.ndarray], labels: np.ndarray, n_edges: int
                ) -> list[list[int]]:
    """Devices grouped into ``n_edges`` edges of (nearly) equal size by their shards'
    majority label (then shard order): the module docstring's grouping."""
    major = [int(np.bincount(labels[s], minlength=10).argmax()) if len(s) else 0
             for s in shards]
    order = sorted(range(len(shards)), key=lambda i: (major[i], i))
    return [sorted(g) for g in np.array_split(np.array(order), n_edges)]


def run_tier_point(point: TierPoint, seed: int, config: RealTrainingConfig | None = None
                   ) -> list[dict]:
    """One hierarchical run (module docstring); one row per cloud round (0 = initial): the
    point's fields, ``seed``, ``epoch``, ``edge_rounds_done``, ``loss``, ``accuracy``,
    ``samples`` (per edge round), ``groups`` (the edges' device indices)."""
    config = config or RealTrainingConfig()
    backend, ids, declared = even_backend(point.n_nodes, point.dirichlet_alpha, config, seed)
    groups = edge_groups(backend.shards, backend._y_train, point.n_edges)
    updates = [EdgeUpdate(f"e{k}", (RoundUpdates(
        tuple(ids[i] for i in g), np.array([declared[i] for i in g], dtype=np.int64),
        np.zeros(len(g), dtype=np.int64)),) * point.edge_rounds) for k, g in enumerate(groups)]
    base = asdict(point)
    rows = [dict(base, seed=seed, epoch=0, edge_rounds_done=0, loss=backend.initial_loss(),
                 accuracy=math.nan, samples=int(sum(declared)), groups=groups)]
    for epoch in range(1, EDGE_ROUND_BUDGET // point.edge_rounds + 1):
        step = backend.advance_tiers(updates, 0)
        rows.append(dict(base, seed=seed, epoch=epoch,
                         edge_rounds_done=epoch * point.edge_rounds, loss=step.loss,
                         accuracy=step.accuracy, samples=int(sum(declared)), groups=groups))
    return rows


def _run_task(task: tuple[TierPoint, int]) -> list[dict]:
    return run_tier_point(*task)


def run_tier_grid(points: Sequence[TierPoint], seeds: Iterable[int], *, jobs: int = 1,
                  progress: bool = True) -> pd.DataFrame:
    """Every (point, seed) run; the long table, one row per cloud round (results do not
    depend on ``jobs``)."""
    tasks = [(p, s) for p in points for s in seeds]
    table = pd.DataFrame(run_tasks(_run_task, tasks, jobs, "hierarchical runs", progress))
    table["dirichlet_alpha"] = table["dirichlet_alpha"].astype(float)
    table["groups"] = table["groups"].map(lambda g: [list(map(int, x)) for x in g])
    return table.sort_values(["config", "seed", "epoch"], kind="stable").reset_index(drop=True)


# --- the fit ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TierFit:
    """The fitted constants and how well they predict: ``report`` per configuration (fit or
    held back; R² of the seed-mean log loss with the fit and with rho = 1, i.e. edge rounds
    worth cloud rounds; cloud rounds to :data:`TARGET_LOSS`, real and predicted)."""

    efficiency: float
    heterogeneity: float
    report: pd.DataFrame
    scales: dict[str, float]
    """Per skew level (``iid``, ``alpha 0.3``...), the nuisance sample scale (module
    docstring)."""

    def held_back_within(self, tolerance: float = 0.25) -> tuple[int, int]:
        """(held-back configurations whose predicted rounds to the target are within
        ``tolerance`` of the real ones, held-back configurations)."""
        held = self.report[self.report["held_back"]]
        ok = (np.abs(held["rounds_predicted"] - held["rounds_real"])
              <= tolerance * held["rounds_real"])
        return int(ok.sum()), len(held)


def _predictor(loss: LossParams, alpha: float | None, efficiency: float,
               heterogeneity: float) -> LossPredictor:
    model = ModelSpec(name=MODEL_NAME, params=4810, train_flop_per_sample=1.0,
                      loss=loss.model_copy(update={"edge_round_efficiency": efficiency,
                                                   "edge_heterogeneity": heterogeneity}))
    return LossPredictor(model, TrainingSpec(target_loss=0.1, deadline_s=1.0,
                                             dirichlet_alpha=alpha))


def _curve(point_rows: pd.DataFrame, loss: LossParams, efficiency: float,
           heterogeneity: float, scale: float = 1.0) -> np.ndarray:
    """The progress model's mean loss after each cloud round of one configuration."""
    first = point_rows.iloc[0]
    alpha = None if math.isnan(first["dirichlet_alpha"]) else float(first["dirichlet_alpha"])
    pred = _predictor(loss, alpha, efficiency, heterogeneity)
    n, k = int(first["n_nodes"]), int(first["edge_rounds"])
    per = int(first["samples"]) // n
    groups = first["groups"]
    updates = [EdgeUpdate(f"e{j}", (RoundUpdates(tuple(f"n{i}" for i in g),
                                                 np.full(len(g), per, dtype=np.int64),
                                                 np.zeros(len(g), dtype=np.int64)),) * k)
               for j, g in enumerate(groups)]
    gain = pred.tiers_gain(updates, sample_scale=scale)
    epochs = point_rows["epoch"].to_numpy()
    return np.asarray(pred.mean_of(0, gain * epochs), dtype=float)


def _means(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per configuration, the seed-mean log loss per cloud round (rounds >= 1)."""
    trained = table[table["epoch"] >= 1]
    out = {}
    for config, grp in trained.groupby("config", sort=True):
        mean = grp.groupby("epoch").agg(log_loss=("loss", lambda x: float(np.mean(np.log(x)))))
        first = grp[grp["seed"] == grp["seed"].min()].sort_values("epoch")
        out[config] = first.assign(log_loss=mean.loc[first["epoch"], "log_loss"].to_numpy())
    return out


def fit_tiers(table: pd.DataFrame, loss: LossParams) -> TierFit:
    """Fit ``edge_round_efficiency`` (0..1) and ``edge_heterogeneity`` (0..10) to the
    configurations not held back (scipy's least_squares on the seed-mean log loss, each
    configuration weighing the same), every other constant kept (module docstring)."""
    from scipy.optimize import least_squares

    means = _means(table)
    fit = {c: m for c, m in means.items() if not bool(m["held_back"].iloc[0])}
    levels = sorted({_level(m) for m in means.values()})
    at = {a: k for k, a in enumerate(levels)}

    def residuals(x: np.ndarray) -> np.ndarray:
        res = [(np.log(_curve(m, loss, x[0], x[1], x[2 + at[_level(m)]]))
                - m["log_loss"].to_numpy()) / math.sqrt(len(m)) for m in fit.values()]
        return np.concatenate(res)

    n = len(levels)
    best = least_squares(residuals, x0=np.array([0.8, 0.1] + [1.0] * n),
                         bounds=([0.0, 0.0] + [1e-3] * n, [1.0, 10.0] + [1e3] * n))
    eff, het = float(best.x[0]), float(best.x[1])
    scales = {a: float(best.x[2 + k]) for a, k in at.items()}
    return TierFit(eff, het, tier_report(means, loss, eff, het, scales), scales)


def _level(m: pd.DataFrame) -> str:
    """A configuration's skew level: ``iid`` or its Dirichlet alpha."""
    a = float(m["dirichlet_alpha"].iloc[0])
    return "iid" if math.isnan(a) else f"alpha {a:g}"


def _rounds_to(curve: np.ndarray, target: float) -> float:
    """The first cloud round (1-based) whose loss is at or below ``target`` (inf: none)."""
    hit = np.flatnonzero(curve <= target)
    return float(hit[0] + 1) if len(hit) else math.inf


def tier_report(means: dict[str, pd.DataFrame], loss: LossParams, efficiency: float,
                heterogeneity: float, scales: dict[str, float]) -> pd.DataFrame:
    """Per configuration: kappa_2, skew, held back or fitted, R² of the seed-mean log loss
    with the fit (its skew's scale) and with rho = 1 (the same scale), cloud rounds to
    :data:`TARGET_LOSS`: real, predicted, and predicted by the model as shipped (the fitted
    rho, no scale)."""
    rows = []
    for config, m in means.items():
        y = m["log_loss"].to_numpy()
        scale = scales[_level(m)]
        pred = np.log(_curve(m, loss, efficiency, heterogeneity, scale))
        flat = np.log(_curve(m, loss, 1.0, 0.0, scale))
        shipped = _curve(m, loss, efficiency, heterogeneity)
        ss = float(np.sum((y - y.mean()) ** 2))
        rows.append({"config": config, "edge_rounds": int(m["edge_rounds"].iloc[0]),
                     "dirichlet_alpha": float(m["dirichlet_alpha"].iloc[0]),
                     "held_back": bool(m["held_back"].iloc[0]),
                     "r2": 1.0 - float(np.sum((y - pred) ** 2)) / ss,
                     "r2_rho1": 1.0 - float(np.sum((y - flat) ** 2)) / ss,
                     "rounds_real": _rounds_to(np.exp(y), TARGET_LOSS),
                     "rounds_predicted": _rounds_to(np.exp(pred), TARGET_LOSS),
                     "rounds_shipped": _rounds_to(shipped, TARGET_LOSS)})
    return pd.DataFrame(rows)
