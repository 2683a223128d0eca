"""Measuring, tracing and building the PyTorch model a scenario names (``model: {torch:
...}``, docs/byo-model.md; what needs no torch: :mod:`netsim.scenario.torch_model`).

:func:`measure_model` fills a :class:`~netsim.scenario.schema.ModelSpec` from
:func:`netsim.torchnet.inspect.inspect_model`; :func:`training_graph_of` builds the model's
training graph (:func:`netsim.torchnet.graph.training_graph`) for the ``baechi`` policy and
``netsim place``; :func:`load_source` imports the factory under the import gate in force
(netsim.scenario.trust; a built-in network needs none). Every failure is a
:class:`~netsim.scenario.errors.ScenarioError` with one line at ``model.torch`` (or
``model.torch.factory`` for a refused import, ``model.torch.variants[i]``,
``model.torch.data``): the CLI exits 2.

Caching: a built-in network's measurement is cached per (name, input shape) in the process (it
depends on nothing else); a user's factory is measured each time it is resolved (its module
may read anything), once per ``netsim run``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from netsim.scenario.errors import Problem, ScenarioError
from netsim.scenario.schema import ModelSpec, TorchModelSpec, TorchSource, VariantSpec
from netsim.scenario.torch_model import (
    DATA_FIELD,
    FACTORY_FIELD,
    MODEL_FIELD,
    default_name,
    input_shape_of,
)
from netsim.torchnet import MISSING_TORCH, TORCH_MODEL_DATA

if TYPE_CHECKING:
    import networkx as nx


def _words(message: str, shape: tuple[int, ...]) -> str:
    """A ModelError's command-line wording in the scenario's terms."""
    text = message.removeprefix("MODEL: ")
    return text.replace(f"--input-shape {','.join(str(d) for d in shape)}",
                        f"input_shape {list(shape)}")


def load_source(source: TorchSource) -> Any:
    """The factory ``source`` names, imported under the import gate in force.

    Raises
    ------
    ScenarioError
        ``model.torch.factory: ... is not imported`` (the gate refused it), torch missing,
        or the module did not import (``model.torch``).
    """
    from netsim.scenario.trust import ImportRefused, check_import

    try:
        if source.factory not in TORCH_MODEL_DATA:
            check_import(FACTORY_FIELD, source.factory)
    except ImportRefused as exc:
        raise ScenarioError([Problem(FACTORY_FIELD, str(exc).split(": ", 1)[1])]) from None
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ScenarioError([Problem(MODEL_FIELD, MISSING_TORCH)]) from None
    from netsim.torchnet.graph import ModelError
    from netsim.torchnet.inspect import load_factory

    try:
        return load_factory(source.factory)
    except ModelError as exc:
        raise ScenarioError([Problem(MODEL_FIELD, _words(str(exc), input_shape_of(source)))]) \
            from None


@functools.lru_cache(maxsize=16)
def _builtin_inspection(name: str, shape: tuple[int, ...]) -> Any:
    from netsim.torchnet.inspect import inspect_model
    from netsim.torchnet.zoo import TORCH_MODELS

    return inspect_model(TORCH_MODELS[name], shape, name)


def inspection_of(source: TorchSource) -> Any:
    """:func:`netsim.torchnet.inspect.inspect_model` of the source's model (a built-in
    network's cached per input shape).

    Raises
    ------
    ScenarioError
        As :func:`load_source`; or the factory raised, returned no module, or the input
        shape does not fit (one line at ``model.torch``).
    """
    factory = load_source(source)
    from netsim.torchnet.graph import ModelError
    from netsim.torchnet.inspect import inspect_model

    shape = input_shape_of(source)
    try:
        if source.factory in TORCH_MODEL_DATA:
            return _builtin_inspection(source.factory, shape)
        return inspect_model(factory, shape, source.factory)
    except ModelError as exc:
        raise ScenarioError([Problem(MODEL_FIELD, _words(str(exc), shape))]) from None


#: A measured variant's kind in the scenario's terms (``full`` has none).
_KINDS: dict[str, Literal["unstructured", "structured"]] = {
    "unstructured": "unstructured", "structured": "structured"}


def measure_model(spec: TorchModelSpec) -> ModelSpec:
    """The model ``spec`` names, measured: a :class:`ModelSpec` with the inspection's params,
    prunable parameters, bytes per parameter (measured unless given), training FLOP per
    sample and the variants chosen (``torch.variants``; all by default, full first) with
    their kinds, the scenario's ``sparse_upload`` (so that ``model_bytes`` of each variant is
    the inspection's ``upload_bytes`` in that encoding, at the measured bytes per
    parameter), the scenario's loss block or the generic one, and the source (input shape
    filled in).

    Raises
    ------
    ScenarioError
        As :func:`inspection_of`; a variant the model does not have
        (``model.torch.variants[i]``); a model without parameters or FLOP.
    """
    from netsim.torchnet import torch_version
    from netsim.training.models import loss_param_table

    source = spec.torch
    report = inspection_of(source)
    shape = input_shape_of(source)
    if report.params < 1 or not report.train_flop_per_sample > 0:
        raise ScenarioError([Problem(MODEL_FIELD, f"the model has {report.params} parameters "
                                                  f"and {report.train_flop_per_sample:g} "
                                                  "training FLOP per sample: nothing to train")])
    measured = {v.name: v for v in report.variants}
    names = ["full"]
    problems = []
    for i, name in enumerate(source.variants or list(measured)):
        if name not in measured:
            why = "".join(f"; {n}" for n in report.notes if n.startswith(f"{name}:"))
            problems.append(Problem(f"{MODEL_FIELD}.variants[{i}]",
                                    f"{name!r} is not a variant of this model (measured: "
                                    f"{', '.join(measured)}){why}"))
        elif name not in names:
            names.append(name)
    if problems:
        raise ScenarioError(problems)
    variants = tuple(VariantSpec(name=n, params_fraction=min(1.0, measured[n].params_fraction),
                                 flop_fraction=min(1.0, measured[n].flop_fraction),
                                 kind=_KINDS.get(measured[n].kind))
                     for n in names)
    per_param = spec.bytes_per_param or report.param_memory_bytes / report.params
    table = loss_param_table()
    return ModelSpec(
        name=spec.name or default_name(source.factory), params=float(report.params),
        bytes_per_param=per_param, train_flop_per_sample=report.train_flop_per_sample,
        variants=variants, sparse_upload=spec.sparse_upload,
        prunable_params=float(report.prunable_params) if report.prunable_params else None,
        loss=spec.loss or table["generic"],
        source=(f"measured from the PyTorch model {source.factory} on inputs of "
                f"{list(shape)} (netsim.torchnet.inspect, torch {torch_version()})"),
        torch=source.model_copy(update={"input_shape": shape}))


def check_labels(source: TorchSource) -> None:
    """Refuse a data set with labels the model's outputs cannot score (its largest label at
    or above the model's outputs per sample, when it returns (batch, C) logits)."""
    data = source.data if source.data is not None else TORCH_MODEL_DATA.get(source.factory)
    if data is None:
        return
    if isinstance(data, str):
        top = 9  # (mnist and digits: 10 classes)
    else:
        with np.load(data.npz, allow_pickle=False) as f:
            top = int(np.max(f["y"]))
    classes = output_classes(load_source(source), input_shape_of(source))
    if classes is not None and top >= classes:
        raise ScenarioError([Problem(DATA_FIELD, f"labels go up to {top}, but the model "
                                                 f"scores {classes} classes (0..{classes - 1})")])


def training_graph_of(source: TorchSource, batch: int, name: str) -> nx.DiGraph:
    """The training-step operator graph (forward, backward, update) of the source's model for
    a batch of ``batch`` samples (:func:`netsim.torchnet.graph.training_graph`; named
    ``NAME-train``).

    Raises
    ------
    ScenarioError
        As :func:`inspection_of`.
    """
    factory = load_source(source)
    from netsim.torchnet.graph import ModelError, training_graph
    from netsim.torchnet.inspect import make_model

    shape = input_shape_of(source)
    try:
        return training_graph(make_model(factory, source.factory, meta=True), shape, batch,
                              name)
    except ModelError as exc:
        raise ScenarioError([Problem(MODEL_FIELD, _words(str(exc), shape))]) from None


def output_classes(factory: Any, shape: tuple[int, ...]) -> int | None:
    """The model's outputs per sample when it returns (batch, C) logits (on the meta device),
    else None."""
    from netsim.torchnet.graph import build_on_meta

    torch = __import__("torch")
    try:
        model = build_on_meta(factory)
        model.eval()
        with torch.no_grad():
            out = model(torch.empty((1, *shape), device="meta"))
    except Exception:  # (a model that does not run on the meta device: not checked here)
        return None
    if isinstance(out, torch.Tensor) and out.dim() == 2:
        return int(out.shape[1])
    return None
