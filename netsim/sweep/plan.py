"""Expanding a sweep into runs: every point validated, every run keyed by its run_id.

A :class:`SweepPlan` lists the :class:`RunTask` s (plain data, cheap to send to a worker) and
the manifest table that ties each run_id to its sweep, point and policy label (stored beside
the results, see :mod:`netsim.sweep.results`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from netsim.api import resolve_policy, run_id
from netsim.measuring import measured_scenario
from netsim.policy import policy_params
from netsim.scenario.errors import Problem, ScenarioError
from netsim.scenario.loading import resolve_trace_paths, validate_scenario
from netsim.scenario.torch_model import resolve_model_paths
from netsim.sweep.spec import (
    PolicyEntry,
    SweepSpec,
    axis_points,
    base_data,
    entry_problems,
    inspect_sweep,
    set_path,
)

MANIFEST_COLUMNS = ["run_id", "sweep", "point", "point_label", "policy_label", "axes_json"]


@dataclass(frozen=True)
class RunTask:
    """One run of a sweep: everything a worker needs, as plain data."""

    run_id: str
    scenario: dict[str, Any]
    policy: str
    params: dict[str, Any]
    seed: int
    point: int = 0
    point_label: str = ""
    policy_label: str = ""
    axes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepPlan:
    """A validated sweep: its name, the runs in order, and how many points it has."""

    name: str
    tasks: list[RunTask]
    n_points: int
    duplicates: int = 0

    def manifest(self) -> pd.DataFrame:
        """One row per run: run_id, sweep, point, point_label, policy_label, axes_json."""
        rows = [{"run_id": t.run_id, "sweep": self.name, "point": t.point,
                 "point_label": t.point_label, "policy_label": t.policy_label,
                 "axes_json": json.dumps(t.axes, sort_keys=True, default=str)}
                for t in self.tasks]
        return pd.DataFrame(rows, columns=MANIFEST_COLUMNS)

    def digest(self) -> str:
        """A short hash of the plan's run ids (names the manifest file)."""
        text = "\n".join(t.run_id for t in self.tasks)
        return hashlib.sha256(text.encode()).hexdigest()[:8]


def point_label(axes: dict[str, Any], base_name: str) -> str:
    """A readable name for a point: ``n_devices=20, target_loss=0.3`` (short keys if unique)."""
    if not axes:
        return base_name
    short = {k: k.replace("[", ".").split(".")[-1].rstrip("]") for k in axes}
    unique = len(set(short.values())) == len(short)
    return ", ".join(f"{short[k] if unique else k}={_fmt(v)}" for k, v in axes.items())


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def policy_labels(entries: list[PolicyEntry]) -> list[str]:
    """Each entry's label: its own, else its name, plus its parameters where a name repeats."""
    names = [e.name for e in entries]
    out = []
    for e in entries:
        if e.label:
            out.append(e.label)
        elif names.count(e.name) > 1 and e.params:
            inner = ",".join(f"{k}={_fmt(v)}" for k, v in sorted(e.params.items()))
            out.append(f"{e.name}({inner})")
        else:
            out.append(e.name)
    return out


def _point_problems(problems: list[Problem], index: int, label: str) -> list[Problem]:
    where = f"point {index} ({label})"
    return [Problem(f"{where} {p.path}".strip(), p.message) for p in problems]



def build_plan(spec: SweepSpec, folder: Path, strict: bool = False) -> SweepPlan:
    """Validate every point and policy of ``spec``, and list its runs (point, policy, seed order).

    Raises
    ------
    ScenarioError
        (source ``sweep``) listing every problem: each names the point (index and axis values)
        and the scenario field, or the policy entry and parameter (and, if ``strict``, every
        warning).
    """
    plan, problems, warnings = plan_and_problems(spec, folder)
    problems += warnings if strict else []
    if problems or plan is None:
        raise ScenarioError(problems, "sweep")
    return plan


def plan_and_problems(spec: SweepSpec, folder: Path) -> tuple[SweepPlan | None, list[Problem],
                                                              list[Problem]]:
    """:func:`build_plan` without raising: the plan (None if any problem), every problem,
    and every warning (each naming its point)."""
    problems: list[Problem] = []
    warnings: list[Problem] = []
    if not spec.base:
        return None, problems, warnings
    try:
        base = base_data(spec, folder)
    except ScenarioError as exc:
        return None, exc.problems, warnings
    base_name = str(base.get("name", spec.base))
    entries = spec.policy_entries()
    labels = policy_labels(entries)
    for j, lab in enumerate(labels):
        if labels.index(lab) != j:
            problems.append(Problem(f"policies[{j}].label", f"label {lab!r} is used twice "
                                    f"(give each entry a distinct 'label')"))
    tasks: list[RunTask] = []
    seen: set[str] = set()
    duplicates = 0
    points = axis_points(spec)
    for i, axes in enumerate(points):
        label = point_label(axes, base_name)
        data, broken = base, False
        for path, value in axes.items():
            try:
                data = set_path(data, path, value)
            except ValueError as exc:
                where = "zip" if path in spec.zip else "grid"
                problem = Problem(f"{where}.{path}", str(exc))
                problems.extend([problem] if problem not in problems else [])
                broken = True
        if broken:
            continue
        # (axes' relative paths: the sweep file's)
        data = resolve_model_paths(resolve_trace_paths(data, folder), folder)
        checked = validate_scenario(data)
        warnings += [w for w in _point_problems(checked.warnings, i, label) if w not in warnings]
        if checked.scenario is None:
            problems.extend(_point_problems(checked.problems, i, label))
            continue
        try:  # a PyTorch model, measured once a point: run ids hash its measured figures
            scenario = measured_scenario(checked.scenario)
        except ScenarioError as exc:
            problems.extend(q for q in _point_problems(exc.problems, i, label)
                            if q not in problems)
            continue
        resolved: dict[str, int] = {}  # (this point) the policy as it runs -> its entry
        for j, (entry, plabel) in enumerate(zip(entries, labels, strict=True)):
            try:
                pol = resolve_policy(scenario, entry.name, entry.params)
            except ScenarioError as exc:
                problems.extend(q for q in entry_problems(exc, j, entry) if q not in problems)
                continue
            pparams = policy_params(pol)
            key = json.dumps([pol.name, pparams], sort_keys=True, default=str)
            if key in resolved:
                first = resolved[key]
                same = Problem(f"policies[{j}]", (
                    f"entry {plabel!r} runs exactly as policies[{first}] "
                    f"({labels[first]!r}) once the scenario's policies block is merged "
                    f"({pol.name} with {pparams or 'no parameters'}): its runs would be "
                    "the same runs under another label; drop one or give it other parameters"))
                if same not in problems:
                    problems.append(same)
                continue
            resolved[key] = j
            for seed in spec.seed_list():
                rid = run_id(scenario, pol.name, pparams, seed)
                if rid in seen:
                    duplicates += 1
                    continue
                seen.add(rid)
                tasks.append(RunTask(rid, data, entry.name, dict(entry.params), seed, i, label,
                                     plabel, dict(axes)))
    if problems:
        return None, problems, warnings
    return SweepPlan(str(spec.name), tasks, len(points), duplicates), problems, warnings


def load_plan(path: str | Path, strict: bool = False,
              warnings: list[Problem] | None = None,
              extra_params: dict[str, dict[str, Any]] | None = None) -> SweepPlan:
    """Read, validate and expand a sweep file (see :func:`build_plan`): the file's fields,
    every point's scenario and every policy entry are checked in one pass. Warnings are
    appended to ``warnings`` if given; ``strict`` makes them problems. ``extra_params``: per
    policy name, parameters set over each of its entries' own (the command line's
    ``--app`` / ``--run-config`` for the policies that take them).

    Raises
    ------
    ScenarioError
        (source ``sweep``) listing every problem found.
    """
    spec, folder, problems = inspect_sweep(path)
    if extra_params and "policies" in spec.model_fields_set:
        spec = spec.model_copy(update={"policies": [
            entry.model_copy(update={"params": {**entry.params, **extra_params[entry.name]}})
            if entry.name in extra_params else entry for entry in spec.policy_entries()]})
    plan, more, found = plan_and_problems(spec, folder)
    problems += [p for p in more if p not in problems]
    problems += found if strict else []
    if warnings is not None:
        warnings.extend(found)
    if problems or plan is None:
        raise ScenarioError(problems, "sweep")
    return plan
