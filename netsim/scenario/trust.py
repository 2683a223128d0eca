"""Which ``module:attr`` names netsim imports: a scenario, sweep or calibration file is data.

Some policy parameters name Python code: the ``flower`` policy's ``strategy``, ``client_app``,
``initial_arrays``, ``evaluate_fn`` and ``server_app`` take ``module:attr`` texts, and its
``app`` a Flower app folder whose components it imports. Importing a module runs its code, so
a file that names ``subprocess:run`` could run anything. netsim's rule (docs/cli.md,
"Imports"; as Hydra warns of ``_target_``, a name in a file is code):

- ``netsim validate`` never imports: it lists what a run would import (:func:`imports_in`).
- ``netsim run``, ``sweep`` and ``calibrate`` import a name only where the user said so: it
  was typed on the command line (``--param``, ``--client-app``, ...), or its module is in the
  ``--app`` folder the user pointed at, or the command was given ``--allow-imports``. Every
  other name is refused before anything runs, each with its path and the flag
  (:func:`refusals`).
- From Python you are the caller: the objects and names you pass, and the names in a file you
  load, are imported as given, as your own import statements would be. :func:`import_gate`
  applies the command line's rule to a block of code.

Mechanism: the commands run under :func:`import_gate`; a policy imports a named object only
after :func:`check_import` (policies.flower.loading does). A policy declares the names its
parameters hold with a classmethod ``import_names(params) -> [(field, name), ...]`` on its
parameter model, read from the raw mapping without importing anything.
"""

from __future__ import annotations

import importlib.machinery
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netsim.scenario.errors import Problem

#: The command-line flag that allows every name a file gives.
ALLOW_FLAG = "--allow-imports"
WHY = ("a scenario, sweep or calibration file is data, and netsim imports the code it names "
       f"only with {ALLOW_FLAG} (or --app FOLDER, for modules in FOLDER)")


@dataclass(frozen=True)
class ImportGate:
    """What may be imported: everything (``allow_all``), the names the user typed
    (``names``), and modules found in the app folders the user pointed at (``roots``)."""

    allow_all: bool = False
    names: frozenset[str] = frozenset()
    roots: tuple[Path, ...] = ()

    def allows(self, name: str) -> bool:
        """Whether ``name`` (``module:attr``) may be imported."""
        if self.allow_all or name in self.names:
            return True
        module = name.partition(":")[0]
        return bool(module) and any(module_in(module, root) for root in self.roots)


_GATE: ContextVar[ImportGate | None] = ContextVar("netsim_import_gate", default=None)


class ImportRefused(ValueError):
    """A name the gate in force does not allow: ``field`` and ``name`` say which."""

    def __init__(self, field: str, name: str) -> None:
        super().__init__(f"{field}: {name!r} is not imported: {WHY}")
        self.field, self.name = field, name


def module_in(module: str, root: Path) -> bool:
    """Whether ``module``'s top-level package (or module) is a file or folder of ``root``,
    found without importing anything."""
    top = module.split(".")[0]
    try:
        return importlib.machinery.PathFinder.find_spec(top, [str(root)]) is not None
    except (ImportError, ValueError):
        return False


@contextmanager
def import_gate(allow_all: bool = False, names: Sequence[str] = (),
                roots: Sequence[str | Path] = ()) -> Iterator[ImportGate]:
    """Within the block, a named object is imported only if the gate allows it (module
    docstring); the previous gate (none: everything) is back afterwards."""
    gate = ImportGate(allow_all, frozenset(names), tuple(Path(r).resolve() for r in roots))
    token = _GATE.set(gate)
    try:
        yield gate
    finally:
        _GATE.reset(token)


def check_import(field: str, name: str) -> None:
    """Raise :class:`ImportRefused` when a gate is in force and does not allow ``name``."""
    gate = _GATE.get()
    if gate is not None and not gate.allows(name):
        raise ImportRefused(field, name)


def gate_roots() -> tuple[Path, ...]:
    """The app folders of the gate in force (none without a gate)."""
    gate = _GATE.get()
    return gate.roots if gate is not None else ()


def policy_imports(policy: str, params: Any) -> list[tuple[str, str]]:
    """(field, name) of each import the ``params`` mapping of registered policy ``policy``
    names, as its parameter model declares them (``import_names``); none for a policy that
    declares none or a mapping that is not one."""
    from netsim.policy import registered

    entry = registered().get(policy)
    hook = getattr(entry.params, "import_names", None) if entry is not None else None
    if hook is None or not isinstance(params, Mapping):
        return []
    return [(str(f), str(n)) for f, n in hook(params)]


def imports_in(policies: Any, prefix: str = "policies") -> list[tuple[str, str]]:
    """(path, name) of each import a ``policies:`` block (policy name -> parameters) names,
    paths as ``policies.flower.client_app``."""
    if not isinstance(policies, Mapping):
        return []
    return [(f"{prefix}.{name}.{field}", value) for name, params in policies.items()
            for field, value in policy_imports(str(name), params)]


def refusals(imports: Sequence[tuple[str, str]], gate: ImportGate) -> list[Problem]:
    """A problem for each (path, name) that ``gate`` does not allow."""
    return [Problem(path, f"{name!r} is not imported: {WHY}") for path, name in imports
            if not gate.allows(name)]
