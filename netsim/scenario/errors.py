"""Scenario problems, each with its field path (``links[3].bandwidth_bps``) and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

_TYPE_TAGS = {"str", "int", "float", "bool", "dict", "list", "none"}
#: pydantic's bound errors: (context key, wording); bounds are shown as ``1e+24``, not digits.
_BOUNDS = {"greater_than": ("gt", "greater than"),
           "greater_than_equal": ("ge", "greater than or equal to"),
           "less_than": ("lt", "less than"), "less_than_equal": ("le", "less than or equal to")}


@dataclass(frozen=True)
class Problem:
    """One problem in a scenario: where (field path) and what is wrong or allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ScenarioError(ValueError):
    """An invalid scenario (or sweep, or decision input): every problem found, at once."""

    def __init__(self, problems: Sequence[Problem], source: str = "scenario") -> None:
        self.problems = list(problems)
        self.source = source
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid {source} ({len(self.problems)} problem(s)):\n{lines}")


def format_path(loc: Iterable[Any]) -> str:
    """``('links', 3, 'bandwidth_bps')`` -> ``links[3].bandwidth_bps`` (union tags dropped)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and (part in _TYPE_TAGS or "[" in part or part[:1].isupper()):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _is_tagged(loc: Sequence[Any]) -> bool:
    return any(isinstance(p, str) and (p in _TYPE_TAGS or "[" in p or p[:1].isupper()) for p in loc)


def problems_from_validation(error: ValidationError, prefix: str = "") -> list[Problem]:
    """Turn pydantic's errors into problems; for a union, keep the branch the input was meant for."""
    problems: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for err in error.errors():
        loc, kind, value = err["loc"], err["type"], err.get("input")
        if loc and _is_tagged(loc[-1:]):  # a union's branch the input was not meant for
            if kind == "string_type" and isinstance(value, dict):
                continue
            if kind in {"model_type", "model_attributes_type", "dict_type"} and isinstance(value, str):
                continue
        path = format_path(loc)
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        msg = err["msg"].removeprefix("Value error, ")
        bound = _BOUNDS.get(kind)
        if bound and isinstance(err.get("ctx", {}).get(bound[0]), int | float):
            msg = f"Input should be {bound[1]} {err['ctx'][bound[0]]:g}"
        if kind != "extra_forbidden" and isinstance(value, int | float | str) \
                and not isinstance(value, bool) and repr(value) not in msg:
            msg = f"{msg} (got {value!r})"
        if kind == "extra_forbidden":
            msg = "unknown field (a typo?)"
        key = (path, msg)
        if key not in seen:
            seen.add(key)
            problems.append(Problem(path, msg))
    if not problems:  # never an invalid input without a problem to show
        problems = [Problem(format_path(e["loc"]), e["msg"]) for e in error.errors()]
    return problems
