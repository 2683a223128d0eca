"""DepL experiments: simulate the sweeps (tables under DIR), then draw the figures from them.

    python -m experiments.depl.run FIGURE [--out DIR] [--seeds N] [--scenario FILE] [--rerun]

FIGURE is one of: cdf, success, cost-pi, cost-target, models, ratio, all. Figures cdf,
success, cost-pi, models and ratio read the *pi sweep* (every policy x pi x seed at the
scenario's L*); cost-target reads the *target sweep* (every policy x L* x seed at pi = 0.9).
A sweep whose tables already exist under DIR is not simulated again (unless --rerun).
"""

from __future__ import annotations

import argparse
import shutil
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import netsim
from netsim.policy import make_policy
from netsim.scenario.loading import load_scenario
from plots import depl as figs

HERE = Path(__file__).parent
SCENARIO = HERE / "scenarios" / "medium.yaml"
POLICIES = ("depl", "depl-mean", "depl-margin", "full-model", "never-switch")
PIS = (0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.975)
TARGETS = (0.25, 0.3, 0.35, 0.4, 0.5)
TARGET_SWEEP_PI = 0.9


def _job(args: tuple[str, str, float, float | None, list[int], str]) -> int:
    scenario, name, pi, target, seeds, out = args
    sc = load_scenario(scenario)
    if target is not None:
        sc = sc.model_copy(update={"training": sc.training.model_copy(
            update={"target_loss": target})})
    policy = make_policy(name, {**sc.policies.get(name, {}), "target_probability": pi})
    for s in seeds:
        netsim.simulate(sc, policy=policy, seed=s, out=out)
    return len(seeds)


def sweep(kind: str, scenario: Path, out: Path, n_seeds: int, rerun: bool) -> Path:
    """Run the ``pi`` or ``target`` sweep into ``out/kind`` (skipped when already there)."""
    folder = out / kind
    if (folder / "runs").exists() and not rerun:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    points = [(pi, None) for pi in PIS] if kind == "pi" else [(TARGET_SWEEP_PI, t) for t in TARGETS]
    seeds = list(range(n_seeds))
    jobs = [(str(scenario), name, pi, target, seeds[h::2], str(folder))
            for name in POLICIES for pi, target in points for h in range(2)]
    with ProcessPoolExecutor(2) as pool:
        done = sum(pool.map(_job, jobs))
    print(f"{kind} sweep: {done} runs -> {folder}")
    return folder


def draw(name: str, scenario: Path, out: Path, n_seeds: int, rerun: bool) -> list[Path]:
    """Simulate what figure ``name`` needs (if missing) and draw it under ``out``."""
    kind = "target" if name == "cost-target" else "pi"
    runs, epochs = figs.load_tables(sweep(kind, scenario, out, n_seeds, rerun))
    draw_fn = {
        "cdf": lambda: figs.final_loss_cdf(runs, out / "depl_final_loss_cdf", pi=0.9),
        "success": lambda: figs.success_vs_pi(runs, out / "depl_success_vs_pi"),
        "cost-pi": lambda: figs.cost_vs_pi(runs, out / "depl_cost_vs_pi"),
        "cost-target": lambda: figs.cost_vs_target(runs, out / "depl_cost_vs_target"),
        "models": lambda: figs.model_per_epoch(runs, epochs, out / "depl_model_per_epoch",
                                               pi=0.9),
        "ratio": lambda: figs.cost_ratio(runs, out / "depl_cost_ratio"),
    }[name]
    paths = draw_fn()
    print("wrote", ", ".join(str(p) for p in paths))
    return paths


FIGURES = ("cdf", "success", "cost-pi", "cost-target", "models", "ratio")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="DepL figures (simulate, then draw)")
    ap.add_argument("figure", choices=FIGURES + ("all",))
    ap.add_argument("--out", type=Path, default=Path("results/depl"))
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--rerun", action="store_true", help="simulate again even if tables exist")
    a = ap.parse_args(argv)
    for name in FIGURES if a.figure == "all" else (a.figure,):
        draw(name, a.scenario, a.out, a.seeds, a.rerun)


if __name__ == "__main__":
    main()
