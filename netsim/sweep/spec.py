"""Sweep files: what to run (scenario points x policies x seeds), validated before anything runs.

A sweep file (YAML, read with ``safe_load``)::

    name: scale                   # optional (default: the file's stem)
    base: default                 # built-in scenario name or scenario file (relative to this file)
    policies: [fedavg-all, {name: random-k, params: {k: 5}, label: random-5}]
    seeds: 10                     # a count (seeds 0..9) or a list of seeds
    grid:                         # dotted scenario paths: cartesian product of the values
      training.target_loss: [0.3, 0.5]
      generate.n_devices: [20, 100]
    zip:                          # zipped axes (equal lengths), crossed with the grid
      generate.mix.phone: [0.5, 0.8]
      generate.mix.laptop: [0.5, 0.2]

A point is one combination of axis values applied to the base scenario; every point's scenario
and every policy's parameters are validated first, and all problems are reported at once, each
naming the point and the field (:class:`netsim.scenario.ScenarioError`).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from netsim.scenario.errors import Problem, ScenarioError, problems_from_validation
from netsim.scenario.loading import builtin_scenarios, read_yaml, scenario_data
from netsim.scenario.schema import MAX_SEED

_PATH_RE = re.compile(r"^[A-Za-z_][\w-]*(?:\.[\w-]+|\[\d+\])*$")
_TOKEN_RE = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")
MAX_SEEDS = 100_000


class PolicyEntry(BaseModel):
    """One policy of a sweep: a registered name, its parameters, and an optional label."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Annotated[str, Field(min_length=1)]
    params: dict[str, Any] = Field(default_factory=dict)
    label: Annotated[str, Field(min_length=1)] | None = None


class SweepSpec(BaseModel):
    """The validated contents of a sweep file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Annotated[str, Field(min_length=1)] | None = None
    description: str = ""
    base: Annotated[str, Field(min_length=1)]
    policies: Annotated[list[Annotated[str, Field(min_length=1)] | PolicyEntry],
                        Field(min_length=1)]
    seeds: int | list[int]
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(default_factory=dict)
    zip: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(default_factory=dict)

    @field_validator("grid", "zip")
    @classmethod
    def _paths(cls, axes: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for path in axes:
            if not _PATH_RE.match(path):
                raise ValueError(f"{path!r} is not a dotted scenario path "
                                 "(e.g. training.target_loss or devices[1].flop_per_s)")
        return axes

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, seeds: Any) -> int | list[int]:
        allowed = (f"a count in 1..{MAX_SEEDS} or a non-empty list of distinct integers in "
                   f"0..{MAX_SEED}")
        if isinstance(seeds, int) and not isinstance(seeds, bool):
            if not 1 <= seeds <= MAX_SEEDS:
                raise ValueError(f"expected {allowed}")
            return seeds
        if isinstance(seeds, list) and seeds and all(
                isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_SEED
                for s in seeds):
            if len(set(seeds)) != len(seeds):
                raise ValueError(f"seeds repeat; expected {allowed}")
            return seeds
        raise ValueError(f"expected {allowed}")

    def seed_list(self) -> list[int]:
        """The seeds to run (a count n means 0..n-1)."""
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)

    def policy_entries(self) -> list[PolicyEntry]:
        """Every policy as a :class:`PolicyEntry`."""
        return [PolicyEntry(name=p) if isinstance(p, str) else p for p in self.policies]


def parse_path(path: str) -> list[str | int]:
    """``"devices[1].flop_per_s"`` -> ``["devices", 1, "flop_per_s"]``; ``a.0.b`` indexes too."""
    out: list[str | int] = []
    for index, key in _TOKEN_RE.findall(path):
        if index:
            out.append(int(index))
        elif key.isdigit():
            out.append(int(key))
        else:
            out.append(key)
    return out


def set_path(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``data`` with the dotted ``path`` set to ``value`` (missing mappings created).

    Raises
    ------
    ValueError
        If the path goes through a value that is neither a mapping nor a list, or a list index
        is out of range.
    """
    keys = parse_path(path)
    root = _copy(data)
    node: Any = root
    for depth, key in enumerate(keys):
        where = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys[:depth])
        where = where.lstrip(".") or "the scenario"
        if isinstance(key, int):
            if not isinstance(node, list):
                raise ValueError(f"{where} is not a list in the base scenario")
            if not -len(node) <= key < len(node):
                raise ValueError(f"index [{key}] out of range: {where} has {len(node)} entries")
        elif not isinstance(node, dict):
            raise ValueError(f"{where} is not a mapping in the base scenario")
        if depth == len(keys) - 1:
            node[key] = value
        else:
            if isinstance(key, str) and node.get(key) is None:
                if isinstance(keys[depth + 1], int):
                    raise ValueError(f"{path.split('[')[0]} is not in the base scenario "
                                     "(an index needs an existing list)")
                node[key] = {}
            node = node[key]
    return root


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def axis_points(spec: SweepSpec) -> list[dict[str, Any]]:
    """Every point's axis values: the grid's cartesian product crossed with the zipped axes."""
    grid_keys = list(spec.grid)
    grid = [dict(zip(grid_keys, combo, strict=True))
            for combo in itertools.product(*(spec.grid[k] for k in grid_keys))]
    if not spec.zip:
        return grid
    zip_keys = list(spec.zip)
    zipped = [dict(zip(zip_keys, combo, strict=True))
              for combo in zip(*(spec.zip[k] for k in zip_keys), strict=True)]
    return [{**g, **z} for g in grid for z in zipped]


def read_sweep(path: str | Path) -> tuple[SweepSpec, Path]:
    """Read and validate a sweep file; returns the spec and the file's folder.

    Raises
    ------
    ScenarioError
        (source ``sweep``) with every problem: unreadable file, unknown fields, bad values,
        zipped axes of unequal length, an axis both in grid and zip.
    """
    spec, folder, problems = inspect_sweep(path)
    if problems:
        raise ScenarioError(problems, "sweep")
    return spec, folder


def inspect_sweep(path: str | Path) -> tuple[SweepSpec, Path, list[Problem]]:
    """Read a sweep file and list its problems without stopping at the first kind: returns the
    spec (where fields are invalid, a partial spec without them, for the points and policies
    to be checked as well), the file's folder and every problem of the file's own fields.

    Raises
    ------
    ScenarioError
        Only if the file cannot be read as a YAML mapping.
    """
    path = Path(path)
    data = read_yaml(path, what="sweep")
    problems = _axis_problems(data)
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        problems = problems_from_validation(exc, model=SweepSpec) + problems
        spec = _partial(data, problems)
    if problems and spec.model_fields_set:  # axis problems on a schema-valid file
        spec = _partial(data, problems)
    problems += [p for p in policy_entry_problems(data.get("policies")) if p not in problems]
    if spec.name is None:
        spec = spec.model_copy(update={"name": path.stem})
    return spec, path.parent, problems


def _partial(data: dict[str, Any], problems: list[Problem]) -> SweepSpec:
    """The sweep without its invalid top-level fields (each already a problem): an invalid
    base leaves none (no point is checked), invalid seeds one seed, invalid policies none."""
    bad = {re.split(r"[.\[]", p.path)[0] for p in problems}
    clean = {k: v for k, v in data.items() if k not in bad and k in SweepSpec.model_fields}
    fallback: dict[str, Any] = {"base": "", "policies": [], "seeds": 1, "grid": {}, "zip": {}}
    for key, value in fallback.items():
        if key in bad or key not in clean:
            clean[key] = value
    try:
        spec = SweepSpec.model_validate({**clean, "base": clean["base"] or "-",
                                         "policies": clean["policies"] or ["-"]})
        return spec.model_copy(update={"base": clean["base"],
                                       "policies": spec.policies if clean["policies"] else []})
    except ValidationError:
        return SweepSpec.model_construct(**{**fallback, "name": None, "description": ""})


def policy_entry_problems(spec_data: Any) -> list[Problem]:
    """Each raw ``policies`` entry on its own: a registered name, parameters valid for it."""
    from netsim.policy import make_policy

    out: list[Problem] = []
    for j, raw in enumerate(spec_data if isinstance(spec_data, list) else []):
        try:
            entry = PolicyEntry(name=raw) if isinstance(raw, str) else PolicyEntry.model_validate(raw)
        except ValidationError:
            continue  # the sweep's own schema reports it
        try:
            make_policy(entry.name, entry.params)
        except ScenarioError as exc:
            out += entry_problems(exc, j, entry)
    return out


def entry_problems(exc: ScenarioError, j: int, entry: PolicyEntry) -> list[Problem]:
    """A policy's ScenarioError (paths ``policy`` or ``policies.NAME.FIELD``) as problems of
    the sweep file's entry ``j`` (``policies[j].name``, ``policies[j].params.FIELD``)."""
    out = []
    prefix = f"policies.{entry.name}"
    for p in exc.problems:
        if p.path == "policy":
            out.append(Problem(f"policies[{j}].name", p.message))
        else:
            rest = p.path[len(prefix):] if p.path.startswith(prefix) else f".{p.path}"
            out.append(Problem(f"policies[{j}].params{rest}", p.message))
    return out


def _axis_problems(data: dict[str, Any]) -> list[Problem]:
    """Zipped axes of unequal lengths, axes given twice (checked on the raw mapping)."""
    grid, zipped = data.get("grid"), data.get("zip")
    problems = []
    if isinstance(zipped, dict):
        lengths = {k: len(v) for k, v in zipped.items() if isinstance(v, list)}
        if len(set(lengths.values())) > 1:
            for key, n in lengths.items():
                problems.append(Problem(f"zip.{key}", f"zipped axes need equal lengths (this has "
                                        f"{n}; lengths: {sorted(set(lengths.values()))})"))
        if isinstance(grid, dict):
            for key in zipped:
                if key in grid:
                    problems.append(Problem(f"zip.{key}", "this axis is also in grid (give once)"))
    return problems


def base_data(spec: SweepSpec, folder: Path) -> dict[str, Any]:
    """The base scenario's raw mapping (a built-in name, or a file relative to the sweep file).

    Raises
    ------
    ScenarioError
        If the base is neither a built-in name nor a readable scenario file (path ``base``).
    """
    candidate = folder / spec.base
    try:
        if spec.base not in builtin_scenarios() and candidate.is_file():
            return scenario_data(str(candidate))
        return scenario_data(spec.base)
    except ScenarioError as exc:
        raise ScenarioError([Problem("base", p.message) for p in exc.problems], "sweep") from None
