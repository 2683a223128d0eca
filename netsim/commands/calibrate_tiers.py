"""``netsim calibrate --hierarchical``: real hierarchical runs of the digits MLP over kappa_2
and data skew (netsim.training.calibrate_tiers), and the fit of the progress model's edge-round
term (docs/hierarchical.md).

    netsim calibrate --hierarchical --out calib/tier_curves.parquet
    netsim calibrate --hierarchical --from-curves netsim/data/calibration/tier_curves.parquet \
        --params netsim/data/loss_params.yaml

Writes the curves table (with the command and settings in its metadata), prints the fitted
``edge_round_efficiency`` and ``edge_heterogeneity``, the report per configuration (fitted
or held back: R², rounds to the target loss real and predicted) and how many held-back
settings it predicts within 25 %, and writes the two constants (with a note in ``source``)
into the ``mlp-digits`` entry of the parameters file with their provenance (``edge_source``),
every other constant kept.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone

import pandas as pd

from netsim.commands.calibration_io import params_path, repo_relative, write_curves, write_entry
from netsim.training import calibrate_tiers as cal_tiers
from netsim.training.real import RealTrainingConfig
from netsim.yamlio import read_text, safe_load

DEFAULT_TIER_OUT = os.path.join("netsim-calibration", "tier_curves.parquet")


def main(args: argparse.Namespace, seeds: int, entry_name: str, packaged) -> int:
    """Run (or read) the hierarchical curves, fit, report, write the two constants."""
    if args.from_curves:
        table = pd.read_parquet(args.from_curves)
        source_file = args.from_curves
    else:
        points = cal_tiers.quick_tier_grid() if args.quick else cal_tiers.tier_grid()
        table = cal_tiers.run_tier_grid(points, range(seeds), jobs=args.jobs,
                                        progress=not args.no_progress)
        write_curves(table, args.out, {
            "command": "netsim calibrate " + " ".join(sys.argv[2:]),
            "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "model": cal_tiers.MODEL_NAME, "seeds": seeds,
            "edge_round_budget": cal_tiers.EDGE_ROUND_BUDGET,
            "training_real": RealTrainingConfig().__dict__,
            "grid": [p.__dict__ for p in points]})
        print(f"wrote {len(table)} rows ({table['config'].nunique()} configs x {seeds} seeds, "
              f"{cal_tiers.EDGE_ROUND_BUDGET} edge rounds per run) to {args.out}")
        source_file = args.out
    path = params_path(args)
    entry = packaged
    if os.path.isfile(path):
        from netsim.scenario.schema import LossParams

        data = safe_load(read_text(path)) or {}
        if entry_name in data:
            entry = LossParams.model_validate(data[entry_name])
    fit = cal_tiers.fit_tiers(table, entry)
    ok, held = fit.held_back_within()
    print(f"\nedge-round term for {entry_name}: edge_round_efficiency {fit.efficiency:.4g}, "
          f"edge_heterogeneity {fit.heterogeneity:.4g} (rho = efficiency / (1 + "
          f"heterogeneity / dirichlet_alpha))")
    print("nuisance sample scale per skew level (the base curve in this setting): "
          + ", ".join(f"{k} {v:.3g}" for k, v in fit.scales.items()))
    print(f"held-back settings with cloud rounds to loss {cal_tiers.TARGET_LOSS:g} predicted "
          f"within 25 %: {ok} of {held}")
    print(fit.report.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.no_params:
        return 0
    data = safe_load(read_text(path)) if os.path.isfile(path) else {}
    record = dict((data or {}).get(entry_name) or entry.model_dump(exclude_defaults=True))
    record["edge_round_efficiency"] = float(f"{fit.efficiency:.4g}")
    record["edge_heterogeneity"] = float(f"{fit.heterogeneity:.4g}")
    record["edge_source"] = (
        f"fitted by `netsim calibrate --hierarchical` to {repo_relative(source_file)} "
        f"({ok} of {held} held-back settings' cloud rounds to loss {cal_tiers.TARGET_LOSS:g} "
        "within 25 %; docs/hierarchical.md)")
    write_entry(path, entry_name, record)
    print(f"updated the edge-round term of the {entry_name!r} entry of {path}")
    return 0
