"""Mutation fuzzing of scenarios and sweep files (used by tests/test_fuzz.py and
benchmarks/fuzz.py).

A valid scenario (or sweep file) has one or two of its fields replaced by junk (None, -1, NaN,
inf, "", "20 furlongs", [], 10**30, ...), deleted, or joined by an unknown field. The property:
either validation raises :class:`ScenarioError` with a problem *related to* a mutated path (the
path itself, a parent or child of it, or, for cross-field checks, a field the mutated one is
checked against), or the scenario runs to a recorded status, and a built-in baseline never
fails on it.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import netsim
from netsim.results.recorder import STATUSES
from netsim.scenario.errors import ScenarioError
from netsim.scenario.loading import scenario_data, validate_scenario
from netsim.sweep.plan import load_plan

JUNK: list[Any] = [
    None, -1, 0, -0.0, 0.5, 1e-300, 1e-30, 1e30, float("nan"), float("inf"), float("-inf"),
    "", "abc", "20 furlongs", "20 mbps", "20 Mb/s", "1e3", "0", "-5 W", [], [1, 2], {},
    {"x": 1}, True, 10**30, -(10**30), 2**63, 10**400 // 10**390, "\x00", "é" * 3,
]
#: Runs are cut to this many epochs (a mutated max_epochs may ask for a million).
RUN_EPOCHS = 3
#: The baselines this change makes total: a validated scenario never makes them fail.
BASELINES = ("fedavg-all", "random-k", "fastest-k")

STAR_BASE: dict[str, Any] = {
    "name": "star", "seed": 0,
    "devices": [
        {"id": "server", "flop_per_s": 1.0e12, "memory_bytes": 6.4e10, "power_busy_w": 200.0,
         "power_idle_w": 50.0},
        {"id": "d1", "flop_per_s": "2 GFLOPS", "memory_bytes": "4 GB", "power_busy_w": 5.0,
         "power_idle_w": 1.0, "samples": 500, "availability": 0.9},
        {"id": "d2", "flop_per_s": 1.0e9, "memory_bytes": 4.0e9, "power_busy_w": "4 W",
         "power_idle_w": 0.5, "samples": 300},
    ],
    "links": [
        {"a": "server", "b": "sw", "bandwidth_bps": "1 Gbit/s", "latency_s": "1 ms"},
        {"a": "sw", "b": "d1", "bandwidth_bps": 2.0e7, "latency_s": 0.01,
         "energy_j_per_bit": 1e-7},
        {"a": "sw", "b": "d2", "bandwidth_bps": "10 Mbit/s", "latency_s": 0.03,
         "energy_j_per_bit": 2e-7},
    ],
    "aggregator": "server",
    "model": {"params": 1.0e6, "bytes_per_param": 4, "train_flop_per_sample": 6.0e6,
              "variants": [{"name": "full", "params_fraction": 1.0, "flop_fraction": 1.0},
                           {"name": "half", "params_fraction": 0.5, "flop_fraction": 0.5}]},
    "training": {"target_loss": 0.3, "deadline_s": "1 hour", "max_epochs": 30,
                 "memory_overhead": 3.0},
    "policies": {"random-k": {"k": 1}, "fastest-k": {"k": 2}},
}
GENERATED_BASE: dict[str, Any] = {
    "name": "gen", "seed": 1,
    "generate": {"n_devices": 6, "mix": {"phone": 0.5, "laptop": 0.5},
                 "access": {"wifi": 0.5, "lte": 0.5}, "devices_per_cell": 4, "seed": 2,
                 "samples_mean": 300.0},
    "model": "small-cnn",
    "training": {"target_loss": 0.5, "deadline_s": 600, "max_epochs": 10},
}


def bases() -> list[dict[str, Any]]:
    """The valid scenarios mutated: an explicit star with a switch, a generated network and
    the built-in two-phones."""
    return [copy.deepcopy(STAR_BASE), copy.deepcopy(GENERATED_BASE),
            copy.deepcopy(scenario_data("two-phones"))]


def paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path in a nested mapping/list (containers included, the root excluded)."""
    out = []
    items = data.items() if isinstance(data, dict) else enumerate(data) \
        if isinstance(data, list) else []
    for key, value in items:
        out.append((*prefix, key))
        out += paths(value, (*prefix, key))
    return out


def dotted(path: tuple) -> str:
    """``("links", 1, "a")`` -> ``links[1].a`` (the form of problem paths)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass(frozen=True)
class Mutation:
    """One change: ``kind`` is replace, delete or add (an unknown key under ``path``)."""

    kind: str
    path: tuple
    value: Any = None

    def apply(self, data: dict[str, Any]) -> str:
        """Change ``data`` in place; returns the dotted path of what changed (an added key's
        own path)."""
        *parent_path, key = self.path
        node: Any = data
        for part in parent_path:
            node = node[part]
        if self.kind == "replace":
            node[key] = copy.deepcopy(self.value)
        elif self.kind == "delete":
            del node[key]
        elif isinstance(node[key], dict):
            node[key]["bogus_field"] = copy.deepcopy(self.value)
            return dotted((*self.path, "bogus_field"))
        else:
            node[key] = copy.deepcopy(self.value)
        return dotted(self.path)


#: For cross-field checks: the roots a mutated root is checked against.
RELATED = {
    "devices": {"devices", "links", "aggregator", "model"},
    "links": {"links", "devices", "aggregator"},
    "aggregator": {"aggregator", "devices", "links"},
    "model": {"model", "training", "policies"},
    "training": {"training", "model"},
    "generate": {"generate", "model"},
    "policies": {"policies"},
}
_POINT = re.compile(r"^point \d+ \(.*?\) ?")


def _root(path: str) -> str:
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def related(problem: str, mutated: str) -> bool:
    """Whether a problem's path names the mutated field, a parent or child of it, or a field
    the mutated one is checked against (:data:`RELATED`); root problems (path "") relate to
    the network fields (devices/links/generate are checked together)."""
    problem = _POINT.sub("", problem)
    if problem == mutated or mutated.startswith(problem + ".") or mutated.startswith(problem + "[") \
            or problem.startswith(mutated + ".") or problem.startswith(mutated + "["):
        return True
    if problem == "":
        return _root(mutated) in {"devices", "links", "generate", "aggregator"}
    return _root(problem) in RELATED.get(_root(mutated), {_root(mutated)})


def scenario_outcome(data: dict[str, Any], mutated: list[str], policy: str, seed: int) -> str:
    """Check the property on one mutated scenario; returns "rejected" or the run's status.

    Raises
    ------
    AssertionError
        If the property fails (an unrelated problem, a crash, a failed baseline run).
    """
    result = validate_scenario(data)
    if result.problems:
        paths_found = [p.path for p in result.problems]
        assert any(related(p, m) for p in paths_found for m in mutated), (mutated, paths_found)
        return "rejected"
    scenario = result.scenario
    assert scenario is not None
    training = scenario.training.model_copy(
        update={"max_epochs": min(scenario.training.max_epochs, RUN_EPOCHS)})
    short = scenario.model_copy(update={"training": training})
    if scenario.generate is not None and scenario.generate.n_devices > 2_000:
        return "skipped (large network)"
    runs = netsim.simulate(short, policy, seed=seed).runs.iloc[0]
    assert runs["status"] in STATUSES, runs["status"]
    if policy in BASELINES:
        assert runs["status"] != "failed", (mutated, runs["error"])
    assert math.isfinite(runs["energy_j"]) and math.isfinite(runs["time_s"])
    return str(runs["status"])


SWEEP_BASE: dict[str, Any] = {
    "name": "fuzz", "base": "two-phones",
    "policies": ["fedavg-all", {"name": "random-k", "params": {"k": 1}, "label": "r1"}],
    "seeds": 2,
    "grid": {"training.target_loss": [0.3, 0.5], "devices[1].samples": [100, 600]},
    "zip": {"links[0].latency_s": [0.01, 0.02], "training.deadline_s": [600, "1 hour"]},
}


def sweep_outcome(data: dict[str, Any], mutated: list[str], folder: Path) -> str:
    """Check the property on one mutated sweep file: rejected with a related problem, or a
    plan whose first run completes with a recorded status."""
    import yaml

    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    try:
        plan = load_plan(path)
    except ScenarioError as exc:
        found = [p.path for p in exc.problems]
        ok = any(related(p, m) or _sweep_related(p, m) for p in found for m in mutated)
        assert ok, (mutated, found)
        return "rejected"
    if not plan.tasks:
        return "empty"
    task = plan.tasks[0]
    return scenario_outcome(task.scenario, [], task.policy, task.seed) if not task.params \
        else str(netsim.simulate(task.scenario, task.policy, task.seed, task.params)
                 .runs.iloc[0]["status"])


def _sweep_related(problem: str, mutated: str) -> bool:
    """A sweep problem names the mutated sweep field, or (for an axis) a point's scenario
    field under that axis, or (for the base) anything in the base scenario."""
    root = _root(mutated)
    if root in {"grid", "zip"}:
        axis = mutated.split(".", 1)[1] if "." in mutated else ""
        axis = re.sub(r"\[\d+\]$", "", axis)
        inner = _POINT.sub("", problem)
        return problem.startswith(root) or bool(
            axis and _POINT.match(problem) and related(inner, axis))
    if root == "base":
        return problem.startswith("base") or _POINT.match(problem) is not None
    if root == "policies":
        return problem.startswith("policies") or "policies" in problem or "label" in problem
    return problem.startswith(root)
