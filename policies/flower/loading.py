"""Resolving the ``flower`` policy's parameters into Flower objects, each problem named by its
parameter (``strategy: 'mymod:nope' does not resolve: module 'mymod' has no attribute 'nope'``).

A parameter is either the object itself (from Python) or a text: a built-in Flower strategy's
name (``FedAvg``, ``FedProx``, ...) or ``module:attr`` of an object, class or factory. Nothing
is evaluated: ``importlib`` imports the module and ``getattr`` walks the dotted attribute.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

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


def import_path(field: str, path: str) -> Any:
    """The object ``module:attr`` (attr may be dotted) names."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise FlowerParamError(field, f"{path!r} is not 'module:attr'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise FlowerParamError(field, f"{path!r} does not resolve: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise FlowerParamError(field, f"{path!r} does not resolve: {obj.__name__ if hasattr(obj, '__name__') else obj!r} has no attribute {part!r}")
        obj = getattr(obj, part)
    return obj


def resolve_strategy(value: Any, args: Mapping[str, Any]) -> Any:
    """A Strategy instance from ``value`` (an instance, a class or factory, a built-in name,
    or ``module:attr`` of one of those) and ``strategy_args`` for a class or factory."""
    _, serverapp, _ = flwr_modules()
    base = serverapp.strategy.Strategy
    obj = value
    if isinstance(value, str):
        if ":" in value:
            obj = import_path("strategy", value)
        elif value in serverapp.strategy.__all__ and isinstance(
                getattr(serverapp.strategy, value), type):
            obj = getattr(serverapp.strategy, value)
        else:
            raise FlowerParamError("strategy", f"{value!r} is no built-in Flower strategy "
                                   f"(one of {', '.join(BUILTIN_STRATEGIES)}, ...) nor "
                                   "'module:attr'")
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


@contextmanager
def quiet_flower() -> Iterator[None]:
    """Flower's INFO and WARNING logging off meanwhile (netsim prints its own summary and
    records what went wrong)."""
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
