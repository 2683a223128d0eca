"""PACT benchmark: planning time, its growth with 1/eps, and energy ratios.

Run: ``python benchmarks/pact.py [--sections 1,2,3,4,5]`` (sections 1-4 about 2-3 minutes on
2 cores, section 5 about 10 more). Prints:
1. planning time for 100 devices, 4 variants, a 200-epoch horizon at the default eps, with a
   loose deadline (untimed graph) and a binding one (time-expanded graph);
2. planning time vs 1/eps and the log-log slope (polynomial growth);
3. PACT's planned energy / pact-optimum's on 20 random small instances;
4. PACT's energy / each baseline's on the default scenario over 10 seeds (simulated);
5. PACT / pact-optimum on 30 random instances up to 6 devices x 3 variants x 40 epochs, the
   optimum seeded with PACT's plan and given 60 s per MILP: how many are proven optimal, the
   ratios over those, and the status, gap and bound of any that is not (never a ratio).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

import netsim
from policies.pact.instances import scenario_problem, small_instance
from policies.pact.optimum import solve_optimum
from policies.pact.planner import Planner
from policies.pact.policy import PactParams

DEFAULT_EPS = PactParams().epsilon
EPSILONS = (0.1, 0.05, 0.025, 0.0125)
BASELINES = ("fedavg-all", "greedy-energy", "fastest-k", "compress-first",
             "pact-no-compression", "pact-all-nodes")
SEEDS = range(10)


#: small-cnn's hand-set curve before 0.7.0 (its entry is now fitted on the torch backend, which
#: reaches loss 0.3 in 4 epochs here: no planning instance), kept as the planning instance's
#: curve so the figures stay comparable; a benchmark's instance, not a claim about LeNet-5
PLANNING_CURVE = {"initial_loss": 2.303, "floor_full": 0.04, "floor_prune": 0.5,
                  "floor_exponent": 2.0, "samples_half": 1.5e4, "exponent": 0.7,
                  "prune_progress_loss": 1.0, "heterogeneity": 0.2, "noise_run_sigma": 0.05,
                  "noise_epoch_sigma": 0.02, "staleness_exponent": 0.3354,
                  "source": "illustrative: small-cnn's hand-set curve before 0.7.0 "
                            "(benchmarks/pact.py's planning instance)"}


def big_problem(n_devices: int = 100):
    """The default scenario's network generator at ``n_devices`` (4 variants, 200 epochs),
    training small-cnn's variants on :data:`PLANNING_CURVE` to loss 0.3 (the default scenario
    before 0.2.0: a harder planning instance than the fitted mlp-digits curve, kept so the
    figures stay comparable)."""
    from netsim.training.models import builtin_models

    model = builtin_models()["small-cnn"].model_dump(mode="json")
    model["loss"] = dict(PLANNING_CURVE)
    sc = netsim.scenario.loading.scenario_data("default")
    sc = {**sc, "model": model, "training": {**sc["training"], "target_loss": 0.3},
          "generate": {**sc["generate"], "n_devices": n_devices}}
    return scenario_problem(sc)


def timed_plan(problem, eps: float, repeats: int = 3):
    """Best-of-``repeats`` wall time (s) of a fresh planner, and the plan."""
    best, plan = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        plan = Planner(eps).plan(problem)
        best = min(best, time.perf_counter() - t0)
    return best, plan


REFERENCE_SIZES = ((3, 3, 5), (4, 3, 12), (6, 3, 40), (8, 3, 40))  # devices, variants, epochs
REFERENCE_PER_SIZE = 10


def reference_section(time_limit_s: float = 60.0) -> None:
    """Section 5: PACT against its proven optimum on instances up to 8 x 3 x 40."""
    print(f"5. PACT / optimum (seeded with PACT's plan, at most {time_limit_s:g} s each), "
          f"{REFERENCE_PER_SIZE} instances per size; the paper: PACT 'closely matches the "
          "optimal energy':")
    for n_dev, n_var, epochs in REFERENCE_SIZES:
        ratios, open_refs, wall, seed = [], [], [], 0
        while len(ratios) + len(open_refs) < REFERENCE_PER_SIZE:
            problem = scenario_problem(small_instance(np.random.default_rng(seed), n_dev, n_var,
                                                      epochs))
            seed += 1
            pact = Planner(DEFAULT_EPS).plan(problem)
            if not pact.feasible:
                continue
            t0 = time.perf_counter()
            opt = solve_optimum(problem, time_limit_s, incumbent=pact)
            wall.append(time.perf_counter() - t0)
            if opt.info["status"] == "optimal":
                ratios.append(pact.energy_j / opt.energy_j)
            else:
                open_refs.append((seed - 1, opt.info["status"], opt.info["gap"], opt.info["bound_j"]))
        line = (f"   {n_dev} x {n_var} x {epochs}: proven {len(ratios)}/{REFERENCE_PER_SIZE}, "
                f"optimum time mean {np.mean(wall):.1f} s max {np.max(wall):.1f} s")
        if ratios:
            line += f"; PACT / optimum mean {np.mean(ratios):.4f} max {np.max(ratios):.4f}"
        print(line)
        for s, status, gap, bound in open_refs:
            print(f"     seed {s}: not proven: status {status}, gap {gap:.3f}, bound {bound:.4g} J")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="1,2,3,4,5", help="which sections to run")
    sections = {int(s) for s in ap.parse_args().sections.split(",")}
    if sections & {1, 2}:
        planning_sections(sections)
    if 3 in sections or 4 in sections:
        ratio_sections(sections)
    if 5 in sections:
        reference_section()


def planning_sections(sections: set[int]) -> None:
    """Sections 1 and 2: planning time, and its growth with 1/eps."""
    problem = big_problem()
    t_free, free = timed_plan(problem, DEFAULT_EPS)
    tight = replace(problem, time_left_s=0.9 * free.time_s)
    t_tight, plan = timed_plan(tight, DEFAULT_EPS)
    print(f"1. planning, 100 devices x 4 variants x 200 epochs, eps {DEFAULT_EPS}:")
    print(f"   loose deadline: {t_free:.3f} s ({free.mode} graph, {len(free.epochs)} epochs, "
          f"{free.energy_j:.0f} J)")
    print(f"   deadline 0.9 x that plan's time: {t_tight:.3f} s ({plan.mode} graph, "
          f"{len(plan.epochs)} epochs, {plan.energy_j:.0f} J)")

    if 2 not in sections:
        return
    print("2. planning time vs 1/eps (100 devices):")
    for name, prob in (("loose", problem), ("binding", tight)):
        times = [timed_plan(prob, e, 1)[0] for e in EPSILONS]
        slope = np.polyfit(np.log(1 / np.array(EPSILONS)), np.log(times), 1)[0]
        cells = "  ".join(f"1/eps={1 / e:g}: {t:.3f}s" for e, t in zip(EPSILONS, times,
                                                                        strict=True))
        print(f"   {name:8s} {cells}  log-log slope {slope:.2f}")


def ratio_sections(sections: set[int]) -> None:
    """Sections 3 and 4: PACT / optimum on small instances, PACT / baselines simulated."""
    if 3 in sections:
        small_ratios()
    if 4 in sections:
        baseline_ratios()


def small_ratios() -> None:
    ratios: dict[float, list[float]] = {e: [] for e in (DEFAULT_EPS, EPSILONS[-1])}
    seed = 0
    while len(ratios[DEFAULT_EPS]) < 20:
        small = scenario_problem(small_instance(np.random.default_rng(seed), n_devices=3,
                                                n_variants=3, max_epochs=5))
        seed += 1
        opt = solve_optimum(small)
        if opt.feasible:
            for e in ratios:
                ratios[e].append(Planner(e).plan(small).energy_j / opt.energy_j)
    print("3. PACT / optimum, planned energy, 20 small instances (3 devices, 3 variants, 5 epochs):")
    for e, r in ratios.items():
        print(f"   eps {e}: mean {np.mean(r):.4f}  max {np.max(r):.4f}  min {np.min(r):.4f}")


def baseline_ratios() -> None:
    energy: dict[str, list[float]] = {p: [] for p in ("pact", *BASELINES)}
    for s in SEEDS:
        for p in energy:
            energy[p].append(float(netsim.simulate("default", p, seed=s).runs["energy_j"].iloc[0]))
    pact = np.array(energy["pact"])
    print(f"4. default scenario, {len(SEEDS)} seeds, PACT energy {pact.mean():.0f} J; ratio "
          "PACT / baseline (mean, min-max over seeds):")
    for p in BASELINES:
        r = pact / np.array(energy[p])
        print(f"   {p:20s} {r.mean():.3f}  ({r.min():.3f}-{r.max():.3f})")


if __name__ == "__main__":
    main()
