"""Dynamics benchmark: a changing world against the static one, side by side in one process.

Run: python benchmarks/dynamics.py [--quick]

1,000 generated devices (small-cnn, fedavg-all), 100 epochs, setup included, best of 3 runs:

- static: the scenario without a dynamics block (the reference);
- churn: markov availability (the catalog's per-class session lengths, diurnal amplitude
  0.5), lognormal bandwidth (sigma 0.3, correlation 60 s, pieces of 10 s) and compute spread
  0.2 with 5 % stragglers 5x slower: the contract's case, target at most 3x the static time;
- everyone online: the same bandwidth and compute dynamics with every device online in every
  epoch, so both runs train as many device-epochs: the cost of the dynamics themselves;
- sessions of 10 min: the churn case with markov sessions of ten minutes on and ten off
  (diurnal amplitude 0.5), so that sessions end mid-epoch in most epochs (issue 47): a
  participant that drops mid-epoch ends its transfer or training at that instant inside the
  arrays (netsim.epochs.stopping); target at most 3x the static time.

For each: wall time, ratio to static, participant-epochs, time per participant-epoch, how
many epochs ran on the array fast path and how many as guarded events, and why
(``World.events_why``: clusters, transfers still moving, a per-device workload, or a piece
the arrays cannot play), how many of the array epochs had a capacity
change inside their downloads or uploads (played piece by piece:
netsim.fastepoch.play_phase_stopping), and how many participants dropped mid-epoch.
"""

from __future__ import annotations

import argparse
import copy
import time

import netsim
from netsim import engine
from netsim.epochs import guarded

DYNAMICS = {
    "availability": {"model": "markov", "diurnal_amplitude": 0.5},
    "bandwidth": {"model": "lognormal", "sigma": 0.3, "correlation_s": 60, "step_s": 10},
    "compute": {"spread": 0.2, "straggler_probability": 0.05, "straggler_slowdown": 5},
}


def scenario(n: int, epochs: int, dynamics: dict | None) -> dict:
    s = {"name": f"dyn-bench-{n}", "seed": 0,
         "generate": {"n_devices": n, "devices_per_cell": 32, "seed": 1},
         "model": "small-cnn",
         "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": epochs}}
    if dynamics is not None:
        s["dynamics"] = copy.deepcopy(dynamics)
    return s


SESSIONS = {**DYNAMICS, "availability": {"model": "markov", "mean_online_s": "10 min",
                                         "mean_offline_s": "10 min", "diurnal_amplitude": 0.5}}
"""The churn case with sessions that end mid-epoch in most epochs (issue 47)."""


def timed(s: dict, repeats: int) -> tuple[float, int, dict[str, int]]:
    """Best wall time of ``repeats`` runs, participant-epochs, epochs per path (last run;
    "across": array epochs with a capacity change inside a phase; "dropped": participants
    that dropped mid-epoch; "why": the events' epochs by why)."""
    paths: dict = {}
    worlds = []
    across = [0]
    original, plain = engine.World.__init__, guarded._arrays_plan

    def keep(self, *args, **kwargs):
        original(self, *args, **kwargs)
        worlds.append(self)

    def count(*args, **kwargs):
        plan = plain(*args, **kwargs)
        across[0] += plan is not None and plan.capacity_changes > 0
        return plan

    best, parts = float("inf"), 0
    engine.World.__init__ = keep  # type: ignore[method-assign]
    guarded._arrays_plan = count
    try:
        for _ in range(repeats):
            worlds.clear()
            across[0] = 0
            t0 = time.perf_counter()
            res = netsim.simulate(copy.deepcopy(s), "fedavg-all", seed=0, raise_errors=True)
            best = min(best, time.perf_counter() - t0)
            parts = int(res.epochs["participants"].sum())
            paths = dict(worlds[-1].epochs_by_path, across=across[0],
                         dropped=int(res.epochs["dropped"].sum()),
                         why=dict(worlds[-1].events_why))
    finally:
        engine.World.__init__ = original  # type: ignore[method-assign]
        guarded._arrays_plan = plain
    return best, parts, paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="200 devices x 30 epochs, 1 run each")
    args = ap.parse_args()
    n, epochs, repeats = (200, 30, 1) if args.quick else (1000, 100, 3)
    everyone = copy.deepcopy(DYNAMICS)
    everyone["availability"] = {"model": "bernoulli"}
    cases = [("static", None), ("churn", DYNAMICS), ("everyone online", everyone),
             ("sessions 10 min", SESSIONS)]
    results = {name: timed(scenario(n, epochs, dyn), repeats) for name, dyn in cases}
    base_s, base_parts, _ = results["static"]
    print(f"{n} devices x {epochs} epochs, fedavg-all, small-cnn, best of {repeats}")
    print(f"{'case':<16} {'wall s':>8} {'x static':>9} {'part-epochs':>12} "
          f"{'us/part-epoch':>14} {'x static':>9}  epochs arrays/events (arrays across "
          "capacity changes), participants dropped mid-epoch, why events")
    for name, (wall, parts, paths) in results.items():
        per = wall / max(parts, 1) * 1e6
        base_per = base_s / max(base_parts, 1) * 1e6
        guarded_epochs = paths.get("arrays", 0) + paths.get("events", 0)
        split = f"{paths['arrays']}/{paths['events']} ({paths['across']}), " \
            f"{paths['dropped']} dropped, why events: {paths['why'] or 'none'}" \
            if guarded_epochs else "static path (arrays)"
        print(f"{name:<16} {wall:8.2f} {wall / base_s:9.2f} {parts:12d} {per:14.1f} "
              f"{per / base_per:9.2f}  {split}")
    for case in ("churn", "sessions 10 min"):
        ratio = results[case][0] / base_s
        print(f"target: {case} at most 3x static: {ratio:.2f}x -> "
              f"{'met' if ratio <= 3 else 'MISSED'}")


if __name__ == "__main__":
    main()
