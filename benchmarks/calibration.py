"""Benchmark of the real-training backend and the calibration, and the surrogate's spread.

Prints:
1. wall time of one real-backend run (20 nodes, 30 epochs; target < 5 s on 2 cores) and,
   as the reference measured in the same run, of the surrogate on the same schedule;
2. wall time of the calibration grid (default grid, or ``--quick``) and its ratio to one run;
3. for several scenarios, the final loss over 50 seeds under ``netsim.simulate`` with
   ``training.backend: real`` and ``surrogate`` (same scenario, policy fedavg-all), and the
   two-sample Kolmogorov-Smirnov test (scipy.stats.ks_2samp) between them.

    python benchmarks/calibration.py [--quick] [--seeds 50] [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import netsim  # noqa: E402
from netsim.training import calibrate as cal  # noqa: E402
from netsim.training.loss import SurrogateLoss  # noqa: E402
from netsim.training.models import resolve_model  # noqa: E402
from netsim.training.real import RealBackend, RealTrainingConfig, _digits  # noqa: E402

N_NODES, EPOCHS, TRAIN_SAMPLES = 20, 30, 1438
REAL = {"learning_rate": 0.05, "batch_size": 16, "local_epochs": 2}  # calibration defaults
#: KS scenarios: (label, nodes, dirichlet_alpha, variant name from epoch 1 or None)
SCENARIOS = [("iid-10", 10, None), ("iid-20", 20, None), ("alpha-0.1", 10, 0.1),
             ("alpha-1", 10, 1.0)]


def one_run_times() -> tuple[float, float]:
    """(real, surrogate) wall seconds of one 20-node 30-epoch run of the backend alone."""
    model = resolve_model("mlp-digits")
    ids = [f"n{i}" for i in range(N_NODES)]
    samples = [TRAIN_SAMPLES // N_NODES] * N_NODES
    plan = dict(zip(ids, samples, strict=True))
    training = {"dirichlet_alpha": None, "real": RealTrainingConfig()}
    _digits()  # load the dataset (and import scikit-learn) outside the timed region
    t0 = time.perf_counter()
    real = RealBackend(model, ids, samples, training, np.random.default_rng(0))
    for _ in range(EPOCHS):
        real.advance(plan, 0)
    t1 = time.perf_counter()
    from netsim.scenario.schema import TrainingSpec

    spec = TrainingSpec(target_loss=0.01, deadline_s=1e9)
    for _ in range(100):
        surrogate = SurrogateLoss(model, spec, np.random.default_rng(0))
        for _ in range(EPOCHS):
            surrogate.advance(plan, 0)
    t2 = time.perf_counter()
    return t1 - t0, (t2 - t1) / 100


def scenario(nodes: int, alpha: float | None, backend: str) -> dict:
    """A star of phones around a server; declared samples = the digits training split."""
    devices = [{"id": "server", "flop_per_s": 1e12, "memory_bytes": 1e10, "power_busy_w": 100,
                "power_idle_w": 10}]
    links = []
    for i in range(nodes):
        devices.append({"id": f"p{i}", "flop_per_s": 1e10, "memory_bytes": 4e9, "power_busy_w": 5,
                        "power_idle_w": 1, "samples": TRAIN_SAMPLES // nodes})
        links.append({"a": "server", "b": f"p{i}", "bandwidth_bps": 2e7, "latency_s": 0.02,
                      "energy_j_per_bit": 1e-7})
    return {"name": f"digits-{nodes}", "devices": devices, "links": links,
            "aggregator": "server", "model": "mlp-digits",
            "training": {"backend": backend, "target_loss": 1e-4, "deadline_s": 1e9,
                         "max_epochs": EPOCHS, "dirichlet_alpha": alpha, "real": REAL}}


def final_loss(task: tuple[int, float | None, str, int]) -> float:
    nodes, alpha, backend, seed = task
    result = netsim.simulate(scenario(nodes, alpha, backend), policy="fedavg-all", seed=seed)
    return float(result.runs["final_loss"].iloc[0])


def ks_table(seeds: int, jobs: int) -> None:
    from scipy.stats import ks_2samp

    print(f"\nfinal loss after {EPOCHS} epochs, {seeds} seeds, real vs surrogate (netsim.simulate)")
    print(f"{'scenario':10s} {'real mean':>9s} {'sd':>6s} {'surr mean':>9s} {'sd':>6s} "
          f"{'sd ratio':>8s} {'KS stat':>7s} {'p-value':>8s}")
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for label, nodes, alpha in SCENARIOS:
            real = np.array(list(pool.map(final_loss, [(nodes, alpha, "real", s)
                                                       for s in range(seeds)])))
            surr = np.array([final_loss((nodes, alpha, "surrogate", s)) for s in range(seeds)])
            ks = ks_2samp(real, surr)
            print(f"{label:10s} {real.mean():9.4f} {real.std(ddof=1):6.4f} {surr.mean():9.4f} "
                  f"{surr.std(ddof=1):6.4f} {surr.std(ddof=1) / real.std(ddof=1):8.2f} "
                  f"{ks.statistic:7.3f} {ks.pvalue:8.3g}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="time the quick grid only")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    real_s, surr_s = one_run_times()
    print(f"one real-backend run ({N_NODES} nodes, {EPOCHS} epochs): {real_s:.3f} s "
          f"(target < 5 s: {'ok' if real_s < 5 else 'MISSED'})")
    print(f"surrogate, same schedule: {surr_s * 1e3:.3f} ms; real / surrogate = {real_s / surr_s:.0f}x")
    points = cal.quick_grid() if args.quick else cal.default_grid()
    seeds, epochs = (4, 10) if args.quick else (25, 30)
    t0 = time.perf_counter()
    table = cal.run_grid(points, range(seeds), epochs, jobs=args.jobs, progress=False)
    grid_s = time.perf_counter() - t0
    n_runs = table.groupby(["config", "seed"]).ngroups
    print(f"calibration grid ({'quick' if args.quick else 'default'}: {n_runs} runs, "
          f"{args.jobs} jobs): {grid_s:.1f} s = {grid_s / real_s:.0f} x one 20-node run, "
          f"{grid_s / n_runs:.3f} s per run")
    ks_table(args.seeds, args.jobs)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
