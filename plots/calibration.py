"""Calibration figure: measured real-training curves vs the fitted surrogate.

Reads the curves table (netsim/data/calibration/curves.parquet) and the ``mlp-digits``
surrogate constants (netsim/data/loss_params.yaml); never simulates (the surrogate's mean
curve is its closed-form formula). One panel per pruning level used from the start, and one
for pruning in mid-training (the loss jump). Measured: mean over seeds and the band holding
95% of the seeds (2.5-97.5 percentiles); surrogate: mean and its 95% log-normal band.

    python -m plots.calibration --out DIR [--curves FILE] [--params FILE]
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from netsim.training import calibrate as cal
from plots.style import OKABE_ITO, figure, save

DEFAULT_PARAMS = os.path.join(os.path.dirname(cal.CURVES_PATH), "..", "loss_params.yaml")
LATE_CONFIGS = ("base", "late-prune-0.5", "late-prune-0.25")


def _curve_constants(params: dict) -> dict[float, tuple[float, float, float]]:
    out = {1.0: (params["floor_full"], params["samples_half"], params["exponent"])}
    for f, name in cal.VARIANT_NAMES.items():
        v = params.get("variants", {}).get(name)
        if f < 1.0:
            floor = params["floor_full"] + params.get("floor_prune", 0.0) * (1 - f) ** params.get(
                "floor_exponent", 2.0)
            v = v or {}
            out[f] = (v.get("floor", floor), v.get("samples_half", params["samples_half"]),
                      v.get("exponent", params["exponent"]))
    return out


def _draw(ax, grp: pd.DataFrame, params: dict, color: str, label: str) -> None:
    """Measured mean + 95% band of seeds, surrogate mean + 95% band, for one configuration."""
    by_epoch = grp.groupby("epoch")["loss"]
    epochs = np.array(sorted(grp["epoch"].unique()))
    mean = by_epoch.mean().to_numpy()
    ax.plot(epochs, mean, color=color, label=f"{label} measured")
    ax.fill_between(epochs, by_epoch.quantile(0.025), by_epoch.quantile(0.975), color=color,
                    alpha=0.2, linewidth=0)
    schedule = grp[grp["epoch"] >= 1].groupby("epoch")[cal.SCHEDULE_COLUMNS].first()
    pred = cal.surrogate_mean(schedule, params["initial_loss"], _curve_constants(params),
                              params["prune_progress_loss"], params["heterogeneity"],
                              params.get("participant_exponent", 0.0))
    pred = np.concatenate([[params["initial_loss"]], pred])
    sigma = math.hypot(params.get("noise_run_sigma", 0.0), params.get("noise_epoch_sigma", 0.0))
    ax.plot(epochs, pred, color=color, linestyle="--", label=f"{label} surrogate")
    ax.fill_between(epochs, pred * math.exp(-1.96 * sigma), pred * math.exp(1.96 * sigma),
                    facecolor="none", edgecolor=color, hatch="///", alpha=0.4, linewidth=0)


def plot_calibration(curves: pd.DataFrame, params: dict, out_base: str | Path) -> list[Path]:
    """Draw the calibration figure; returns the written paths (PNG and PDF).

    Parameters
    ----------
    curves: the calibration curves table (columns of :func:`netsim.training.calibrate.run_point`).
    params: the model's loss_params.yaml entry (a dict).
    out_base: output path without suffix.
    """
    start = curves[curves["prune_epoch"].isna()
                   & curves["dirichlet_alpha"].isna() & (curves["data_fraction"] == 1.0)
                   & (curves["n_nodes"] == cal.GridPoint("base").n_nodes)]
    levels = sorted(start["params_fraction"].unique(), reverse=True)
    ncols = 3
    fig, axes = figure(ncols=ncols, nrows=math.ceil((len(levels) + 2) / ncols), wide=True,
                       sharey=True)
    axes = np.ravel(axes)
    for ax, level in zip(axes, levels, strict=False):
        _draw(ax, start[start["params_fraction"] == level], params, OKABE_ITO[0], "")
        ax.set(title=f"pruned from start to {level:.0%}", xlabel="epoch", yscale="log")
    for ax in axes[::ncols]:
        ax.set_ylabel("test loss (nats)")
    ax = axes[len(levels)]
    for i, config in enumerate(LATE_CONFIGS):
        grp = curves[curves["config"] == config]
        if len(grp):
            _draw(ax, grp, params, OKABE_ITO[i], config)
    late = curves.loc[curves["prune_epoch"].notna(), "prune_epoch"]
    if len(late):
        ax.axvline(float(late.iloc[0]) + 0.5, color="grey", linestyle=":", linewidth=0.8)
    ax.set(title="pruned mid-training (dotted line)", xlabel="epoch", yscale="log")
    handles, labels = ax.get_legend_handles_labels()
    for extra in axes[len(levels) + 1:]:
        extra.axis("off")
    legend_ax = axes[len(levels) + 1] if len(axes) > len(levels) + 1 else ax
    legend_ax.legend(handles, labels, loc="center", title="solid: measured mean, band 95% of"
                     " seeds;\ndashed: surrogate mean, hatched its 95%", title_fontsize=6)
    fig.tight_layout()
    return save(fig, out_base)


def main(argv: list[str] | None = None) -> int:
    """``python -m plots.calibration --out DIR``: write DIR/calibration.png and .pdf."""
    parser = argparse.ArgumentParser(description="calibration figure")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--curves", default=os.path.normpath(cal.CURVES_PATH))
    parser.add_argument("--params", default=os.path.normpath(DEFAULT_PARAMS))
    parser.add_argument("--model", default=cal.MODEL_NAME)
    args = parser.parse_args(argv)
    with open(args.params, encoding="utf-8") as fh:
        params = yaml.safe_load(fh)[args.model]
    paths = plot_calibration(pd.read_parquet(args.curves), params, Path(args.out) / "calibration")
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
