"""Figures of Baechi placement: functions reading result tables / JSON, never simulating.

Matplotlib with the Agg backend; the Okabe-Ito colour-blind-safe palette.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from plots.style import policy_style  # noqa: E402  (one colour per algorithm in every figure)

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
ALGO_COLOURS = {name: policy_style(name)["color"] for name in ("m-topo", "m-etf", "m-sct", "single")}


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


def gantt_figure(record: dict | str | Path, out: str | Path) -> Path:
    """Gantt chart of one step (operators per device, transfers) above per-device memory.

    ``record``: the dict written by ``policies.baechi.command.step_record`` (or its JSON file):
    devices, memory_bytes, ops [[node, device, start_s, end_s]], transfers [[node, src, dst,
    bytes, start_s, end_s]], memory_trace [per device [[time_s, bytes]]].
    """
    rec: dict = record if isinstance(record, dict) else json.loads(Path(record).read_text(encoding="utf-8"))
    devices = rec["devices"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    for _, d, s, e in rec["ops"]:
        top.barh(d, (e - s) * 1e3, left=s * 1e3, height=0.6, color=OKABE_ITO[d % 7], lw=0)
    for _, a, b, _, s, e in rec["transfers"]:
        top.plot([s * 1e3, e * 1e3], [a + 0.4, b + 0.4], color="0.4", lw=0.5, alpha=0.5)
    top.set_yticks(range(len(devices)), devices)
    top.set_ylabel("device")
    top.set_title("operators (bars) and transfers (grey lines) over one step")
    for d, trace in enumerate(rec["memory_trace"]):
        if trace:
            t = [p[0] * 1e3 for p in trace]
            m = [p[1] / 2**20 for p in trace]
            bottom.step(t, m, where="post", color=OKABE_ITO[d % 7], label=devices[d])
    limit = min(rec["memory_bytes"]) / 2**20
    bottom.axhline(limit, color="k", ls=":", label="device memory")
    bottom.set_xlabel("time (ms)")
    bottom.set_ylabel("memory (MiB)")
    bottom.legend(fontsize=7, ncol=3)
    return _save(fig, out)


def _save(fig, out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out
