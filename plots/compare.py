"""Generic comparison figures for any results folder: one series per policy label.

Each function takes a :class:`netsim.sweep.results.Results` and returns a Matplotlib figure, a
mapping ``suffix -> figure`` (one per scenario point or slice), or ``None`` when its data is
absent. Means are over seeds, bands and error bars their 95 % Student-t intervals: the
interval ``netsim compare`` prints for the same runs (:func:`plots.common.band`; a low bound
below 0 of energy, time or loss drawn at 0); the caption gives the runs per bar. Failed runs
are left out.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt

from netsim.sweep.results import Results
from plots.common import (
    axis_label,
    band,
    curves_on_grid,
    mean_band_by,
    numeric_axes,
    still_running,
    time_label,
    time_unit,
)
from plots.style import (
    ONE_COLUMN_IN,
    bar_hatches,
    error_bar_kw,
    figure,
    halo_error_bars,
    legend_outside,
    line_style,
    series_label,
    set_value_scale,
    style_for,
)


def _styles(runs: pd.DataFrame) -> dict[str, dict[str, str]]:
    return style_for(runs["policy_label"].unique())


def tick_label(label: str, width: int = 36, lines: int = 3) -> str:
    """A point label wrapped to ``width`` characters per line, at most ``lines`` lines (the
    rest elided with "..."), so a sweep with many axes keeps the axes their room."""
    wrapped = textwrap.wrap(str(label).replace(",", ", "), width, break_long_words=True)
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        wrapped[-1] = wrapped[-1][: width - 3] + "..."
    return "\n".join(wrapped) or str(label)


def energy_by_policy(results: Results):
    """Mean energy (J) per point and policy: horizontal bars with 95 % intervals over seeds.

    Points are rows (their labels read horizontally, so long labels never collide), a bar per
    policy in each; the legend sits outside the axes."""
    runs = results.runs
    stats = mean_band_by(runs, "point", "energy_j")
    if stats.empty:
        return None
    labels = runs.drop_duplicates("point").set_index("point")["point_label"]
    points = sorted(stats["point"].unique())
    policies = sorted(stats["policy_label"].unique())
    styles = _styles(runs)
    hatches = bar_hatches(styles)
    height_in = max(1.6, 0.45 + 0.11 * len(points) * (len(policies) + 1))
    fig, ax = figure()
    fig.set_size_inches(ONE_COLUMN_IN[0], height_in)
    width = 0.8 / len(policies)
    for k, policy in enumerate(policies):
        s = stats[stats["policy_label"] == policy].set_index("point").reindex(points)
        # the y axis is inverted below: the first policy's bar is the top one of each group,
        # in the legend's order (top to bottom)
        y = np.arange(len(points)) + (k - (len(policies) - 1) / 2) * width
        err = np.vstack([s["mean"] - s["lo"], s["hi"] - s["mean"]])
        bars = ax.barh(y, s["mean"], width, xerr=np.nan_to_num(err), label=series_label(policy),
                       color=styles[policy]["color"], edgecolor="black", linewidth=0.4,
                       hatch=hatches[policy], error_kw=error_bar_kw())
        halo_error_bars(bars)
    set_value_scale(ax, "x", stats["mean"], from_zero=True)
    ax.set_yticks(np.arange(len(points)), [tick_label(labels[p]) for p in points])
    ax.invert_yaxis()
    ax.set(xlabel=axis_label("energy_j"))
    ax.grid(axis="y", visible=False)
    legend_outside(ax)
    fig.tight_layout()
    return fig


def energy_time(results: Results):
    """Mean time vs mean energy (J) per policy and point, with 95 % intervals both ways; each
    axis logarithmic where its means span more than a decade, time in s, min, h or days."""
    runs = results.runs
    e = mean_band_by(runs, "point", "energy_j")
    t = mean_band_by(runs, "point", "time_s")
    if e.empty:
        return None
    both = e.merge(t, on=["policy_label", "point"], suffixes=("_e", "_t"))
    unit, length = time_unit(float(np.nanmax(both["hi_t"].to_numpy(float), initial=0.0)))
    for col in ("mean_t", "lo_t", "hi_t"):
        both[col] = both[col] / length
    styles = _styles(runs)
    fig, ax = figure()
    for policy, grp in both.groupby("policy_label", sort=True):
        st = styles[policy]
        ax.errorbar(grp["mean_t"], grp["mean_e"],
                    xerr=np.nan_to_num([grp["mean_t"] - grp["lo_t"], grp["hi_t"] - grp["mean_t"]]),
                    yerr=np.nan_to_num([grp["mean_e"] - grp["lo_e"], grp["hi_e"] - grp["mean_e"]]),
                    fmt=st["marker"], color=st["color"], capsize=2, markersize=4,
                    label=series_label(policy),
                    alpha=0.85)
    set_value_scale(ax, "x", both["mean_t"])
    set_value_scale(ax, "y", both["mean_e"])
    ax.set(xlabel=time_label("simulated training time", unit), ylabel=axis_label("energy_j"))
    legend_outside(ax)
    fig.tight_layout()
    return fig


def metric_vs_axis(results: Results, metric: str = "energy_j"):
    """``metric`` vs each numeric sweep axis, a line per policy, mean and 95 % band over seeds.

    One figure per (axis, combination of the other axes' values), keyed
    ``<axis>[-<other>=<value>...]``.
    """
    runs = results.runs
    axes = numeric_axes(runs, results.axes)
    out = {}
    styles = _styles(runs)
    for axis in axes:
        others = [a for a in results.axes if a != axis]
        groups = runs.groupby(others, sort=True, dropna=False) if others else [((), runs)]
        for key, part in groups:
            key = key if isinstance(key, tuple) else (key,)
            stats = mean_band_by(part.assign(**{axis: part[axis].astype(float)}), axis, metric)
            if stats.empty:
                continue
            ylabel = axis_label(metric)
            if metric.endswith("_s"):  # a time: in s, min, h or days by its span
                unit, length = time_unit(float(np.nanmax(stats["hi"].to_numpy(float),
                                                         initial=0.0)))
                stats[["mean", "lo", "hi"]] = stats[["mean", "lo", "hi"]] / length
                ylabel = time_label(ylabel.rsplit(" (", 1)[0], unit)
            fig, ax = figure()
            for policy, s in stats.groupby("policy_label", sort=True):
                st = styles[policy]
                ax.plot(s[axis], s["mean"], label=series_label(policy), **st, markersize=3)
                ax.fill_between(s[axis], s["lo"], s["hi"], color=st["color"], alpha=0.2,
                                linewidth=0)
            set_value_scale(ax, "y", stats["mean"])
            ax.set(xlabel=axis_label(axis), ylabel=ylabel)
            if any(k is not None for k in key):
                ax.set_title(", ".join(f"{axis_label(o).split(' (')[0]} = {v}"
                                       for o, v in zip(others, key, strict=True)))
            legend_outside(ax)
            fig.tight_layout()
            suffix = "-".join([_slug(axis)]
                              + [f"{_slug(o)}={_slug(v)}" for o, v in zip(others, key, strict=True)])
            out[suffix] = fig
    return out or None


def loss_vs_time(results: Results):
    """Loss (nats) vs simulated time (s) at each point, a line per policy: mean and 95 % band
    over seeds on a common time grid, each run held at its final loss after it ends; a marker
    where the policy's last run ends, the legend giving its run count. One figure per point,
    keyed ``point<N>``; runs that record no loss (a query-only Flower app) are left out, and
    a point with none that does has no figure."""
    runs = results.runs[results.runs["status"] != "failed"]
    epochs = results.epochs
    if runs.empty or epochs.empty:
        return None
    by_run = dict(tuple(epochs.sort_values(["run_id", "epoch"]).groupby("run_id", sort=False)))
    styles = _styles(results.runs)
    out = {}
    for (point, label), part in runs.groupby(["point", "point_label"], sort=True):
        ends = [float(by_run[r]["end_s"].max()) for r in part["run_id"] if r in by_run]
        unit, length = time_unit(max(ends, default=0.0))
        fig, ax = figure()
        drawn, shown = False, []
        for policy, grp in part.groupby("policy_label", sort=True):
            curves = []
            for run in grp.itertuples():
                ep = by_run.get(run.run_id)
                if ep is None or not np.isfinite(ep["loss"].to_numpy(float)).any():
                    continue  # (no epoch, or no loss recorded: a query-only Flower app)
                curves.append((np.concatenate([[0.0], ep["end_s"].to_numpy()]) / length,
                               np.concatenate([[run.initial_loss], ep["loss"].to_numpy()])))
            if not curves:
                continue
            grid, ys = curves_on_grid(curves)
            mean, lo, hi = band(ys)
            st = styles[policy]
            last = int(np.max(np.nonzero(still_running(curves, grid))[0], initial=0))
            ax.plot(grid[: last + 1], mean[: last + 1],
                    label=f"{series_label(policy)} (n={len(curves)})",
                    marker=st["marker"], markevery=[last], markersize=4, **line_style(st))
            ax.fill_between(grid, lo, hi, color=st["color"], alpha=0.15, linewidth=0)
            drawn = True
            shown.extend(mean)
        if not drawn:
            plt.close(fig)
            continue
        target = part["target_loss"].dropna()
        if len(target):
            ax.axhline(float(target.iloc[0]), color="grey", linestyle=":", linewidth=0.8,
                       label="target")
            shown.append(float(target.iloc[0]))
        set_value_scale(ax, "y", shown)
        ax.set(xlabel=time_label("simulated time", unit), ylabel=axis_label("loss"), title=label)
        legend_outside(ax)
        fig.tight_layout()
        out[f"point{int(point)}"] = fig
    return out or None


def _slug(text: object) -> str:
    """A file-name-safe piece: an axis's last path component, ``.`` in numbers as ``p``."""
    text = str(text)
    leaf = text.replace("[", ".").split(".")[-1].rstrip("]") if not _is_number(text) else text
    return "".join(c if c.isalnum() or c in "-_" else "p" if c == "." else "-"
                   for c in leaf).strip("-")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


__all__ = ["energy_by_policy", "energy_time", "loss_vs_time", "metric_vs_axis"]
