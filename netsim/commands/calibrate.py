"""``netsim calibrate``: measure real-training curves, store them, fit the surrogate.

    netsim calibrate --out calib/curves.parquet        # default grid; fit -> calib/loss_params.yaml
    netsim calibrate --quick --out /tmp/curves.parquet --no-params    # tiny smoke grid
    netsim calibrate --from-curves netsim/data/calibration/curves.parquet --out refit/x.parquet
    netsim calibrate --asynchronous --out calib/async_curves.parquet   # the staleness exponent

Writes the curves table (Parquet, with the command and settings in its metadata), prints
the fitted constants and goodness of fit (R² and RMS log-residual per configuration, fit
and held-out seeds; fitted vs measured spread), and writes the ``mlp-digits`` entry of
loss_params.yaml beside ``--out`` (``--params FILE`` for another file, ``--no-params`` for
none). Nothing is written into the installed package unless its path is given explicitly
(maintainers: ``--params netsim/data/loss_params.yaml``). A file's existing fit is replaced
only by one whose held-out R² (mean over configurations, both scored on the new table) is
not lower; ``--force`` replaces it anyway.

``--client-app M:A`` or ``--app PATH`` (with ``--initial-arrays`` and ``--evaluate-fn``) fits
the progress model to a Flower app's real runs on a scenario's fleet instead
(netsim.commands.calibrate_app).

``--recorded mnist|cifar`` fits a built-in model's constants to recorded real federated runs
instead (netsim/data/curves/; netsim.commands.calibrate_recorded, docs/curves.md).

``--asynchronous`` runs real asynchronous training instead (FedBuff on the digits MLP over IID
and Dirichlet shards, several buffer sizes and concurrencies: netsim.training.calibrate_async)
and fits ``staleness_exponent`` alone, every other constant taken from the entry it updates
(the package's ``mlp-digits`` entry when that file has none); it writes only that constant
(and a note in ``source``), under the same held-out R² rule.

``--hierarchical`` runs real hierarchical training instead (the digits MLP over kappa_2 and
data skew: netsim.training.calibrate_tiers) and fits the progress model's edge-round term
alone (netsim.commands.calibrate_tiers, docs/hierarchical.md).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from datetime import datetime, timezone
from importlib import resources

import numpy as np
import pandas as pd
import yaml

from netsim.commands import calibrate_app, calibrate_coverage, calibrate_recorded, calibrate_tiers
from netsim.commands.calibration_io import (
    DEFAULT_OUT,
    params_path,
    params_problems,
    repo_relative,
    write_curves,
    write_entry,
)
from netsim.outputs import file_problems
from netsim.scenario.errors import Problem, ScenarioError
from netsim.scenario.schema import LossParams
from netsim.training import calibrate as cal
from netsim.training import calibrate_async as cal_async
from netsim.training.real import RealTrainingConfig
from netsim.yamlio import read_text, safe_load

ENTRY = "mlp-digits"
DEFAULT_ASYNC_OUT = os.path.join("netsim-calibration", "async_curves.parquet")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` subcommand to the CLI's subparsers."""
    p = subparsers.add_parser(
        "calibrate",
        help="run real training over a grid and fit the surrogate loss model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default=DEFAULT_OUT,
                   help=f"curves table to write (Parquet; default {DEFAULT_OUT}); the fitted "
                        "parameters go beside it, in loss_params.yaml")
    p.add_argument("--quick", action="store_true", help="tiny grid (3 configs, 4 seeds, 10 epochs)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per configuration (default 25)")
    p.add_argument("--epochs", type=int, default=None, help="epochs per run (default 30)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--params", default=None,
                   help="loss_params.yaml to update (default: loss_params.yaml beside --out; "
                        "the package's own only when named here)")
    p.add_argument("--no-params", action="store_true", help="do not write loss parameters")
    p.add_argument("--force", action="store_true",
                   help="replace the file's fit even if the new one scores a lower held-out R²")
    p.add_argument("--from-curves", default=None, help="fit an existing curves table; run nothing")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--asynchronous", action="store_true",
                   help="real asynchronous runs (FedBuff); fit staleness_exponent only")
    p.add_argument("--hierarchical", action="store_true",
                   help="real hierarchical runs (kappa_2 x skew); fit the edge-round term only")
    p.add_argument("--updates", type=int, default=None,
                   help="--asynchronous: updates per run (default "
                        f"{cal_async.UPDATES_PER_RUN}; --quick 60)")
    calibrate_app.add_arguments(p)
    calibrate_recorded.add_arguments(p)
    calibrate_coverage.add_arguments(p)
    p.set_defaults(func=main)


def _input_problems(args: argparse.Namespace) -> list[Problem]:
    """Every problem with the arguments and output paths, found before anything runs."""
    out: list[Problem] = []
    for flag, value, low in (("--seeds", args.seeds, 2), ("--epochs", args.epochs, 2),
                             ("--jobs", args.jobs, 1),
                             ("--updates", getattr(args, "updates", None), 10)):
        if value is not None and not low <= value <= 100_000:
            out.append(Problem(flag, f"must be in {low}..100000 (got {value})"))
    if args.from_curves and not os.path.isfile(args.from_curves):
        out.append(Problem("--from-curves", f"no such file {args.from_curves}"))
    if not args.from_curves:
        out += file_problems(args.out or DEFAULT_OUT, "--out")
    return out + params_problems(args)


def main(args: argparse.Namespace) -> int:
    """Run the calibration; returns the exit code (0 ok, 2 invalid input, 1 failure or a worse
    fit refused)."""
    if getattr(args, "recorded", None):  # recorded runs of real models (calibrate_recorded)
        return calibrate_recorded.main(args)
    if getattr(args, "coverage", False):  # which data trained (calibrate_coverage)
        return calibrate_coverage.main(args)
    seeds = args.seeds if args.seeds is not None else (4 if args.quick else 25)
    epochs = args.epochs if args.epochs is not None else (10 if args.quick else 30)
    asynchronous = bool(getattr(args, "asynchronous", False))  # (callers building a Namespace)
    hierarchical = bool(getattr(args, "hierarchical", False))
    if asynchronous and args.out == DEFAULT_OUT:
        args.out = DEFAULT_ASYNC_OUT
    if hierarchical and args.out == DEFAULT_OUT:
        args.out = calibrate_tiers.DEFAULT_TIER_OUT
    args.out = args.out or DEFAULT_OUT
    problems = _input_problems(args)
    if problems:
        print(f"netsim: {ScenarioError(problems, 'command line')}", file=sys.stderr)
        return 2
    fit_seeds = cal.fit_seed_count(seeds)
    if getattr(args, "client_app", None) or getattr(args, "app", None):
        return calibrate_app.main(args, args.seeds or (3 if args.quick else 6),
                                  args.epochs or (8 if args.quick else 20))
    if asynchronous:
        return _main_async(args, seeds, fit_seeds)
    if hierarchical:
        return calibrate_tiers.main(args, args.seeds or (2 if args.quick else 6), ENTRY,
                                    packaged_entry())
    if args.from_curves:
        table = _read_curves(args.from_curves, CURVES_COLUMNS, 2,
                             "the synchronous grid's (netsim calibrate)")
        if table is None:
            return 2
        fit_seeds = cal.fit_seed_count(table["seed"].nunique())
        source_file = args.from_curves
    else:
        points = cal.quick_grid() if args.quick else cal.default_grid()
        table = cal.run_grid(points, range(seeds), epochs, jobs=args.jobs,
                             progress=not args.no_progress)
        write_curves(table, args.out, _metadata(seeds, fit_seeds, points, epochs=epochs))
        print(f"wrote {len(table)} rows ({table['config'].nunique()} configs x {seeds} seeds "
              f"x {epochs} epochs) to {args.out}")
        source_file = args.out
    supported = "participant_exponent" in LossParams.model_fields
    fit = cal.fit_surrogate(table, fit_seeds=fit_seeds, fit_participant_exponent=supported)
    print_fit(fit, table, fit_seeds)
    if not supported and table["n_nodes"].nunique() > 1:
        alt = cal.fit_surrogate(table, fit_seeds=fit_seeds, fit_participant_exponent=True)
        worst = fit.report["r2_held_out"].min(), alt.report["r2_held_out"].min()
        print(f"\nnote: the surrogate counts total samples whatever the number of participants;"
              f" configurations with another node count were left out of the fit. Counting"
              f" samples * participants ** -b per epoch would fit them with b ="
              f" {alt.participant_exponent:.3g} (worst held-out R² {worst[0]:.3f} -> {worst[1]:.3f}).")
    if args.no_params:
        return 0
    path = params_path(args)
    new_r2 = held_out_r2(fit.report)
    old = existing_entry(path)
    if old is not None:
        old_r2 = held_out_r2(score_entry(old, table, fit_seeds))
        print(f"\nheld-out R² (mean over configurations) on this table: new fit {new_r2:.4f}, "
              f"the fit in {path} {old_r2:.4f}")
        if math.isfinite(old_r2) and not new_r2 >= old_r2 and not args.force:
            print(f"netsim: not replacing the {ENTRY!r} entry of {path}: the new fit's held-out "
                  f"R² ({new_r2:.4f}) is lower than the current one's ({old_r2:.4f}); --force "
                  "replaces it anyway", file=sys.stderr)
            return 1
    source = (f"fitted by `netsim calibrate` to {repo_relative(source_file)} "
              f"(seeds < {fit_seeds}; held-out R² {new_r2:.3f}; see "
              "netsim/data/calibration/README.md)")
    record = fit.loss_params(source)
    if old is not None and "staleness_exponent" in old.model_fields_set:
        # fitted separately (--asynchronous): kept, with its note
        record["staleness_exponent"] = old.staleness_exponent
        kept = re.search(r"; staleness_exponent fitted .*$", old.source)
        record["source"] += kept.group(0) if kept else ""
    write_entry(path, ENTRY, record)
    print(f"updated the {ENTRY!r} entry of {path}")
    return 0


#: The columns each fit reads of a --from-curves table (netsim calibrate writes them)
CURVES_COLUMNS = ["config", "seed", "epoch", "loss", *cal.SCHEDULE_COLUMNS]
ASYNC_CURVES_COLUMNS = ["config", "seed", "epoch", "loss", "update_samples",
                        "update_staleness", "staleness_max"]


def _read_curves(path: str, columns: list[str], min_seeds: int, kind: str
                 ) -> pd.DataFrame | None:
    """The curves table at ``path``, or None (said on stderr, naming --from-curves) where it
    is not a parquet table, lacks one of ``columns`` (a table of the other kind of fit) or
    holds fewer than ``min_seeds`` seeds (the synchronous fit measures the run-to-run
    spread across seeds: 2)."""
    why = None
    try:
        table = pd.read_parquet(path)
    except Exception as exc:  # (pyarrow's errors for a file that is not a table)
        why = f"{path} is not a parquet table ({type(exc).__name__})"
    else:
        missing = [c for c in columns if c not in table.columns]
        if missing:
            why = (f"{path} lacks the column(s) {', '.join(missing)}: this fit reads {kind} "
                   "curves table")
        elif table["seed"].nunique() < min_seeds:
            why = (f"{path} holds {table['seed'].nunique()} seed; the fit needs at least "
                   f"{min_seeds} (the run-to-run spread is measured across seeds)")
    if why is not None:
        print(f"netsim: {ScenarioError([Problem('--from-curves', why)], 'command line')}",
              file=sys.stderr)
        return None
    return table


def _main_async(args: argparse.Namespace, seeds: int, fit_seeds: int) -> int:
    """``--asynchronous``: run (or read) the asynchronous curves, fit staleness_exponent, write
    it into the entry (module docstring)."""
    updates = args.updates or (60 if args.quick else cal_async.UPDATES_PER_RUN)
    if args.from_curves:
        table = _read_curves(args.from_curves, ASYNC_CURVES_COLUMNS, 1,  # (mean curves)
                             "the asynchronous grid's (netsim calibrate --asynchronous)")
        if table is None:
            return 2
        fit_seeds = cal.fit_seed_count(table["seed"].nunique())
        source_file = args.from_curves
    else:
        points = cal_async.quick_async_grid() if args.quick else cal_async.async_grid()
        table = cal_async.run_async_grid(points, range(seeds), updates, jobs=args.jobs,
                                         progress=not args.no_progress)
        write_curves(table, args.out,
                     _metadata(seeds, fit_seeds, points, updates_per_run=updates))
        print(f"wrote {len(table)} rows ({table['config'].nunique()} configs x {seeds} seeds, "
              f"{updates} updates per run) to {args.out}")
        source_file = args.out
    path = params_path(args)
    entry = existing_entry(path) or packaged_entry()
    fit = cal_async.fit_staleness(table, entry, fit_seeds)
    print(f"\nstaleness_exponent for {ENTRY}: {fit.exponent:.4g} (seeds < {fit_seeds} fitted; "
          f"held-out R², mean over configurations: {fit.r2_held_out:.3f}, with no staleness "
          f"penalty {fit.r2_held_out_without:.3f})")
    print(fit.report.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.no_params:
        return 0
    old = existing_entry(path)
    if old is not None and "staleness_exponent" in old.model_fields_set:
        old_r2 = cal_async.staleness_report(table[table["epoch"] >= 1], old,
                                            old.staleness_exponent, fit_seeds)
        old_mean = float(np.nanmean(old_r2["r2_held_out"].to_numpy(dtype=float)))
        print(f"\nheld-out R² on this table: new exponent {fit.r2_held_out:.4f}, the one in "
              f"{path} ({old.staleness_exponent:.4g}) {old_mean:.4f}")
        if math.isfinite(old_mean) and not fit.r2_held_out >= old_mean and not args.force:
            print(f"netsim: not replacing staleness_exponent in {path}: the new fit's held-out "
                  "R² is lower; --force replaces it anyway", file=sys.stderr)
            return 1
    data = safe_load(read_text(path)) if os.path.isfile(path) else {}
    record = dict((data or {}).get(ENTRY) or entry.model_dump(exclude_defaults=True))
    record["staleness_exponent"] = float(f"{fit.exponent:.4g}")
    note = (f"staleness_exponent fitted by `netsim calibrate --asynchronous` to "
            f"{repo_relative(source_file)} (held-out R² {fit.r2_held_out:.3f})")
    source = re.sub(r"; staleness_exponent fitted .*$", "", str(record.get("source", "")))
    record["source"] = f"{source}; {note}" if source else note
    write_entry(path, ENTRY, record)
    print(f"updated staleness_exponent of the {ENTRY!r} entry of {path}")
    return 0


def packaged_entry() -> LossParams:
    """The package's own ``mlp-digits`` loss parameters."""
    text = resources.files("netsim").joinpath("data").joinpath("loss_params.yaml").read_text()
    return LossParams.model_validate(safe_load(text)[ENTRY])


def held_out_r2(report: pd.DataFrame) -> float:
    """Mean held-out R² over a fit report's configurations (NaN if none has held-out seeds)."""
    values = report["r2_held_out"].to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if len(values) else math.nan


def existing_entry(path: str) -> LossParams | None:
    """The ``mlp-digits`` entry of a loss-parameter file, if the file holds a valid one."""
    if not os.path.isfile(path):
        return None
    try:
        data = safe_load(read_text(path)) or {}
        return LossParams.model_validate(data[ENTRY])
    except (ValueError, KeyError, TypeError, yaml.YAMLError):
        return None


def score_entry(entry: LossParams, table: pd.DataFrame, fit_seeds: int) -> pd.DataFrame:
    """The fit report (R² per configuration) of existing constants on a curves table: each
    variant's curve is its per-variant override, else the floor formula with the full
    model's samples_half and exponent."""
    curves = {}
    for f in sorted(table["variant_fraction"].unique(), reverse=True):
        f = float(f)
        name = cal.VARIANT_NAMES.get(f, f"pf-{f:g}")
        floor = entry.floor_full + entry.floor_prune * (1 - f) ** entry.floor_exponent
        curve = [floor, entry.samples_half, entry.exponent]
        override = entry.variants.get(name)
        if f < 1.0 and override is not None:
            curve = [override.floor if override.floor is not None else floor,
                     override.samples_half or entry.samples_half,
                     override.exponent or entry.exponent]
        curves[f] = tuple(curve)
    return cal.fit_report(table, entry.initial_loss, curves, entry.prune_progress_loss,
                          entry.heterogeneity, entry.participant_exponent, fit_seeds)


def _metadata(seeds: int, fit_seeds: int, points: list, **run_length: int) -> dict:
    """The command, date, grid, seeds and training settings stored with a curves table;
    ``run_length``: ``epochs=`` (synchronous) or ``updates_per_run=`` (asynchronous)."""
    return {
        "command": "netsim calibrate " + " ".join(sys.argv[2:] if len(sys.argv) > 2 else []),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": cal.MODEL_NAME, "seeds": seeds, **run_length, "fit_seeds": fit_seeds,
        "training_real": RealTrainingConfig().__dict__,
        "grid": [p.__dict__ for p in points],
    }


def print_fit(fit: cal.SurrogateFit, table: pd.DataFrame, fit_seeds: int) -> None:
    """Print the fitted constants and goodness of fit."""
    print(f"\nsurrogate fit for {ENTRY} (seeds < {fit_seeds} fitted, the rest held out)")
    print(f"  initial_loss {fit.initial_loss:.4g} nats")
    for name, (floor, half, exponent) in fit.variants.items():
        print(f"  {name:10s} floor {floor:.4g}  samples_half {half:.4g}  exponent {exponent:.4g}")
    print(f"  floor(f) = {fit.floor_full:.4g} + {fit.floor_prune:.4g} * (1 - f) ** "
          f"{fit.floor_exponent:.4g}")
    print(f"  prune_progress_loss {fit.prune_progress_loss:.4g}  heterogeneity "
          f"{fit.heterogeneity:.4g}")
    print(f"  noise sigma per run {fit.noise_run_sigma:.4g}, per epoch {fit.noise_epoch_sigma:.4g}"
          f" (total {(fit.noise_run_sigma**2 + fit.noise_epoch_sigma**2) ** 0.5:.4g});"
          f" per-run sigma x (1 + {fit.noise_heterogeneity:.3g} / dirichlet_alpha) for non-IID data")
    print("\ngoodness of fit per configuration (R² of the seed-mean curve; RMS log-residual;"
          " measured sd of log final loss):")
    print(fit.report.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
