"""Synchronous vs asynchronous training: five policies on one fleet, static, with stragglers
and with churn (and a uniform fleet as a control), over seeds.

    python -m experiments.async.run [--out DIR] [--seeds N] [--quick] [--workers W]
                                    [--model NAME] [--target-loss L]

The worlds train cnn-mnist (fitted to real FedAvg MNIST runs) to 97 % test accuracy, B = 10,
E = 1, 600 examples per device on average. ``--model NAME`` trains another model on the worlds
as they were before issue 37 (:data:`BEFORE_CNN_MNIST`: 300 examples per device, the whole
local data as one batch, loss 0.3, 30 s churn sessions), so ``--model small-cnn`` reproduces
the small-cnn tables and ``--model mlp-digits --target-loss 0.2`` the digits MLP's
(experiments/async/README.md); their default folder is results/async-NAME/.

Four sweeps through netsim's Python API (``netsim.sweep``) into one results folder (default
results/async/; runs already there are skipped, so it resumes): fedavg-all, random-k,
overselect, fedbuff and fedasync, their parameters from the scenarios' ``policies`` blocks
(every policy but fedavg-all keeps 20 devices training), on seeds 0..N-1 (default 20;
``--quick``: 2). Then it prints and writes:

- DIR/table.csv, DIR/table.md: per scenario and policy, success rate, energy and time to the
  target (means over the runs that reached it, 95 % intervals), epochs (aggregations), the
  mean staleness of the aggregated updates, and per run the dropouts, discarded updates and
  wasted energy;
- DIR/claim.csv, DIR/claim.md: FedBuff's claim (less time to the target than synchronous
  FedAvg with the same concurrency, random-k with k = the concurrency): per scenario the ratio
  of fedbuff's (and fedasync's) mean time and energy to the target to random-k's, with a
  95 % percentile-bootstrap interval over runs;
- the figure async-loss-time-energy (plots/asynchronous.py) into DIR/figures/.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

import netsim
from experiments.report import draw_figures, interval_text
from netsim.sweep.results import Results
from netsim.sweep.stats import ratio_of_means
from plots import dynamics as figs

HERE = Path(__file__).parent
SCENARIOS = {"uniform": HERE / "uniform.yaml", "static": HERE / "static.yaml",
             "stragglers": HERE / "stragglers.yaml", "churn": HERE / "churn.yaml"}
POLICIES = ["fedavg-all", "random-k", "overselect", "fedbuff", "fedasync"]
SYNCHRONOUS_REFERENCE = "random-k"
FIGURES = ["async-loss-time-energy"]
MODEL = "cnn-mnist"
"""The model the scenarios train."""
BEFORE_CNN_MNIST: dict[str, object] = {
    "generate.samples_mean": 300, "training.target_loss": 0.3, "training.deadline_s": "2 hours",
    "training.max_epochs": 6000, "dynamics.availability.mean_online_s": "30 s",
    "dynamics.availability.mean_offline_s": "30 s"}
"""The worlds before issue 37 (small-cnn's): the fields that differ from the scenarios' (those
under ``dynamics.availability`` only where the scenario has it); ``target_accuracy``,
``batch_size`` and ``local_epochs`` are removed (the whole local data as one batch, E = 1)."""


def scenarios_before_cnn_mnist(folder: Path, model: str,
                               scenarios: dict[str, Path] | None = None) -> dict[str, Path]:
    """The scenarios as they were before issue 37 (:data:`BEFORE_CNN_MNIST`) training
    ``model``, written into ``folder``; their paths by world."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, path in (scenarios or SCENARIOS).items():
        data = yaml.safe_load(path.read_text())
        data["model"] = model
        for key in ("target_accuracy", "batch_size", "local_epochs"):
            data["training"].pop(key, None)
        for dotted, value in BEFORE_CNN_MNIST.items():
            *parents, last = dotted.split(".")
            node = data
            for key in parents:
                node = node.get(key) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node[last] = value
        out[name] = folder / f"{name}.yaml"
        out[name].write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def run_sweeps(out: Path, seeds: int, workers: int = 2, policies: list[str] | None = None,
               scenarios: dict[str, Path] | None = None,
               overrides: dict[str, object] | None = None) -> Results:
    """Run every policy on every scenario for seeds 0..seeds-1 into ``out``; the results.
    ``overrides``: scenario fields set in every run (dotted paths, e.g. ``model``).
    (``async`` is a Python keyword: import this module with
    ``importlib.import_module("experiments.async.run")``.)"""
    grid = {path: [value] for path, value in (overrides or {}).items()}
    for name, path in (scenarios or SCENARIOS).items():
        netsim.sweep({"name": f"async-{name}", "base": str(path),
                      "policies": list(policies or POLICIES), "seeds": seeds,
                      **({"grid": grid} if grid else {})}, out=out, workers=workers)
    return netsim.load_results(out)


def _labelled(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with each point labelled by its world (the sweep's name), followed by the
    point's own label where it says more (overrides such as ``model=mlp-digits``)."""
    if "sweep" not in runs:
        return runs
    sweep, label = runs["sweep"].astype(str), runs["point_label"].astype(str)
    same = [lab in (sw, sc) for lab, sw, sc in zip(label, sweep, runs["scenario"].astype(str),
                                                     strict=True)]
    return runs.assign(point_label=sweep.where(same, sweep + ", " + label))


def _per_run(results: Results) -> pd.DataFrame:
    """Per run: dropouts, discarded (late) updates, wasted energy (J) summed over its epochs
    and the mean staleness of the updates it aggregated."""
    ep = results.epochs
    sums = ep.groupby("run_id")[["dropped", "late", "energy_wasted_j"]].sum()
    weighted = (ep["staleness_mean"].fillna(0.0) * ep["updates_aggregated"]).groupby(
        ep["run_id"]).sum()
    sums["staleness"] = weighted / ep.groupby("run_id")["updates_aggregated"].sum()
    return sums.reset_index()


def _order(frame: pd.DataFrame, policy: str = "policy") -> pd.DataFrame:
    scen = {f"async-{k}": i for i, k in enumerate(SCENARIOS)}
    pol = {p: i for i, p in enumerate(POLICIES)}
    key = frame["point_label"].map(lambda s: next((v for k, v in scen.items() if k in str(s)),
                                                  len(scen)))
    return frame.assign(_s=key, _p=frame[policy].map(lambda p: pol.get(p, len(pol)))) \
        .sort_values(["_s", "_p"]).drop(columns=["_s", "_p"]).reset_index(drop=True)


def table(results: Results) -> pd.DataFrame:
    """One row per scenario point and policy (module docstring)."""
    summary = figs.summary(_labelled(results.runs))
    runs = figs.with_point_key(results.runs).merge(_per_run(results), on="run_id", how="left")
    extra = runs.groupby(["point_key", "policy_label"])[
        ["dropped", "late", "energy_wasted_j", "staleness", "epochs", "final_loss"]].mean()
    extra.index = extra.index.set_names(["point_key", "policy"])
    return _order(summary.merge(extra.reset_index(), on=["point_key", "policy"], how="left"))


def claim(results: Results) -> pd.DataFrame:
    """FedBuff's claim per scenario (module docstring): ratios to random-k of the mean time
    and energy to the target over the runs that reached it, and the success rates."""
    runs = figs.with_point_key(_labelled(results.runs))
    rng = np.random.default_rng(0)
    rows = []
    for (_, label), part in runs.groupby(["point_key", "point_label"], sort=False):
        ok = part[part["target_reached"].astype(bool)]
        ref = ok[ok["policy_label"] == SYNCHRONOUS_REFERENCE]
        for policy in ("fedbuff", "fedasync", "overselect"):
            mine = ok[ok["policy_label"] == policy]
            row = {"point_label": label, "policy": policy,
                   "success": float(part.loc[part["policy_label"] == policy,
                                             "target_reached"].mean()),
                   "success_reference": float(part.loc[part["policy_label"]
                                                       == SYNCHRONOUS_REFERENCE,
                                                       "target_reached"].mean())}
            for metric in ("time_s", "energy_j"):
                r, lo, hi = ratio_of_means(mine[metric].to_numpy(float),
                                            ref[metric].to_numpy(float), rng)
                row |= {f"{metric}_ratio": r, f"{metric}_ratio_lo": lo,
                        f"{metric}_ratio_hi": hi}
            row["claim_holds"] = bool(row["time_s_ratio_hi"] < 1.0) \
                if np.isfinite(row["time_s_ratio_hi"]) else False
            rows.append(row)
    return _order(pd.DataFrame(rows))


def markdown(t: pd.DataFrame) -> str:
    """The table as Markdown (intervals in brackets)."""
    head = ("| scenario | policy | runs | success [95 % CI] | energy to target (J) [95 % CI] "
            "| time to target (s) [95 % CI] | epochs | staleness | dropouts / run "
            "| discarded / run | wasted (J) / run |")
    lines = [head, "|" + "---|" * 11]
    for r in t.itertuples():
        lines.append(
            f"| {r.point_label} | {r.policy} | {r.runs} | "
            f"{r.success:.2f} [{r.success_lo:.2f}, {r.success_hi:.2f}] | "
            f"{interval_text(r.energy_j, r.energy_j_lo, r.energy_j_hi)} | "
            f"{interval_text(r.time_s, r.time_s_lo, r.time_s_hi)} | {r.epochs:.0f} | "
            f"{r.staleness:.2f} | {r.dropped:.1f} | {r.late:.1f} | {r.energy_wasted_j:.3g} |")
    return "\n".join(lines)


def claim_markdown(c: pd.DataFrame) -> str:
    """The claim table as Markdown."""
    lines = [f"| scenario | policy | success (vs {SYNCHRONOUS_REFERENCE}) | time to target / "
             f"{SYNCHRONOUS_REFERENCE}'s [95 % CI] | energy to target / "
             f"{SYNCHRONOUS_REFERENCE}'s [95 % CI] | less time? |", "|" + "---|" * 6]
    for r in c.itertuples():
        lines.append(
            f"| {r.point_label} | {r.policy} | {r.success:.2f} ({r.success_reference:.2f}) | "
            f"{interval_text(r.time_s_ratio, r.time_s_ratio_lo, r.time_s_ratio_hi)} | "
            f"{interval_text(r.energy_j_ratio, r.energy_j_ratio_lo, r.energy_j_ratio_hi)} | "
            f"{'yes' if r.claim_holds else 'no'} |")
    return "\n".join(lines)


def draw(results: Results, folder: Path) -> list[Path]:
    """Draw the experiment's figures into ``folder``; the files written."""
    return draw_figures(results, folder, FIGURES)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None,
                    help="results folder (default results/async, with --model results/async-NAME)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="a 2-seed smoke run")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--model", default=None,
                    help="train this model on the worlds as they were before issue 37 "
                         "(small-cnn: the earlier tables; mlp-digits: every curve fitted)")
    ap.add_argument("--target-loss", type=float, default=None,
                    help="a loss target instead (of 97 %% accuracy; with --model, of 0.3)")
    a = ap.parse_args(argv)
    seeds = 2 if a.quick else a.seeds
    before = bool(a.model) and a.model != MODEL
    if a.out is None:
        a.out = Path(f"results/async-{a.model}" if before else "results/async")
    scenarios = scenarios_before_cnn_mnist(a.out / "scenarios", a.model) if before else None
    overrides: dict[str, object] = {}
    if a.target_loss is not None:
        overrides["training.target_loss"] = a.target_loss
        if not before:
            overrides["training.target_accuracy"] = None
    t0 = time.perf_counter()
    results = run_sweeps(a.out, seeds, a.workers, scenarios=scenarios, overrides=overrides)
    print(f"{len(results.runs)} runs under {a.out} ({time.perf_counter() - t0:.0f} s)")
    a.out.mkdir(parents=True, exist_ok=True)
    t = table(results)
    t.to_csv(a.out / "table.csv", index=False)
    (a.out / "table.md").write_text(markdown(t) + "\n")
    print(markdown(t))
    c = claim(results)
    c.to_csv(a.out / "claim.csv", index=False)
    (a.out / "claim.md").write_text(claim_markdown(c) + "\n")
    print()
    print(claim_markdown(c))
    for path in draw(results, a.out / "figures"):
        print("wrote", path)


if __name__ == "__main__":
    main()
