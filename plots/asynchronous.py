"""Synchronous beside asynchronous training (experiments/async; docs/async.md), drawn from stored
run tables (the ``netsim.figures`` registry, plots/registry.py).

- :func:`loss_time_energy` (``async-loss-time-energy``): for each scenario point (static, with
  stragglers, with churn), loss against simulated time (left) and against the energy spent so
  far (right), a line per policy: mean and 95 % band over seeds on a common grid, each run held
  at its final loss after it ends; the legend gives each policy's run count. Asynchronous
  epochs are aggregations, so their curves step once per aggregation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from netsim.figures import drawn_from
from netsim.sweep.results import Results
from plots.common import axis_label, band, curves_on_grid, still_running, time_label, time_unit
from plots.style import (
    figure,
    legend_outside,
    line_style,
    series_label,
    set_value_scale,
    style_for,
)

ENERGY_COLUMNS = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "energy_sleep_j"]
ASYNC_POLICIES = ("fedbuff", "fedasync")


def is_async_experiment(runs: pd.DataFrame) -> pd.Series:
    """Runs of experiments/async (scenario or sweep named ``async...``)."""
    names = runs["scenario"].astype(str)
    sweeps = runs["sweep"].astype(str) if "sweep" in runs else pd.Series("", index=runs.index)
    return names.str.startswith("async") | sweeps.str.startswith("async")


def run_curves(epochs: pd.DataFrame, initial_loss: float) -> tuple[np.ndarray, np.ndarray,
                                                                    np.ndarray]:
    """One run's (time (s), energy so far (J), loss) after each epoch, the start first."""
    ep = epochs.sort_values("epoch")
    cols = [c for c in ENERGY_COLUMNS if c in ep]
    energy = np.cumsum(ep[cols].to_numpy().sum(axis=1))
    return (np.concatenate([[0.0], ep["end_s"].to_numpy()]), np.concatenate([[0.0], energy]),
            np.concatenate([[initial_loss], ep["loss"].to_numpy()]))


def loss_time_energy(results: Results):
    """Loss vs simulated time and vs energy, synchronous and asynchronous policies, per
    scenario point (module docstring); one figure per sweep point, keyed
    ``point<N>-<sweep>`` (``point<N>-<label>`` outside sweeps)."""
    runs = results.runs[results.runs["status"] != "failed"]
    epochs = results.epochs
    if runs.empty or epochs.empty:
        return None
    by_run = dict(tuple(epochs.groupby("run_id", sort=False)))
    styles = style_for(runs["policy_label"].astype(str))
    out = {}
    runs = runs.assign(_sweep=runs["sweep"].fillna("").astype(str) if "sweep" in runs else "")
    for (sweep, point, label), part in runs.groupby(["_sweep", "point", "point_label"],
                                                    sort=True):  # (points are per sweep)
        title = str(label) if not sweep or sweep in str(label) else f"{sweep}: {label}"
        fig, (ax_t, ax_e) = figure(ncols=2, sharey=True)
        ends = [float(by_run[r]["end_s"].max()) for r in part["run_id"] if r in by_run]
        unit, length = time_unit(max(ends, default=0.0))
        shown: list[float] = []
        for policy, grp in part.groupby("policy_label", sort=True):
            by_time, by_energy = [], []
            for run in grp.itertuples():
                ep = by_run.get(run.run_id)
                if ep is None or ep.empty:
                    continue
                t, e, loss = run_curves(ep, float(run.initial_loss))
                by_time.append((t / length, loss))
                by_energy.append((e, loss))
            if not by_time:
                continue
            st = styles[str(policy)]
            for ax, curves in ((ax_t, by_time), (ax_e, by_energy)):
                grid, ys = curves_on_grid(curves)
                mean, lo, hi = band(ys)
                last = int(np.max(np.nonzero(still_running(curves, grid))[0], initial=0))
                ax.plot(grid[: last + 1], mean[: last + 1],
                        label=f"{series_label(policy)} (n={len(curves)})" if ax is ax_e
                        else None,
                        marker=st["marker"], markevery=[last], markersize=4, **line_style(st))
                ax.fill_between(grid, lo, hi, color=st["color"], alpha=0.15, linewidth=0)
                shown.extend(mean)
        target = part["target_loss"].dropna()
        for ax in (ax_t, ax_e):
            if len(target):
                ax.axhline(float(target.iloc[0]), color="grey", linestyle=":", linewidth=0.8,
                           label="target" if ax is ax_e else None)
        set_value_scale(ax_t, "y", [*shown, *target.astype(float)])  # (the y axis is shared)
        ax_t.set(xlabel=time_label("simulated time", unit), ylabel=axis_label("loss"),
                 title=title)
        ax_e.set(xlabel="energy spent (J)", title=title)
        legend_outside(ax_e)
        fig.tight_layout()
        out[f"point{int(point)}-{_slug(sweep or label)}"] = drawn_from(fig, part["run_id"])
    return out or None


def _slug(label: object) -> str:
    """A file-name-safe form of a point's label (several sweeps each have a point 0)."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in str(label)).strip("-")[:60]


__all__ = ["is_async_experiment", "loss_time_energy", "run_curves"]
