"""Policies under churn: every policy on the churn scenario and on its static twin, over seeds.

    python -m experiments.dynamics.run [--out DIR] [--seeds N] [--quick] [--workers W]

Two sweeps through netsim's Python API (``netsim.sweep``), one per scenario, into one results
folder (default results/dynamics/; runs already there are skipped, so it resumes): the
policies fedavg-all, random-k, overselect, greedy-energy, pact and depl, their parameters from
the scenarios' ``policies`` blocks, on seeds 0..N-1 (``--quick``: 2 seeds). Then it prints
and writes (DIR/table.csv, DIR/table.md) one row per scenario and policy: success rate,
energy and time to the target (means over the runs that reached it, 95 % intervals), and per
run the dropouts, late updates and wasted energy; the mean energy per run by category and
the devices' mean online share (DIR/energy.csv); and draws the figures
dynamics-availability-map and dynamics-energy-time (plots/dynamics.py) into DIR/figures/.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

import netsim
from experiments.report import draw_figures, interval_text
from netsim.sweep.results import Results
from plots import dynamics as figs

HERE = Path(__file__).parent
SCENARIOS = {"static": HERE / "static.yaml", "churn": HERE / "churn.yaml"}
POLICIES = ["fedavg-all", "random-k", "overselect", "greedy-energy", "pact", "depl"]
FIGURES = ["dynamics-availability-map", "dynamics-energy-time"]


def run_sweeps(out: Path, seeds: int, workers: int = 2, policies: list[str] | None = None,
               scenarios: dict[str, Path] | None = None) -> Results:
    """Run every policy on every scenario for seeds 0..seeds-1 into ``out``; the results."""
    for name, path in (scenarios or SCENARIOS).items():
        netsim.sweep({"name": f"dynamics-{name}", "base": str(path),
                      "policies": list(policies or POLICIES), "seeds": seeds},
                     out=out, workers=workers)
    return netsim.load_results(out)


def per_run_dynamics(results: Results) -> pd.DataFrame:
    """Per run: dropouts, late updates and energy wasted (J), summed over its epochs (zero
    where the epochs table has no such column)."""
    ep = results.epochs
    cols = [c for c in ("dropped", "late", "energy_wasted_j") if c in ep]
    sums = ep.groupby("run_id")[cols].sum() if cols and len(ep) else pd.DataFrame()
    out = pd.DataFrame(index=results.runs["run_id"])
    for c in ("dropped", "late", "energy_wasted_j"):
        out[c] = sums[c].reindex(out.index).fillna(0.0) if c in sums else 0.0
    return out.reset_index()


def table(results: Results) -> pd.DataFrame:
    """One row per scenario point and policy (see the module docstring)."""
    summary = figs.summary(results.runs)
    runs = figs.with_point_key(results.runs).merge(per_run_dynamics(results), on="run_id",
                                                     how="left")
    extra = runs.groupby(["point_key", "policy_label"])[
        ["dropped", "late", "energy_wasted_j", "epochs", "final_loss"]].mean()
    extra.index = extra.index.set_names(["point_key", "policy"])
    out = summary.merge(extra.reset_index(), on=["point_key", "policy"], how="left")
    order = {p: i for i, p in enumerate(POLICIES)}
    out["_o"] = out["policy"].map(lambda p: order.get(p, len(order)))
    out["_s"] = ~out["point_label"].str.contains("static")
    return out.sort_values(["_s", "point_key", "_o"]).drop(columns=["_o", "_s"]).reset_index(
        drop=True)


ENERGY_CATEGORIES = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "energy_sleep_j"]


def energy_breakdown(results: Results) -> pd.DataFrame:
    """Mean energy per run by category (J, all runs) and the devices' mean online share, per
    scenario point and policy: where the energy goes, static vs churn."""
    ep = results.epochs
    cols = [c for c in ENERGY_CATEGORIES if c in ep]
    runs = figs.with_point_key(results.runs).merge(
        ep.groupby("run_id")[cols].sum().reset_index(), on="run_id", how="left")
    dev = results.devices
    if "online_s" in dev and len(dev):
        if "network_node" in dev:
            dev = dev[~dev["network_node"].fillna(False).astype(bool)]
        share = dev.merge(runs[["run_id", "time_s"]], on="run_id")
        share = (share["online_s"] / share["time_s"]).groupby(share["run_id"]).mean()
        runs["online_share"] = runs["run_id"].map(share)
    out = runs.groupby(["point_key", "point_label", "policy_label"])[
        [*cols, "energy_j", *(["online_share"] if "online_share" in runs else [])]].mean()
    out = out.reset_index().rename(columns={"policy_label": "policy"})
    order = {p: i for i, p in enumerate(POLICIES)}
    out["_o"] = out["policy"].map(lambda p: order.get(p, len(order)))
    out["_s"] = ~out["point_label"].str.contains("static")
    return out.sort_values(["_s", "point_key", "_o"]).drop(
        columns=["_o", "_s", "point_key"]).reset_index(drop=True)


def markdown(t: pd.DataFrame) -> str:
    """The table as Markdown (intervals in brackets)."""
    head = ("| scenario | policy | runs | success [95 % CI] | energy to target (J) [95 % CI] "
            "| time to target (s) [95 % CI] | epochs | dropouts / run | late / run "
            "| wasted (J) / run |")
    lines = [head, "|" + "---|" * 10]
    for r in t.itertuples():
        lines.append(
            f"| {r.point_label} | {r.policy} | {r.runs} | "
            f"{r.success:.2f} [{r.success_lo:.2f}, {r.success_hi:.2f}] | "
            f"{interval_text(r.energy_j, r.energy_j_lo, r.energy_j_hi)} | "
            f"{interval_text(r.time_s, r.time_s_lo, r.time_s_hi)} | {r.epochs:.1f} | "
            f"{r.dropped:.1f} | {r.late:.1f} | {r.energy_wasted_j:.3g} |")
    return "\n".join(lines)


def draw(results: Results, folder: Path) -> list[Path]:
    """Draw the experiment's figures into ``folder``; the files written."""
    return draw_figures(results, folder, FIGURES)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/dynamics"))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="a 2-seed smoke run")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    seeds = 2 if a.quick else a.seeds
    t0 = time.perf_counter()
    results = run_sweeps(a.out, seeds, a.workers)
    print(f"{len(results.runs)} runs under {a.out} ({time.perf_counter() - t0:.0f} s)")
    t = table(results)
    a.out.mkdir(parents=True, exist_ok=True)
    t.to_csv(a.out / "table.csv", index=False)
    (a.out / "table.md").write_text(markdown(t) + "\n")
    print(markdown(t))
    e = energy_breakdown(results)
    e.to_csv(a.out / "energy.csv", index=False)
    print(e.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    for path in draw(results, a.out / "figures"):
        print("wrote", path)


if __name__ == "__main__":
    main()
