"""Resolving the ``flower`` policy's parameters into Flower objects, each problem named by its
parameter (``client_app: 'myapp.client_app:app' does not resolve: No module named 'myapp'
...``), and reading a Flower app folder as ``flwr run`` reads it.

A parameter is either the object itself (from Python) or a text: a built-in Flower strategy's
name (``FedAvg``, ``FedProx``, ...) or ``module:attr`` of an object, class or factory. Nothing
is evaluated: ``importlib`` imports the module and ``getattr`` walks the dotted attribute,
and only where the import gate in force allows the name (netsim.scenario.trust: a name from
a scenario, sweep or calibration file is imported by the command line only with
``--allow-imports`` or from the ``--app`` folder the user pointed at).

An app folder (:func:`read_app`) is read with Flower's own reader: its ``pyproject.toml``'s
``[tool.flwr.app.components]`` (``serverapp``, ``clientapp``) and ``[tool.flwr.app.config]``
(the run config, flattened as Flower flattens it; overrides fused as ``flwr run
--run-config`` fuses them: a key the app does not declare is an error).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from netsim.scenario.trust import check_import, gate_roots, module_in

INSTALL_HINT = "the flower policy needs the optional extra: pip install 'netsim[flower]'"

#: The built-in Message-API strategies of flwr that netsim's tests run (docs/flower.md).
BUILTIN_STRATEGIES = ("FedAvg", "FedAvgM", "FedProx", "FedAdagrad", "FedAdam", "FedYogi",
                      "FedMedian", "FedTrimmedAvg", "Krum", "MultiKrum", "Bulyan", "QFedAvg")


class FlowerParamError(ValueError):
    """A ``flower`` parameter that does not resolve: ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def flwr_modules() -> tuple[Any, Any, Any]:
    """(flwr.app, flwr.serverapp, flwr.clientapp), or ImportError with how to install."""
    try:
        import flwr.app as app
        import flwr.clientapp as clientapp
        import flwr.serverapp as serverapp
    except ImportError as exc:  # (the optional extra is missing)
        raise ImportError(INSTALL_HINT) from exc
    return app, serverapp, clientapp


def is_import_name(value: Any) -> bool:
    """Whether ``value`` is a ``module:attr`` text (both parts given)."""
    if not isinstance(value, str):
        return False
    module, sep, attr = value.partition(":")
    return bool(sep and module and attr)


def import_path(field: str, path: str) -> Any:
    """The object ``module:attr`` (attr may be dotted) names, once the import gate allows it
    (netsim.scenario.trust); a name that does not resolve says where netsim looked and how
    to make it resolve."""
    if not is_import_name(path):
        raise FlowerParamError(field, f"{path!r} is not 'module:attr'")
    check_import(field, path)
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise FlowerParamError(field, _not_found(path, module_name, exc)) from None
    except Exception as exc:  # the module's own code failed (a SyntaxError, its imports)
        raise FlowerParamError(field, f"{path!r}: importing {module_name!r} raised "
                               f"{type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            owner = getattr(obj, "__name__", None) or type(obj).__name__
            public = sorted(n for n in dir(obj) if not n.startswith("_"))
            listed = ", ".join(public[:12]) + (", ..." if len(public) > 12 else "")
            raise FlowerParamError(field, f"{path!r} does not resolve: {owner} has no "
                                   f"attribute {part!r} (its names: {listed or 'none'})")
        obj = getattr(obj, part)
    return obj


def _not_found(path: str, module_name: str, exc: ModuleNotFoundError) -> str:
    """Why ``module_name`` was not found: where netsim looked, and how to make it resolve.
    Three cases: a module the user's code imports is missing (from an installed package:
    that package's version is named, the module being gone from it; else it is not
    installed); a module of a package that is found is missing (its modules are listed: a
    misspelt name); the top-level package itself is not on the Python path."""
    top = module_name.split(".")[0]
    missing = exc.name or module_name
    if missing.split(".")[0] != top:  # (the user's module imports something not installed)
        return f"{path!r} does not resolve: importing {module_name!r} needs " \
            f"{_missing_dependency(missing)}"
    if missing != top and (package := _found_package(missing)) is not None:
        where, modules = package
        return (f"{path!r} does not resolve: there is no module {missing!r} (package "
                f"{missing.rpartition('.')[0]!r}, {where}, holds "
                f"{', '.join(modules) or 'no modules'}): is the name misspelt?")
    roots = gate_roots()
    looked = "the Python path (sys.path: the installed packages and PYTHONPATH"
    looked += f", and the app folder{'s' if len(roots) > 1 else ''} " \
        f"{', '.join(map(str, roots))})" if roots else ")"
    if Path.cwd() not in roots and module_in(top, Path.cwd()):
        app = "give --app . (this Flower app folder) or " \
            if (Path.cwd() / "pyproject.toml").is_file() else ""
        how = (f"{top!r} is in the current folder, which is not on the Python path: {app}set "
               "PYTHONPATH=.")
    else:
        how = (f"put the folder that holds {top!r} on the Python path: --app FOLDER for a "
               "Flower app folder (Python: params={'app': FOLDER}), or PYTHONPATH=FOLDER")
    return f"{path!r} does not resolve: {exc}; netsim looked on {looked}; {how}"


def _missing_dependency(missing: str) -> str:
    """What to say of a module the user's code imports that is missing: its top-level
    package installed (a module gone from the installed version: flwr.client.typing from
    flwr 1.42, say) or not installed at all."""
    import importlib.metadata
    import importlib.util

    top = missing.split(".")[0]
    try:
        installed = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        installed = False
    if not installed:
        return f"{missing!r}, which is not installed (install the app's dependencies)"
    dists = importlib.metadata.packages_distributions().get(top, [])
    versions = []
    for dist in dists:
        try:
            versions.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    which = ", ".join(versions) or f"package {top!r}"
    return (f"{missing!r}, which the installed {which} does not have (the app was written "
            f"for another version of it: install the version the app's pyproject.toml "
            f"names, or import what this version provides)")


def _found_package(module: str) -> tuple[str, list[str]] | None:
    """Where the package above ``module`` is (a folder) and the modules it holds, where that
    package imports (None: it does not, or is no package)."""
    import pkgutil

    parent = module.rpartition(".")[0]
    try:
        package = importlib.import_module(parent)
    except Exception:  # noqa: BLE001 (its own failure is reported where it is imported)
        return None
    paths = list(getattr(package, "__path__", None) or [])
    if not paths:
        return None
    names = sorted({info.name for info in pkgutil.iter_modules(paths)})
    return (paths[0], names)


def resolve_strategy(value: Any, args: Mapping[str, Any]) -> Any:
    """A Strategy instance from ``value`` (an instance, a class or factory, a built-in name,
    or ``module:attr`` of one of those) and ``strategy_args`` for a class or factory."""
    _, serverapp, _ = flwr_modules()
    base = serverapp.strategy.Strategy
    obj = value
    if isinstance(value, str):
        if ":" in value:
            obj = import_path("strategy", value)
        elif is_builtin_strategy(value):
            obj = getattr(serverapp.strategy, value)
        else:
            raise FlowerParamError("strategy", NOT_A_STRATEGY.format(value))
    if isinstance(obj, base):
        if args:
            raise FlowerParamError("strategy_args", "given with a Strategy instance (pass "
                                   "a class or factory, or leave strategy_args out)")
        return obj
    if callable(obj):
        try:
            with quiet_flower():  # (FedAvg warns of fraction_evaluate 0 when made)
                made = obj(**dict(args))
        except TypeError as exc:
            raise FlowerParamError("strategy_args", f"{_name(obj)}(**strategy_args) "
                                   f"failed: {exc}") from None
        if isinstance(made, base):
            return made
        obj = made
    raise FlowerParamError("strategy", f"{_name(obj)} is not a flwr.serverapp.strategy."
                           "Strategy (the Message API; legacy flwr.server.strategy classes "
                           "are not supported)")


NOT_A_STRATEGY = ("{!r} is no built-in Flower strategy (one of "
                  f"{', '.join(BUILTIN_STRATEGIES)}, ...) nor 'module:attr'")


def is_builtin_strategy(name: str) -> bool:
    """Whether ``name`` is a strategy class of ``flwr.serverapp.strategy``."""
    _, serverapp, _ = flwr_modules()
    return name in serverapp.strategy.__all__ and isinstance(
        getattr(serverapp.strategy, name), type)


def resolve_client_app(value: Any) -> Any:
    """A ClientApp from ``value`` (an instance, or ``module:attr`` of one or of a factory
    returning one); None stays None (surrogate mode)."""
    if value is None:
        return None
    _, _, clientapp = flwr_modules()
    obj = import_path("client_app", value) if isinstance(value, str) else value
    if not isinstance(obj, clientapp.ClientApp) and callable(obj) and not isinstance(obj, type):
        try:
            obj = obj()
        except TypeError as exc:
            raise FlowerParamError("client_app", f"{_name(obj)}() failed: {exc}") from None
    if not isinstance(obj, clientapp.ClientApp):
        raise FlowerParamError("client_app", f"{_name(obj)} is not a flwr.clientapp.ClientApp")
    return obj


def resolve_server_app(value: Any) -> Any:
    """A ServerApp (with an ``@app.main()`` function) from ``value``; None stays None."""
    if value is None:
        return None
    _, serverapp, _ = flwr_modules()
    obj = import_path("server_app", value) if isinstance(value, str) else value
    if not isinstance(obj, serverapp.ServerApp):
        raise FlowerParamError("server_app", f"{_name(obj)} is not a flwr.serverapp.ServerApp")
    if getattr(obj, "_main", None) is None:
        raise FlowerParamError("server_app", "the ServerApp has no @app.main() function")
    return obj


def resolve_callable(field: str, value: Any) -> Callable[..., Any] | None:
    """A function from ``value`` (itself or ``module:attr``); None stays None."""
    if value is None:
        return None
    obj = import_path(field, value) if isinstance(value, str) else value
    if not callable(obj):
        raise FlowerParamError(field, f"{_name(obj)} is not callable")
    return obj


def resolve_arrays(value: Any) -> Any:
    """An ArrayRecord from ``value``: an ArrayRecord, a list of numpy arrays, or a callable
    (or ``module:attr``) returning one of those; None stays None."""
    if value is None:
        return None
    app, _, _ = flwr_modules()
    obj = import_path("initial_arrays", value) if isinstance(value, str) else value
    if callable(obj) and not isinstance(obj, app.ArrayRecord):
        try:
            obj = obj()
        except TypeError as exc:
            raise FlowerParamError("initial_arrays", f"{_name(obj)}() failed: {exc}") from None
    if isinstance(obj, app.ArrayRecord):
        return obj
    if isinstance(obj, list | tuple) and all(isinstance(a, np.ndarray) for a in obj):
        return app.ArrayRecord([np.asarray(a) for a in obj])
    raise FlowerParamError("initial_arrays", f"{_name(obj)} is not an ArrayRecord, a list of "
                           "numpy arrays, or a callable returning one")


def _name(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or type(obj).__name__


# -- a Flower app folder ---------------------------------------------------------------------
@dataclass(frozen=True)
class FlowerApp:
    """A Flower app folder as ``flwr run`` reads it: its components (``module:attr``) and its
    run config (``[tool.flwr.app.config]``, flattened)."""

    folder: Path
    server_app: str
    client_app: str
    config: dict[str, Any] = field(default_factory=dict)


def read_app(folder: str | Path) -> FlowerApp:
    """The app in ``folder`` (its pyproject.toml read with Flower's own reader, which checks
    the fields ``flwr run`` needs); nothing is imported."""
    from flwr.common.config import flatten_dict, get_project_config

    path = Path(folder)
    if not path.is_dir():
        raise FlowerParamError("app", f"{str(folder)!r} is no folder (a Flower app folder "
                               "holds a pyproject.toml, as `flwr new` makes one)")
    try:
        config = get_project_config(path)
    except FileNotFoundError:
        raise FlowerParamError("app", f"{str(folder)!r} holds no pyproject.toml (a Flower app "
                               "folder, as `flwr new` makes one)") from None
    except Exception as exc:  # (Flower's checks: a ValueError listing them; TOML errors)
        text = " ".join(str(exc).split())
        raise FlowerParamError("app", f"{path / 'pyproject.toml'}: {text}") from None
    app = config["tool"]["flwr"]["app"]
    components = app["components"]
    for key in ("serverapp", "clientapp"):
        if not is_import_name(components.get(key)):
            raise FlowerParamError("app", f"{path / 'pyproject.toml'}: [tool.flwr.app."
                                   f"components] {key} = {components.get(key)!r} is not "
                                   "'module:attr'")
    try:
        run_config = flatten_dict(app.get("config", {}))
    except ValueError as exc:
        raise FlowerParamError("app", f"{path / 'pyproject.toml'}: [tool.flwr.app.config]: "
                               f"{exc}") from None
    return FlowerApp(path, components["serverapp"], components["clientapp"], run_config)


def parse_run_config(value: Any) -> dict[str, Any]:
    """A run config from a mapping (as it is), or from ``flwr run --run-config`` texts: one
    text or a list of them, each ``'key=value key2="text"'`` (values in TOML), or one path of
    a ``.toml`` file (Flower's own parser)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list | tuple) or not all(isinstance(t, str) for t in texts):
        raise FlowerParamError("run_config", f"{value!r}: a mapping, or texts as flwr run's "
                               "--run-config takes them ('key=value key2=\"text\"')")
    from flwr.common.config import parse_config_args

    try:
        return dict(parse_config_args(list(texts)))
    except Exception as exc:  # (click's exception for bad TOML; a missing .toml file)
        message = getattr(exc, "message", None) or str(exc)
        raise FlowerParamError("run_config", f"{value!r}: {message}") from None


def fused_run_config(app: FlowerApp, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The app's run config with ``overrides`` (as ``flwr run --run-config`` fuses them: a
    key the app's ``[tool.flwr.app.config]`` does not declare is an error)."""
    unknown = sorted(set(overrides) - set(app.config))
    if unknown:
        raise FlowerParamError("run_config", f"{', '.join(map(repr, unknown))}: not in "
                               f"{app.folder / 'pyproject.toml'}'s [tool.flwr.app.config] "
                               f"(its keys: {', '.join(sorted(app.config)) or 'none'})")
    return {**app.config, **dict(overrides)}


def put_on_path(app: FlowerApp, names: list[str]) -> None:
    """The app's folder on the Python path (first, as ``flwr run`` puts it), once the gate
    allows ``names``; a package of the app already imported from elsewhere is an error (two
    apps with one package name in one process)."""
    for name in names:
        check_import("app", name)
    folder = str(app.folder.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    for name in names:
        top = name.partition(":")[0].split(".")[0]
        loaded = sys.modules.get(top)
        if loaded is None or not module_in(top, app.folder):
            continue
        where = getattr(loaded, "__file__", None) or next(iter(getattr(loaded, "__path__", [])),
                                                          "")
        if where and not os.path.abspath(where).startswith(folder + os.sep):
            raise FlowerParamError("app", f"module {top!r} is already imported from {where}, "
                                   f"not from {folder}: two apps with one package name in one "
                                   "process (run them in separate processes)")


def _inside(path: str | None, folder: str) -> bool:
    return bool(path) and os.path.abspath(str(path)).startswith(folder + os.sep)


def app_modules(folder: Path) -> list[str]:
    """The names of the imported modules (``sys.modules``) whose file, or a folder of whose
    package path, lies in ``folder``: an app folder's modules."""
    root = str(folder.resolve())
    out = []
    for name, module in list(sys.modules.items()):
        paths = [getattr(module, "__file__", None)]
        try:  # (a package's folders; some modules' __path__ is no list: torch._classes')
            paths += [p for p in getattr(module, "__path__", None) or [] if isinstance(p, str)]
        except Exception:  # noqa: BLE001, S112
            pass
        if any(isinstance(p, str) and _inside(p, root) for p in paths):
            out.append(name)
    return out


def purge_app_modules(folder: Path) -> list[str]:
    """Forget the modules imported from ``folder`` (:func:`app_modules`), so that the next
    import of one runs its code anew; returns their names."""
    names = app_modules(folder)
    for name in names:
        sys.modules.pop(name, None)
    if names:
        importlib.invalidate_caches()
    return names


@contextmanager
def fresh_app(app: FlowerApp) -> Iterator[None]:
    """Within the block, the app's modules are imported anew (those imported from its folder
    before are forgotten first) and its folder is on the Python path; afterwards its modules
    are forgotten again and ``sys.path`` is what it was. So every run of an app starts from
    the app as ``flwr run`` starts it: module-level state (a data cache, a model made at
    import) does not carry over from one run to the next in one process."""
    saved = list(sys.path)
    purge_app_modules(app.folder)
    try:
        yield
    finally:
        purge_app_modules(app.folder)
        sys.path[:] = saved


class RunConfigKeyError(KeyError):
    """A run-config key the app reads but nobody set (its message says where to set it)."""

    def __str__(self) -> str:
        return str(self.args[0])


class RunConfig(dict):
    """A node's or the server's ``Context.run_config``: a dict whose missing key says which
    keys there are and where to set one."""

    def __missing__(self, key: Any) -> Any:
        raise RunConfigKeyError(
            f"the run config has no {key!r} (its keys: {', '.join(sorted(self)) or 'none'}); "
            f"set it in the app's [tool.flwr.app.config], with --run-config '{key}=...' or "
            "the flower policy's run_config")


@contextmanager
def quiet_flower() -> Iterator[None]:
    """Flower's INFO and WARNING logging off meanwhile (a strategy's construction warns of
    settings netsim chose, fraction_evaluate 0 say)."""
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
