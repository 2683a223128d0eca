"""PACT figures (experiments/pact/run.py): each reads stored result tables, never simulates.

Tables under a results folder: netsim's ``runs``/``epochs`` (netsim.results.store), a
``points.parquet`` (run_id -> swept value x), and, where a figure needs them, ``plans.parquet``
(planned energies) or ``epsilon.parquet``. Means with 95 % Student-t intervals over seeds (the
interval ``netsim compare`` prints, :func:`plots.common.band`); distinct colours, line styles
and markers (plots.style).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import NullFormatter

from netsim.results.store import read_table
from plots.common import band
from plots.style import figure, legend_outside, save, series_label, style_for


def _runs(folder: Path) -> pd.DataFrame:
    runs = read_table(folder, "runs")
    points = pd.read_parquet(folder / "points.parquet")
    return runs.merge(points, on="run_id")


def _energy_lines(ax, runs: pd.DataFrame, xlabel: str, key: str | None = None) -> None:
    """Mean energy (J) per policy vs x with its 95 % interval over the seeds that reached the
    target (a run that stops early spends less and is not comparable); hollow markers where
    some seeds missed it, no point where all did. A line per ``key``: the policy label where
    the runs have one (a policy run with several parameter sets: a line each, its parameters
    in the legend), else the policy; ``key="policy"`` where x is the parameter itself."""
    key = key or ("policy_label" if "policy_label" in runs else "policy")
    styles = style_for(sorted(runs[key].unique()))
    for policy, everything in runs.groupby(key):
        grp = everything[everything["target_reached"].astype(bool)]
        xs = np.sort(grp["x"].unique())
        if len(xs) == 0:
            continue
        vals = [grp.loc[grp["x"] == x, "energy_j"].to_numpy() for x in xs]
        stats = [band(v[:, None]) for v in vals]
        mean = np.array([s[0][0] for s in stats])
        lo, hi = np.array([s[1][0] for s in stats]), np.array([s[2][0] for s in stats])
        ok = [np.mean(everything.loc[everything["x"] == x, "target_reached"]) for x in xs]
        st = styles[policy]
        ax.plot(xs, mean, label=series_label(policy), color=st["color"],
                linestyle=st["linestyle"],
                marker=st["marker"], markersize=3)
        ax.fill_between(xs, lo, hi, color=st["color"], alpha=0.15, linewidth=0)
        missed = np.array(ok) < 1.0
        if missed.any():   # hollow markers: some seeds missed the target
            ax.scatter(xs[missed], mean[missed], facecolors="white", edgecolors=st["color"],
                       s=14, zorder=3)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("total energy (J)")


def energy_vs_target(folder: Path):
    """Total energy vs loss target per policy, with the planned energies of PACT and the
    optimum (small scenario)."""
    fig, ax = figure(wide=True)
    _energy_lines(ax, _runs(folder), "loss target (nats)")
    plans = pd.read_parquet(folder / "plans.parquet")
    for (name, grp), ls in zip(plans.groupby("plan"), ["-", ":"], strict=False):
        grp = grp.sort_values("x")
        ax.plot(grp["x"], grp["energy_j"], color="black", linestyle=ls, linewidth=1.0,
                label=name)
    ax.set_yscale("log")
    legend_outside(ax)
    ax.set_title("energy vs loss target (runs that reached it; hollow: some seeds missed it)")
    return fig


def energy_vs_deadline(folder: Path):
    """Total energy vs deadline per policy (default scenario)."""
    fig, ax = figure(wide=True)
    _energy_lines(ax, _runs(folder), "deadline (s)")
    legend_outside(ax)
    ax.set_title("energy vs deadline (runs that reached the target; hollow: some missed)")
    return fig


def energy_vs_devices(folder: Path):
    """Total energy vs number of devices per policy (generated networks)."""
    fig, ax = figure(wide=True)
    _energy_lines(ax, _runs(folder), "number of devices")
    ax.set_xscale("log")
    ax.set_yscale("log")
    legend_outside(ax)
    ax.set_title("energy vs number of devices")
    return fig


def schedule(folder: Path):
    """PACT's variant per epoch (top) and which devices train in each epoch (heatmap)."""
    return schedule_figure(read_table(folder, "epochs"), read_table(folder, "devices"))


def schedule_figure(epochs: pd.DataFrame, table: pd.DataFrame):
    """:func:`schedule` from one run's epochs and devices tables."""
    epochs = epochs.sort_values("epoch")
    used = {d for ids in epochs["participant_ids"] for d in ids}
    devices = sorted(used | set(table.loc[~table["network_node"], "device"]) - {"aggregator"})
    grid = np.zeros((len(devices), len(epochs)))
    row = {d: i for i, d in enumerate(devices)}
    for j, ids in enumerate(epochs["participant_ids"]):
        for d in ids:
            grid[row[d], j] = 1
    fig, (top, bottom) = figure(nrows=2, wide=True, sharex=True,
                                gridspec_kw={"height_ratios": [1, 3]})
    top.step(epochs["epoch"], epochs["variant"], where="mid", color="#0072B2")
    names = epochs.drop_duplicates("variant").set_index("variant")["variant_name"]
    top.set_yticks(list(names.index), list(names.values))
    top.set_ylabel("variant")
    bottom.imshow(grid, aspect="auto", cmap="cividis", interpolation="nearest",
                  extent=(-0.5, len(epochs) - 0.5, len(devices) - 0.5, -0.5))
    step = max(1, -(-len(devices) // 36))  # at most 36 device names: never overlapping
    bottom.set_yticks(range(0, len(devices), step), devices[::step], fontsize=5)
    bottom.set_xlabel("epoch")
    bottom.set_ylabel("device (yellow: trains)")
    bottom.grid(False)
    fig.tight_layout()
    return fig


def epsilon(folder: Path):
    """Planning time (s) vs 1/eps (log-log) and gap to the optimum vs eps."""
    df = pd.read_parquet(folder / "epsilon.parquet")
    fig, (left, right) = figure(ncols=2)
    for (kind, grp), colour in zip(df.groupby("kind"), ["#0072B2", "#D55E00"], strict=False):
        by = grp.groupby("eps")["planning_s"]
        inv = 1 / np.array(sorted(grp["eps"].unique()))
        left.plot(inv, by.mean().to_numpy(), marker="o", markersize=3, color=colour,
                  label=kind)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("1 / eps")
    left.set_ylabel("planning time (s)")
    left.legend(fontsize=6)
    small = df[df["kind"] == "small"]
    xs = np.sort(small["eps"].unique())
    gaps = np.array([small.loc[small["eps"] == e, "gap"].to_numpy() * 100 for e in xs]).T
    mean, lo, hi = band(gaps)
    right.plot(xs, mean, marker="o", markersize=3, color="#009E73", label="mean")
    right.fill_between(xs, lo, hi, color="#009E73", alpha=0.2, linewidth=0)
    right.plot(xs, gaps.max(axis=0), linestyle="--", color="#CC79A7", label="max")
    right.set_xscale("log")
    for axis in (left.xaxis, right.xaxis):
        axis.set_minor_formatter(NullFormatter())
    right.set_xlabel("eps")
    right.set_ylabel("gap to optimum (%)")
    right.legend(fontsize=6)
    return fig


FIGURES = {"target": energy_vs_target, "deadline": energy_vs_deadline,
           "devices": energy_vs_devices, "schedule": schedule, "epsilon": epsilon}


def draw(name: str, folder: Path, out_dir: Path) -> list[Path]:
    """Draw figure ``name`` from the results in ``folder`` into ``out_dir``; the paths."""
    return save(FIGURES[name](Path(folder)), Path(out_dir) / f"pact-{name}")
