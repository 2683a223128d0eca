"""Baechi experiments: each sub-command writes a result table, then its figure from the table.

    python -m experiments.baechi.run step-time [--graph gnmt] [--out DIR]
    python -m experiments.baechi.run placement-time [--out DIR]
    python -m experiments.baechi.run gantt [--graph gnmt] [--fraction 0.5] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from netsim.opgraph import identical_devices, layered_dag, load_graph, total_memory_bytes
from plots.baechi import gantt_figure, placement_time_figure, step_time_vs_memory_figure
from policies.baechi.command import step_record
from policies.baechi.place import place, simulate

ALGORITHMS = ("m-topo", "m-etf", "m-sct")
N_DEVICES = 4
FRACTIONS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
SIZES = (100, 300, 1000, 3000, 10000)


def _step(graph, devices, algorithm):
    res = place(graph, devices, algorithm, group=algorithm != "single")
    step = simulate(res, devices) if res.ok else None
    ok = step is not None and step.status == "ok"
    return res, step, (step.step_time_s if ok else float("nan"))


def step_time(graph_name: str, out: Path) -> Path:
    """Step time per algorithm vs memory per device (fractions of total operator memory)."""
    g = load_graph(graph_name)
    total = total_memory_bytes(g)
    rows = []
    _, _, single = _step(g, identical_devices(1, total), "single")
    rows.append({"algorithm": "single", "memory_fraction": 1.0, "step_time_s": single, "status": "ok"})
    for f in FRACTIONS:
        devices = identical_devices(N_DEVICES, f * total)
        for a in ALGORITHMS:
            res, step, t = _step(g, devices, a)
            status = res.status if step is None else step.status
            rows.append({"algorithm": a, "memory_fraction": f, "step_time_s": t, "status": status,
                         "placement_time_s": res.placement_time_s})
    table = out / f"step_time_{graph_name}.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    return step_time_vs_memory_figure(table, out / f"step_time_{graph_name}.png")


def placement_time(out: Path) -> Path:
    """Placement time vs operators (layered random DAGs, 4 devices at 0.3 of the memory each)."""
    rows = []
    for n in SIZES:
        g = layered_dag(n, np.random.default_rng(n))
        devices = identical_devices(N_DEVICES, 0.3 * total_memory_bytes(g))
        for a in ALGORITHMS:
            res = place(g, devices, a, group=False)
            rows.append({"algorithm": a, "n_operators": n, "placement_time_s": res.placement_time_s,
                         "lp_time_s": res.lp_time_s, "status": res.status})
    table = out / "placement_time.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    return placement_time_figure(table, out / "placement_time.png")


def gantt(graph_name: str, fraction: float, algorithm: str, out: Path) -> Path:
    """Gantt chart and per-device memory over one step."""
    g = load_graph(graph_name)
    devices = identical_devices(N_DEVICES, fraction * total_memory_bytes(g))
    res, step, _ = _step(g, devices, algorithm)
    if step is None:
        raise SystemExit(f"{algorithm} on {graph_name} at {fraction}: {res.reason}")
    record = out / f"gantt_{graph_name}_{algorithm}.json"
    record.write_text(json.dumps(step_record(step, devices)), encoding="utf-8")
    return gantt_figure(record, out / f"gantt_{graph_name}_{algorithm}.png")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("experiment", choices=["step-time", "placement-time", "gantt"])
    p.add_argument("--graph", default="gnmt")
    p.add_argument("--fraction", type=float, default=0.5)
    p.add_argument("--algorithm", default="m-sct", choices=ALGORITHMS)
    p.add_argument("--out", type=Path, default=Path("experiments/baechi/out"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.experiment == "step-time":
        fig = step_time(args.graph, args.out)
    elif args.experiment == "placement-time":
        fig = placement_time(args.out)
    else:
        fig = gantt(args.graph, args.fraction, args.algorithm, args.out)
    print(f"figure: {fig}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
