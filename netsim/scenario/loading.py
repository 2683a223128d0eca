"""Loading scenarios (file, dict, built-in name), validating them, resolving their network.

Validation reports every problem at once with its field path; nothing runs on an invalid
scenario. Field problems come from the schema (pydantic); cross-field ones (duplicate ids,
unknown aggregator, link end, model or policy, unreachable devices, a network where no device
can ever train) from :mod:`netsim.scenario.checks`, run on the raw mapping so that both are
reported in the same pass. Implausible magnitudes are warnings, except unit traps (a case
mistake such as ``'20 mbps'`` for ``'20 Mbps'``: :func:`netsim.units.unit_trap`), which are
problems.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from netsim.scenario.checks import cross_problems, with_target_loss
from netsim.scenario.edge_checks import edge_problems
from netsim.scenario.errors import Problem, ScenarioError, problems_from_validation
from netsim.scenario.network import (  # noqa: F401  (re-exported: their home before 0.4)
    ResolvedNetwork,
    generated_network,
    resolve_network,
)
from netsim.scenario.schema import Scenario
from netsim.units import unit_checks
from netsim.yamlio import YamlLimitError, describe_error, read_text, safe_load


def builtin_scenarios() -> dict[str, Path]:
    """Built-in scenario names and their files (netsim/data/scenarios/NAME.yaml)."""
    folder = resources.files("netsim").joinpath("data").joinpath("scenarios")
    return {Path(p.name).stem: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml")}


def read_yaml(source: str | Path, what: str = "scenario") -> dict[str, Any]:
    """A YAML mapping from a file, parsed with ``safe_load`` within netsim's limits
    (:mod:`netsim.yamlio`: size, nesting, aliases).

    Raises
    ------
    ScenarioError
        With a plain message if the file is missing, too large, empty, binary, not UTF-8,
        unparsable, beyond the limits, or not a mapping.
    """
    path = Path(source)
    text = None
    try:
        text = read_text(path)
        data = safe_load(text, name=str(path))
    except YamlLimitError as exc:
        raise ScenarioError([Problem("", str(exc))], what) from None
    except yaml.YAMLError as exc:  # named PATH:LINE:COLUMN, not "<unicode string>"
        raise ScenarioError([Problem("", describe_error(exc, str(path), text))], what) from None
    if not isinstance(data, dict):
        kind = "nothing" if data is None else type(data).__name__
        raise ScenarioError([Problem("", f"{path}: expected a mapping (key: value) at the top "
                                         f"level, found {kind}")], what)
    return data


#: Fields of a scenario that name files (trace files of the dynamics block).
TRACE_FIELDS = (("dynamics", "availability", "trace"), ("dynamics", "bandwidth", "trace"))


def trace_parent(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any] | None:
    """The mapping in ``data`` that holds the trace field ``keys`` (one of
    :data:`TRACE_FIELDS`), or None where the path is absent."""
    node: Any = data
    for key in keys[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def resolve_trace_paths(data: dict[str, Any], folder: str | Path) -> dict[str, Any]:
    """``data`` with relative trace paths (``dynamics.availability.trace``,
    ``dynamics.bandwidth.trace``) made absolute against ``folder`` (the scenario file's:
    "paths in a scenario are relative to the scenario file"); ``~`` is expanded. Returns a
    copy where anything changed; values that are not strings are left for the schema."""
    out = data
    for keys in TRACE_FIELDS:
        node = trace_parent(out, keys)
        value = node.get(keys[-1]) if node is not None else None
        if not isinstance(value, str) or not value:
            continue
        path = Path(value).expanduser()
        if not path.is_absolute():
            path = Path(folder).absolute() / path
        if str(path) == value:
            continue
        if out is data:  # copy the branch we change, never the caller's mapping
            out = dict(data)
        parent = out
        for key in keys[:-1]:
            parent[key] = dict(parent[key])
            parent = parent[key]
        parent[keys[-1]] = str(path)
    return out


def scenario_data(source: str | Path | dict[str, Any]) -> dict[str, Any]:
    """The raw mapping of a scenario given as a dict, a built-in name or a file path.

    From a file, relative trace paths are resolved against the file's folder
    (:func:`resolve_trace_paths`), as are a PyTorch model's files and a baechi graph file
    (:func:`netsim.torchnet.scenario.resolve_model_paths`); a dict's or a built-in's against
    the current directory."""
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
    from netsim.scenario.torch_model import resolve_model_paths

    folder = Path(source).parent
    return resolve_model_paths(resolve_trace_paths(read_yaml(source), folder), folder)


class ScenarioWarning(UserWarning):
    """A scenario value that is valid but implausible (a unit trap, most often)."""


@dataclass(frozen=True)
class Validation:
    """The outcome of validating a scenario: the Scenario (None if invalid), every problem,
    and every warning (field path and message, like problems)."""

    scenario: Scenario | None
    problems: list[Problem]
    warnings: list[Problem]

    def raise_for(self, strict: bool = False) -> Scenario:
        """The scenario; :class:`ScenarioError` with every problem (and, if ``strict``, every
        warning) when there are any."""
        problems = self.problems + (self.warnings if strict else [])
        if problems or self.scenario is None:
            raise ScenarioError(problems)
        return self.scenario


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


def validate_data(data: dict[str, Any] | Scenario) -> Validation:
    """Validate a raw scenario mapping (or re-check a Scenario): field problems (the schema)
    and cross-field problems (:mod:`netsim.scenario.checks`) together, plus warnings."""
    if isinstance(data, Scenario):
        scenario: Scenario | None = data
        problems: list[Problem] = []
        raw: dict[str, Any] = {k: getattr(data, k) for k in Scenario.model_fields}
    else:
        if not isinstance(data, dict):
            return Validation(None, [Problem("", "a scenario is a mapping (key: value), found "
                                                 f"{type(data).__name__}")], [])
        raw, targeted = with_target_loss(data)
        try:
            scenario, problems = Scenario.model_validate(raw), targeted
        except ValidationError as exc:
            found = problems_from_validation(exc, model=Scenario)
            if targeted:  # (target_accuracy could not stand in: its reason, not "required")
                found = [p for p in found if p.path != "training.target_loss"]
            scenario, problems = None, found + targeted
        except (OverflowError, RecursionError) as exc:
            scenario, problems = None, [Problem("", f"cannot be read: {exc}")]
    traps, implausible = unit_checks(
        data.model_dump(include={"devices", "links"}) if isinstance(data, Scenario) else raw)
    problems = _unique([Problem(path, msg) for path, msg in traps] + problems
                       + cross_problems(raw, None if scenario is None else scenario.devices)
                       + edge_problems(raw))
    warnings = [Problem(path, msg) for path, msg in implausible]
    if scenario is not None and not problems:
        warnings += data_set_warnings(scenario)
    return Validation(scenario if not problems else None, problems, warnings)


def _declared_samples(scenario: Scenario) -> tuple[int, float, str]:
    """(devices holding samples, samples they declare in all, the field that declares them)."""
    if scenario.generate is not None:
        n = scenario.generate.n_devices
        return n, n * scenario.generate.samples_mean, "generate.samples_mean"
    n = sum(1 for d in scenario.devices or () if d.samples > 0)
    return n, float(sum(d.samples for d in scenario.devices or ())), "devices"


def real_training_split(scenario: Scenario) -> int | None:
    """The training samples a real backend shares out among the devices: its shipped data
    set's training split at ``training.real.test_fraction`` (the numpy backend's digits for
    mlp-digits, the torch backend's set for each network or the one ``model.torch.data``
    names); None on the surrogate, and for your own ``.npz`` data (its size is the file's)."""
    backend, model = scenario.training.backend, scenario.model
    if backend == "surrogate":  # (before the imports: a surrogate run imports no torchnet)
        return None
    from netsim.scenario.schema import TorchModelSpec
    from netsim.torchnet import TORCH_MODEL_DATA, train_split_size
    from netsim.training.models import resolve_model
    from netsim.training.real import REAL_MODELS

    if isinstance(model, TorchModelSpec):
        data = model.torch.data if model.torch.data is not None \
            else TORCH_MODEL_DATA.get(model.torch.factory)
    else:
        name = resolve_model(model).name
        data = ("digits" if name in REAL_MODELS else None) if backend == "real" \
            else TORCH_MODEL_DATA.get(name)
    if not isinstance(data, str):
        return None
    return train_split_size(data, scenario.training.real.test_fraction)


def data_set_warnings(scenario: Scenario) -> list[Problem]:
    """A real backend on devices that declare more samples than its data set's training
    split holds: how the data is shared out (issue 57: a device's samples are the data it
    holds and trains on)."""
    held = real_training_split(scenario)
    n, declared, path = _declared_samples(scenario)
    if held is None or declared <= held * 1.001 or n == 0:
        return []
    return [Problem(path, f"the devices declare about {declared:,.0f} samples in all, but the "
                          f"data set's training split holds {held:,.0f}: the real backend "
                          f"shares those out in proportion ({_per_device(held, n)}), "
                          f"and each device trains on what it is given")]


def _per_device(held: float, n: int) -> str:
    """``held`` samples shared by ``n`` devices, in words."""
    return f"about {held / n:,.0f} a device" if held >= n else "fewer than one a device"


def surrogate_data_note(scenario: Scenario) -> Problem | None:
    """The surrogate on devices that declare more samples than the model's curve was fitted
    with (``loss.reference_samples``, its data set's training split): what the surrogate
    counts, which no real backend can hold (issue 57; ``netsim validate`` prints it)."""
    from netsim.scenario.schema import TorchModelSpec
    from netsim.training.models import resolve_model

    if scenario.training.backend != "surrogate":
        return None
    model = scenario.model  # (a PyTorch model is not measured to validate the scenario)
    loss = model.loss if isinstance(model, TorchModelSpec) else resolve_model(model).loss
    held = None if loss is None else loss.reference_samples
    n, declared, path = _declared_samples(scenario)
    if held is None or declared <= held * 1.001 or n == 0:
        return None
    return Problem(path, f"the devices declare about {declared:,.0f} samples in all, more than "
                         f"the {held:,.0f} distinct samples the model's curve was fitted with "
                         "(loss.reference_samples, its data set's training split): the "
                         "surrogate counts each device's declared samples as distinct data "
                         "(its data floor from its own count), which no real backend can hold "
                         f"(a real backend shares the {held:,.0f} out in proportion, "
                         f"{_per_device(held, n)})")


def validate_scenario(source: str | Path | dict[str, Any] | Scenario) -> Validation:
    """Like :func:`validate_data`, from a file path, built-in name, mapping or Scenario; an
    unreadable file is a problem too (never raises :class:`ScenarioError`). Trace paths of a
    scenario file are read relative to its folder (:func:`scenario_data`); the trace files
    themselves are checked with the cross-field problems (every bad row, unknown devices
    and links)."""
    if isinstance(source, Scenario):
        return validate_data(source)
    try:
        data = scenario_data(source)
    except ScenarioError as exc:
        return Validation(None, exc.problems, [])
    return validate_data(data)


def load_scenario(source: str | Path | dict[str, Any] | Scenario,
                  strict: bool = False) -> Scenario:
    """A validated :class:`Scenario` from a file path, built-in name, mapping or Scenario.

    Warnings (implausible magnitudes, see :func:`netsim.units.unit_checks`) are issued as
    :class:`ScenarioWarning`; with ``strict`` they are problems.

    Raises
    ------
    ScenarioError
        With every problem found, each naming its field path and what is allowed.
    """
    result = validate_scenario(source)
    scenario = result.raise_for(strict)
    for w in result.warnings:
        warnings.warn(str(w), ScenarioWarning, stacklevel=2)
    return scenario


def check(scenario: Scenario) -> list[Problem]:
    """Cross-field problems of a schema-valid scenario (empty list when it is fine)."""
    return validate_data(scenario).problems


def scenario_to_yaml(scenario: Scenario) -> str:
    """The scenario as YAML (the fields the user gave, defaults left out)."""
    data = json.loads(scenario.model_dump_json(exclude_unset=True))
    return yaml.safe_dump(data, sort_keys=False, width=100)
