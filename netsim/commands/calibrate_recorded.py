"""``netsim calibrate --recorded mnist|cifar``: fit a model's progress constants to recorded
federated runs (netsim/data/curves/), predict the settings held back, write the entry.

    netsim calibrate --recorded mnist --params netsim/data/loss_params.yaml   # maintainers
    netsim calibrate --recorded cifar --no-params                             # print only
    netsim calibrate --recorded mnist --hold-out B50-E1 B10-E5 Binf-E5 --no-params

The fit, the accuracy map, the spread and the held-back comparison: netsim.training.recorded
and docs/curves.md. Prints the fitted constants, the runs left out (diverged) and, per
setting, the prediction against the real runs (held-back settings judged against the target:
rounds to 97 % within 35 % of the real run for MNIST; accuracy at rounds 25, 50 and 100
inside the seeds' range widened by 0.03 for CIFAR, with the 10-90 % band's coverage of the
seeds). Writes the model's entry (``cnn-mnist`` or ``vgg11-cifar10``) to loss_params.yaml
beside ``--out`` unless ``--params FILE`` names another (the package's own only when named),
with a ``source`` naming the data file and the held-back results; constants no recorded run
measures (pruning, staleness) are set as netsim.training.recorded declares them, and said so.
The figure of the recorded runs against the prediction is plots/curves.py's
(``python -m plots.curves mnist cifar --out DIR``; registered as ``recorded-curves``).
"""

from __future__ import annotations

import argparse
import math
import sys

import pandas as pd

from netsim.commands.calibration_io import (
    params_path,
    params_problems,
    repo_relative,
    write_entry,
)
from netsim.scenario.errors import Problem, ScenarioError
from netsim.scenario.schema import LossParams
from netsim.training import recorded as rec


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``netsim calibrate`` for recorded curves."""
    g = p.add_argument_group("from recorded runs (netsim/data/curves/, docs/curves.md)")
    g.add_argument("--recorded", choices=sorted(rec.LOADERS), default=None,
                   help="fit the progress model to a recorded table of real federated runs")
    g.add_argument("--hold-out", nargs="+", default=None, metavar="SETTING",
                   help="settings held back from the fit and predicted (default: mnist "
                        "B50-E1 B10-E5, cifar fedavg-vanilla-fixed); commas also separate")


def _hold_out(args: argparse.Namespace) -> list[str] | None:
    values = getattr(args, "hold_out", None)
    if values is None:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _problems(args: argparse.Namespace, data: rec.Recorded) -> list[Problem]:
    out = []
    held = _hold_out(args)
    for h in held or []:
        if h not in data.settings:
            out.append(Problem("--hold-out", f"{data.name} has no setting {h!r}; its settings: "
                               f"{', '.join(data.settings)}"))
    return out + params_problems(args)


def main(args: argparse.Namespace) -> int:
    """Fit, print, write; returns the exit code (0 ok, 2 invalid input, 1 nothing to fit)."""
    data = rec.load(args.recorded)
    problems = _problems(args, data)
    if problems:
        print(f"netsim: {ScenarioError(problems, 'command line')}", file=sys.stderr)
        return 2
    try:
        fit = rec.fit_recorded(data, _hold_out(args))
    except ValueError as e:
        print(f"netsim: {e}", file=sys.stderr)
        return 1
    path = None if args.no_params else params_path(args)
    entry = fit.entry()
    table = rec.report(fit, entry)
    print_fit(fit, entry, table)
    if path is None:
        return 0
    write_entry(path, data.model, fit.loss_params(source_text(fit, entry, table)))
    print(f"\nupdated the {data.model!r} entry of {path}")
    return 0


def _num(x: float | int | None, fmt: str = ".3f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, fmt) if isinstance(x, float) else str(x)


def print_fit(fit: rec.RecordedFit, entry: LossParams, table: pd.DataFrame) -> None:
    """The fitted constants, the left-out runs, the comparison table and the targets."""
    data, e, s = fit.data, entry, fit.spread
    amap = entry.accuracy
    assert amap is not None
    print(f"netsim calibrate --recorded {data.name}: {data.model} fitted to "
          f"{repo_relative(data.path)}")
    print(f"  fitted on: {', '.join(fit.fit_settings)}")
    print(f"  held back: {', '.join(fit.held_out) or '(none)'}")
    fixed = ", ".join(f"{k} = {v:g}" for k, v in data.fixed.items())
    print(f"  mean curve: initial_loss {e.initial_loss:g}  floor {e.floor_full:g}  samples_half "
          f"{e.samples_half:g}  exponent {e.exponent:g}")
    print(f"  local training: local_step_exponent {e.local_step_exponent:g}  "
          f"local_epoch_exponent {e.local_epoch_exponent:g}" + (f" (held: {fixed})" if fixed
                                                                 else ""))
    print(f"  accuracy map: chance {amap.chance:g}  top {amap.top:g}  loss_mid "
          f"{amap.loss_mid:g}  exponent {amap.exponent:g}"
          + (f"  cutoff_exponent {amap.cutoff_exponent:g}" if amap.cutoff_exponent else ""))
    print(f"  spread: noise_run_sigma {e.noise_run_sigma:g}  noise_epoch_sigma "
          f"{e.noise_epoch_sigma:g}  noise_level_exponent {e.noise_level_exponent:g}; "
          f"{s.how}")
    if fit.seed_spread is not None:
        t = fit.seed_spread
        print(f"  (the seeds' own spread, around their mean: noise_run_sigma "
              f"{t.noise_run_sigma:.4g}  noise_epoch_sigma {t.noise_epoch_sigma:.4g}  "
              f"noise_level_exponent {t.noise_level_exponent:.4g}; {t.how})")
    for note in data.notes:
        print(f"  note: {note}")
    runs = data.table
    print("\naccuracy map error on the recorded (loss, accuracy) pairs of runs that did not "
          "diverge (|map(loss) - accuracy|):")
    clean = rec.clean_runs(data)
    every = [] if data.modelled == list(data.settings) else list(data.settings)
    for label, sel in (("fitted settings", fit.fit_settings), ("held back", fit.held_out),
                       ("every modelled setting", data.modelled), ("every setting", every)):
        part = clean[clean["setting"].isin(list(sel))]
        if part.dropna(subset=["loss", "accuracy"]).empty:
            continue
        err = rec.map_error(amap, part)
        print(f"  {label:24s} {err.pairs:5d} pairs: RMS {err.rms:.4f}  mean {err.mean_abs:.4f}"
              f"  max {err.max_abs:.3f}  within 0.02: {100 * err.within:.1f} %")
    found = rec.incidents(data)
    if found:
        print("\nruns left out of the fit or flagged (a limit of the model: it has no "
              "divergence):")
        for i in found:
            last = runs[(runs["setting"] == i.setting) & (runs["seed"] == i.seed)]
            what = (f"loss NaN from round {i.round}, accuracy {i.accuracy_after:.3f} at round "
                    f"{int(last['round'].max())} (chance): left out"
                    if i.kind == "diverged" else
                    f"loss {i.loss:.3g} at round {i.round} (> {rec.BLOW_UP:g} x its best so "
                    f"far), recovered: kept")
            print(f"  {i.setting} seed {i.seed}: {i.kind}, {what}")
    print()
    if data.target == "rounds":
        print(f"rounds to {100 * data.target_accuracy:g} % test accuracy, predicted (first round"
              " whose predicted mean accuracy reaches it) against the real run; target for "
              "held-back settings: within 35 %")
        show = table.assign(real=table["real"].map(_num), predicted=table["predicted"].map(_num),
                            rel_error=table["rel_error"].map(lambda x: _num(x, "+.1%")))
        print(show.to_string(index=False))
        held = table[table["role"] == "held back"]
        met = bool(len(held)) and (held["within"] == "yes").all()
        print(f"\ntarget (held back, rounds to {100 * data.target_accuracy:g} % within 35 %): "
              f"{'met' if met else 'NOT met'}")
    else:
        print("accuracy at rounds " + ", ".join(str(r) for r in data.target_rounds) + ": "
              "the seeds' range against the predicted mean and its 10-90 % band (covered: "
              "seeds' accuracies inside the band; loss_covered: their losses inside the loss "
              "band); target for held-back settings: inside the range widened by 0.03")
        show = table.copy()
        for col in ("real_min", "real_mean", "real_max", "predicted", "band_lo", "band_hi"):
            show[col] = show[col].map(lambda x: f"{x:.3f}")
        print(show.to_string(index=False))
        held = table[table["role"] == "held back"]
        met = bool(len(held)) and (held["within"] == "yes").all()
        print(f"\ntarget (held back, accuracy inside the seeds' range +- 0.03): "
              f"{'met' if met else 'NOT met'}")
        for label, roles in (("held back", ["held back"]), ("fitted", ["fit"]),
                             ("held back and fitted", ["held back", "fit"])):
            a, n = rec.coverage(table, roles)
            la, ln = rec.coverage(table, roles, "loss_covered")
            if n:
                print(f"10-90 % band coverage, {label}: accuracies {a}/{n} "
                      f"({100 * a / n:.0f} %; target >= 80 %: {'met' if a >= 0.8 * n else 'NOT met'})"
                      f", losses {la}/{ln} ({100 * la / ln:.0f} %)")
    print(f"fit took {fit.seconds:.2f} s", file=sys.stderr)  # (stdout stays reproducible)


def source_text(fit: rec.RecordedFit, entry: LossParams, table: pd.DataFrame) -> str:
    """The entry's ``source``: the data file, the settings fitted, the held-back results."""
    data = fit.data
    held = table[table["role"] == "held back"]
    if data.target == "rounds":
        results = "; ".join(
            f"{r.setting} {_num(r.predicted)} rounds vs {_num(r.real)} real "
            f"({_num(r.rel_error, '+.0%')})" for r in held.itertuples())
        what = f"held back, rounds to {100 * data.target_accuracy:g} %: {results}"
    else:
        results = "; ".join(
            f"{r.setting} round {r.round} {r.predicted:.3f} vs {r.real_min:.3f}-{r.real_max:.3f}"
            for r in held.itertuples())
        a, n = rec.coverage(table, ["held back"])
        what = (f"held back, accuracy predicted vs the seeds' range: {results}; 10-90 % band "
                f"covers {a}/{n} held-back seed accuracies")
    amap = entry.accuracy
    assert amap is not None
    err = rec.map_error(amap, rec.clean_runs(data)[lambda t: t["setting"].isin(data.modelled)])
    return (f"fitted by `netsim calibrate --recorded {data.name}` to {repo_relative(data.path)} "
            f"(netsim/data/curves/SOURCE.md); fitted on {', '.join(fit.fit_settings)}; {what}; "
            f"accuracy map RMS {err.rms:.3f} (mean {err.mean_abs:.3f}) on the recorded pairs; "
            f"spread of {fit.spread.how}; runs that diverged left out (docs/curves.md); "
            f"not measured by these runs: floor_prune, floor_exponent, prune_progress_loss "
            f"({data.unmeasured_from}), staleness_exponent (mlp-digits' fitted value)")
