"""PACT experiments: run the simulations (netsim.simulate, results under OUT) and draw figures.

One command per figure (``--out`` defaults to experiments/pact/results)::

    python experiments/pact/run.py target     # energy vs loss target, with the optimum
    python experiments/pact/run.py deadline   # energy vs deadline
    python experiments/pact/run.py devices    # energy vs number of devices (10-500)
    python experiments/pact/run.py schedule   # PACT's variant per epoch and device heatmap
    python experiments/pact/run.py epsilon    # planning time and gap to the optimum vs eps
    python experiments/pact/run.py all

Each writes netsim's tables under OUT/NAME/ (plus a points table mapping run_id to the swept
value, and plan tables where a figure shows planned energies) and the figure to
OUT/figures/pact-NAME.{png,pdf} through plots/pact.py, which only reads those tables.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import numpy as np
import pandas as pd

import netsim
from netsim.scenario.loading import scenario_data
from plots import pact as figures
from policies.pact.instances import scenario_problem, small_instance
from policies.pact.optimum import solve_optimum
from policies.pact.planner import Planner

HERE = Path(__file__).parent
SEEDS = range(10)
BASELINES = ["fedavg-all", "greedy-energy", "compress-first", "pact-no-compression",
             "pact-all-nodes"]
TARGET_FACTORS = [0.8, 0.9, 1.0, 1.15, 1.3]
DEADLINES_S = [8.0, 9.0, 10.0, 12.0, 15.0, 20.0, 30.0]
N_DEVICES = [10, 20, 50, 100, 200, 500]
EPSILONS = [0.1, 0.05, 0.025, 0.0125]
# Online PACT keeps its plan while observations stay within its predicted band (its default).
PACT_SWEEP_PARAMS: dict = {}


def _sweep(out: Path, scenarios: dict[float, dict], policies: list[str],
           params: dict[str, dict] | None = None) -> None:
    """Simulate every (x, policy, seed); tables under ``out`` and a points table (run_id, x)."""
    points = []
    for x, sc in scenarios.items():
        for policy in policies:
            for seed in SEEDS:
                res = netsim.simulate(sc, policy, seed=seed, out=out,
                                      params=(params or {}).get(policy))
                points.append({"run_id": res.runs["run_id"].iloc[0], "x": x})
        print(f"  {out.name}: x={x} done", flush=True)
    pd.DataFrame(points).to_parquet(out / "points.parquet", index=False)


def run_target(out: Path) -> None:
    base = scenario_data(str(HERE / "small.yaml"))
    scenarios, plans = {}, []
    for f in TARGET_FACTORS:
        sc = copy.deepcopy(base)
        sc["training"]["target_loss"] = round(base["training"]["target_loss"] * f, 4)
        x = sc["training"]["target_loss"]
        scenarios[x] = sc
        problem = scenario_problem(sc)
        plans.append({"x": x, "plan": "optimum (planned)", "energy_j": solve_optimum(problem).energy_j})
        plans.append({"x": x, "plan": "pact (planned)", "energy_j": Planner(0.05).plan(problem).energy_j})
    _sweep(out, scenarios, ["pact", "pact-optimum", *BASELINES])
    pd.DataFrame(plans).to_parquet(out / "plans.parquet", index=False)


def run_deadline(out: Path) -> None:
    base = scenario_data("default")
    scenarios = {}
    for d in DEADLINES_S:
        sc = copy.deepcopy(base)
        sc["training"]["deadline_s"] = d
        scenarios[d] = sc
    _sweep(out, scenarios, ["pact", *BASELINES], {"pact": PACT_SWEEP_PARAMS})


def run_devices(out: Path) -> None:
    base = scenario_data("default")
    scenarios = {}
    for n in N_DEVICES:
        sc = copy.deepcopy(base)
        sc["generate"]["n_devices"] = n
        sc["generate"]["devices_per_cell"] = 16
        scenarios[n] = sc
    _sweep(out, scenarios, ["pact", *BASELINES], {"pact": PACT_SWEEP_PARAMS})


def run_schedule(out: Path) -> None:
    res = netsim.simulate(str(HERE / "schedule.yaml"), "pact", seed=0, out=out)
    pd.DataFrame([{"run_id": res.runs["run_id"].iloc[0], "x": 0}]).to_parquet(
        out / "points.parquet", index=False)


def run_epsilon(out: Path) -> None:
    rows, seed, done = [], 0, 0
    while done < 20:
        problem = scenario_problem(small_instance(np.random.default_rng(seed), n_devices=3,
                                                  n_variants=3, max_epochs=5))
        seed += 1
        opt = solve_optimum(problem)
        if not opt.feasible:
            continue
        done += 1
        for eps in EPSILONS:
            plan = Planner(eps).plan(problem)
            rows.append({"kind": "small", "instance": seed - 1, "eps": eps,
                         "gap": plan.energy_j / opt.energy_j - 1, "planning_s": plan.planning_s})
    sc = scenario_data("default")
    sc["generate"]["n_devices"] = 100
    big = scenario_problem(sc)
    for eps in EPSILONS:
        t0 = time.perf_counter()
        Planner(eps).plan(big)
        rows.append({"kind": "100 devices", "instance": 0, "eps": eps, "gap": np.nan,
                     "planning_s": time.perf_counter() - t0})
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(out / "epsilon.parquet", index=False)


RUNNERS = {"target": run_target, "deadline": run_deadline, "devices": run_devices,
           "schedule": run_schedule, "epsilon": run_epsilon}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=[*RUNNERS, "all"])
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--figures-only", action="store_true", help="draw from stored results")
    args = parser.parse_args(argv)
    for name in RUNNERS if args.what == "all" else [args.what]:
        folder = args.out / name
        if not args.figures_only:
            t0 = time.perf_counter()
            RUNNERS[name](folder)
            print(f"{name}: simulated in {time.perf_counter() - t0:.0f} s")
        for path in figures.draw(name, folder, args.out / "figures"):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
