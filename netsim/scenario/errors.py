"""Scenario problems, each with its field path (``links[3].bandwidth_bps``) and what is allowed."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

_TYPE_TAGS = {"str", "int", "float", "bool", "dict", "list", "none"}
#: pydantic's names of constrained and validated union branches (``constrained-str``).
_TAG_PREFIXES = ("constrained-", "function-")
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
        elif _is_tag(part):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _is_tag(part: Any) -> bool:
    """Whether a location part is pydantic's name of a union branch (``str``,
    ``DeviceSpec``, ``list[...]``, ``constrained-str``), not a field."""
    return isinstance(part, str) and (part in _TYPE_TAGS or "[" in part or part[:1].isupper()
                                      or part.startswith(_TAG_PREFIXES))


def _is_tagged(loc: Sequence[Any]) -> bool:
    return any(_is_tag(p) for p in loc)


def _unwrap(tp: Any) -> list[Any]:
    """The types a field's annotation stands for: ``Annotated``, unions and ``None`` removed."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _unwrap(get_args(tp)[0])
    if origin is Union or origin is types.UnionType:
        return [t for arg in get_args(tp) for t in _unwrap(arg)]
    return [] if tp is type(None) else [tp]


def fields_at(model: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    """The field names of the model(s) found by following ``loc`` (pydantic's error location,
    up to the unknown key) from ``model``: through fields, list items and dict values; union
    tags (``DeviceSpec``) pick their branch. Empty where the path leads to no model."""
    current: list[Any] = [model]
    for part in loc:
        found: list[Any] = []
        for tp in (t for c in current for t in _unwrap(c)):
            origin, args = get_origin(tp), get_args(tp)
            if isinstance(part, int):
                if origin in (list, tuple, set, frozenset, Sequence) and args:
                    found.append(args[0])
            elif isinstance(tp, type) and issubclass(tp, BaseModel):
                if part in tp.model_fields:
                    found.append(tp.model_fields[part].annotation)
                elif part == tp.__name__ or (isinstance(part, str) and part in _TYPE_TAGS):
                    found.append(tp)  # (a union's tag: this branch)
            elif origin is dict and len(args) == 2 and isinstance(part, str):
                found.append(args[1])
        current = found or (current if _is_tag(part) else [])
    names: list[str] = []
    for tp in (t for c in current for t in _unwrap(c)):
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            names += [n for n in tp.model_fields if n not in names]
    return names


def unknown_field_message(key: Any, known: Sequence[str]) -> str:
    """``unknown field; did you mean 'flop_per_s'?`` (the closest known name), else
    ``unknown field (a typo?)`` with the known names (at most 12)."""
    close = difflib.get_close_matches(str(key), list(known), n=1) if known else []
    if close:
        return f"unknown field; did you mean {close[0]!r}?"
    if not known:
        return "unknown field (a typo?)"
    shown = ", ".join(list(known)[:12]) + (", ..." if len(known) > 12 else "")
    return f"unknown field (a typo?); the fields here: {shown}"


def problems_from_validation(error: ValidationError, prefix: str = "",
                             model: type[BaseModel] | None = None) -> list[Problem]:
    """Turn pydantic's errors into problems; for a union, keep the branch the input was meant
    for. With the ``model`` validated, an unknown field gets the closest known name
    (``did you mean 'flop_per_s'?``)."""
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
            msg = unknown_field_message(loc[-1] if loc else "",
                                        fields_at(model, loc[:-1]) if model else [])
        key = (path, msg)
        if key not in seen:
            seen.add(key)
            problems.append(Problem(path, msg))
    if not problems:  # never an invalid input without a problem to show
        problems = [Problem(format_path(e["loc"]), e["msg"]) for e in error.errors()]
    return problems
