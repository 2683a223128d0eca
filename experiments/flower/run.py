"""Flower's FedAvg, FedProx and FedAdam beside netsim's random-k, pact and fedbuff, with churn.

The Flower strategies run as the ``flower`` policy in real mode with the ClientApp of this
folder, on a 40-device Wi-Fi/LTE fleet with churn; then, with ``--scale``, in surrogate mode
on 100,000 devices.

    python -m experiments.flower.run [--out DIR] [--seeds N] [--workers W] [--quick]
                                     [--no-real-baselines] [--scale [N_DEVICES]]

Sweeps through netsim's Python API (``netsim.sweep``) into one results folder (default
results/flower/; runs already there are skipped, so it resumes), seeds 0..N-1 (default 5;
``--quick``: 2):

- ``flower-churn`` (churn.yaml): FedAvg, FedProx (mu 0.1) and FedAdam (Flower's defaults:
  eta 0.1, beta 0.9/0.99, tau 1e-3) with the ClientApp (client_app.py), centralized
  evaluation on the held-out split (server_app.evaluate: the run's loss) and no federated
  evaluation (fraction_evaluate 0); each round trains fraction_train 0.5 of the nodes
  available then (about 10 of 20 online). Beside them netsim's random-k (k 10), pact and
  fedbuff (concurrency 10, buffer 5) on mlp-digits' fitted curve.
- ``flower-churn-real`` (unless ``--no-real-baselines``): random-k, pact and fedbuff again with
  ``training.backend: real`` (netsim trains its own 64-64-10 MLP on the digits with the
  ClientApp's hyper-parameters), so that every loss in the comparison is measured.
- ``flower-scale`` (with ``--scale``; default off, ``--scale`` alone: 100,000 devices,
  ``--scale N``: N devices): scale.yaml, FedAvg, FedProx and FedAdam in surrogate mode (no
  ClientApp; netsim answers for the clients, the loss is the fitted curve), about 100 clients
  a round (fraction_train 100 / the expected number online, fraction_evaluate 0), beside
  random-k (k 100).

It prints and writes per world (DIR/table-<world>.md and .csv, from ``netsim.compare``): per
policy, where its loss comes from, the success rate (Wilson 95 %), time and energy to the
target over the runs that reached it and the final loss over all runs (Student-t 95 %), the
final accuracy and the epochs (rounds); and draws the figure flower-loss-time-energy-<world>
(loss against simulated time and against energy, a line per policy: plots/asynchronous.py's
loss_time_energy) into DIR/figures/.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

import netsim
from experiments.report import interval_text
from netsim import figures as registry
from netsim.sweep.results import Results
from plots.asynchronous import loss_time_energy

HERE = Path(__file__).parent
CHURN = HERE / "churn.yaml"
SCALE = HERE / "scale.yaml"
APP = {"client_app": "experiments.flower.client_app:app",
       "initial_arrays": "experiments.flower.task:initial_arrays",
       "evaluate_fn": "experiments.flower.server_app:evaluate"}
#: Each strategy's own arguments (beside fraction_train and fraction_evaluate).
STRATEGIES: dict[str, dict[str, float]] = {"FedAvg": {}, "FedProx": {"proximal_mu": 0.1},
                                           "FedAdam": {}}
NETSIM_POLICIES = ["random-k", "pact", "fedbuff"]
ORDER = [*STRATEGIES, *NETSIM_POLICIES]
#: Clients per round at scale, and the share of the fleet online (2 s online, 2 s offline).
SCALE_CLIENTS = 100
ONLINE_SHARE = 0.5


def flower_entries(fraction_train: float, real: bool) -> list[dict]:
    """The sweep entries of FedAvg, FedProx and FedAdam (labelled by the strategy)."""
    out = []
    for name, args in STRATEGIES.items():
        params = {"strategy": name, "strategy_args": {"fraction_train": fraction_train,
                                                      "fraction_evaluate": 0.0, **args},
                  "quiet": True}  # (Flower's log lines, from every worker: not shown)
        out.append({"name": "flower", "label": name, "params": params | (APP if real else {})})
    return out


def run_sweeps(out: Path, seeds: int, workers: int = 2, real_baselines: bool = True,
               scale: int | None = None) -> Results:
    """The module's sweeps into ``out`` (runs already there are skipped); the results."""
    netsim.sweep({"name": "flower-churn", "base": str(CHURN),
                  "policies": [*flower_entries(0.5, real=True), *NETSIM_POLICIES],
                  "seeds": seeds}, out=out, workers=workers)
    if real_baselines:
        netsim.sweep({"name": "flower-churn-real", "base": str(CHURN),
                      "policies": NETSIM_POLICIES, "seeds": seeds,
                      "grid": {"training.backend": ["real"]}}, out=out, workers=workers)
    if scale:
        fraction = min(1.0, SCALE_CLIENTS / (scale * ONLINE_SHARE))
        netsim.sweep({"name": "flower-scale", "base": str(SCALE),
                      "policies": [*flower_entries(fraction, real=False),
                                   {"name": "random-k", "params": {"k": SCALE_CLIENTS}}],
                      "seeds": seeds, "grid": {"generate.n_devices": [scale]}},
                     out=out, workers=workers)
    return netsim.load_results(out)


def _loss_from(source: str) -> str:
    if source.startswith("Flower"):
        return "Flower app (test split)"
    if source.startswith("real training"):
        return "netsim real backend"
    return "fitted curve"


def table(results: Results) -> pd.DataFrame:
    """One world's comparison (``netsim.compare``) with the loss source, the mean final
    accuracy and the mean epochs per policy, in ORDER."""
    runs = results.runs
    cmp = netsim.compare(results)
    extra = runs.groupby("policy_label").agg(
        loss_from=("loss_source", lambda s: _loss_from(str(s.iloc[0]))),
        accuracy=("final_accuracy", "mean"), epochs=("epochs", "mean"))
    t = cmp.merge(extra, left_on="policy", right_index=True, how="left")
    rank = {p: i for i, p in enumerate(ORDER)}
    return t.assign(_r=t["policy"].map(lambda p: rank.get(p, len(rank)))) \
        .sort_values(["point", "_r"]).drop(columns="_r").reset_index(drop=True)


def markdown(t: pd.DataFrame) -> str:
    """The table as Markdown (intervals in brackets)."""
    lines = ["| policy | loss from | runs | success [95 % CI] | time to target (s) [95 % CI] "
             "| energy to target (J) [95 % CI] | final loss [95 % CI] | final accuracy "
             "| epochs |", "|" + "---|" * 9]
    for r in t.itertuples():
        acc = "-" if pd.isna(r.accuracy) else f"{r.accuracy:.3f}"
        lines.append(
            f"| {r.policy} | {r.loss_from} | {r.runs} | "
            f"{r.success:.2f} [{r.success_lo:.2f}, {r.success_hi:.2f}] | "
            f"{interval_text(r.time_s, r.time_s_lo, r.time_s_hi)} | "
            f"{interval_text(r.energy_j, r.energy_j_lo, r.energy_j_hi)} | "
            f"{interval_text(r.final_loss, r.final_loss_lo, r.final_loss_hi)} | {acc} | "
            f"{r.epochs:.1f} |")
    return "\n".join(lines)


def draw(results: Results, folder: Path, world: str) -> list[Path]:
    """Loss against simulated time and against energy, a line per policy."""
    figs = loss_time_energy(results) or {}
    written: list[Path] = []
    for fig in figs.values():
        written += registry.save(fig, folder / f"flower-loss-time-energy-{world}")
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/flower"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a 2-seed smoke run")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-real-baselines", dest="real_baselines", action="store_false",
                    help="skip netsim's policies with the real backend")
    ap.add_argument("--scale", type=int, nargs="?", const=100_000, default=None,
                    metavar="N_DEVICES", help="also run the strategies in surrogate mode on "
                    "scale.yaml's fleet of N_DEVICES (default 100,000)")
    a = ap.parse_args(argv)
    seeds = 2 if a.quick else a.seeds
    t0 = time.perf_counter()
    results = run_sweeps(a.out, seeds, a.workers, a.real_baselines, a.scale)
    print(f"{len(results.runs)} runs under {a.out} ({time.perf_counter() - t0:.0f} s)")
    a.out.mkdir(parents=True, exist_ok=True)
    sweeps = [s for s in ("flower-churn", "flower-churn-real", "flower-scale")
              if (results.runs["sweep"] == s).any()]
    for world in sweeps:
        part = results.select(results.runs["sweep"] == world)
        t = table(part)
        t.to_csv(a.out / f"table-{world}.csv", index=False)
        (a.out / f"table-{world}.md").write_text(markdown(t) + "\n")
        label = ", ".join(sorted(set(part.runs["point_label"].astype(str))))
        print(f"\n{world} ({label})\n")
        print(markdown(t))
        for path in draw(part, a.out / "figures", world):
            print("wrote", path)


if __name__ == "__main__":
    main()
