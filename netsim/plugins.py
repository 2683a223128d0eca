"""Plug-ins by entry point: the groups netsim loads and never imports by name.

A package adds policies, figures or commands by declaring them in its metadata (setup.cfg)::

    [options.entry_points]
    netsim.policies =
        cheapest-k = mypkg.policies:CheapestK
    netsim.figures =
        my-figure = mypkg.figures:MY_FIGURE
    netsim.commands =
        mycmd = mypkg.cli

netsim itself declares its own policies and figures the same way (policies/, plots/), so the
engine never imports them (pytest's ``pytest11`` and flake8's ``flake8.extension`` work alike).
After editing a package's entry points, reinstall it (``pip install -e .``) so the metadata
is rewritten.

A plug-in cannot break netsim (issue 54): one whose module is missing, raises on import, or
loads something that is no plug-in of its group is skipped by :func:`load_group` with a
:class:`PluginWarning` naming the entry point (name, value, distribution) and the error;
everything else works, and asking for that plug-in by name says why it is not there
(:func:`broken_plugin`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

POLICIES = "netsim.policies"
FIGURES = "netsim.figures"
COMMANDS = "netsim.commands"

#: The distributions whose entry points are netsim's own (its built-in policies, figures).
BUILTIN_DISTRIBUTIONS = frozenset({"netsim"})

T = TypeVar("T")


class PluginWarning(UserWarning):
    """A plug-in (entry point) that could not be loaded and was skipped."""


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry point that failed to load: where it is declared and what went wrong."""

    group: str
    name: str
    value: str
    distribution: str | None
    error: str

    def describe(self) -> str:
        """``plug-in 'cheapest-k' (entry point cheapest-k = mypkg:CheapestK of group
        netsim.policies, from distribution mypkg)``."""
        source = f", from distribution {self.distribution}" if self.distribution else ""
        return (f"plug-in {self.name!r} (entry point {self.name} = {self.value} of group "
                f"{self.group}{source})")

    def __str__(self) -> str:
        return f"{self.describe()} cannot be loaded and is skipped: {self.error}"

    def unavailable(self) -> str:
        """Why the plug-in cannot be used, for an error naming it."""
        return (f"{self.describe()} failed to load: {self.error}; fix its package or "
                "uninstall it (`netsim --debug COMMAND ...` shows the traceback)")


#: Every broken entry point found in this process, by (group, name).
_BROKEN: dict[tuple[str, str], BrokenPlugin] = {}


def group(name: str) -> dict[str, EntryPoint]:
    """The entry points declared under group ``name`` by every installed package, by name
    (sorted). Two packages declaring one name: the first found wins, as importlib returns them."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=name):
        found.setdefault(ep.name, ep)
    return dict(sorted(found.items()))


def distribution_of(ep: EntryPoint) -> str | None:
    """The name (and version) of the distribution that declares ``ep``, where known."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None
    try:
        return f"{dist.name} {dist.version}"
    except Exception:  # (broken metadata: the name is all we could want anyway)
        return None


def load_group(name: str, convert: Callable[[Any, str], T] | None = None) -> dict[str, T]:
    """Every entry point of group ``name`` loaded (and passed through ``convert(obj,
    entry_name)``, which raises for an object that is no plug-in of the group), by name.

    One that raises (a missing module, an error on import, a wrong object) is left out,
    recorded (:func:`broken_plugin`) and warned about with a :class:`PluginWarning`."""
    out: dict[str, T] = {}
    for key in [k for k in _BROKEN if k[0] == name]:  # (this load's findings replace the last's)
        del _BROKEN[key]
    for entry_name, ep in group(name).items():
        try:
            obj = ep.load()
            out[entry_name] = convert(obj, entry_name) if convert is not None else obj
        except Exception as exc:  # any error of a third party's code: skipped, named
            if debugging():
                raise
            broken = BrokenPlugin(name, entry_name, ep.value, distribution_of(ep),
                                  f"{type(exc).__name__}: {exc}")
            _BROKEN[(name, entry_name)] = broken
            warnings.warn(str(broken), PluginWarning, stacklevel=2)
    return out


#: Set by ``netsim --debug``: a plug-in that fails to load raises (its traceback shown).
_DEBUG: list[bool] = [False]


def debugging(on: bool | None = None) -> bool:
    """Whether a failing plug-in raises instead of being skipped (``netsim --debug``); sets it
    where ``on`` is given."""
    if on is not None:
        _DEBUG[0] = on
    return _DEBUG[0]


def broken_plugin(group_name: str, name: str) -> BrokenPlugin | None:
    """The entry point ``name`` of ``group_name`` if it failed to load in this process."""
    return _BROKEN.get((group_name, name))


def broken_plugins(group_name: str | None = None) -> list[BrokenPlugin]:
    """Every entry point that failed to load in this process (of one group, if given)."""
    return [b for (g, _), b in sorted(_BROKEN.items()) if group_name in (None, g)]


def is_builtin(ep: EntryPoint) -> bool:
    """Whether ``ep`` is declared by netsim itself (:data:`BUILTIN_DISTRIBUTIONS`)."""
    dist = getattr(ep, "dist", None)
    return dist is not None and dist.name in BUILTIN_DISTRIBUTIONS


#: How a user's own object is named on the command line: ``module:Attr`` or ``FILE.py:Attr``.
OBJECT_FORMS = "module:Class or path/to/file.py:Class"


def names_an_object(text: str) -> bool:
    """Whether ``text`` names a Python object to import (``mypolicy:CheapestK``,
    ``path/to/mypolicy.py:CheapestK``) rather than a registered name."""
    module, sep, attr = text.rpartition(":")
    return bool(sep and module and attr.isidentifier())


def import_object(text: str) -> Any:
    """The object ``text`` names (:data:`OBJECT_FORMS`): a ``.py`` file is loaded as a module
    named by its stem (put in ``sys.modules``, its folder on the path for its own imports);
    a module is imported with the current folder first on the path, as ``python -m`` does.
    Call it only where the user allowed imports (``--allow-imports``): it runs the module.

    Raises
    ------
    ValueError
        Naming the text and what went wrong (no such file or module, an error on import,
        no such attribute).
    """
    import importlib
    import importlib.util
    import os
    import sys
    from pathlib import Path

    module_name, _, attr = text.rpartition(":")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).expanduser().resolve()
            if not path.is_file():
                raise ValueError(f"no file {module_name!r}")
            if str(path.parent) not in sys.path:
                sys.path.insert(0, str(path.parent))
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None:
                raise ValueError(f"cannot load {module_name!r} as a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    except Exception as exc:  # the user's code: any error on import, named
        raise ValueError(f"{text!r} cannot be imported: {type(exc).__name__}: {exc}") from None
    if not hasattr(module, attr):
        raise ValueError(f"{text!r}: module {module_name!r} has no attribute {attr!r}")
    return getattr(module, attr)
