"""``netsim calibrate --coverage``: fit the coverage terms (the data floor and the class
interference, netsim.training.coverage) of a model's entry from real training runs
(:mod:`netsim.training.calibrate_coverage`: the numpy backend for ``mlp-digits``, the torch
backend for ``small-cnn`` and ``cnn-mnist``)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from yaml import safe_load

from netsim.commands.calibration_io import params_path, write_entry
from netsim.yamlio import read_text

MODELS = ("mlp-digits", "small-cnn", "cnn-mnist")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the coverage terms (which data trained, docs/curves.md)")
    g.add_argument("--coverage", action="store_true",
                   help="fit data_floor, data_exponent, class_interference and "
                        "interference_exponent from real runs")
    g.add_argument("--model", default="mlp-digits", choices=MODELS,
                   help="the model whose entry is fitted (mlp-digits: numpy backend, the "
                        "CNNs: torch backend)")
    g.add_argument("--base-curve", action="store_true",
                   help="first fit the model's base curve on the same backend (nodes 5, 10, "
                        "20, Dirichlet 1 and 0.1; nodes 40 held back and predicted); for a "
                        "model whose curve was never fitted to its backend, such as small-cnn; "
                        "for cnn-mnist, whose curve is the recorded runs', only the participant "
                        "exponent and the heterogeneity are kept, anchored on those runs")
    g.add_argument("--base-epochs", type=int, default=None, metavar="N",
                   help="--base-curve: epochs of each base-grid run (default: --epochs)")
    g.add_argument("--backend", default=None, choices=("real", "torch"),
                   help="the real backend to train with (default: numpy for mlp-digits, "
                        "torch for the CNNs)")


def main(args: argparse.Namespace) -> int:
    """Run both grids, fit, print, and write the four constants into the model's entry."""
    from netsim.training import calibrate_coverage as cc
    from netsim.training.models import builtin_models

    name = args.model
    backend = args.backend or ("real" if name == "mlp-digits" else "torch")
    if backend == "real" and name != "mlp-digits":
        print("netsim: error: --backend real trains only mlp-digits (the CNNs: --backend torch)",
              file=sys.stderr)
        return 2
    if backend == "torch":
        from netsim.scenario.errors import ScenarioError
        from netsim.torchnet import require_torch

        try:
            require_torch()
        except ScenarioError as exc:
            print(f"netsim: {exc}", file=sys.stderr)
            return 2
    quick = bool(args.quick)
    seeds = range(args.seeds if args.seeds is not None else (1 if quick else 3))
    epochs = args.epochs if args.epochs is not None else (30 if quick else 150)
    t0 = time.perf_counter()
    model = builtin_models()[name]
    base_fit = None
    recorded = cc.RECORDED_BASES.get(name)
    if getattr(args, "base_curve", False):
        base_epochs = args.base_epochs or epochs
        base_fit = _fit_base(name, seeds, base_epochs, backend)
        # the floor and the interference are fitted against the backend's own curve
        model = cc.with_base_curve(model, base_fit)
    floors = cc.floor_runs(name, cc.QUICK_FLOOR_SIZES if quick else cc.FLOOR_SIZES, seeds,
                           epochs, backend=backend)
    floor = cc.fit_floor(floors)
    print(f"data floor of {name} ({backend} backend, {len(floors)} runs of {epochs} epochs): "
          f"data_floor {floor.data_floor:.4g}, data_exponent {floor.data_exponent:.4g}, "
          f"reference_samples {floor.reference_samples:g} (RMS log error {floor.rms_log_error:.3f})")
    print(floor.table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    model = cc.with_floor(model, floor)
    inter_epochs = max(2, epochs * 4 // 5)
    runs = cc.interference_runs(name, cc.QUICK_KS if quick else cc.KS,
                                range(min(len(seeds), 2)), inter_epochs, backend=backend)
    fit = cc.fit_interference(model, runs)
    print(f"\ninterference of {name} ({len(runs)} runs of {inter_epochs} epochs): "
          f"class_interference {fit.class_interference:g}, interference_exponent "
          f"{fit.interference_exponent:g} (RMS log error over every epoch "
          f"{fit.rms_log_error:.3f})")
    print(fit.table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.no_params:
        return 0
    path = params_path(args)
    data = safe_load(read_text(path)) if os.path.isfile(path) else {}
    record = dict((data or {}).get(name) or {})
    if not record:
        loss = builtin_models()[name].loss
        assert loss is not None
        record = loss.model_dump(exclude_defaults=True)
    if base_fit is not None and recorded is not None:
        from netsim.scenario.schema import LossParams
        from netsim.training.calibrate import _r

        terms = cc.anchored_terms(LossParams(**record), recorded, base_fit.participant_exponent,
                                  base_fit.heterogeneity, floor)
        record.update({k: _r(v) for k, v in terms.items()})
        record["scale_source"] = (
            f"participant_exponent and heterogeneity measured by `netsim calibrate --coverage "
            f"--base-curve --model {name}` ({backend} backend: {len(seeds)} seeds x "
            f"{base_epochs} epochs of nodes 5, 10, 20 and Dirichlet 1, 0.1 on the backend's "
            f"data set, nodes 40 held back; docs/curves.md) and anchored on the recorded "
            f"runs' setting ({recorded.participants} clients, "
            f"{recorded.shards_per_device} shards each): samples_half rescaled so that it "
            f"keeps the recorded curve; the data floor referred to their "
            f"{recorded.training_samples:,} training samples (netsim's formalization)")
    elif base_fit is not None:
        from netsim.training.calibrate import _r

        full = base_fit.variants["full"]
        record.update({
            "initial_loss": _r(base_fit.initial_loss), "floor_full": _r(full[0]),
            "samples_half": _r(full[1]), "exponent": _r(full[2]),
            "heterogeneity": _r(base_fit.heterogeneity),
            "participant_exponent": _r(base_fit.participant_exponent),
            "noise_run_sigma": _r(base_fit.noise_run_sigma),
            "noise_epoch_sigma": _r(base_fit.noise_epoch_sigma),
            "source": (f"base curve fitted by `netsim calibrate --coverage --base-curve --model "
                       f"{name}` ({backend} backend: {len(seeds)} seeds x {base_epochs} epochs of "
                       f"nodes 5, 10, 20 and Dirichlet 1, 0.1 on the backend's data set, the "
                       f"last seed held out; docs/curves.md); pruning and staleness terms not "
                       f"measured: " + str(record.get("source", "")))})
    if base_fit is None or recorded is None:
        record.update({"reference_samples": float(f"{floor.reference_samples:.6g}"),
                       "data_floor": float(f"{floor.data_floor:.4g}"),
                       "data_exponent": float(f"{floor.data_exponent:.4g}")})
    record.update({
        "classes": 10,
        "class_interference": float(fit.class_interference),
        "interference_exponent": float(fit.interference_exponent),
        "coverage_source": (
            f"fitted by `netsim calibrate --coverage --model {name}` ({backend} backend; "
            f"docs/curves.md 'Which data trained'): the data floor from the lowest loss of one "
            f"device holding U of the {floor.reference_samples:g} training samples, "
            f"{len(floors)} runs of {epochs} epochs (RMS log error {floor.rms_log_error:.3f}); "
            f"the interference from fixed sets of devices under Dirichlet 0.1, 1.0 and 2-class "
            f"shards, {len(runs)} runs of {inter_epochs} epochs (RMS log error over every epoch "
            f"{fit.rms_log_error:.3f})")})
    write_entry(path, name, record)
    print(f"updated the coverage terms of the {name!r} entry of {path}")
    return 0


def _fit_base(name: str, seeds: range, epochs: int, backend: str):
    """Run the base grid and its held-back points, fit on the grid's, print the fit and
    every configuration's R² (the held-back ones predicted)."""
    from netsim.training import calibrate as cal
    from netsim.training import calibrate_coverage as cc

    table = cc.base_curve_runs(name, seeds, epochs, backend)
    held_back = {c for c, _, _ in cc.HELD_BACK_POINTS}
    held = 1 if len(seeds) >= 3 else 0  # (the noise fit needs two seeds or more)
    fit = cal.fit_surrogate(table[~table["config"].isin(held_back)],
                            fit_seeds=len(seeds) - held, fit_participant_exponent=True)
    full = fit.variants["full"]
    print(f"base curve of {name} ({backend} backend, {table['config'].nunique()} configs x "
          f"{len(seeds)} seeds x {epochs} epochs; {', '.join(sorted(held_back))} held back): "
          f"initial_loss {fit.initial_loss:.4g}, floor_full {full[0]:.4g}, samples_half "
          f"{full[1]:.4g}, exponent {full[2]:.4g}, heterogeneity {fit.heterogeneity:.4g}, "
          f"participant_exponent {fit.participant_exponent:.4g}")
    report = cal.fit_report(table, fit.initial_loss, {1.0: full}, fit.prune_progress_loss,
                            fit.heterogeneity, fit.participant_exponent, len(seeds) - held)
    report["held_back"] = report["config"].isin(held_back)
    print(report.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return fit
