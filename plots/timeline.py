"""Loss and cumulative energy vs simulated time, one line per policy (``netsim run``'s figure).

Reads the runs and epochs tables; never simulates. With several seeds per policy the line is
the mean over seeds on a common time grid and the band its 95% interval.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from netsim.sweep.results import Results
from plots.common import band, curves_on_grid
from plots.style import figure, style_for


def _curves(runs: pd.DataFrame, epochs: pd.DataFrame, column: str) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for run in runs.itertuples():
        ep = epochs[epochs["run_id"] == run.run_id].sort_values("epoch")
        t = np.concatenate([[0.0], ep["end_s"].to_numpy()])
        if column == "loss":
            y = np.concatenate([[run.initial_loss], ep["loss"].to_numpy()])
        else:
            e = (ep["energy_compute_j"] + ep["energy_comm_j"] + ep["energy_idle_j"]).to_numpy()
            y = np.concatenate([[0.0], np.cumsum(e)])
        out.setdefault(run.policy, []).append((t, y))
    return out


def timeline_figure(results: Results) -> Any:
    """Loss and cumulative energy (J) vs simulated time (s), a line per policy.

    ``netsim run``'s figure; the target loss is a dotted line when the runs share one."""
    runs = results.runs
    targets = runs["target_loss"].dropna().unique() if "target_loss" in runs else []
    return _timeline(runs, results.epochs, float(targets[0]) if len(targets) == 1 else None)


def _timeline(runs: pd.DataFrame, epochs: pd.DataFrame, target_loss: float | None) -> Any:
    fig, (ax_loss, ax_energy) = figure(ncols=2)
    styles = style_for(sorted(runs["policy"].unique()))
    for ax, column in ((ax_loss, "loss"), (ax_energy, "energy")):
        for policy, curves in _curves(runs, epochs, column).items():
            st = {k: v for k, v in styles[policy].items() if k != "marker"}
            if len(curves) == 1:
                ax.plot(*curves[0], label=policy, **st)
                continue
            grid, ys = curves_on_grid(curves)
            mean, lo, hi = band(ys)
            ax.plot(grid, mean, label=f"{policy} (mean of {len(curves)})", **st)
            ax.fill_between(grid, lo, hi, color=st["color"], alpha=0.2, linewidth=0)
    if target_loss is not None:
        ax_loss.axhline(target_loss, color="grey", linewidth=0.8, linestyle=":", label="target")
    ax_loss.set(xlabel="simulated time (s)", ylabel="test loss (nats)", yscale="log")
    ax_energy.set(xlabel="simulated time (s)", ylabel="cumulative energy (J)")
    ax_loss.legend(loc="upper right")
    fig.tight_layout()
    return fig
