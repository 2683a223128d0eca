"""Figures of Baechi placement: functions reading result tables / JSON, never simulating.

Two kinds: the registered figures (``baechi-step-time``, ``baechi-peak-memory``: plots/registry.py)
take a :class:`netsim.sweep.results.Results` and read what the ``baechi`` policy recorded in
its runs' epochs ``info`` (:func:`policies.baechi.policy.placement_info`: the algorithm chosen,
each candidate's simulated step time, the chosen placement's peak memory per device), so
``netsim figures`` draws them from any results folder holding baechi runs (e.g. the sweep
experiments/baechi/sweep.yaml); the others draw experiments/baechi/run.py's CSV/JSON tables.

Matplotlib with the Agg backend; the Okabe-Ito colour-blind-safe palette.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from netsim.sweep.results import Results  # noqa: E402
from plots.common import axis_label  # noqa: E402
from plots.style import figure, legend_outside, policy_style  # noqa: E402  (one style per algorithm)

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
ALGO_COLOURS = {name: policy_style(name)["color"] for name in ("m-topo", "m-etf", "m-sct", "single")}


ALGORITHMS = ("m-topo", "m-etf", "m-sct")


def placements(results: Results) -> pd.DataFrame:
    """One row per run whose epochs record a placement (the first epoch that does): the run's
    run_id, point, point_label, policy_label, seed and sweep axes, then the placement keys of the ``info``
    column (``placement_algorithm``, ``placement_step_s``, ``placement_peak_memory_bytes``, ...).
    A run that stopped before its first epoch (nothing fits) has no row."""
    epochs = results.epochs
    if epochs.empty or "info" not in epochs:
        return pd.DataFrame()
    rows = []
    for rid, infos in epochs.sort_values(["run_id", "epoch"]).groupby("run_id", sort=False)["info"]:
        for text in infos:
            info = json.loads(text) if isinstance(text, str) and text else {}
            if "placement_algorithm" in info:
                rows.append({"run_id": rid, **info})
                break
    if not rows:
        return pd.DataFrame()
    runs = results.runs
    keep = ["run_id", "point", "point_label", "policy_label", "seed",
            *[a for a in results.axes if a in runs and a != "seed"]]
    return runs[keep].merge(pd.DataFrame(rows), on="run_id").sort_values(["point", "seed"])


def _fmt_value(column: str, value: Any) -> str:
    """A tick label for a sweep axis value: bytes as kB/MB/GB, numbers with %g."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if column.endswith("_bytes"):
            for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
                if abs(value) >= size:
                    return f"{value / size:g} {unit}"
        return f"{value:g}"
    return str(value)


def point_ticks(table: pd.DataFrame, axes: list[str]) -> tuple[list[int], list[str], str]:
    """The points of ``table`` in order, a tick label each and the x-axis label.

    Axes that vary over the points are the x-axis; zipped axes with the same name and values
    (the memory of every device, say) count once. One such axis: its values label the ticks
    (sorted by value) and its name the axis; several: the point labels; none: the point label.
    """
    first = table.drop_duplicates("point").set_index("point")
    varying: dict[tuple[str, tuple], str] = {}
    for axis in axes:
        values = first[axis] if axis in first else None
        if values is None or values.map(repr).nunique() < 2:
            continue
        leaf = axis.replace("[", ".").split(".")[-1].rstrip("]")
        varying.setdefault((leaf, tuple(values.map(repr))), axis)
    if len(varying) == 1:
        axis = next(iter(varying.values()))
        values = first[axis]
        numeric = values.map(lambda v: isinstance(v, int | float)).all()
        points = list(values.sort_values().index) if numeric else list(first.index)
        label = axis_label(axis)
        if axis.endswith("_bytes"):
            label = label.replace(" (bytes)", " per device" if "devices" in axis else "")
        return points, [_fmt_value(axis, values[p]) for p in points], label
    points = list(first.index)
    labels = [str(first.loc[p, "point_label"]).replace(", ", "\n") for p in points]
    return points, labels, "sweep point" if varying else ""


def _groups(table: pd.DataFrame, axes: list[str]) -> tuple[list[tuple[int, str]], list[str], str]:
    """The (point, policy label) groups of ``table`` in order, a label each and the x-axis
    label (:func:`point_ticks`; the policy label is added when the runs hold several, e.g.
    baechi entries with different parameters)."""
    points, ticks, xlabel = point_ticks(table, axes)
    several = table["policy_label"].nunique() > 1
    groups, labels = [], []
    for point, tick in zip(points, ticks, strict=True):
        for label in sorted(table.loc[table["point"] == point, "policy_label"].unique()):
            groups.append((point, str(label)))
            if not several:
                labels.append(tick)
            else:  # one point: its label says nothing the caption does not
                labels.append(f"{tick}\n{label}" if tick and len(points) > 1 else str(label))
    return groups, labels, xlabel


def step_time(results: Results):
    """Simulated step time (s) of each placement algorithm per sweep point (bars; none where it
    does not fit, marked x), one device as a dashed reference, the chosen one starred."""
    table = placements(results)
    if table.empty:
        return None
    groups, ticks, xlabel = _groups(table, list(results.axes))
    steps = pd.DataFrame([{"point": p, "policy_label": lab, "algorithm": a,
                           "step_s": math.nan if s is None else s}
                          for p, lab, d in zip(table["point"], table["policy_label"],
                                               table["placement_step_s"], strict=True)
                          for a, s in d.items()])
    mean = steps.groupby(["point", "policy_label", "algorithm"])["step_s"].mean()
    chosen = table.groupby(["point", "policy_label"])["placement_algorithm"].agg(
        lambda a: a.mode().iloc[0])
    algos = [a for a in ALGORITHMS if a in set(steps["algorithm"])]
    width = 0.8 / max(len(algos), 1)
    lines = [len(line) for tick in ticks for line in tick.split("\n")] or [0]
    across = len(groups) <= 6 and max(lines) * len(groups) <= 48  # else labels on the y-axis
    fig, ax = figure(wide=across and len(groups) > 3)
    if not across:
        fig.set_size_inches(3.5, max(1.8, 0.6 + 0.32 * len(groups) * (len(algos) + 1) / 2))
    top = float(np.nanmax(mean.to_numpy())) if mean.notna().any() else 1.0
    shown: set[str] = set()

    def once(label: str) -> str:  # each legend entry once
        if label in shown:
            return "_nolegend_"
        shown.add(label)
        return label

    def mark(pos: float, value: float, **kw) -> None:  # a marker at (group position, value)
        ax.plot(*((pos, value) if across else (value, pos)), linestyle="none", **kw)

    for i, group in enumerate(groups):
        for k, algo in enumerate(algos):
            pos = i + (k - (len(algos) - 1) / 2) * width
            value = mean.get((*group, algo), math.nan)
            style = policy_style(algo)
            if math.isnan(value):
                mark(pos, 0.02 * top, marker="x", color=style["color"], markersize=5,
                     label=once("does not fit"))
                continue
            bar = ax.bar if across else ax.barh
            bar(pos, value, width, color=style["color"], edgecolor="black", linewidth=0.4,
                label=once(algo))
            if chosen.get(group) == algo:
                mark(pos, value * 1.04, marker="*", color="black", markersize=6,
                     label=once("chosen"))
        single = mean.get((*group, "single"), math.nan)
        if not math.isnan(single):
            style = policy_style("single")
            ref = ax.hlines if across else ax.vlines
            ref(single, i - 0.45, i + 0.45, colors=style["color"], linestyles=style["linestyle"],
                linewidth=1.0, label=once("one device"))
            if chosen.get(group) == "single":
                mark(i, single * 1.04, marker="*", color="black", markersize=6,
                     label=once("chosen"))
    if across:
        ax.set_xticks(range(len(groups)), ticks)
        ax.set_xlim(-0.6, len(groups) - 0.4)
        ax.set_ylim(0, top * 1.15)
        ax.set(xlabel=xlabel, ylabel=axis_label("step_time_s"))
        ax.grid(axis="x", visible=False)
    else:
        ax.set_yticks(range(len(groups)), ticks)
        ax.set_ylim(len(groups) - 0.4, -0.6)  # first group on top
        ax.set_xlim(0, top * 1.15)
        ax.set(ylabel=xlabel, xlabel=axis_label("step_time_s"))
        ax.grid(axis="y", visible=False)
    legend_outside(ax)
    fig.tight_layout()
    return fig


def peak_memory(results: Results):
    """Peak memory (MB) per device of the chosen placement against each device's capacity,
    for the first run (lowest seed) of each sweep point; keyed ``point<N>`` (``point<N>-LABEL``
    when the runs hold several baechi policy labels)."""
    table = placements(results)
    if table.empty:
        return None
    groups, ticks, xlabel = _groups(table, list(results.axes))
    several = table["policy_label"].nunique() > 1
    out = {}
    for (point, label), tick in zip(groups, ticks, strict=True):
        grp = table[(table["point"] == point) & (table["policy_label"] == label)]
        row = grp.iloc[0]
        devices = list(row["placement_devices"])
        peak = np.asarray(row["placement_peak_memory_bytes"], dtype=float) / 1e6
        capacity = np.asarray(row["placement_memory_bytes"], dtype=float) / 1e6
        if len(peak) != len(devices) or len(capacity) != len(devices) or not devices:
            continue
        algo = str(row["placement_algorithm"])
        style = policy_style(algo)
        fig, ax = figure()
        fig.set_size_inches(3.5, max(1.6, 0.9 + 0.28 * len(devices)))
        y = np.arange(len(devices))
        ax.barh(y, peak, 0.6, color=style["color"], edgecolor="black", linewidth=0.4,
                label=f"peak ({algo})")
        ax.plot(capacity, y, marker="|", markersize=12, markeredgewidth=1.5, color="black",
                linestyle="none", label="capacity")
        ax.set_yticks(y, devices)
        ax.invert_yaxis()
        ax.set_xlim(0, max(float(capacity.max()), float(peak.max())) * 1.08)
        title = f"{xlabel} {tick}" if xlabel and xlabel != "sweep point" else tick
        ax.set(xlabel="memory (MB)", title=title.replace("\n", ", "))
        ax.grid(axis="y", visible=False)
        legend_outside(ax)
        fig.tight_layout()
        out[f"point{int(point)}" + (f"-{label}" if several else "")] = fig
    return out or None


def step_time_vs_memory_figure(table: pd.DataFrame | str | Path, out: str | Path) -> Path:
    """Step time per algorithm vs memory per device, single-device time as a line.

    ``table`` columns: algorithm, memory_fraction, step_time_s (NaN when infeasible or out of
    memory), and rows with algorithm ``single`` at memory_fraction 1.0 for the reference line.
    """
    df = pd.read_csv(table) if not isinstance(table, pd.DataFrame) else table
    fig, ax = plt.subplots(figsize=(6, 4))
    single = df[df.algorithm == "single"].step_time_s.dropna()
    for algo, sub in df[df.algorithm != "single"].groupby("algorithm"):
        sub = sub.sort_values("memory_fraction")
        ax.plot(sub.memory_fraction, sub.step_time_s * 1e3, marker="o", label=algo,
                color=ALGO_COLOURS.get(algo))
    if len(single):
        ax.axhline(single.min() * 1e3, color=ALGO_COLOURS["single"], ls="--", label="single device")
    ax.set_xlabel("memory per device (fraction of the graph's total operator memory)")
    ax.set_ylabel("step time (ms)")
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, out)


def placement_time_figure(table: pd.DataFrame | str | Path, out: str | Path) -> Path:
    """Placement time (s) vs number of operators, log-log, one line per algorithm.

    ``table`` columns: algorithm, n_operators, placement_time_s.
    """
    df = pd.read_csv(table) if not isinstance(table, pd.DataFrame) else table
    fig, ax = plt.subplots(figsize=(6, 4))
    for algo, sub in df.groupby("algorithm"):
        sub = sub.sort_values("n_operators")
        ax.loglog(sub.n_operators, sub.placement_time_s, marker="o", label=algo, color=ALGO_COLOURS.get(algo))
    ax.set_xlabel("operators")
    ax.set_ylabel("placement time (s)")
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    return _save(fig, out)


def gantt_caption(rec: dict) -> str:
    """The provenance line under a Gantt chart: what was placed (graph and algorithm where the
    record names them), on how many devices of what memory, the step time, netsim's version."""
    import netsim

    parts = []
    what = ", ".join(f"{k} {rec[k]}" for k in ("graph", "algorithm", "chosen", "mode")
                     if rec.get(k))
    if what:
        parts.append(what)
    devices = len(rec.get("devices", []))
    memory = min(rec.get("memory_bytes") or [0])
    parts.append(f"{devices} device{'' if devices == 1 else 's'}"
                 + (f", {memory / 2**20:.4g} MiB each" if memory else ""))
    ops, moves = len(rec.get("ops", [])), len(rec.get("transfers", []))
    parts.append(f"{ops} operator{'' if ops == 1 else 's'}, {moves} transfer"
                 f"{'' if moves == 1 else 's'}")
    if rec.get("step_time_s") is not None:
        parts.append(f"step {float(rec['step_time_s']) * 1e3:.4g} ms")
    return "; ".join([*parts, f"netsim {netsim.__version__} (netsim place --gantt)"])


OP_LANE = (-0.4, 0.5)
"""Where a device's operator bars sit around its row (offset, height): above its transfers."""
TRANSFER_LANE = (0.18, 0.2)
"""Where the transfers a device sends sit (offset, height): a thin lane of their own under
its operator bars, so they never cover them."""


def gantt_figure(record: dict | str | Path, out: str | Path) -> Path:
    """Gantt chart of one step (operators per device, transfers) above per-device memory.

    ``record``: the dict written by ``policies.baechi.command.step_record`` (or its JSON file):
    devices, memory_bytes, ops [[node, device, start_s, end_s]], transfers [[node, src, dst,
    bytes, start_s, end_s]], memory_trace [per device [[time_s, bytes]]]; ``graph``,
    ``algorithm`` where given go into the caption. Each device's row holds its operators (wide
    bars in its colour) and, in a thin grey lane of its own below them, the transfers it sends
    (never drawn over an operator); a provenance caption (:func:`gantt_caption`) sits under the
    figure and in the PNG's metadata.
    """
    rec: dict = record if isinstance(record, dict) else json.loads(Path(record).read_text(encoding="utf-8"))
    devices = rec["devices"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    lanes: dict[int, list[tuple[float, float]]] = {}
    for _, d, s, e in rec["ops"]:
        lanes.setdefault(int(d), []).append((s * 1e3, (e - s) * 1e3))
    for d, bars in sorted(lanes.items()):
        top.broken_barh(bars, (d + OP_LANE[0], OP_LANE[1]), facecolors=OKABE_ITO[d % 7],
                        linewidth=0, zorder=2, label="operators" if d == min(lanes) else None)
    sent: dict[int, list[tuple[float, float]]] = {}
    for _, a, _b, _, s, e in rec["transfers"]:
        sent.setdefault(int(a), []).append((s * 1e3, max((e - s) * 1e3, 0.0)))
    for d, bars in sorted(sent.items()):
        top.broken_barh(bars, (d + TRANSFER_LANE[0], TRANSFER_LANE[1]), facecolors="0.35",
                        linewidth=0, zorder=1,
                        label="transfers sent (lane below)" if d == min(sent) else None)
    top.set_yticks(range(len(devices)), devices)
    top.set_ylim(len(devices) - 0.5, -0.5)
    top.set_ylabel("device")
    top.grid(axis="y", visible=False)
    top.set_title("operators (bars) and the transfers each device sends (grey lane) over one step")
    if rec["transfers"]:
        legend_outside(top, fontsize=7)  # (beside the lanes: never over a bar)
    for d, trace in enumerate(rec["memory_trace"]):
        if trace:
            t = [p[0] * 1e3 for p in trace]
            m = [p[1] / 2**20 for p in trace]
            bottom.step(t, m, where="post", color=OKABE_ITO[d % 7], label=devices[d])
    limit = min(rec["memory_bytes"]) / 2**20
    bottom.axhline(limit, color="k", ls=":", label="device memory")
    bottom.set_xlabel("time (ms)")
    bottom.set_ylabel("memory (MiB)")
    legend_outside(bottom, fontsize=7)
    caption = gantt_caption(rec)
    fig.text(0.01, 0.0, caption, ha="left", va="top", fontsize=6, color="0.35")
    fig.netsim_meta = {"name": "gantt", "caption": caption}  # type: ignore[attr-defined]
    return _save(fig, out)


def _save(fig, out: str | Path) -> Path:
    """Write ``fig`` (its caption and legends kept in the file; a Gantt chart's caption also
    in the PNG's ``Description``), close it; returns the path."""
    import netsim
    from netsim.figures import extra_artists

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    meta = getattr(fig, "netsim_meta", None) or {}
    info = {"Software": f"netsim {netsim.__version__}"}
    if meta.get("caption") and out.suffix.lower() == ".png":
        info["Description"] = meta["caption"]
    fig.savefig(out, dpi=130, bbox_inches="tight", bbox_extra_artists=extra_artists(fig),
                metadata=info if out.suffix.lower() == ".png" else None)
    plt.close(fig)
    return out
