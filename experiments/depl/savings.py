"""DepL's saving, measured honestly (issue 14): DepL's energy against the cheapest baseline
that meets pi, against fedavg-all and against PACT planning for pi, with 95 % intervals.

    python -m experiments.depl.savings [--scenario FILE] [--seeds N] [--out DIR]

Every policy runs the same seeds (same network, same noise draws: a seed fixes the run's
noise), so savings are paired: per seed ``1 - E_depl / E_other``, and the interval is a
percentile bootstrap over seeds of the ratio of mean energies. A baseline "meets pi" when its
success rate's 95 % Wilson interval reaches pi. PACT plans for pi through the scenario's
``training.target_probability`` (its target is the mean whose pi-quantile is L*). Tables
are stored under DIR (default results/depl-savings/) and reused unless ``--rerun``.
"""

from __future__ import annotations

import argparse
import shutil
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

import netsim
from netsim.results.store import read_table
from netsim.scenario.loading import load_scenario
from netsim.sweep.stats import wilson_interval

HERE = Path(__file__).parent
SCENARIO = HERE / "scenarios" / "costly.yaml"
BASELINES = ("depl-mean", "depl-margin", "full-model", "never-switch", "fedavg-all", "pact")


def _job(args: tuple[str, str, list[int], str]) -> int:
    scenario, name, seeds, out = args
    for s in seeds:
        netsim.simulate(scenario, name, seed=s, out=out)
    return len(seeds)


def simulate_all(scenario: Path, out: Path, n_seeds: int, rerun: bool) -> pd.DataFrame:
    """The runs table of DepL and every baseline on ``n_seeds`` seeds (simulated if absent)."""
    if rerun:
        shutil.rmtree(out, ignore_errors=True)
    if not (out / "runs").exists():
        seeds = list(range(n_seeds))
        jobs = [(str(scenario), name, seeds[h::2], str(out))
                for name in ("depl", *BASELINES) for h in range(2)]
        with ProcessPoolExecutor(2) as pool:
            print(f"{sum(pool.map(_job, jobs))} runs -> {out}")
    return read_table(out, "runs")


def saving(depl: np.ndarray, other: np.ndarray, rng: np.random.Generator,
           n_boot: int = 10_000) -> tuple[float, float, float]:
    """1 - mean(E_depl) / mean(E_other) and its 95 % paired-bootstrap interval."""
    point = 1.0 - depl.mean() / other.mean()
    idx = rng.integers(0, len(depl), size=(n_boot, len(depl)))
    boots = 1.0 - depl[idx].mean(axis=1) / other[idx].mean(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(point), float(lo), float(hi)


def report(runs: pd.DataFrame, pi: float, seed: int = 0) -> pd.DataFrame:
    """One row per policy: success rate (Wilson interval), mean energy, DepL's saving."""
    rng = np.random.default_rng(seed)
    runs = runs.sort_values("seed")
    energy = {p: g["energy_j"].to_numpy() for p, g in runs.groupby("policy")}
    hits = {p: int(g["target_reached"].sum()) for p, g in runs.groupby("policy")}
    rows = []
    for p in ("depl", *BASELINES):
        n = len(energy[p])
        _, lo, hi = wilson_interval(hits[p], n)
        s = saving(energy["depl"], energy[p], rng) if p != "depl" else (0.0, 0.0, 0.0)
        rows.append({"policy": p, "success": hits[p] / n, "success_lo": lo, "success_hi": hi,
                     "meets_pi": hi >= pi, "energy_j": energy[p].mean(),
                     "saving": s[0], "saving_lo": s[1], "saving_hi": s[2]})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("results/depl-savings"))
    ap.add_argument("--rerun", action="store_true")
    a = ap.parse_args(argv)
    sc = load_scenario(a.scenario)
    pi = sc.training.target_probability or 0.9
    table = report(simulate_all(a.scenario, a.out, a.seeds, a.rerun), pi)
    print(f"{sc.name}: L* {sc.training.target_loss}, pi {pi}, {a.seeds} seeds")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    meeting = table[(table["policy"] != "depl") & table["meets_pi"]]
    if len(meeting):
        best = meeting.loc[meeting["energy_j"].idxmin()]
        print(f"cheapest baseline meeting pi: {best.policy}; DepL's saving {best.saving:+.1%} "
              f"(95% CI {best.saving_lo:+.1%} to {best.saving_hi:+.1%})")
    else:
        print("no baseline meets pi")
    for p in ("fedavg-all", "pact"):
        row = table[table["policy"] == p].iloc[0]
        print(f"against {p}: {row.saving:+.1%} (95% CI {row.saving_lo:+.1%} to "
              f"{row.saving_hi:+.1%})")
    a.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(a.out / "savings.csv", index=False)


if __name__ == "__main__":
    main()
