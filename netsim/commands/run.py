"""``netsim run [SCENARIO] [--policy NAME ...] [--seed N ...] [--out DIR]``.

Runs each policy with each seed, prints a summary table (energy J, time s, final loss, target
reached), writes the tables (Parquet, one file per run and table, atomically) and one figure
(loss and cumulative energy vs simulated time) to the output folder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from tqdm import tqdm

from netsim.commands.info import print_warnings
from netsim.outputs import dir_problems
from netsim.scenario.errors import Problem, ScenarioError
from netsim.scenario.loading import validate_scenario
from netsim.scenario.schema import MAX_SEED, Scenario
from netsim.yamlio import safe_load

DEFAULT_POLICIES = ["fedavg-all", "greedy-energy", "pact", "depl"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim run``."""
    p = sub.add_parser("run", help="simulate policies on a scenario (default: built-in 'default')")
    p.add_argument("scenario", nargs="?", default="default", help="scenario file or built-in name")
    p.add_argument("--policy", action="append", metavar="NAME",
                   help="policy to run (repeatable; default: the scenario's 'policies' block, "
                        f"else {', '.join(DEFAULT_POLICIES)})")
    p.add_argument("--seed", action="append", type=int, metavar="N",
                   help="seed (repeatable; default: the scenario's seed)")
    p.add_argument("--param", action="append", default=[], metavar="POLICY.KEY=VALUE",
                   help="a policy parameter, e.g. pact.epsilon=0.05 (repeatable)")
    p.add_argument("--out", default="netsim-out", help="output folder (default ./netsim-out)")
    p.add_argument("--no-figure", action="store_true", help="skip the figure")
    p.add_argument("--strict", action="store_true",
                   help="treat warnings (implausible magnitudes, unit traps) as errors")
    p.set_defaults(func=run_command)


def parse_params(items: list[str]) -> dict[str, dict[str, Any]]:
    """``["pact.epsilon=0.05"]`` -> ``{"pact": {"epsilon": 0.05}}`` (values read as YAML).

    Raises
    ------
    ScenarioError
        Naming every malformed item (``--param[i]``).
    """
    out, problems = params_and_problems(items)
    if problems:
        raise ScenarioError(problems, "command line")
    return out


def params_and_problems(items: list[str]) -> tuple[dict[str, dict[str, Any]], list[Problem]]:
    """:func:`parse_params` without raising: the parameters read, and every problem."""
    out: dict[str, dict[str, Any]] = {}
    problems = []
    for i, item in enumerate(items):
        key, sep, value = item.partition("=")
        policy, dot, name = key.partition(".")
        if not sep or not dot or not policy or not name:
            problems.append(Problem(f"--param[{i}]", f"expected POLICY.KEY=VALUE, got {item!r}"))
            continue
        try:
            out.setdefault(policy, {})[name] = safe_load(value)
        except (yaml.YAMLError, ValueError) as exc:
            problems.append(Problem(f"--param[{i}]", f"cannot read the value {value!r}: "
                                                     f"{str(exc).splitlines()[0]}"))
    return out, problems


def _policy_problems(scenario: Scenario | None, names: list[str],
                     params: dict[str, dict[str, Any]]) -> list[Problem]:
    """Unknown policies and bad parameters of the policies to run (every one, not the first)."""
    from netsim.api import resolve_policy
    from netsim.policy import make_policy

    out = []
    for name in params:
        if name not in names:
            out.append(Problem("--param", f"policy {name!r} is not being run "
                                          f"(running: {', '.join(names)})"))
    for name in names:
        try:
            if scenario is not None:
                resolve_policy(scenario, name, params.get(name))
            else:
                make_policy(name, params.get(name))
        except ScenarioError as exc:
            out += [Problem("--policy", p.message) if p.path == "policy" else p
                    for p in exc.problems]
    return out


def check_run_inputs(args: argparse.Namespace) -> tuple[Scenario, list[str],
                                                          dict[str, dict[str, Any]]]:
    """Validate the scenario, the policies, their parameters, the seeds and the output folder
    together, before anything runs; warnings go to stderr.

    Raises
    ------
    ScenarioError
        With every problem found (and every warning, with ``--strict``).
    """
    result = validate_scenario(args.scenario)
    print_warnings(result.warnings)
    problems = result.problems + (result.warnings if args.strict else [])
    params, param_problems = params_and_problems(args.param)
    problems += param_problems
    scenario = result.scenario
    names = args.policy or (list(scenario.policies) if scenario is not None else []) \
        or DEFAULT_POLICIES
    problems += _policy_problems(scenario, names, params)
    for i, seed in enumerate(args.seed or []):
        if not 0 <= seed <= MAX_SEED:
            problems.append(Problem(f"--seed[{i}]", f"{seed} outside 0..{MAX_SEED}"))
    problems += dir_problems(args.out)
    unique = list(dict.fromkeys(problems))
    if unique or scenario is None:
        raise ScenarioError(unique, "scenario or command line")
    return scenario, names, params


def summary_table(runs: pd.DataFrame) -> str:
    """The per-run summary printed by ``netsim run``."""
    cols = ["policy", "seed", "status", "epochs", "energy_j", "time_s", "final_loss",
            "target_reached"]
    table = runs[cols].copy()
    if "planned_energy_j" in runs and runs["planned_energy_j"].notna().any():
        # a planning policy's first plan beside what the simulator did (blank for the others)
        table["planned_j"] = runs["planned_energy_j"]
        table["observed/planned"] = runs["energy_j"] / runs["planned_energy_j"]
    return table.to_string(index=False, float_format=lambda x: f"{x:.4g}", na_rep="")


def run_command(args: argparse.Namespace) -> int:
    """Validate everything first, then simulate; returns the exit code."""
    from netsim.api import resolve_policy, simulate

    scenario, names, params = check_run_inputs(args)
    seeds = args.seed or [scenario.seed]
    out = Path(args.out)
    results = []
    with tqdm(total=len(names) * len(seeds), desc="runs", unit="run", delay=1.0,
              file=sys.stderr) as bar:
        for name in names:
            for seed in seeds:
                label = f"{name} seed {seed}"
                bar.set_postfix_str(label)

                def progress(epoch: int, now_s: float, label: str = label) -> None:
                    bar.set_postfix_str(f"{label} epoch {epoch} t={now_s:.0f}s", refresh=False)

                policy = resolve_policy(scenario, name, params.get(name))
                results.append(simulate(scenario, policy, seed=seed, out=out, progress=progress))
                bar.update()
    runs = pd.concat([r.runs for r in results], ignore_index=True)
    print(f"scenario {scenario.name}: target loss {scenario.training.target_loss}, "
          f"deadline {scenario.training.deadline_s:g} s")
    print(summary_table(runs))
    for run in runs[runs["error"] != ""].itertuples():
        print(f"  {run.policy} seed {run.seed}: {run.status}: {run.error}")
    print(f"tables: {out}/{{runs,epochs,devices}}/")
    if not args.no_figure:
        from netsim.figures import registered_figures, save
        from netsim.sweep.results import load_results

        stored = load_results(out)  # (as `netsim figures` reads them: points, labels)
        stored = stored.select(stored.runs["run_id"].isin(runs["run_id"]))
        figures = registered_figures()
        names = ["timeline"]
        if scenario.dynamics is not None and "dynamics-availability-map" in figures:
            names.append("dynamics-availability-map")  # who was online, who dropped out
        for name in names:
            drawn = figures[name].plot(stored)
            for suffix, fig in (drawn.items() if isinstance(drawn, dict) else [("", drawn)]):
                if fig is not None:
                    stem = f"{name}-{suffix}" if suffix else name
                    print(f"figure: {save(fig, out / 'figures' / stem)[0]}")
    return 1 if (runs["status"] == "failed").any() else 0
