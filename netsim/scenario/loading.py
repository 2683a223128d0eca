"""Loading scenarios (file, dict, built-in name), validating them, resolving their network.

Validation reports every problem at once with its field path; nothing runs on an invalid
scenario. Structural problems come from the schema (pydantic); semantic ones (duplicate ids,
unknown aggregator or model, unreachable devices, unknown device classes) from :func:`check`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import ValidationError

from netsim.scenario.errors import Problem, ScenarioError, problems_from_validation
from netsim.scenario.generator import edge_catalog, generate_network
from netsim.scenario.schema import DeviceSpec, LinkSpec, ModelSpec, Scenario
from netsim.yamlio import safe_load


def builtin_scenarios() -> dict[str, Path]:
    """Built-in scenario names and their files (netsim/data/scenarios/NAME.yaml)."""
    folder = resources.files("netsim").joinpath("data", "scenarios")
    return {Path(p.name).stem: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml")}


def read_yaml(source: str | Path, what: str = "scenario") -> dict[str, Any]:
    """A YAML mapping from a file, parsed with ``safe_load``.

    Raises
    ------
    ScenarioError
        If the file is missing, unparsable or not a mapping.
    """
    path = Path(source)
    if not path.is_file():
        raise ScenarioError([Problem("", f"no such file: {path}")], what)
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ScenarioError([Problem("", f"{path}: not valid YAML: {exc}")], what) from exc
    if not isinstance(data, dict):
        raise ScenarioError([Problem("", f"{path}: expected a mapping at the top level")], what)
    return data


def scenario_data(source: str | Path | dict[str, Any]) -> dict[str, Any]:
    """The raw mapping of a scenario given as a dict, a built-in name or a file path."""
    if isinstance(source, dict):
        return source
    builtins = builtin_scenarios()
    if isinstance(source, str) and source in builtins:
        return read_yaml(builtins[source])
    if isinstance(source, str) and not Path(source).exists() and "/" not in source \
            and not source.endswith((".yaml", ".yml")):
        names = ", ".join(sorted(builtins))
        raise ScenarioError([Problem("", f"no scenario file or built-in named {source!r} "
                                         f"(built-in: {names})")])
    return read_yaml(source)


def load_scenario(source: str | Path | dict[str, Any] | Scenario) -> Scenario:
    """A validated :class:`Scenario` from a file path, built-in name, mapping or Scenario.

    Raises
    ------
    ScenarioError
        With every problem found, each naming its field path and what is allowed.
    """
    if isinstance(source, Scenario):
        scenario = source
    else:
        try:
            scenario = Scenario.model_validate(scenario_data(source))
        except ValidationError as exc:
            raise ScenarioError(problems_from_validation(exc)) from None
    problems = check(scenario)
    if problems:
        raise ScenarioError(problems)
    return scenario


def _check_model(model: str | ModelSpec) -> list[Problem]:
    from netsim.training.models import builtin_models

    if isinstance(model, str) and model not in builtin_models():
        return [Problem("model", f"unknown built-in model {model!r} "
                                 f"(one of: {', '.join(sorted(builtin_models()))})")]
    return []


def _check_generate(scenario: Scenario) -> list[Problem]:
    spec = scenario.generate
    assert spec is not None
    catalog = edge_catalog()
    classes, links = catalog["device_classes"], catalog["access_links"]
    out = []
    for field, table, shares in (("mix", classes, spec.mix), ("access", links, spec.access)):
        for key in shares:
            if key not in table:
                out.append(Problem(f"generate.{field}.{key}",
                                   f"unknown {field} entry (one of: {', '.join(table)})"))
        if not any(v > 0 for v in shares.values()):
            out.append(Problem(f"generate.{field}", "needs at least one positive share"))
    if spec.aggregator_class not in classes:
        out.append(Problem("generate.aggregator_class", f"one of: {', '.join(classes)}"))
    if spec.backhaul not in links:
        out.append(Problem("generate.backhaul", f"one of: {', '.join(links)}"))
    return out


def _check_explicit(scenario: Scenario) -> list[Problem]:
    import networkx as nx

    devices, links = scenario.devices or [], scenario.links or []
    out = []
    seen: dict[str, int] = {}
    for i, d in enumerate(devices):
        if d.id in seen:
            out.append(Problem(f"devices[{i}].id", f"duplicate id {d.id!r} (first at devices[{seen[d.id]}])"))
        seen.setdefault(d.id, i)
        if d.power_idle_w > d.power_busy_w:
            out.append(Problem(f"devices[{i}].power_idle_w",
                               f"must be <= power_busy_w ({d.power_busy_w} W)"))
    graph = nx.Graph()
    graph.add_nodes_from(seen)
    for i, link in enumerate(links):
        if link.a == link.b:
            out.append(Problem(f"links[{i}].b", f"a link joins two different nodes (both {link.a!r})"))
        graph.add_edge(link.a, link.b)
    if scenario.aggregator is None:
        out.append(Problem("aggregator", "required: the id of the device that aggregates"))
    elif scenario.aggregator not in seen:
        out.append(Problem("aggregator", f"{scenario.aggregator!r} is not a device id"))
    else:
        reach = nx.node_connected_component(graph, scenario.aggregator)
        for i, d in enumerate(devices):
            if d.id not in reach:
                out.append(Problem(f"devices[{i}].id", f"{d.id!r} has no route to the aggregator"))
    return out


def check(scenario: Scenario) -> list[Problem]:
    """Semantic problems of a schema-valid scenario (empty list when it is fine)."""
    out = _check_model(scenario.model)
    out += _check_generate(scenario) if scenario.generate is not None else _check_explicit(scenario)
    return out


@dataclass(frozen=True)
class ResolvedNetwork:
    """The concrete network of a run: devices, links (network nodes implied) and aggregator."""

    devices: list[DeviceSpec]
    links: list[LinkSpec]
    aggregator: str

    @property
    def node_ids(self) -> list[str]:
        """Device ids first (in order), then network nodes in order of first appearance."""
        ids = [d.id for d in self.devices]
        known = set(ids)
        for link in self.links:
            for end in (link.a, link.b):
                if end not in known:
                    known.add(end)
                    ids.append(end)
        return ids


def resolve_network(scenario: Scenario, seed: int) -> ResolvedNetwork:
    """The scenario's network; generated ones from ``generate.seed`` or else the run's seed."""
    if scenario.generate is None:
        return ResolvedNetwork(list(scenario.devices or []), list(scenario.links or []),
                               str(scenario.aggregator))
    gen_seed = scenario.generate.seed if scenario.generate.seed is not None else seed
    rng = np.random.default_rng(np.random.SeedSequence([gen_seed, 0x6E6574]))
    devices, links, agg = generate_network(scenario.generate, rng)
    return ResolvedNetwork(devices, links, agg)


def scenario_to_yaml(scenario: Scenario) -> str:
    """The scenario as YAML (the fields the user gave, defaults left out)."""
    data = json.loads(scenario.model_dump_json(exclude_unset=True))
    return yaml.safe_dump(data, sort_keys=False, width=100)
