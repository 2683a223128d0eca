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

from netsim.plugins import POLICIES, broken_plugin, load_group
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
    # (a plug-in that fails to load is skipped with a warning: netsim.plugins.load_group)
    return tuple(load_group(POLICIES, entry_of).items())


#: Policies registered in this process only, by name (:func:`register_local`).
_LOCAL: dict[str, PolicyEntry] = {}


def registered() -> dict[str, PolicyEntry]:
    """Every registered policy by name (sorted), loaded once per process, and those
    registered in this process (:func:`register_local`)."""
    if not _LOCAL:
        return dict(_load())
    return dict(sorted({**dict(_load()), **_LOCAL}.items()))


def local_policies(names: list[str], allow_imports: bool,
                   where: str = "--policy") -> tuple[list[str], list[Problem]]:
    """``names`` with each that names a user's own policy class (``mypolicy:CheapestK``,
    ``path/to/mypolicy.py:CheapestK``: :func:`netsim.plugins.names_an_object`) imported,
    registered in this process (:func:`register_local`) and replaced by its registered
    name; imported only with ``allow_imports`` (``--allow-imports``), else a problem saying
    to add it. Also every problem (import errors, an object that is no policy class); a
    name with a problem is left out of the names returned."""
    from netsim.plugins import OBJECT_FORMS, import_object, names_an_object

    known = registered()
    out: list[str] = []
    problems: list[Problem] = []
    for name in names:
        if name in known or not names_an_object(name):
            out.append(name)
            continue
        if not allow_imports:
            problems.append(Problem(where, f"{name!r} names a policy class to import "
                                           f"({OBJECT_FORMS}); importing runs its code, so "
                                           "netsim does it only with --allow-imports: add it"))
            continue
        try:
            entry = register_local(_entry_named(import_object(name), name))
        except (ValueError, TypeError) as exc:
            problems.append(Problem(where, str(exc)))
            continue
        out.append(entry.name)
    return out, problems


def _entry_named(obj: Any, text: str) -> PolicyEntry:
    """The :class:`PolicyEntry` of an object a user named (``text``), under its own
    registered name."""
    entry = obj if isinstance(obj, PolicyEntry) else getattr(obj, "__dict__", {}).get(
        ENTRY_ATTRIBUTE)
    if not isinstance(entry, PolicyEntry):
        raise TypeError(f"{text!r} is {obj!r}, not a policy class: decorate it with "
                        "@netsim.policy.register(NAME, DESCRIPTION, PARAMS) "
                        "(docs/writing-a-policy.md)")
    return entry


def register_local(entry: PolicyEntry) -> PolicyEntry:
    """Make ``entry`` available by name in this process only: a user's own policy class
    named on the command line (``netsim run --policy mypolicy:CheapestK --allow-imports``)
    or a Policy object given to ``netsim.sweep``. Returns it.

    Raises
    ------
    ValueError
        If an installed policy (an entry point) other than ``entry``'s is registered under
        its name (an earlier local one is replaced).
    """
    known = dict(_load()).get(entry.name)
    if known is not None and known.factory is not entry.factory:
        raise ValueError(f"policy name {entry.name!r} is taken by the registered policy "
                         f"{known.factory!r}: give your policy another name")
    _LOCAL[entry.name] = entry
    return entry


def make_policy(name: str, params: Mapping[str, Any] | None = None) -> Policy:
    """A fresh policy instance by registered name, its parameters validated.

    Raises
    ------
    ScenarioError
        For an unknown name or invalid parameters (paths ``policies.NAME.FIELD``).
    """
    entries = registered()
    if name not in entries:
        broken = broken_plugin(POLICIES, name)
        raise ScenarioError([Problem("policy", f"policy {name!r}: {broken.unavailable()}" if broken else
                                     f"unknown policy {name!r} (registered: "
                                     f"{', '.join(entries)})")], "policy")
    entry = entries[name]
    try:
        p = entry.params.model_validate(dict(params or {}))
    except ValidationError as exc:
        raise ScenarioError(problems_from_validation(exc, prefix=f"policies.{name}",
                                                     model=entry.params),
                            "policy") from None
    return entry.factory(p)


def policy_params(policy: Policy) -> dict[str, Any]:
    """A policy's parameters as plain data (for run ids and records)."""
    params = getattr(policy, "params", None)
    return params.model_dump(mode="json") if isinstance(params, BaseModel) else {}
