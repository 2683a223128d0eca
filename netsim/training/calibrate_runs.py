"""Curves from recorded runs: the calibration table (netsim.training.calibrate) made from the
result tables of runs whose losses were measured (a Flower ClientApp in real mode, or any
driver that trains for real), and how well a fitted surrogate predicts a held-out curve.

A run becomes one curve: epoch 0 is its ``initial_loss``, each recorded epoch its loss and
accuracy, the samples that counted in it and its participants (``n_nodes``); the model is
never pruned (``variant_fraction`` 1) and the data is taken as IID (no label skew is known).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from netsim.training import calibrate as cal

CURVE_COLUMNS = ["config", "seed", "epoch", "loss", "accuracy", "variant_fraction", "samples",
                 "cumulative_samples", "n_nodes", "dirichlet_alpha", "params_fraction",
                 "data_fraction", "prune_epoch", "prune_fraction"]


def curves_from_run(runs: pd.DataFrame, epochs: pd.DataFrame, config: str) -> pd.DataFrame:
    """The curve of one recorded run (its ``runs`` row and ``epochs`` rows) labelled
    ``config``. Raises ValueError when its losses are not all finite numbers."""
    run = runs.iloc[0]
    losses = np.concatenate([[float(run["initial_loss"])], epochs["loss"].to_numpy(float)])
    if not np.all(np.isfinite(losses)) or np.any(losses <= 0):
        raise ValueError(f"run {run['run_id']} ({config}, seed {run['seed']}): losses must be "
                         "finite and > 0 to fit (is an evaluate_fn giving the loss?)")
    samples = np.concatenate([[0], epochs["samples"].to_numpy(int)])
    nodes = np.concatenate([[0], epochs["participants"].to_numpy(int)])
    accuracy = np.concatenate([[math.nan], epochs["accuracy"].to_numpy(float)])
    n = len(losses)
    return pd.DataFrame({
        "config": config, "seed": int(run["seed"]), "epoch": np.arange(n), "loss": losses,
        "accuracy": accuracy, "variant_fraction": 1.0, "samples": samples,
        "cumulative_samples": np.cumsum(samples), "n_nodes": nodes,
        "dirichlet_alpha": None, "params_fraction": 1.0, "data_fraction": 1.0,
        "prune_epoch": None, "prune_fraction": None})[CURVE_COLUMNS]


def log_loss_r2(table: pd.DataFrame, fit: cal.SurrogateFit) -> pd.DataFrame:
    """Per configuration of ``table``: R² of the fitted surrogate's mean curve against the
    seed-mean measured curve, both on the log of the loss (epochs >= 1), and the number of
    runs; the surrogate replays each configuration's own schedule (samples, participants)."""
    curves = {1.0: fit.variants["full"]}
    rows = []
    for config, (schedule, grp) in cal._schedules(table).items():
        pred = np.log(cal.surrogate_mean(schedule, fit.initial_loss, curves,
                                         fit.prune_progress_loss, fit.heterogeneity,
                                         fit.participant_exponent))
        mean = np.log(grp["loss"]).groupby(grp["epoch"]).mean().to_numpy()
        r2 = 1.0 - float(np.sum((mean - pred) ** 2) / np.sum((mean - mean.mean()) ** 2))
        rows.append({"config": config, "runs": grp["seed"].nunique(), "r2_log_loss": r2,
                     "rms_log": float(np.sqrt(np.mean((mean - pred) ** 2)))})
    return pd.DataFrame(rows)
