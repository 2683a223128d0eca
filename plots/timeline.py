"""Loss and cumulative energy vs simulated time, one line per policy (``netsim run``'s figure).

Reads the runs and epochs tables; never simulates. With several seeds per policy the line is
the mean over seeds on a common time grid (each run held at its final value after it ends) and
the band its 95% interval.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from netsim.sweep.results import Results
from plots.common import band, curves_on_grid, time_label, time_unit
from plots.style import (
    figure,
    legend_outside,
    line_style,
    series_label,
    set_value_scale,
    style_for,
)


def _curves(runs: pd.DataFrame, epochs: pd.DataFrame, column: str,
            length: float = 1.0) -> dict[str, list[tuple]]:
    """Per policy, each run's (time in units of ``length`` s, loss or cumulative energy)."""
    out: dict[str, list[tuple]] = {}
    for run in runs.itertuples():
        ep = epochs[epochs["run_id"] == run.run_id].sort_values("epoch")
        t = np.concatenate([[0.0], ep["end_s"].to_numpy()]) / length
        if column == "loss":
            y = np.concatenate([[run.initial_loss], ep["loss"].to_numpy()])
        else:
            e = (ep["energy_compute_j"] + ep["energy_comm_j"] + ep["energy_idle_j"]).to_numpy()
            y = np.concatenate([[0.0], np.cumsum(e)])
        out.setdefault(str(getattr(run, "policy_label", run.policy)), []).append((t, y))
    return out


def timeline_figure(results: Results) -> Any:  # a figure, or a mapping for several points
    """Loss and cumulative energy (J) vs simulated time, a line per policy.

    ``netsim run``'s figure; the target loss is a dotted line when the runs share one. With
    several seeds a line is the mean over seeds, each run held at its final value after it
    ends (so the mean never falls when a run stops), its band the 95 % interval (clipped at
    0); a marker shows where the policy's last run ends. The energy axis is logarithmic
    (symlog, 0 kept) when the policies' final energies span more than a decade, the loss
    axis when the losses drawn do (``netsim figures --log`` / ``--linear`` force either);
    time reads in s, min, h or days by its span. Runs that record no loss (a query-only
    Flower app) leave the loss panel empty, saying so, on the energy panel's time axis. A
    caption line names the scenario, seeds and netsim version. Results of several scenario points (a
    sweep) give one figure per point, keyed ``point<N>``."""
    from netsim.figures import annotate

    runs = results.runs
    if "point" in runs and runs["point"].nunique() > 1:
        return {f"point{int(p)}": timeline_figure(results.select(runs["point"] == p))
                for p in sorted(runs["point"].unique())}
    targets = runs["target_loss"].dropna().unique() if "target_loss" in runs else []
    fig = _timeline(runs, results.epochs, float(targets[0]) if len(targets) == 1 else None)
    return annotate(fig, results, "timeline")


def _timeline(runs: pd.DataFrame, epochs: pd.DataFrame, target_loss: float | None) -> Any:
    fig, (ax_loss, ax_energy) = figure(ncols=2)
    styles = style_for(runs["policy_label" if "policy_label" in runs else "policy"].unique())
    ran = epochs[epochs["run_id"].isin(runs["run_id"])]
    unit, length = time_unit(float(ran["end_s"].max()) if len(ran) else 0.0)
    finals, losses = [], []
    for ax, column in ((ax_loss, "loss"), (ax_energy, "energy")):
        for policy, curves in _curves(runs, epochs, column, length).items():
            st = styles[policy]
            name = series_label(policy)
            label = name if len(curves) == 1 else f"{name} (mean of {len(curves)})"
            grid, ys = curves_on_grid(curves)
            mean, lo, hi = band(ys)
            ax.plot(grid, mean, label=label, marker=st["marker"], markevery=[len(grid) - 1],
                    markersize=4, **line_style(st))
            if len(curves) > 1:
                ax.fill_between(grid, np.maximum(lo, 0.0) if column == "energy" else lo, hi,
                                color=st["color"], alpha=0.15, linewidth=0)
            if column == "energy":
                finals.append(float(mean[-1]))
            else:
                losses.extend(mean)
    if np.isfinite(pd.to_numeric(ran["loss"], errors="coerce").to_numpy(float)).any():
        if target_loss is not None:
            ax_loss.axhline(target_loss, color="grey", linewidth=0.8, linestyle=":",
                            label="target")
            losses.append(target_loss)
        set_value_scale(ax_loss, "y", losses)
    else:  # (a query-only Flower app, or a loss metric no reply carries: nothing to draw)
        ax_loss.set_xlim(ax_energy.get_xlim())
        ax_loss.set_yticks([])
        ax_loss.text(0.5, 0.5, "no loss recorded\n(the runs report none)", ha="center",
                     va="center", transform=ax_loss.transAxes, fontsize=8, color="grey")
    ax_loss.set(xlabel=time_label("simulated time", unit), ylabel="test loss (nats)")
    ax_energy.set(xlabel=time_label("simulated time", unit), ylabel="cumulative energy (J)")
    set_value_scale(ax_energy, "y", finals, from_zero=True)
    names = runs["point_label"] if "point_label" in runs else runs.get("scenario", pd.Series([]))
    title = ", ".join(sorted({str(n) for n in names}))
    seeds = sorted({int(s) for s in runs["seed"]}) if "seed" in runs else []
    if title:
        fig.suptitle(f"{title}: seed{'s' if len(seeds) > 1 else ''} "
                     f"{', '.join(str(s) for s in seeds[:8])}{' ...' if len(seeds) > 8 else ''}",
                     fontsize=8)
    handles, labels = ax_loss.get_legend_handles_labels()
    legend_outside(fig, handles, labels, bbox_to_anchor=(1.0, 0.9))
    fig.tight_layout()
    return fig
