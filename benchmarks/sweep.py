"""Sweep throughput: 200 short runs on 1 worker, a 2-process pool and a 2-worker Dask cluster.

Prints, measured in this one run: wall time of each path and its speed-up over 1 worker; the
overhead per run of the pool and Dask paths (worker time per run beyond the run's own compute:
wall x workers / runs - mean run compute); and the time to resume the finished sweep (plan
validation plus skipping every run; no run may be recomputed). Checks that the three paths
stored identical tables.

    python benchmarks/sweep.py            # 200 runs
    python benchmarks/sweep.py --runs 60  # quicker
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from netsim.results.store import read_table
from netsim.sweep.plan import load_plan
from netsim.sweep.runner import run_sweep

SWEEP = """
name: bench
base: two-phones
policies: [fedavg-all, {{name: random-k, params: {{k: 1}}}}]
seeds: {seeds}
grid:
  training.max_epochs: [40]
"""
WORKERS = 2


def timed(label: str, plan, out: Path, **kwargs) -> float:
    start = time.perf_counter()
    summary = run_sweep(plan, out, progress=False, **kwargs)
    wall = time.perf_counter() - start
    assert summary.computed == len(plan.tasks), summary.text()
    print(f"  {label:28s} {wall:7.2f} s")
    return wall


def runs_table(out: Path) -> pd.DataFrame:
    return read_table(out, "runs").drop(columns="wall_s").sort_values("run_id") \
        .reset_index(drop=True)


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs (even; default 200)")
    args = parser.parse_args()
    from distributed import LocalCluster

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sweep = root / "bench.yaml"
        sweep.write_text(SWEEP.format(seeds=args.runs // 2))
        plan = load_plan(sweep)
        n = len(plan.tasks)
        print(f"{n} runs (two-phones, 40 epochs, fedavg-all and random-k), {WORKERS} workers; "
              f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        serial = timed("1 worker (in process)", plan, root / "serial", workers=1)
        compute = float(read_table(root / "serial", "runs")["wall_s"].mean())
        pool = timed(f"{WORKERS}-process pool", plan, root / "pool", workers=WORKERS)
        start = time.perf_counter()
        with LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                          dashboard_address=None, silence_logs=logging.CRITICAL) as cluster:
            startup = time.perf_counter() - start
            dask = timed(f"Dask LocalCluster ({WORKERS} w.)", plan, root / "dask",
                         scheduler=cluster.scheduler_address)
        print(f"  (Dask cluster start-up, not counted above: {startup:.2f} s)")
        same = runs_table(root / "serial").equals(runs_table(root / "pool")) and \
            runs_table(root / "serial").equals(runs_table(root / "dask"))
        print(f"identical runs tables on all three paths: {same}")
        print(f"mean run compute: {compute * 1e3:.1f} ms")
        print(f"speed-up over 1 worker: pool {serial / pool:.2f}x, Dask {serial / dask:.2f}x")
        print(f"overhead per run (worker time beyond compute): pool "
              f"{(pool * WORKERS / n - compute) * 1e3:.1f} ms, Dask "
              f"{(dask * WORKERS / n - compute) * 1e3:.1f} ms (target < 50 ms)")
        start = time.perf_counter()
        again = run_sweep(load_plan(sweep), root / "serial", workers=WORKERS, progress=False)
        resume = time.perf_counter() - start
        print(f"load average after: {os.getloadavg()[0]:.1f} (timings assume idle cores)")
        print(f"resume of the finished sweep: {resume:.2f} s, {again.skipped} skipped, "
              f"{again.computed} recomputed (target: seconds, none)")


if __name__ == "__main__":
    main()
