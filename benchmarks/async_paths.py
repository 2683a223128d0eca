"""Buffered epochs in arrays against the event path over long runs: how far apart, per run and
over seeds.

Run: python benchmarks/async_paths.py [--seeds N] [--scenario FILE]

Run by run the two paths agree to 1e-9 for the first hundred-odd aggregations
(tests/test_buffered_arrays.py); over thousands their rounding differences grow, and a run on
one path becomes another rounding of the run on the other (docs/async.md). This script runs
fedbuff and fedasync on experiments/async's uniform fleet (100 identical laptops: the world
whose exact ties make the paths' roundings matter most) with both paths and prints, per
policy: the aggregation at which the two runs of a seed first differ by more than 1e-9
(relative, an epoch's end), the mean time to the target on each path with the ratio of the
means and a 95 % bootstrap interval of it (paired by seed), and each path's wall time.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import netsim
from netsim.scenario.loading import load_scenario

ROOT = Path(__file__).resolve().parent.parent
POLICIES = {"fedbuff": {"concurrency": 20, "buffer_updates": 5},
            "fedasync": {"concurrency": 20}}


def first_apart(fast: np.ndarray, slow: np.ndarray, rtol: float = 1e-9) -> int:
    """The first epoch whose end differs by more than ``rtol`` (relative) between two runs
    (the shorter run's length if none does)."""
    n = min(len(fast), len(slow))
    apart = np.abs(fast[:n] - slow[:n]) > rtol * np.abs(slow[:n])
    return int(np.argmax(apart)) if apart.any() else n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--scenario", default=str(ROOT / "experiments" / "async" / "uniform.yaml"))
    a = ap.parse_args(argv)
    sc = load_scenario(a.scenario)
    rng = np.random.default_rng(0)
    print(f"{a.scenario}, {a.seeds} seeds; time to target (s) on each path")
    for policy, params in POLICIES.items():
        times = {True: [], False: []}
        walls = {True: 0.0, False: 0.0}
        apart = []
        for seed in range(a.seeds):
            ends = {}
            for fast in (True, False):
                t0 = time.perf_counter()
                res = netsim.simulate(sc, policy, seed=seed, params=params, fast_epochs=fast)
                walls[fast] += time.perf_counter() - t0
                times[fast].append(float(res.runs["time_s"].iloc[0]))
                ends[fast] = res.epochs["end_s"].to_numpy(float)
            apart.append(first_apart(ends[True], ends[False]))
        fast_t, slow_t = np.array(times[True]), np.array(times[False])
        boots = rng.integers(0, a.seeds, size=(2000, a.seeds))
        ratios = fast_t[boots].mean(axis=1) / slow_t[boots].mean(axis=1)
        low, high = np.percentile(ratios, [2.5, 97.5])
        print(f"  {policy:8s}: runs first 1e-9 apart at aggregation {int(np.min(apart))}-"
              f"{int(np.max(apart))} (median {int(np.median(apart))}); time to target "
              f"{fast_t.mean():.1f} s (arrays) vs {slow_t.mean():.1f} s (events): ratio "
              f"{fast_t.mean() / slow_t.mean():.4f} [{low:.4f}, {high:.4f}]; wall "
              f"{walls[True]:.1f} s vs {walls[False]:.1f} s")


if __name__ == "__main__":
    main()
