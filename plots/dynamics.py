"""Figures of a time-varying world (experiments/dynamics; docs/dynamics.md), drawn from stored
run tables (the ``netsim.figures`` registry, plots/registry.py).

- :func:`availability_map` (``dynamics-availability-map``): devices x simulated time for one
  run per scenario point: each device's online intervals (``devices.online_intervals_s``) as
  light bars, the epochs it trained in (``epochs.participant_ids``) darker on top, dropouts
  (``epochs.dropped_ids``) as crosses at the instant the device went offline, updates discarded
  as late (``epochs.late_ids``) as hollow circles at the epoch's end.
- :func:`energy_time` (``dynamics-energy-time``): energy (J) and time (s) to the target per
  policy, one bar per scenario point (the static twin and the churn scenario), mean over the
  runs that reached the target with its 95 % interval (Student-t, as ``netsim compare``
  prints; drawn from 0 at the lowest), and each policy's success rate with its Wilson 95 %
  interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from netsim.figures import drawn_from
from netsim.sweep.results import Results
from netsim.sweep.stats import wilson_interval
from plots.common import interval, plural, time_label, time_unit
from plots.style import error_bar_kw, figure, halo_error_bars, legend_outside, style_for

ONLINE_COLOUR = "#56B4E9"   # light: online
TRAIN_COLOUR = "#0072B2"    # dark: training in an epoch
DROP_COLOUR = "#D55E00"     # dropouts
POLICY_ORDER = ["fedavg-all", "random-k", "overselect", "greedy-energy", "pact", "depl"]
HATCHES = ["", "////", "\\\\\\\\", "...."]


def _ids(value) -> list[str]:
    """A list column's cell (list, array, None or NaN) as a list of device ids."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return [str(v) for v in value]


def intervals(value) -> list[tuple[float, float]]:
    """``online_intervals_s`` ([start0, end0, start1, end1, ...]) as (start, end) pairs."""
    flat = [float(v) for v in (value if value is not None and not isinstance(value, float)
                                else [])]
    return list(zip(flat[0::2], flat[1::2], strict=False))


def _offline_somewhere(devices: pd.DataFrame, time_s: float) -> bool:
    """Whether some device of one run was offline for part of it (its online intervals do
    not cover the run), i.e. the run's world changed who was online."""
    if "online_intervals_s" not in devices:
        return False
    for value in devices["online_intervals_s"]:
        spans = intervals(value)
        if spans and sum(e - s for s, e in spans) < time_s * (1 - 1e-9):
            return True
    return False


MAP_ORDER = ["overselect", "fedavg-all", "random-k", "greedy-energy", "pact", "depl"]


def pick_run(runs: pd.DataFrame, results: Results) -> str | None:
    """The run to draw for one point: the first policy of :data:`MAP_ORDER` present (then
    any), lowest seed, that trained at least one epoch and saw devices offline."""
    order = {p: i for i, p in enumerate(MAP_ORDER)}
    runs = runs[runs["epochs"] > 0].assign(
        _rank=runs["policy"].map(lambda p: order.get(p, len(order))))
    for rid, time_s in runs.sort_values(["_rank", "seed"])[["run_id", "time_s"]].itertuples(
            index=False):
        dev = results.devices[results.devices["run_id"] == rid]
        if _offline_somewhere(dev, float(time_s)):
            return str(rid)
    return None


def availability_map(results: Results):
    """Who was online, who trained and who dropped out (devices x simulated time), for one
    run per scenario point (overselect's first seed where present, else the next policy of
    :data:`MAP_ORDER`); one figure per point, keyed by its label; points where every device
    stayed online are skipped."""
    if results.devices.empty or "online_intervals_s" not in results.devices:
        return None
    out = {}
    runs = with_point_key(results.runs)
    for _key, grp in runs.groupby("point_key", sort=True):
        rid = pick_run(grp, results)
        if rid is None:
            continue
        run = grp[grp["run_id"] == rid].iloc[0]
        epochs = results.epochs[results.epochs["run_id"] == rid].sort_values("epoch")
        devices = results.devices[results.devices["run_id"] == rid]
        out[_slug(str(run["point_label"]), out)] = drawn_from(
            availability_figure(run, epochs, devices), [rid])
    return out or None


def with_point_key(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with ``point_key``: one value per scenario point across sweeps (a point index
    is per sweep: two sweeps' point 0 are different points)."""
    sweep = runs["sweep"].astype(str) if "sweep" in runs else pd.Series("", index=runs.index)
    return runs.assign(point_key=sweep + "#" + runs["point"].astype(int).astype(str))


def _slug(label: str, taken) -> str:
    """A file-name suffix from a point label, unique among ``taken``."""
    base = "".join(c if c.isalnum() or c in "-_." else "-" for c in label).strip("-") or "point"
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}-{k}"
    return name


def _trainers(epochs: pd.DataFrame, devices: pd.DataFrame, time_s: float) -> list[str]:
    """Devices to show: those that trained, and those online for part of the run only
    (network nodes, devices never online and devices online throughout that never trained,
    such as the aggregator, left out), the most online first."""
    dev = devices
    if "network_node" in dev:
        dev = dev[~dev["network_node"].fillna(False).astype(bool)]
    used = {d for ids in epochs["participant_ids"] for d in _ids(ids)} \
        if "participant_ids" in epochs else set()
    online = {str(r.device): sum(e - s for s, e in intervals(r.online_intervals_s))
              for r in dev.itertuples()}
    shown = used | {d for d, t in online.items() if 0.0 < t < time_s * (1 - 1e-9)}
    return sorted(shown, key=lambda d: (-online.get(d, 0.0), d))


def availability_figure(run: pd.Series, epochs: pd.DataFrame, devices: pd.DataFrame):
    """:func:`availability_map` for one run (its runs row, epochs and devices tables)."""
    end = max(float(run["time_s"]), float(epochs["end_s"].max()) if len(epochs) else 0.0)
    names = _trainers(epochs, devices, end)
    row = {d: i for i, d in enumerate(names)}
    spans = {str(r.device): intervals(r.online_intervals_s) for r in devices.itertuples()}
    fig, ax = figure(wide=True)
    fig.set_size_inches(7.2, max(2.8, min(6.0, 1.2 + 0.04 * len(names))))
    online = [(row[d], s, e - s) for d in names for s, e in spans.get(d, [])]
    trained: list[tuple[int, float, float]] = []
    drops: list[tuple[float, int]] = []
    late: list[tuple[float, int]] = []
    for ep in epochs.itertuples():
        start, stop = float(ep.start_s), float(ep.end_s)
        trained += [(row[d], start, stop - start)
                    for d in _ids(getattr(ep, "participant_ids", None)) if d in row]
        for d in _ids(getattr(ep, "dropped_ids", None)):
            if d in row:  # the instant it went offline: an online interval ending in the epoch
                ends = [e for s, e in spans.get(d, []) if start - 1e-9 <= e <= stop + 1e-9]
                drops.append((ends[0] if ends else stop, row[d]))
        late += [(stop, row[d]) for d in _ids(getattr(ep, "late_ids", None)) if d in row]
    unit, length = time_unit(end)
    online = [(y, s / length, w / length) for y, s, w in online]
    trained = [(y, s / length, w / length) for y, s, w in trained]
    drops = [(x / length, y) for x, y in drops]
    late = [(x / length, y) for x, y in late]
    end /= length
    for bars, height, style in ((online, 0.8, {"color": ONLINE_COLOUR, "alpha": 0.35,
                                               "label": "online"}),
                                (trained, 0.5, {"color": TRAIN_COLOUR, "edgecolor": "white",
                                                "linewidth": 0.3,
                                                "label": "trains (epoch)"})):
        y, left, width = ([b[i] for b in bars] for i in range(3))
        ax.barh(y, width, height, left=left, **{"linewidth": 0, **style})
    ax.scatter([x for x, _ in drops], [y for _, y in drops], marker="x", s=14,
               color=DROP_COLOUR, linewidths=1.0, zorder=3, label="dropped out")
    ax.scatter([x for x, _ in late], [y for _, y in late], marker="o", s=12,
               facecolors="none", edgecolors="black", linewidths=0.7, zorder=3,
               label="late (discarded)")
    ax.set_xlim(0.0, end * 1.01 if end > 0 else 1.0)
    ax.set_ylim(len(names) - 0.5, -0.5)
    step = max(1, -(-len(names) // 30))
    ticks = list(range(0, len(names), step))
    ax.set_yticks(ticks, [names[i] for i in ticks], fontsize=5 if len(names) > 12 else 6)
    ax.set_xlabel(time_label("simulated time", unit))
    ax.set_ylabel("device (most online first)")
    ax.grid(False)
    ax.set_title(f"{run['scenario']}, {run['policy']}, seed {int(run['seed'])}: "
                 f"{plural(len(epochs), 'epoch')}, {plural(len(drops), 'dropout')}, "
                 f"{plural(len(late), 'late update')}; {len(names)} of "
                 f"{plural(_n_devices(devices), 'device')} shown")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def _n_devices(devices: pd.DataFrame) -> int:
    """Devices of one run's devices table that are not network nodes."""
    if "network_node" in devices:
        return int((~devices["network_node"].fillna(False).astype(bool)).sum())
    return len(devices)


def _point_labels(runs: pd.DataFrame) -> dict[int, str]:
    """A label per scenario point: its point label (the scenario's name outside sweeps);
    static points (a label with "static") first."""
    labels = {str(p): str(g["point_label"].iloc[0])
              for p, g in with_point_key(runs).groupby("point_key", sort=True)}
    return dict(sorted(labels.items(), key=lambda kv: ("static" not in kv[1], kv[0])))


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per scenario point and policy label: success rate (Wilson 95 %) and, over the runs that
    reached the target, energy (J) and time (s) means with 95 % Student-t intervals (as ``netsim compare``; a low bound below 0 drawn at 0)."""
    rows = []
    for (point, label), grp in with_point_key(runs).groupby(["point_key", "policy_label"],
                                                           sort=True):
        reached = grp["target_reached"].fillna(False).astype(bool) & (grp["status"] != "failed")
        row = {"point_key": str(point), "point_label": str(grp["point_label"].iloc[0]),
               "policy": str(label), "runs": len(grp)}
        row["success"], row["success_lo"], row["success_hi"] = wilson_interval(
            int(reached.sum()), len(grp))
        for metric in ("energy_j", "time_s"):
            row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = interval(
                grp.loc[reached, metric])
        rows.append(row)
    return pd.DataFrame(rows)


def _ordered(labels: Iterable[str]) -> list[str]:
    order = {p: i for i, p in enumerate(POLICY_ORDER)}
    return sorted(set(labels), key=lambda p: (order.get(p.split(" ")[0], len(order)), p))


def energy_time(results: Results):
    """Energy (J) and time (s) to the target per policy, static twin vs churn (means over
    the runs that reached the target, 95 % intervals), and each policy's success rate."""
    runs = results.runs
    if runs.empty:
        return None
    table = summary(runs)
    points = _point_labels(runs)
    policies = _ordered(table["policy"])
    styles = style_for(policies)
    fig, axes = figure(ncols=3, wide=True, sharey=True)
    fig.set_size_inches(7.2, max(2.2, 0.9 + 0.12 * len(policies) * max(1, len(points))))
    height = 0.8 / max(1, len(points))
    y = np.arange(len(policies))
    unit, length = time_unit(float(np.nanmax(table["time_s_hi"].to_numpy(float),
                                             initial=0.0)))
    panels = [("energy_j", "energy to target (J)", 1.0),
              ("time_s", time_label("time to target", unit), length),
              ("success", "success rate", 1.0)]
    for ax, (metric, xlabel, per) in zip(axes, panels, strict=True):
        for k, (point, label) in enumerate(points.items()):
            sub = table[table["point_key"] == point].set_index("policy").reindex(policies)
            mean = sub[metric].to_numpy(dtype=float) / per
            lo = sub[f"{metric}_lo"].to_numpy(dtype=float) / per
            hi = sub[f"{metric}_hi"].to_numpy(dtype=float) / per
            err = np.vstack([mean - lo, hi - mean])
            err = np.maximum(np.where(np.isnan(err), 0.0, err), 0.0)
            pos = y - 0.4 + height * (k + 0.5)
            ax.barh(pos, np.nan_to_num(mean), height,
                    color=[styles[p]["color"] for p in policies],
                    hatch=HATCHES[k % len(HATCHES)], edgecolor="white", linewidth=0.4,
                    alpha=0.5 if k == 0 else 0.95, label=label)
            halo_error_bars(ax.errorbar(np.nan_to_num(mean), pos, xerr=err, fmt="none",
                                        **error_bar_kw(capsize=1.5)))
            missing = pos[np.isnan(mean)]
            ax.plot(np.zeros_like(missing), missing, linestyle="", marker="x", color="black",
                    markersize=3)
        ax.set_xlabel(xlabel)
        ax.grid(axis="y", visible=False)
    axes[0].set_yticks(y, policies)
    axes[0].set_ylim(len(policies) - 0.5, -0.5)
    axes[2].set_xlim(0.0, 1.05)
    handles = [Patch(facecolor="0.55", alpha=0.5 if k == 0 else 0.95,
                     hatch=HATCHES[k % len(HATCHES)], edgecolor="white", label=label)
               for k, label in enumerate(points.values())]
    handles.append(Line2D([], [], marker="x", color="black", linestyle="",
                          label="never reached"))
    legend_outside(axes[2], handles, [h.get_label() for h in handles])
    fig.tight_layout()
    return fig


def is_dynamics_experiment(runs: pd.DataFrame) -> pd.Series:
    """Runs of experiments/dynamics (scenario or sweep named ``dynamics...``)."""
    names = runs["scenario"].astype(str)
    sweeps = runs["sweep"].astype(str) if "sweep" in runs else pd.Series("", index=runs.index)
    return names.str.startswith("dynamics") | sweeps.str.startswith("dynamics")


__all__ = ["availability_figure", "availability_map", "energy_time", "intervals",
           "is_dynamics_experiment", "pick_run", "summary", "with_point_key"]
