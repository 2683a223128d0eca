"""Hierarchical federated learning against the star: hierfavg (kappa_2 in 1, 2, 4, 8), rfl-ha,
async-hfl, cloud-only and fedbuff on the built-in ``nycmesh`` and ``city-edge`` scenarios
(cnn-mnist, its curve fitted to real FedAvg runs; the edge-round term borrowed from the digits
MLP's fit), over seeds.

    python -m experiments.hierarchical.run [--out DIR] [--seeds N] [--quick] [--workers W]

One sweep per scenario through netsim's Python API into DIR/SCENARIO (DIR default
results/hierarchical/; runs already there are skipped). Equal local work per round:
hierfavg's participants (nycmesh: every device; city-edge: one per edge, 200) are cloud-only's
k; fedbuff keeps as many devices training with K a quarter of them. Then it prints and
writes:

- DIR/table.md (and .csv): per scenario and policy, ``netsim compare``'s success, time and
  energy to the target with 95 % intervals over seeds, and per run the cloud rounds (epochs),
  edge rounds and backhaul bytes;
- DIR/claims.md (and .csv): the published claims' ratios with 95 % percentile-bootstrap
  intervals over runs: HierFAVG (each kappa_2 against cloud-only: cloud rounds, time and
  energy to the target) and Async-HFL (hierfavg's time to the target over async-hfl's, and
  over rfl-ha's: a "faster by" factor as the paper states it);
- the figure ``loss-vs-time`` per scenario into DIR/figures/SCENARIO/.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

import netsim
from experiments.report import draw_figures, interval_text
from netsim.sweep.results import Results
from netsim.sweep.stats import ratio_of_means

SCENARIOS = ["nycmesh", "city-edge"]
KAPPAS = (1, 2, 4, 8)
PER_ROUND = {"nycmesh": 184, "city-edge": 200}
"""Devices training per round at equal local work (hierfavg's participants)."""
FIGURES = ["loss-vs-time"]


def policies(scenario: str) -> list[dict]:
    """The sweep's policy entries on ``scenario`` (module docstring)."""
    k = PER_ROUND[scenario]
    per_edge = {} if scenario == "nycmesh" else {"participants_per_edge": 1}
    out = [{"name": "hierfavg", "label": f"hierfavg-k{kappa}",
            "params": {"edge_rounds": kappa, **per_edge}} for kappa in KAPPAS]
    out += [{"name": "rfl-ha"}, {"name": "async-hfl"},
            {"name": "cloud-only", "params": {"k": k}},
            {"name": "fedbuff", "params": {"concurrency": k, "buffer_updates": k // 4}}]
    return out


def run_sweeps(out: Path, seeds: int, workers: int = 2) -> dict[str, Results]:
    """Every policy on each scenario for seeds 0..seeds-1 into ``out/SCENARIO``; the results
    by scenario."""
    return {name: netsim.sweep({"name": f"hier-{name}", "base": name,
                                "policies": policies(name), "seeds": seeds},
                               out=out / name, workers=workers) for name in SCENARIOS}


def _per_run(results: Results) -> pd.DataFrame:
    """Per run: cloud rounds, edge rounds and backhaul bytes over its epochs."""
    ep = results.epochs
    sums = ep.groupby("run_id").agg(cloud_rounds=("epoch", "size"),
                                    edge_rounds=("edge_rounds", "sum"),
                                    backhaul_bytes=("bytes_backhaul", "sum"))
    return sums.reset_index()


def table(results: Results) -> pd.DataFrame:
    """``netsim compare``'s table with the per-run means of :func:`_per_run`."""
    runs = results.runs.merge(_per_run(results), on="run_id", how="left")
    compared = netsim.compare(results)
    extra = runs.groupby(["point_label", "policy_label"])[
        ["cloud_rounds", "edge_rounds", "backhaul_bytes"]].mean()
    extra.index = extra.index.set_names(["point_label", "policy"])
    return compared.merge(extra.reset_index(), on=["point_label", "policy"], how="left")


def claims(results: Results) -> pd.DataFrame:
    """The published claims' ratios per scenario (module docstring)."""
    runs = results.runs.merge(_per_run(results), on="run_id", how="left")
    runs = runs[runs["target_reached"].astype(bool)]
    rng = np.random.default_rng(0)
    rows = []
    for label, part in runs.groupby("point_label", sort=False):
        by = {p: g for p, g in part.groupby("policy_label")}

        def ratio(num: str, den: str, metric: str, label=label, by=by) -> dict:
            if num not in by or den not in by:
                return {"point_label": label, "claim": f"{num} / {den}", "metric": metric,
                        "ratio": np.nan, "lo": np.nan, "hi": np.nan}
            r, lo, hi = ratio_of_means(by[num][metric].to_numpy(float),
                               by[den][metric].to_numpy(float), rng)
            return {"point_label": label, "claim": f"{num} / {den}", "metric": metric,
                    "ratio": r, "lo": lo, "hi": hi}

        for kappa in KAPPAS:
            for metric in ("cloud_rounds", "time_s", "energy_j"):
                rows.append(ratio(f"hierfavg-k{kappa}", "cloud-only", metric))
        for sync in ("hierfavg-k2", "rfl-ha"):
            rows.append(ratio(sync, "async-hfl", "time_s"))
        rows.append(ratio("hierfavg-k2", "rfl-ha", "time_s"))
    return pd.DataFrame(rows)


def markdown(t: pd.DataFrame) -> str:
    """The table as Markdown (intervals in brackets; hours, MJ, GB)."""
    lines = ["| scenario | policy | success | time to target (h) [95 % CI] | energy to target "
             "(MJ) [95 % CI] | cloud rounds | edge rounds | backhaul (GB) |",
             "|" + "---|" * 8]
    for r in t.itertuples():
        lines.append(
            f"| {r.point_label} | {r.policy} | {r.success:.2f} | "
            f"{interval_text(r.time_s / 3600, r.time_s_lo / 3600, r.time_s_hi / 3600)} | "
            f"{interval_text(r.energy_j / 1e6, r.energy_j_lo / 1e6, r.energy_j_hi / 1e6)} | "
            f"{r.cloud_rounds:.1f} | {r.edge_rounds:.1f} | {r.backhaul_bytes / 1e9:.3g} |")
    return "\n".join(lines)


def claims_markdown(c: pd.DataFrame) -> str:
    """The claims table as Markdown."""
    lines = ["| scenario | ratio | of | mean [95 % CI] |", "|---|---|---|---|"]
    for r in c.itertuples():
        lines.append(f"| {r.point_label} | {r.claim} | {r.metric} | "
                     f"{interval_text(r.ratio, r.lo, r.hi)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/hierarchical"))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="a 2-seed smoke run")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    by_scenario = run_sweeps(a.out, 2 if a.quick else a.seeds, a.workers)
    runs = sum(len(r.runs) for r in by_scenario.values())
    print(f"{runs} runs under {a.out} ({time.perf_counter() - t0:.0f} s)")
    t = pd.concat([table(r) for r in by_scenario.values()], ignore_index=True)
    t.to_csv(a.out / "table.csv", index=False)
    (a.out / "table.md").write_text(markdown(t) + "\n")
    print(markdown(t))
    c = pd.concat([claims(r) for r in by_scenario.values()], ignore_index=True)
    c.to_csv(a.out / "claims.csv", index=False)
    (a.out / "claims.md").write_text(claims_markdown(c) + "\n")
    print()
    print(claims_markdown(c))
    for name, results in by_scenario.items():
        for path in draw_figures(results, a.out / "figures" / name, FIGURES):
            print("wrote", path)


if __name__ == "__main__":
    main()
