"""``netsim calibrate --client-app M:A``: fit the progress model to a Flower app's real runs.

    netsim calibrate --client-app experiments.flower.client_app:app \\
        --initial-arrays experiments.flower.task:initial_arrays \\
        --evaluate-fn experiments.flower.server_app:evaluate \\
        --scenario default --out calib/app_curves.parquet

Runs the ClientApp in real mode (the registered ``flower`` policy, netsim[flower]) on the
scenario's fleet with a FedAvg-family strategy (``--strategy``, default FedAvg) over a small
grid of participants per round (``--fractions`` of the available devices, each round's
samples following), ``--seeds`` seeds each and ``--epochs`` rounds, the loss being
``evaluate_fn``'s; plus one held-back fraction (``--held-out-fraction``) that the fit never
sees. The curves (netsim.training.calibrate_runs) are fitted by the existing fit
(:func:`netsim.training.calibrate.fit_surrogate`, the participant exponent included), and the
constants go, with their provenance, to the ``--entry`` block (default: the scenario model's
name) of loss_params.yaml beside ``--out`` (or ``--params``). Printed: the constants, R² per
configuration, and the R² on the log-loss of the held-back fraction's curve, the measure of
how well the surrogate predicts a real run it was not fitted to. Copy the block into the
model's ``loss:`` to run the same model in surrogate mode at scale.

``--app PATH`` takes the ClientApp and the run config from a Flower app folder instead of
``--client-app`` (its ServerApp is not run: the grid of fractions is netsim's), and
``--run-config 'key=value ...'`` overrides that config as ``flwr run`` does. A run that fails
(every ClientApp call of a round failed, say) or reports no finite loss stops the
calibration with exit code 2, naming the run and why; nothing is fitted.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import pandas as pd

from netsim.commands.run import add_app_arguments, command_logging, gated
from netsim.scenario.errors import Problem, ScenarioError

#: The default grid: participants per round as fractions of the available devices.
FRACTIONS = (0.25, 0.5, 1.0)
HELD_OUT_FRACTION = 0.75


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``netsim calibrate`` for a Flower app."""
    g = p.add_argument_group("from a Flower app (real mode; needs netsim[flower])")
    g.add_argument("--client-app", default=None, help="module:attr of the ClientApp")
    g.add_argument("--initial-arrays", default=None,
                   help="module:attr of the initial arrays (or a callable returning them)")
    g.add_argument("--evaluate-fn", default=None,
                   help="module:attr of Flower's evaluate_fn: the loss that is fitted")
    g.add_argument("--scenario", default="default", help="scenario (file or built-in name)")
    g.add_argument("--strategy", default="FedAvg",
                   help="a FedAvg-family strategy (fraction_train, min_*_nodes)")
    g.add_argument("--fractions", default=",".join(f"{f:g}" for f in FRACTIONS),
                   help="participants per round, as fractions of the available devices")
    g.add_argument("--held-out-fraction", type=float, default=HELD_OUT_FRACTION,
                   help="a fraction run but never fitted: the held-back check")
    g.add_argument("--entry", default=None,
                   help="loss_params.yaml block to write (default: the scenario model's name)")
    add_app_arguments(g)


def _fractions(text: str) -> list[float]:
    values = [float(x) for x in text.split(",") if x.strip()]
    if not values or any(not 0.0 < v <= 1.0 for v in values):
        raise ValueError(text)
    return values


def main(args: argparse.Namespace, seeds: int, epochs: int) -> int:
    """Run the grid, fit, report, write (under the command's import gate and logging);
    returns the exit code (2: bad input, or runs that failed)."""
    typed = {"calibrate": {k: v for k, v in (
        ("client_app", args.client_app), ("initial_arrays", args.initial_arrays),
        ("evaluate_fn", args.evaluate_fn), ("strategy", args.strategy)) if v is not None}}
    with gated(args, typed), command_logging(bool(getattr(args, "debug", False)),
                                             bool(getattr(args, "quiet", False))):
        return _main(args, seeds, epochs, typed)


def _main(args: argparse.Namespace, seeds: int, epochs: int,
          typed: dict[str, dict[str, Any]]) -> int:
    import netsim
    from netsim.commands import calibration_io as command
    from netsim.commands.run import _gate
    from netsim.policy import make_policy
    from netsim.scenario.loading import load_scenario
    from netsim.scenario.trust import imports_in, refusals
    from netsim.training import calibrate as cal
    from netsim.training.calibrate_runs import curves_from_run, log_loss_r2

    problems: list[Problem] = []
    try:
        fractions = _fractions(args.fractions)
    except ValueError:
        problems.append(Problem("--fractions", f"{args.fractions!r}: comma-separated numbers "
                                "in (0, 1]"))
        fractions = []
    held = args.held_out_fraction
    if not 0.0 < held <= 1.0 or held in fractions:
        problems.append(Problem("--held-out-fraction", f"{held:g}: in (0, 1] and not one of "
                                "--fractions"))
    if args.evaluate_fn is None or args.initial_arrays is None:
        problems.append(Problem("--evaluate-fn", "--client-app needs --initial-arrays and "
                                "--evaluate-fn (the measured loss)"))
    app = getattr(args, "app", None)
    if app is not None and args.client_app is not None:
        problems.append(Problem("--client-app", "given with --app (the app folder's "
                                "pyproject.toml names its ClientApp)"))
    base: dict[str, object] = {"strategy": args.strategy, "initial_arrays": args.initial_arrays,
                               "evaluate_fn": args.evaluate_fn}
    base.update({"app": app} if app is not None else {"client_app": args.client_app})
    if getattr(args, "run_config", None):
        base["run_config"] = args.run_config
    try:
        scenario = load_scenario(args.scenario)
        problems += refusals(imports_in({"flower": scenario.policies.get("flower", {})}),
                             _gate(args, typed))
        if not problems:
            make_policy("flower", {**scenario.policies.get("flower", {}), **base,
                                   "strategy_args": _args(fractions[0])})
    except ScenarioError as exc:
        problems += exc.problems
        scenario = None
    if problems:
        print(f"netsim: {ScenarioError(list(dict.fromkeys(problems)), 'command line')}",
              file=sys.stderr)
        return 2
    assert scenario is not None
    sc = scenario.model_copy(update={"training": scenario.training.model_copy(update={
        "max_epochs": epochs, "target_loss": 1e-9})})
    name = app or args.client_app
    curves = []
    for fraction in [*fractions, held]:
        for seed in range(seeds):
            r = netsim.simulate(sc, policy="flower", seed=seed,
                                params={**base, "strategy_args": _args(fraction)})
            why = r.runs["error"].iloc[0] if r.runs["status"].iloc[0] == "failed" else None
            try:
                if why is None:
                    curves.append(curves_from_run(r.runs, r.epochs, f"fraction-{fraction:g}"))
            except ValueError as exc:
                why = str(exc)
            if why is not None:
                print(f"netsim: calibrating {name}: its run with fraction {fraction:g}, seed "
                      f"{seed} failed: {why}; nothing was fitted", file=sys.stderr)
                return 2
    table = pd.concat(curves, ignore_index=True)
    held_config = f"fraction-{held:g}"
    counts = cal.participant_counts(table[table["config"] != held_config])
    if len(counts) < 2:
        print(f"netsim: calibrating {name}: the fit of its {len(curves)} runs failed: the "
              f"participant exponent is not identified: every fraction fitted (--fractions) "
              f"trains {', '.join(map(str, counts))} participant(s) a round on this scenario "
              "(it needs at least two participant counts); nothing was fitted",
              file=sys.stderr)
        return 2
    fit_seeds = cal.fit_seed_count(seeds)
    try:
        fit = cal.fit_surrogate(table[table["config"] != held_config], fit_seeds=fit_seeds,
                                fit_participant_exponent=True)
        held_r2 = log_loss_r2(table[table["config"] == held_config], fit)
    except (ValueError, RuntimeError, FloatingPointError) as exc:
        print(f"netsim: calibrating {name}: the fit of its {len(curves)} runs failed: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    entry = args.entry or str(getattr(sc.model, "name", None) or _model_name(sc.model))
    metadata = {"command": "netsim calibrate " + " ".join(sys.argv[2:]),
                "client_app": args.client_app, "app": app, "scenario": args.scenario,
                "strategy": args.strategy, "fractions": fractions, "held_out_fraction": held,
                "seeds": seeds, "fit_seeds": fit_seeds, "epochs": epochs}
    command.write_curves(table, args.out, metadata)
    print(f"wrote {len(table)} rows ({len(fractions) + 1} fractions x {seeds} seeds x "
          f"{epochs} rounds) to {args.out}")
    print(f"\nsurrogate fit of {name} (fractions {fractions}, seeds < {fit_seeds})")
    print(f"  initial_loss {fit.initial_loss:.4g}; full: floor, samples_half, exponent "
          f"{', '.join(f'{x:.4g}' for x in fit.variants['full'])}; participant_exponent "
          f"{fit.participant_exponent:.4g}")
    print(fit.report.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    r2 = float(held_r2["r2_log_loss"].iloc[0])
    print(f"\nheld-back fraction {held:g} ({seeds} runs, never fitted): R² on the log-loss "
          f"{r2:.3f}, RMS log-residual {float(held_r2['rms_log'].iloc[0]):.3f}")
    if args.no_params:
        return 0
    flag = f"--app {app}" if app is not None else f"--client-app {args.client_app}"
    source = (f"fitted by `netsim calibrate {flag}` to "
              f"{command.repo_relative(args.out)} (scenario {args.scenario}, {args.strategy}, "
              f"fractions {fractions}, seeds < {fit_seeds}; held-back fraction {held:g}: R² on "
              f"the log-loss {r2:.3f})")
    path = command.params_path(args)
    record = fit.loss_params(source)
    if not math.isfinite(r2):
        record["source"] += " (held-back R² not finite: check the curves)"
    command.write_entry(path, entry, record)
    print(f"wrote the {entry!r} entry of {path}: put it under the model's `loss:` to run the "
          "same model in surrogate mode")
    return 0


def _args(fraction: float) -> dict[str, float | int]:
    """A FedAvg-family strategy training ``fraction`` of the available nodes, no federated
    evaluation (the loss is evaluate_fn's), never waiting for nodes."""
    return {"fraction_train": fraction, "fraction_evaluate": 0.0, "min_available_nodes": 1,
            "min_train_nodes": 1}


def _model_name(model: Any) -> str:
    """A scenario model's name for its loss_params.yaml entry: a built-in's name, a PyTorch
    model's factory name (``model: {torch: ...}`` without ``name``)."""
    from netsim.scenario.torch_model import default_name, source_of

    source = source_of(model)
    return default_name(source.factory) if source is not None else str(model)

