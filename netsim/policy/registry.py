"""The policy registry: policies found through the entry-point group ``netsim.policies``.

A policy class carries its name, one-line description and parameter model (set by the
:func:`register` decorator, which records them on the class and nowhere else: no global
state). A package makes it available by name by declaring it under the group in its metadata::

    [options.entry_points]
    netsim.policies =
        cheapest-k = mypkg.policies:CheapestK

``netsim policies`` lists every registered policy, netsim's own and any installed package's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from netsim.plugins import POLICIES, group
from netsim.policy.contract import Policy
from netsim.scenario.errors import Problem, ScenarioError, problems_from_validation

ENTRY_ATTRIBUTE = "__netsim_policy__"
T = TypeVar("T")


class NoParams(BaseModel):
    """Parameters of a policy that takes none."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class PolicyEntry:
    """A registered policy: its factory, one-line description and parameter model."""

    name: str
    factory: Callable[..., Policy]
    description: str
    params: type[BaseModel]


def register(name: str, description: str,
             params: type[BaseModel] = NoParams) -> Callable[[T], T]:
    """Class decorator: describe a policy class (built as ``cls(params_instance)``; it must set
    ``self.name``). The class is found by name once its package declares it under the
    ``netsim.policies`` entry-point group (see the module docstring)."""

    def wrap(cls: T) -> T:
        setattr(cls, ENTRY_ATTRIBUTE, PolicyEntry(name, cls, description, params))  # type: ignore[arg-type]
        return cls

    return wrap


def entry_of(obj: Any, name: str) -> PolicyEntry:
    """The :class:`PolicyEntry` an entry point loads: a PolicyEntry, or a class decorated with
    :func:`register` (registered under the entry point's ``name``)."""
    entry = obj if isinstance(obj, PolicyEntry) else vars(obj).get(ENTRY_ATTRIBUTE)
    if not isinstance(entry, PolicyEntry):
        raise TypeError(f"entry point {name!r} of group {POLICIES!r} loads {obj!r}, which is "
                        "neither a PolicyEntry nor a class decorated with netsim.policy.register")
    return entry if entry.name == name else PolicyEntry(name, entry.factory, entry.description,
                                                        entry.params)


@cache
def _load() -> tuple[tuple[str, PolicyEntry], ...]:
    return tuple((name, entry_of(ep.load(), name)) for name, ep in group(POLICIES).items())


def registered() -> dict[str, PolicyEntry]:
    """Every registered policy by name (sorted), loaded once per process."""
    return dict(_load())


def make_policy(name: str, params: Mapping[str, Any] | None = None) -> Policy:
    """A fresh policy instance by registered name, its parameters validated.

    Raises
    ------
    ScenarioError
        For an unknown name or invalid parameters (paths ``policies.NAME.FIELD``).
    """
    entries = registered()
    if name not in entries:
        raise ScenarioError([Problem("policy", f"unknown policy {name!r} "
                                               f"(registered: {', '.join(entries)})")], "policy")
    entry = entries[name]
    try:
        p = entry.params.model_validate(dict(params or {}))
    except ValidationError as exc:
        raise ScenarioError(problems_from_validation(exc, prefix=f"policies.{name}"),
                            "policy") from None
    return entry.factory(p)


def policy_params(policy: Policy) -> dict[str, Any]:
    """A policy's parameters as plain data (for run ids and records)."""
    params = getattr(policy, "params", None)
    return params.model_dump(mode="json") if isinstance(params, BaseModel) else {}
