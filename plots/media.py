"""Each cell's air time in use over a run: shared media (docs/wireless.md), from stored results.

Reads the runs and epochs tables (``epochs.airtime_by_medium_s``: per epoch, the air time each
medium was used, s); never simulates. One heat map per policy (its first seed): a row per cell
(every cell any run drawn used; 0 where this one did not), a column per epoch over simulated
time (one x range for all panels), the colour the cell's air time in use per second of
the epoch. A Wi-Fi cell's single budget allows at most 1 s per s; a cellular cell's uplink and
downlink budgets together at most 2.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from netsim.sweep.results import Results
from plots.common import plural, time_label, time_unit
from plots.style import figure, series_label


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
    (first seed): every cell any of these runs used on every panel (0 where a policy's run
    left it unused), busiest first, epochs over simulated time on one x range for all."""
    from netsim.figures import annotate, drawn_from

    if results.epochs.empty or "airtime_by_medium_s" not in results.epochs:
        return None
    key = "policy_label" if "policy_label" in results.runs else "policy"
    panels = []
    for policy, grp in results.runs.groupby(key, sort=True):
        run = grp.sort_values("seed").iloc[0]
        media, edges, share = airtime_matrix(
            results.epochs[results.epochs["run_id"] == run["run_id"]])
        if media:
            panels.append((str(policy), int(run["seed"]), str(run["run_id"]),
                           dict(zip(media, share, strict=True)), edges))
    if not panels:
        return None
    totals: dict[str, float] = {}
    for *_, rows, edges in panels:
        for medium, row in rows.items():
            totals[medium] = totals.get(medium, 0.0) + float(row @ np.diff(edges))
    cells = sorted(totals, key=lambda m: (-totals[m], m))  # busiest over all panels first
    unit, length = time_unit(max(float(p[4][-1]) for p in panels))
    fig, axes = figure(nrows=len(panels), squeeze=False, sharex=True, layout="constrained")
    top = max(1.0, max(float(r.max()) for p in panels for r in p[3].values()))
    mesh = None
    for ax, (policy, seed, _, rows, edges) in zip(axes[:, 0], panels, strict=True):
        share = np.array([rows.get(m, np.zeros(len(edges) - 1)) for m in cells])
        mesh = ax.pcolormesh(edges / length, np.arange(len(cells) + 1), share, cmap="viridis",
                             vmin=0.0, vmax=top, shading="flat")
        ax.set_ylabel("cell")
        ax.grid(False)
        ax.invert_yaxis()  # busiest cell on top
        ticks = np.arange(len(cells)) + 0.5
        if len(cells) <= 20:
            ax.set_yticks(ticks, cells, fontsize=6)
        else:
            ax.set_yticks([])
        used = len(rows)
        ax.set_title(f"{series_label(policy)}, seed {seed}: "
                     + (f"{used} of {plural(len(cells), 'cell')}" if used < len(cells)
                        else plural(used, "cell")), fontsize=8)
    axes[-1, 0].set_xlim(0.0, max(float(p[4][-1]) for p in panels) / length)
    axes[-1, 0].set_xlabel(time_label("simulated time", unit))
    fig.colorbar(mesh, ax=axes[:, 0].tolist(), label="air time in use (s per s)")
    drawn_from(fig, [p[2] for p in panels])
    return annotate(fig, results, "airtime-by-cell")
