"""``netsim run [SCENARIO] [--policy NAME ...] [--seed N ...] [--out DIR]``.

Runs each policy with each seed, prints a summary table (energy J, simulated time s as
``sim_time_s``, final loss, target reached), writes the tables (Parquet, one file per run and
table, atomically) and one figure (loss and cumulative energy vs simulated time) to the output
folder. Into a folder that holds results, it first lists by run id the runs it replaces (same
scenario, policy, parameters and seed) and those it adds. ``--policy a b`` and ``--policy a
--policy b`` both run a and b; give SCENARIO before ``--policy`` (a built-in scenario or scenario
file after the names is still read as the scenario when none came before).

A Flower app folder runs as ``flwr run`` runs it: ``--app PATH`` gives PATH to each policy run
that takes an app folder (the ``flower`` policy; with no ``--policy``, those policies), whose
``pyproject.toml`` names the ServerApp and ClientApp and their run config, and
``--run-config 'key=value ...'`` overrides that config as Flower's CLI does. Names a scenario
file gives (``module:attr``) are imported only with ``--allow-imports`` or from the ``--app``
folder (netsim.scenario.trust); what is typed on the command line is the user's word.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
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
from netsim.scenario.trust import ALLOW_FLAG, import_gate, imports_in, refusals
from netsim.yamlio import safe_load

DEFAULT_POLICIES = ["fedavg-all", "greedy-energy", "pact", "depl"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim run``."""
    p = sub.add_parser("run", help="simulate policies on a scenario (default: built-in 'default')")
    p.add_argument("scenario", nargs="?", default=None,
                   help="scenario file or built-in name (default: 'default'); give it before "
                        "--policy")
    p.add_argument("--policy", action="extend", nargs="+", metavar="NAME",
                   help="policies to run: --policy a b, or --policy a --policy b (default: the "
                        f"scenario's 'policies' block, else {', '.join(DEFAULT_POLICIES)}); "
                        "your own policy class as module:Class or path/to/file.py:Class, "
                        "with --allow-imports")
    p.add_argument("--seed", action="append", type=int, metavar="N",
                   help="seed (repeatable; default: the scenario's seed)")
    p.add_argument("--param", action="append", default=[], metavar="POLICY.KEY=VALUE",
                   help="a policy parameter, e.g. pact.epsilon=0.05 (repeatable)")
    p.add_argument("--out", default="netsim-out", help="output folder (default ./netsim-out)")
    p.add_argument("--no-figure", action="store_true", help="skip the figure")
    p.add_argument("--strict", action="store_true",
                   help="treat warnings (implausible magnitudes) as errors; unit traps (a case "
                        "mistake: '20 mbps') always are")
    add_app_arguments(p)
    p.set_defaults(func=run_command)


def add_app_folder_arguments(p: argparse._ActionsContainer) -> None:
    """``--app`` and ``--run-config`` (run, sweep, calibrate)."""
    p.add_argument("--app", default=None, metavar="PATH",
                   help="a Flower app folder (its pyproject.toml names the ServerApp and "
                        "ClientApp), run as `flwr run` runs it by the policies that take "
                        "one (flower; the default policy with --app); PATH goes on the "
                        "Python path, and names of modules in it may be imported")
    p.add_argument("--run-config", action="append", default=None, metavar="'K=V ...'",
                   help="the app's run config overrides, as `flwr run --run-config` takes "
                        "them ('num-server-rounds=5 lr=0.1', or a .toml file; repeatable)")


def add_app_arguments(p: argparse._ActionsContainer, app: bool = True) -> None:
    """``--app``, ``--run-config``, ``--allow-imports`` and ``--quiet`` (run, calibrate)."""
    if app:
        add_app_folder_arguments(p)
    p.add_argument(ALLOW_FLAG, action="store_true",
                   help="import the module:attr names the scenario (or sweep) file gives: a "
                        "file is data, and without this flag netsim refuses to run its code")
    p.add_argument("--quiet", action="store_true",
                   help="hide Flower's and the app's log lines (ClientApp failures still show)")


def policies_taking(field: str) -> list[str]:
    """The registered policies whose parameters include ``field`` (``app``: flower)."""
    from netsim.policy import registered

    return [name for name, entry in registered().items() if field in entry.params.model_fields]


def typed_names(params: dict[str, dict[str, Any]]) -> list[str]:
    """Every text given on the command line as a policy parameter: the user's word."""
    return [v for block in params.values() for v in block.values() if isinstance(v, str)]


@contextmanager
def command_logging(debug: bool, quiet: bool) -> Iterator[None]:
    """netsim's log (a policy's warnings: ClientApp failures, a missing loss metric) on stderr
    as ``netsim: warning: ...`` (every record with ``--debug``); Flower's log lines shown
    unless ``--quiet``; all put back afterwards."""
    log, flwr = logging.getLogger("netsim"), logging.getLogger("flwr")
    level = log.level
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if debug else logging.INFO)
    quieter = _BelowWarning()
    if quiet:  # (a filter: Flower sets its logger's level when it is imported)
        flwr.addFilter(quieter)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        flwr.removeFilter(quieter)


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return f"netsim: {record.levelname.lower()}: {text}"


class _BelowWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


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


def _looks_like_scenario(name: str) -> bool:
    """Whether a name given to ``--policy`` is rather a scenario (a built-in or a file)."""
    from netsim.scenario.loading import builtin_scenarios

    return name in builtin_scenarios() or name.endswith((".yaml", ".yml")) or Path(name).is_file()


def scenario_and_policies(args: argparse.Namespace) -> tuple[str, list[str] | None]:
    """The scenario and the policy names ``netsim run`` was given.

    ``--policy a b`` takes every name after it, so a scenario written after the names
    (``netsim run --policy pact two-phones``) lands among them. Where no scenario came before
    ``--policy``, the one name there that is no registered policy but a built-in scenario or a
    scenario file is the scenario; any other such name stays a policy name, for
    :func:`_policy_problems` to report."""
    from netsim.policy import registered

    names = list(args.policy) if args.policy else None
    scenario = args.scenario
    if scenario is None and names:
        known = registered()
        found = [n for n in names if n not in known and _looks_like_scenario(n)]
        if len(found) == 1 and len(names) > 1:
            scenario = found[0]
            names.remove(scenario)
    return scenario or "default", names


def _unknown_policy(name: str, known: list[str]) -> Problem:
    """``--policy: unknown policy 'pactt'; did you mean 'pact'?`` (else every name)."""
    import difflib

    from netsim.plugins import POLICIES, broken_plugin

    broken = broken_plugin(POLICIES, name)
    if broken is not None:
        return Problem("--policy", f"policy {name!r}: {broken.unavailable()}")
    if _looks_like_scenario(name):
        return Problem("--policy", f"unknown policy {name!r}: it names a scenario; give one "
                                   "scenario, before --policy (netsim run SCENARIO --policy NAME ...)")
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f" (registered: {', '.join(known)})"
    return Problem("--policy", f"unknown policy {name!r}{hint}")


def _policy_problems(scenario: Scenario | None, names: list[str],
                     params: dict[str, dict[str, Any]]) -> list[Problem]:
    """Unknown policies and bad parameters of the policies to run (every one, not the first)."""
    from netsim.api import resolve_policy
    from netsim.policy import make_policy, registered
    from netsim.policy.requirements import requirement_problems

    out = []
    for name in params:
        if name not in names:
            out.append(Problem("--param", f"policy {name!r} is not being run "
                                          f"(running: {', '.join(names)})"))
    known = list(registered())
    for name in names:
        if name not in known:
            out.append(_unknown_policy(name, known))
            continue
        try:
            if scenario is not None:
                policy = resolve_policy(scenario, name, params.get(name))
                out += requirement_problems(policy, scenario, "--policy", name)
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
    source, given = scenario_and_policies(args)
    result = validate_scenario(source)
    print_warnings(result.warnings)
    problems = result.problems + (result.warnings if args.strict else [])
    params, param_problems = params_and_problems(args.param)
    problems += param_problems
    scenario = result.scenario
    app = getattr(args, "app", None)
    names = given or (policies_taking("app") if app else []) \
        or (list(scenario.policies) if scenario is not None else []) or DEFAULT_POLICIES
    from netsim.policy.registry import local_policies  # (--policy mypolicy:CheapestK)

    names, own = local_policies(names, bool(getattr(args, "allow_imports", False)))
    problems += own
    problems += _app_params(args, names, params)
    if scenario is not None:
        from netsim.measuring import measured_scenario
        from netsim.scenario.torch_model import model_imports

        gate = _gate(args, params)
        refused = refusals(model_imports(scenario.model), gate)
        problems += refused + refusals(
            imports_in({n: scenario.policies.get(n, {}) for n in names}), gate)
        if not refused:  # a PyTorch model, measured once (under the command's gate)
            try:
                scenario = measured_scenario(scenario)
            except ScenarioError as exc:
                problems += exc.problems
    problems += _policy_problems(scenario, names, params)
    for i, seed in enumerate(args.seed or []):
        if not 0 <= seed <= MAX_SEED:
            problems.append(Problem(f"--seed[{i}]", f"{seed} outside 0..{MAX_SEED}"))
    problems += dir_problems(args.out)
    if not args.no_figure:  # (its figures replace only figures netsim wrote)
        from netsim.figures import replace_figure_problems

        problems += replace_figure_problems(
            Path(args.out) / "figures", ["timeline", "dynamics-availability-map"])
    unique = list(dict.fromkeys(problems))
    if unique or scenario is None:
        raise ScenarioError(unique, "scenario or command line")
    return scenario, names, params


def app_flag_values(args: argparse.Namespace) -> list[tuple[str, str, Any]]:
    """(flag, policy parameter, value) of ``--app`` and ``--run-config`` where given: the
    parameters of the policies that take them (run, sweep)."""
    given = (("--app", "app", getattr(args, "app", None)),
             ("--run-config", "run_config", getattr(args, "run_config", None)))
    return [(flag, field, value) for flag, field, value in given if value is not None]


def _app_params(args: argparse.Namespace, names: list[str],
                params: dict[str, dict[str, Any]]) -> list[Problem]:
    """``--app`` and ``--run-config`` as the ``app`` and ``run_config`` parameters of the
    policies run that take them."""
    out = []
    for flag, field, value in app_flag_values(args):
        takers = [n for n in names if n in policies_taking(field)]
        if not takers:
            out.append(Problem(flag, f"none of the policies run ({', '.join(names)}) takes "
                                     f"{field!r} (the flower policy does: --policy flower)"))
        for name in takers:
            params.setdefault(name, {})[field] = value
    return out


def _gate(args: argparse.Namespace, params: dict[str, dict[str, Any]]) -> Any:
    """The import gate of a command: everything with --allow-imports, else the names typed
    on the command line and the modules in the --app folder."""
    from netsim.scenario.trust import ImportGate

    app = getattr(args, "app", None)
    return ImportGate(bool(getattr(args, "allow_imports", False)),
                      frozenset(typed_names(params)),
                      (Path(app).resolve(),) if app else ())


@contextmanager
def gated(args: argparse.Namespace, params: dict[str, dict[str, Any]]) -> Iterator[None]:
    """The block under the command's import gate (:func:`_gate`)."""
    gate = _gate(args, params)
    with import_gate(gate.allow_all, sorted(gate.names), gate.roots):
        yield


def summary_table(runs: pd.DataFrame) -> str:
    """The per-run summary printed by ``netsim run``; ``time_s`` is shown as ``sim_time_s``
    (simulated time, not the wall clock)."""
    cols = ["policy", "seed", "status", "epochs", "energy_j", "time_s", "final_loss",
            "target_reached"]
    table = runs[cols].rename(columns={"time_s": "sim_time_s"})
    if "planned_energy_j" in runs and runs["planned_energy_j"].notna().any():
        # a planning policy's first plan beside what the simulator did (blank for the others)
        table["planned_j"] = runs["planned_energy_j"]
        table["observed/planned"] = runs["energy_j"] / runs["planned_energy_j"]
    return table.to_string(index=False, float_format=lambda x: f"{x:.4g}", na_rep="")


def failed_calls(results: list[Any]) -> list[str]:
    """A line per run whose driven rounds had client calls that failed (a Flower ClientApp
    that raised): how many of how many, and the most frequent reasons."""
    import json

    out = []
    for r in results:
        if "phases" not in r.epochs or r.runs.empty:
            continue
        if "client_calls_failed" in r.runs and not int(r.runs["client_calls_failed"].iloc[0]):
            continue  # (the runs table counts the failed calls: no epoch's phases to read)
        calls = failed = 0
        reasons: dict[str, int] = {}
        for text, info in zip(r.epochs["phases"], r.epochs["info"], strict=True):
            # a driven round's phases carry the nodes it messaged; a hierarchical epoch's
            # phases (backhaul, edge and cloud aggregation) carry none and call no client
            driven = [phase for phase in json.loads(text) if "nodes" in phase]
            for phase in driven:
                calls += len(phase["nodes"]) - len(phase["unavailable"])
                failed += len(phase["failed"])
            errors = json.loads(info).get("flower_errors", {}) if driven else {}
            for phase in driven:
                for dev in phase["failed"]:
                    reason = str(errors.get(dev, "?"))
                    reasons[reason] = reasons.get(reason, 0) + 1
        if failed:
            run = r.runs.iloc[0]
            top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
            print_reasons = "; ".join(
                f"{n} x {reason if len(reason) <= 100 else reason[:97] + '...'}"
                for reason, n in top)
            out.append(f"  {run['policy']} seed {run['seed']}: {failed} of {calls} client "
                       f"calls failed ({print_reasons})")
    return out


#: At most this many runs are listed by :func:`stored_notice` (then "... and N more").
MAX_LISTED = 20


def stored_notice(out: str | Path, planned: list[tuple[str, str, int]]) -> list[str]:
    """What a run into ``out`` does to the results already there: the lines naming, by run id,
    each run it replaces (same scenario, policy, parameters and seed) and each it adds; empty
    where ``out`` holds no results. ``planned``: (run id, policy, seed) of each run."""
    from netsim.results.store import completed_runs

    stored = completed_runs(out)
    if not stored:
        return []
    ids = list(dict.fromkeys(rid for rid, _, _ in planned))
    replaced = [rid for rid in ids if rid in stored]
    kept = len(stored) - len(replaced)
    lines = [f"{out} already holds {len(stored)} run(s); this run replaces {len(replaced)} of "
             f"them, keeps {kept} and adds {len(ids) - len(replaced)}:"]
    seen: set[str] = set()
    for rid, policy, seed in planned:
        if rid in seen:
            continue
        seen.add(rid)
        if len(seen) > MAX_LISTED:
            lines.append(f"  ... and {len(ids) - MAX_LISTED} more")
            break
        lines.append(f"  {'replaces' if rid in stored else 'adds':<8}  {rid}  {policy} seed {seed}")
    return lines


def run_command(args: argparse.Namespace) -> int:
    """Validate everything first, then simulate (under the command's import gate and
    logging); returns the exit code."""
    params, _ = params_and_problems(args.param)  # (the gate's typed names: --param's)
    with gated(args, params), command_logging(bool(getattr(args, "debug", False)),
                                              bool(getattr(args, "quiet", False))):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from netsim.api import resolve_policy, run_id, simulate
    from netsim.policy import policy_params

    scenario, names, params = check_run_inputs(args)
    seeds = args.seed or [scenario.seed]
    out = Path(args.out)
    planned = []
    for name in names:
        policy = resolve_policy(scenario, name, params.get(name))
        for seed in seeds:
            planned.append((run_id(scenario, policy.name, policy_params(policy), seed), name,
                            seed))
    for line in stored_notice(out, planned):
        print(line)
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
                res = simulate(scenario, policy, seed=seed, out=out, progress=progress)
                results.append(replace(res, devices=res.devices.iloc[:0]))  # (written: its
                bar.update()  # rows, a row per device, are not kept for the summary)
    runs = pd.concat([r.runs for r in results], ignore_index=True)
    print(f"scenario {scenario.name}: target loss {scenario.training.target_loss}, "
          f"deadline {scenario.training.deadline_s:g} s")
    print(summary_table(runs))
    for run in runs[runs["error"] != ""].itertuples():
        print(f"  {run.policy} seed {run.seed}: {run.status}: {run.error}")
    for line in failed_calls(results):
        print(line)
    print(f"tables: {out}/{{runs,epochs,devices}}/")
    if not args.no_figure:
        from netsim.figures import registered_figures, save
        from netsim.sweep.results import load_results

        # (as `netsim figures` reads them: points, labels; the devices table only for the
        # availability map)
        stored = load_results(out, devices=scenario.dynamics is not None)
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
