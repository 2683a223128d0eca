"""Each cell's air time in use over a run: shared media (docs/wireless.md), from stored results.

Reads the runs and epochs tables (``epochs.airtime_by_medium_s``: per epoch, the air time each
medium was used, s); never simulates. One heat map per policy (its first seed): a row per cell,
a column per epoch over simulated time, the colour the cell's air time in use per second of
the epoch. A Wi-Fi cell's single budget allows at most 1 s per s; a cellular cell's uplink and
downlink budgets together at most 2.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from netsim.sweep.results import Results
from plots.style import figure


def airtime_matrix(epochs: pd.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(medium ids, epoch boundaries (s), air time in use per second of each epoch: media x
    epochs) of one run's epochs; media sorted by their total air time, busiest first."""
    ep = epochs.sort_values("epoch")
    used = [json.loads(x) if isinstance(x, str) else {} for x in ep["airtime_by_medium_s"]]
    media = sorted({m for u in used for m in u})
    if not media:
        return [], np.zeros(0), np.zeros((0, 0))
    seconds = np.array([[u.get(m, 0.0) for u in used] for m in media])
    length = (ep["end_s"] - ep["start_s"]).to_numpy(dtype=float)
    share = seconds / np.where(length > 0, length, np.inf)[None, :]
    order = np.argsort(-seconds.sum(axis=1), kind="stable")
    edges = np.concatenate([ep["start_s"].to_numpy(dtype=float)[:1], ep["end_s"].to_numpy(float)])
    return [media[i] for i in order], edges, share[order]


def airtime_by_cell(results: Results) -> Any:
    """Each cell's air time in use over a run (s of air time per s), a heat map per policy
    (first seed): cells by busiest first, epochs over simulated time."""
    from netsim.figures import annotate

    if results.epochs.empty or "airtime_by_medium_s" not in results.epochs:
        return None
    panels = []
    for policy, grp in results.runs.groupby("policy", sort=True):
        run = grp.sort_values("seed").iloc[0]
        media, edges, share = airtime_matrix(
            results.epochs[results.epochs["run_id"] == run["run_id"]])
        if media:
            panels.append((str(policy), media, edges, share))
    if not panels:
        return None
    fig, axes = figure(nrows=len(panels), squeeze=False, layout="constrained")
    top = max(1.0, max(float(p[3].max()) for p in panels))
    mesh = None
    for ax, (policy, media, edges, share) in zip(axes[:, 0], panels, strict=True):
        mesh = ax.pcolormesh(edges, np.arange(len(media) + 1), share, cmap="viridis",
                             vmin=0.0, vmax=top, shading="flat")
        ax.set_ylabel("cell")
        ax.grid(False)
        ax.invert_yaxis()  # busiest cell on top
        ticks = np.arange(len(media)) + 0.5
        if len(media) <= 20:
            ax.set_yticks(ticks, media, fontsize=6)
        else:
            ax.set_yticks([])
        ax.set_title(f"{policy}: {len(media)} cells", fontsize=9)
    axes[-1, 0].set_xlabel("simulated time (s)")
    fig.colorbar(mesh, ax=axes[:, 0].tolist(), label="air time in use (s per s)")
    return annotate(fig, results, "airtime-by-cell")
