"""The ``flower`` policy: a Flower app folder, or a Flower strategy (the Message API) and
optionally the user's own ClientApp, run over a netsim scenario (docs/flower.md).

It is a :class:`netsim.runloop.Driver`: netsim hands it the run and it calls the strategy's
``start`` (or the ServerApp's ``main``: the user's, or the app folder's) with netsim's Grid
(:mod:`.grid`), which turns each Flower round's messages into an epoch of the world. Two
modes:

- real (an app folder or a ``client_app``): the ClientApp's handlers are called in-process
  with the messages netsim built and a per-node Context (its ``state`` persists across
  rounds, ``node_config`` carries ``partition-id``, ``num-partitions`` and ``device-id``,
  ``run_config`` the app's config with its overrides); the run's loss is ``evaluate_fn``'s
  ``loss_metric`` (else the clients' aggregated evaluate metric), recorded in
  ``runs.loss_source``. A call computes its reply's ``num-examples`` x the model's FLOP per
  sample, or with ``client_compute: measured`` its seconds on this host x the host's FLOP/s.
- surrogate (no ClientApp): netsim answers for the clients (replies carry the arrays they
  were sent, the model's size, and their samples as ``num-examples``); the loss is the
  progress model's. A Flower strategy then runs over a fleet of millions at netsim's speed.

The parameters are resolved into Flower objects when the policy is made: a ``module:attr``
is imported where the import gate in force allows it (netsim.scenario.trust: the command
line imports what a file names only with ``--allow-imports`` or from the ``--app`` folder),
an app folder is read with Flower's own reader and put on the Python path.

Determinism: Flower samples nodes with Python's global ``random``, and apps draw from numpy's
global generator; the run seeds both from the policy's generator and puts their states back
afterwards, so the same seed gives the same participants and tables and two runs in one
process do not interact. A Strategy instance given from Python is copied for each run (its
state, FedAdam's moments say, starts afresh).
"""

from __future__ import annotations

import copy
import logging
import random
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from netsim.policy import Decision, Observation, register
from netsim.runloop import Run
from netsim.scenario.errors import Problem, ScenarioError
from netsim.scenario.schema import Scenario
from netsim.scenario.trust import ImportRefused
from netsim.training.progress import EpochProgress
from policies.flower.loading import (
    NOT_A_STRATEGY,
    FlowerApp,
    FlowerParamError,
    RunConfig,
    fresh_app,
    fused_run_config,
    is_builtin_strategy,
    is_import_name,
    parse_run_config,
    put_on_path,
    read_app,
    resolve_arrays,
    resolve_callable,
    resolve_client_app,
    resolve_server_app,
    resolve_strategy,
)

#: Fields that may hold Python objects (recorded in the run's parameters by a description).
OBJECT_FIELDS = ("strategy", "client_app", "initial_arrays", "evaluate_fn", "server_app")


class FlowerParams(BaseModel):
    """Parameters of the ``flower`` policy.

    strategy: a Strategy instance (Python), a built-in Flower strategy's name (``FedAvg``,
        ``FedProx``, ...) or ``module:attr`` of an instance, class or factory.
    strategy_args: keyword arguments for a strategy class or factory.
    client_app: the ClientApp (instance or ``module:attr``); given: real mode.
    initial_arrays: the model's initial arrays (an ArrayRecord, a list of numpy arrays, or a
        callable / ``module:attr`` returning one); needed in real mode; in surrogate mode
        netsim makes arrays of the scenario model's size when left out.
    evaluate_fn: Flower's ``(server_round, ArrayRecord) -> MetricRecord | None`` (or
        ``module:attr``), called before the first round and after each, as ``start`` does.
    server_app: a ServerApp with an ``@app.main()`` function (or ``module:attr``): run with
        netsim's Grid in place of ``strategy.start``.
    app: a Flower app folder (its pyproject.toml's ``[tool.flwr.app.components]`` and
        ``[tool.flwr.app.config]``), run as ``flwr run`` runs it: its ServerApp and ClientApp
        in real mode, the folder on the Python path, ``run_config`` fused over its config.
        With ``initial_arrays``: its ClientApp only, under the strategy parameters (what
        ``netsim calibrate --app`` runs).
    train_config: the training ConfigRecord's contents sent each round.
    evaluate_config: the evaluate ConfigRecord's contents sent each round.
    run_config: each node's and the ServerApp's Context ``run_config`` (real mode): a
        mapping, or texts as ``flwr run --run-config`` takes them (``'key=value k2="s"'``,
        or a .toml file); with ``app``, overrides of the app's config.
    loss_metric: the metric that is the run's loss (real mode).
    loss_source: where that metric is read (real mode): "auto", the ServerApp's (or the
        policy's) evaluate_fn, Flower's centralized evaluation, where it returns the loss
        metric, else the clients' evaluate replies aggregated (weighted by their
        num-examples); "server", the evaluate_fn's only; "clients", the clients' only;
        "train", the clients' training replies aggregated the same way (Flower's aggregated
        fit metrics: an app that evaluates nothing, as fl-dp-sa, whose clients report their
        ``val_loss`` after training).
    client_compute: what a ClientApp call computes on its device (real mode): "examples",
        its reply's num-examples x the scenario model's FLOP per sample (deterministic), or
        "measured", its wall seconds on this host x this host's FLOP/s (measured once per
        run: tables then vary with the host).
    num_rounds: rounds of ``start`` (default: the scenario's ``training.max_epochs``).
    timeout_s: the ``timeout`` given to ``start`` (s), read as each round's simulated
        deadline (replies later than that are lost); None: Flower's default, 3,600 s.
    evaluate_flop_fraction: an evaluation's FLOP per sample as a share of training's
        (forward pass only: 1/3, netsim's formalization).
    quiet: hide Flower's and the app's log lines below warnings during the run (a sweep's
        workers, say); not part of the run's identity (its run id and recorded parameters).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    strategy_args: dict[str, Any] = Field(default_factory=dict)
    strategy: Any = "FedAvg"
    client_app: Any = None
    initial_arrays: Any = None
    evaluate_fn: Any = None
    server_app: Any = None
    app: str | None = None
    train_config: dict[str, Any] = Field(default_factory=dict)
    evaluate_config: dict[str, Any] = Field(default_factory=dict)
    run_config: dict[str, Any] = Field(default_factory=dict)
    loss_metric: str = "loss"
    loss_source: Literal["auto", "server", "clients", "train"] = "auto"
    client_compute: Literal["examples", "measured"] = "examples"
    num_rounds: Annotated[int | None, Field(ge=1)] = None
    timeout_s: Annotated[float | None, Field(gt=0.0, allow_inf_nan=False)] = None
    evaluate_flop_fraction: Annotated[float, Field(ge=0.0, le=10.0)] = 1.0 / 3.0
    quiet: bool = Field(default=False, exclude=True)

    @field_validator("strategy")
    @classmethod
    def _strategy_is_named(cls, value: Any) -> Any:
        if isinstance(value, str) and ":" not in value:
            _resolve(lambda: None if is_builtin_strategy(value) else _raise(
                FlowerParamError("strategy", NOT_A_STRATEGY.format(value))))
        elif isinstance(value, str) and not is_import_name(value):
            raise ValueError(f"{value!r} is not 'module:attr'")
        return value

    @field_validator("client_app", "initial_arrays", "evaluate_fn", "server_app")
    @classmethod
    def _object_is_named(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and not is_import_name(value):
            raise ValueError(f"{value!r} is not 'module:attr' (a text names an object to "
                             "import; from Python, pass the object itself)")
        return value

    @field_validator("run_config", mode="before")
    @classmethod
    def _run_config_read(cls, value: Any) -> Any:
        return _resolve(lambda: parse_run_config(value))

    @field_validator("app")
    @classmethod
    def _app_read(cls, value: str | None) -> str | None:
        if value is not None:
            _resolve(lambda: read_app(value))
        return value

    @model_validator(mode="after")
    def _real_mode_has_arrays(self) -> FlowerParams:
        if self.app is not None:
            given = [f for f in ("server_app", "client_app") if getattr(self, f) is not None]
            if self.initial_arrays is None:
                given += [f for f in SERVER_APP_OWNS
                          if getattr(self, f) not in (None, {}, "FedAvg")]
            if given:
                raise ValueError(f"{given[0]}: given with app (the app folder's pyproject.toml "
                                 "names its ServerApp and ClientApp, and its ServerApp's main() "
                                 "chooses the strategy and rounds; leave it out, or give "
                                 "initial_arrays to run the app's ClientApp under the "
                                 "strategy parameters instead)")
            _resolve(lambda: fused_run_config(read_app(self.app or ""), self.run_config),
                     named=True)
        elif self.server_app is not None:
            given = [f for f in SERVER_APP_OWNS if getattr(self, f) not in (None, {}, "FedAvg")]
            if given:
                raise ValueError(f"{given[0]}: given with server_app (its main() chooses the "
                                 "strategy and passes its own initial arrays, evaluate_fn and "
                                 "configs to start(); leave them out)")
        elif self.client_app is not None and self.initial_arrays is None:
            raise ValueError(REAL_NEEDS_ARRAYS)
        return self

    @field_serializer(*OBJECT_FIELDS)
    def _describe(self, value: Any) -> Any:
        return describe(value)

    @classmethod
    def import_names(cls, params: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(field, ``module:attr``) of each name these raw parameters would import: the texts
        of the object fields (a built-in strategy name imports nothing of the user's) and an
        app folder's components (read, not imported; netsim.scenario.trust)."""
        out = [(f, str(params[f])) for f in OBJECT_FIELDS if is_import_name(params.get(f))]
        folder = params.get("app")
        if isinstance(folder, str):
            try:
                app = read_app(folder)
            except (FlowerParamError, ImportError):
                return out
            out += [("app", name) for name in _app_components(
                app, params.get("initial_arrays") is not None)]
        return out


def _app_components(app: FlowerApp, strategy_loop: bool) -> list[str]:
    """The components of ``app`` a run imports: its ServerApp and ClientApp, or with
    ``strategy_loop`` (initial arrays given: netsim's strategy loop) its ClientApp only."""
    return [app.client_app] if strategy_loop else [app.server_app, app.client_app]


def _raise(exc: Exception) -> None:
    raise exc


def describe(value: Any) -> Any:
    """A parameter as plain data for run ids and records: texts as they are, an object as
    its class and its plain public attributes (``FedAvg{'fraction_train': 0.1, ...}``)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}:{value.__qualname__}"
    plain = {k: v for k, v in sorted(vars(value).items()) if not k.startswith("_")
             and isinstance(v, str | int | float | bool | type(None))} \
        if hasattr(value, "__dict__") else {}
    return f"{type(value).__module__}.{type(value).__qualname__}{plain}"


#: What a ServerApp's main() decides itself (the flower policy refuses them beside it).
SERVER_APP_OWNS = ("strategy", "strategy_args", "initial_arrays", "evaluate_fn",
                   "train_config", "evaluate_config", "num_rounds", "timeout_s")
REAL_NEEDS_ARRAYS = ("initial_arrays: needed in real mode (a client_app is given): the "
                     "model's initial arrays, as Flower's start() takes them")
RESOLVERS: dict[str, Callable[[Any], Any]] = {
    "client_app": resolve_client_app, "initial_arrays": resolve_arrays,
    "evaluate_fn": lambda v: resolve_callable("evaluate_fn", v),
    "server_app": resolve_server_app}


def _resolve(make: Callable[[], Any], named: bool = False) -> Any:
    """``make()``; a parameter that does not resolve, or flwr missing, as a ValueError (its
    message prefixed by the parameter's name when ``named``: a check of the whole model)."""
    try:
        return make()
    except FlowerParamError as exc:
        raise ValueError(str(exc) if named else exc.message) from None
    except ImportError as exc:
        raise ValueError(str(exc)) from None


def resolved(params: FlowerParams) -> dict[str, Any]:
    """The parameters as Flower objects, the names imported where the import gate in force
    allows them (netsim.scenario.trust). With an app folder: its ServerApp and ClientApp,
    the folder put on the Python path, and the fused run config.

    Raises
    ------
    ScenarioError
        Naming every parameter that does not resolve (``policies.flower.FIELD``) and, for
        a name the gate refuses, the flag that allows it.
    """
    problems: list[Problem] = []
    from_app: dict[str, tuple[str, str]] = {}  # (field: its pyproject.toml key and entry)
    out: dict[str, Any] = {"run_config": RunConfig(params.run_config), "app": None}
    values = {name: getattr(params, name) for name in RESOLVERS}

    def attempt(field: str, make: Callable[[], Any]) -> Any:
        try:
            return make()
        except ImportRefused as exc:
            problems.append(Problem(f"policies.flower.{exc.field}", str(exc).split(": ", 1)[1]))
        except FlowerParamError as exc:
            problems.append(Problem(f"policies.flower.{exc.field}", exc.message))
        except ImportError as exc:
            problems.append(Problem(f"policies.flower.{field}", str(exc)))
        return None

    if params.app is not None:
        app: FlowerApp | None = attempt("app", lambda: read_app(params.app or ""))
        if app is not None:
            loop = params.initial_arrays is not None  # (the app's ClientApp, netsim's loop)
            attempt("app", lambda: put_on_path(app, _app_components(app, loop)))
            values.update(server_app=None if loop else app.server_app,
                          client_app=app.client_app)
            from_app = {"server_app": ("serverapp", app.server_app),
                        "client_app": ("clientapp", app.client_app)}
            fused = attempt("run_config", lambda: fused_run_config(app, params.run_config))
            out["run_config"] = RunConfig(fused or {})
            out["app"] = app
    if not problems:
        out["strategy"] = attempt("strategy", lambda: resolve_strategy(
            params.strategy, params.strategy_args))
        for name, make in RESOLVERS.items():
            value = values[name]
            before = len(problems)
            out[name] = attempt(name, partial(make, value))
            if len(problems) > before and name in from_app and value is not None:
                key, entry = from_app[name]  # (a component the app's pyproject.toml names)
                problems[-1] = Problem("policies.flower.app", (
                    f"{params.app and Path(params.app) / 'pyproject.toml'}'s "
                    f"[tool.flwr.app.components] {key} = {entry!r}: "
                    f"{problems[-1].message.removeprefix(f'{entry!r} does not resolve: ')}"))
    if problems:
        raise ScenarioError(problems, "policy")
    return out


def _resolved_once(params: FlowerParams) -> dict[str, Any]:
    """:func:`resolved`, with an app folder's modules forgotten afterwards and the Python
    path put back (each run imports them anew: :meth:`FlowerPolicy._fresh`)."""
    if params.app is None:
        return resolved(params)
    try:
        app = read_app(params.app)
    except (FlowerParamError, ImportError):
        return resolved(params)  # (which names the problem)
    with fresh_app(app):
        return resolved(params)


@register("flower", "a Flower strategy (Message API) and optionally your ClientApp, or a "
          "Flower app folder, each round one epoch on netsim's network, time and energy "
          "(needs netsim[flower])", FlowerParams)
class FlowerPolicy:
    """The ``flower`` policy (module docstring); it drives its own loop (``drive``). Its
    parameters are resolved into Flower objects when it is made (names imported where the
    import gate in force allows them: netsim.scenario.trust), so a name that does not
    resolve is an error before anything runs."""

    def __init__(self, params: FlowerParams | None = None, **kwargs: Any) -> None:
        self.name = "flower"
        self.params = params if params is not None else FlowerParams(**kwargs)
        self._objects = _resolved_once(self.params)
        self.grid: Any = None
        """netsim's Grid of the last run (its ``calls`` and ``failed_calls``)."""
        self.seed = 0
        """The seed of Python's ``random`` and numpy's global generator in the last run."""
        self._scenario: Scenario | None = None
        self.result: Any = None
        """What the strategy's ``start`` returned in the last run (Flower's Result)."""

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        self._scenario = scenario
        self.seed = int(rng.integers(2**63 - 1))

    def decide(self, obs: Observation) -> Decision:
        raise RuntimeError("flower drives its own loop: netsim calls drive(run), not decide")

    def drive(self, run: Run) -> None:
        """Run the strategy (or the ServerApp) on netsim's Grid over ``run``."""
        with _seeded_random(self.seed), self._fresh() as objs:
            self._drive(run, objs)

    @contextmanager
    def _fresh(self) -> Iterator[dict[str, Any]]:
        """The parameters' Flower objects for one run: with an app folder, its modules
        imported anew for the run and forgotten afterwards (:func:`.loading.fresh_app`: the
        same run gives the same result however many ran before it in the process); else the
        objects resolved when the policy was made."""
        app = self._objects.get("app")
        if app is None:
            yield self._objects
            return
        with fresh_app(app):
            yield resolved(self.params)

    def _drive(self, run: Run, objs: dict[str, Any]) -> None:
        from policies.flower.grid import NetsimGrid

        p = self.params
        strategy = copy.deepcopy(objs["strategy"])
        real = objs["client_app"] is not None
        grid = NetsimGrid(run, self.name, objs["client_app"], p.loss_metric,
                          p.evaluate_flop_fraction,
                          str(getattr(strategy, "weighted_by_key", "num-examples")), strategy,
                          objs["run_config"],
                          host_flop_per_s=host_flop_per_s() if real and
                          p.client_compute == "measured" else None,
                          loss_source=p.loss_source)
        self.grid = grid
        try:
            self._run_on(grid, run, objs, strategy, real)
        finally:
            grid.report_failures()
        grid.close_epoch()

    def _run_on(self, grid: Any, run: Run, objs: dict[str, Any], strategy: Any,
                real: bool) -> None:
        p = self.params
        with _task_identity(grid.flower_run_id), _flower_logging(quiet=p.quiet):
            if objs["server_app"] is not None:
                import flwr.app as app

                if real:
                    source = _SERVER_LOSS if p.loss_source == "server" else \
                        _TRAIN_LOSS if p.loss_source == "train" else _CLIENTS_LOSS
                    run.set_initial_loss(float("nan"), source.format(p.loss_metric))
                context = app.Context(run_id=grid.flower_run_id, node_id=0, node_config={},
                                      state=app.RecordDict(),
                                      run_config=RunConfig(objs["run_config"]))
                with _centralized_evaluation(grid, run, p.loss_metric, real), \
                        _legacy_centralized_evaluation(grid, run, real), \
                        _legacy_never_waits(grid):
                    objs["server_app"](grid, context)
            else:
                arrays = objs["initial_arrays"] or _model_arrays(run)
                evaluate = _EvaluateHook(grid, run, objs["evaluate_fn"], p.loss_metric, real)
                self.result = strategy.start(
                    grid=grid, initial_arrays=arrays,
                    num_rounds=p.num_rounds or run.training.max_epochs,
                    timeout=3600.0 if p.timeout_s is None else p.timeout_s,
                    train_config=_config(p.train_config), evaluate_config=_config(
                        p.evaluate_config), evaluate_fn=evaluate)


_CLIENTS_LOSS = "Flower clients' aggregated evaluate metric {!r}"
_SERVER_LOSS = "Flower evaluate_fn metric {!r}"
_TRAIN_LOSS = "Flower clients' aggregated training metric {!r}"


class _EvaluateHook:
    """The evaluate_fn netsim gives ``start``: it calls the user's (if any: the policy's
    evaluate_fn, or the one a ServerApp gives its strategy's start), and closes the round's
    epoch with its loss (real mode, where the grid's ``loss_source`` takes the evaluate_fn's:
    ``auto`` or ``server``) or the progress model's (surrogate). ``runs.loss_source`` says
    which: the evaluate_fn's where it carries the loss metric before the first round (or
    ``loss_source`` is ``server``), else the clients' (their training replies' with
    ``loss_source`` ``train``)."""

    def __init__(self, grid: Any, run: Run, user_fn: Any, loss_metric: str, real: bool) -> None:
        self.grid, self.run, self.user_fn = grid, run, user_fn
        self.loss_metric, self.real = loss_metric, real
        if user_fn is not None:
            grid.evaluate_fns += 1
        if real:
            self._source(float("nan"), server=grid.loss_source == "server" or (
                user_fn is not None and grid.loss_source == "auto"))

    def _source(self, loss: float, server: bool) -> None:
        """The initial loss and ``runs.loss_source`` (left as they are once the run has
        started: a ServerApp that calls start() a second time)."""
        text = (_TRAIN_LOSS if self.grid.loss_source == "train" else _SERVER_LOSS if server
                else _CLIENTS_LOSS).format(self.loss_metric)
        try:
            self.run.set_initial_loss(loss, text)
        except RuntimeError:
            pass

    def __call__(self, server_round: int, arrays: Any) -> Any:
        result = self.user_fn(server_round, arrays) if self.user_fn is not None else None
        measured = None
        source = self.grid.loss_source
        if self.real and result is not None:
            self.grid.saw_metrics(result)
            if self.loss_metric in result and source != "clients":
                accuracy = result.get("accuracy")
                measured = EpochProgress(loss=float(result[self.loss_metric]),
                                         accuracy=None if accuracy is None else float(accuracy))
        if self.real and server_round == 0:
            if measured is not None:
                self._source(measured.loss, server=True)
            elif source == "auto":
                self._source(float("nan"), server=False)
            return result
        if server_round > 0:
            self.grid.close_epoch(measured)
        return result


@contextmanager
def _centralized_evaluation(grid: Any, run: Run, loss_metric: str, real: bool
                            ) -> Iterator[None]:
    """Meanwhile, Flower's ``Strategy.start`` called with ``grid`` and an ``evaluate_fn``
    (a ServerApp's centralized evaluation: what Flower logs as "ServerApp-side Evaluate
    Metrics") gets it wrapped in :class:`_EvaluateHook`, so that its loss is the run's
    (by the grid's ``loss_source``) and each round's epoch closes when it is evaluated.
    A strategy that overrides ``start`` itself is run as it is."""
    import inspect

    from flwr.serverapp.strategy import Strategy

    original = Strategy.__dict__["start"]
    signature = inspect.signature(original)

    def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        user_fn = bound.arguments.get("evaluate_fn")
        if bound.arguments.get("grid") is grid and user_fn is not None \
                and not isinstance(user_fn, _EvaluateHook):
            bound.arguments["evaluate_fn"] = _EvaluateHook(grid, run, user_fn, loss_metric,
                                                           real)
        return original(*bound.args, **bound.kwargs)

    start.__doc__, start.__wrapped__ = original.__doc__, original  # type: ignore[attr-defined]
    Strategy.start = start  # type: ignore[method-assign]
    try:
        yield
    finally:
        Strategy.start = original  # type: ignore[method-assign]


@contextmanager
def _legacy_centralized_evaluation(grid: Any, run: Run, real: bool) -> Iterator[None]:
    """Meanwhile, Flower's legacy ``DefaultWorkflow`` (a ``LegacyContext`` strategy's
    centralized ``evaluate``, what it adds to ``history.losses_centralized``) gives the round
    its loss, as a new strategy's evaluate_fn does (:class:`_EvaluateHook`): the initial loss
    from its round-0 evaluation, each round's from its own, where the grid's ``loss_source``
    takes the server's (``auto``, ``server``). Real mode only; the surrogate keeps its own."""
    try:
        from flwr.server.workflow import default_workflows as workflows
    except ImportError:  # (a Flower without the legacy API)
        yield
        return
    init, central = (workflows.default_init_params_workflow,
                     workflows.default_centralized_evaluation_workflow)

    def latest(context: Any, server_round: int) -> float | None:
        losses = getattr(getattr(context, "history", None), "losses_centralized", [])
        found = [loss for r, loss in losses if r == server_round]
        return float(found[-1]) if found else None

    def init_hook(g: Any, context: Any) -> None:
        init(g, context)
        loss = latest(context, 0) if g is grid and real else None
        if loss is not None and grid.loss_source in ("auto", "server"):
            grid.evaluate_fns += 1
            try:
                run.set_initial_loss(loss, _SERVER_LOSS.format("loss"))
            except RuntimeError:
                pass

    def central_hook(g: Any, context: Any) -> None:
        central(g, context)
        if g is not grid or not real:
            return
        cfg = context.state.config_records[workflows.MAIN_CONFIGS_RECORD]
        loss = latest(context, int(cfg[workflows.Key.CURRENT_ROUND]))
        if loss is not None:
            grid.epoch.centralized = EpochProgress(loss=loss)

    workflows.default_init_params_workflow = init_hook  # type: ignore[assignment]
    workflows.default_centralized_evaluation_workflow = central_hook  # type: ignore[assignment]
    try:
        yield
    finally:
        workflows.default_init_params_workflow = init
        workflows.default_centralized_evaluation_workflow = central


@contextmanager
def _legacy_never_waits(grid: Any) -> Iterator[None]:
    """Meanwhile, Flower's legacy ``SimpleClientManager.wait_for`` (LegacyContext's client
    manager: it blocks up to a day of wall time for nodes to connect) returns at once where
    enough nodes are registered and raises, saying so, where they are not: nothing waits in
    real time in netsim (its ClientManager is refreshed from the grid before each read)."""
    try:
        from flwr.server.client_manager import SimpleClientManager
    except ImportError:  # (a Flower without the legacy API)
        yield
        return
    original = SimpleClientManager.__dict__["wait_for"]

    def wait_for(self: Any, num_clients: int, timeout: int = 86400) -> bool:
        if len(self) >= num_clients:
            return True
        raise RuntimeError(
            f"{grid._name}: the strategy's round needs {num_clients} nodes but {len(self)} "
            f"are available at {grid._run.world.now_s:.6g} s (epoch {grid._run.epoch}); "
            "Flower would wait for them in real time, netsim stops (lower the strategy's "
            "min_fit_clients, min_evaluate_clients or min_available_clients)")

    SimpleClientManager.wait_for = wait_for  # type: ignore[method-assign]
    try:
        yield
    finally:
        SimpleClientManager.wait_for = original  # type: ignore[method-assign]


def _model_arrays(run: Run) -> Any:
    """Surrogate mode without initial arrays: one array of the scenario model's parameters,
    of its bytes per parameter (float16/32/64; else bytes)."""
    import flwr.app as app

    model = run.world.model
    dtype = {2: np.float16, 4: np.float32, 8: np.float64}.get(int(model.bytes_per_param))
    n = int(round(model.params))
    if dtype is None or model.bytes_per_param != int(model.bytes_per_param):
        return app.ArrayRecord([np.zeros(int(round(model.model_bytes(0))), dtype=np.uint8)])
    return app.ArrayRecord([np.zeros(n, dtype=dtype)])


def _config(values: dict[str, Any]) -> Any:
    import flwr.app as app

    return app.ConfigRecord(dict(values))


#: The host benchmark of ``client_compute: measured``: products of SIZE x SIZE float64
#: matrices (2 SIZE^3 FLOP each), the best of REPEATS.
BENCHMARK_SIZE, BENCHMARK_REPEATS = 384, 5


def host_flop_per_s() -> float:
    """This host's FLOP/s as numpy multiplies float64 matrices (the best of
    :data:`BENCHMARK_REPEATS` products of :data:`BENCHMARK_SIZE` square matrices, about
    0.1 s): what ``client_compute: measured`` scales a ClientApp call's seconds by."""
    rng = np.random.default_rng(0)
    a, b = rng.random((BENCHMARK_SIZE, BENCHMARK_SIZE)), rng.random((BENCHMARK_SIZE,
                                                                      BENCHMARK_SIZE))
    best = float("inf")
    for _ in range(BENCHMARK_REPEATS):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * BENCHMARK_SIZE ** 3 / max(best, 1e-9)


@contextmanager
def _seeded_random(seed: int) -> Iterator[None]:
    """Python's global ``random``, numpy's global generator (``np.random.*``, which
    scikit-learn and many apps draw from) and, where it is imported, PyTorch's CPU generator
    (``torch.manual_seed``: a PyTorch app's initial weights and shuffles) seeded for the run,
    their states put back afterwards."""
    state, np_state = random.getstate(), np.random.get_state()  # noqa: NPY002
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 (the global one the apps draw from)
    torch = sys.modules.get("torch")  # (an app's import made it: its weights, its shuffles)
    torch_state = torch.random.get_rng_state() if torch is not None else None
    if torch is not None:
        torch.manual_seed(seed)
    try:
        yield
    finally:
        random.setstate(state)
        np.random.set_state(np_state)  # noqa: NPY002
        if torch is not None and torch_state is not None:
            torch.random.set_rng_state(torch_state)


class _BelowWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


@contextmanager
def _flower_logging(quiet: bool) -> Iterator[None]:
    """Flower's log records below warnings dropped meanwhile when ``quiet`` (a filter:
    Flower sets its logger's level itself)."""
    logger, drop = logging.getLogger("flwr"), _BelowWarning()
    if quiet:
        logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


@contextmanager
def _task_identity(run_id: int) -> Iterator[None]:
    """Flower's process-wide task identity (run id, the server's node id) set for the run
    (its messages are stamped with it), put back afterwards."""
    try:
        from flwr.supercore.task_identity import TaskIdentity
    except ImportError:  # (flwr releases before the task identity)
        yield
        return
    old = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = run_id, 1, 0
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = old
