"""Built-in models (netsim/data/models.yaml) and their surrogate loss parameters.

``resolve_model`` turns a scenario's ``model`` field (a built-in name or an explicit spec) into a
:class:`~netsim.scenario.schema.ModelSpec` whose ``loss`` block is filled in: the model's own
block if it gives one, else the built-in's entry of netsim/data/loss_params.yaml, else 'generic'.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

from netsim.scenario.schema import LossParams, ModelSpec, TorchModelSpec
from netsim.yamlio import safe_load


def _data_yaml(name: str) -> dict[str, Any]:
    text = resources.files("netsim").joinpath("data").joinpath(name).read_text(encoding="utf-8")
    return safe_load(text) or {}


@lru_cache(maxsize=1)
def loss_param_table() -> dict[str, LossParams]:
    """Surrogate parameters per model name (read once per process)."""
    return {name: LossParams.model_validate(v) for name, v in _data_yaml("loss_params.yaml").items()}


@lru_cache(maxsize=1)
def builtin_models() -> dict[str, ModelSpec]:
    """The built-in models by name, loss parameters attached."""
    table = loss_param_table()
    out = {}
    for name, spec in _data_yaml("models.yaml").items():
        model = ModelSpec.model_validate({"name": name, **spec})
        out[name] = model.model_copy(update={"loss": table.get(name, table["generic"])})
    return out


def resolve_model(ref: str | ModelSpec) -> ModelSpec:
    """The model a scenario names, with its loss parameters (a PyTorch model, ``model:
    {torch: ...}``, is measured a layer above: :func:`netsim.measuring.resolved_model`).

    Raises
    ------
    KeyError
        If ``ref`` names no built-in model.
    TypeError
        For a PyTorch model (measure it with :func:`netsim.measuring.resolved_model`).
    """
    if isinstance(ref, TorchModelSpec):
        raise TypeError("resolve_model: a PyTorch model (model: {torch: ...}) is measured by "
                        "netsim.measuring.resolved_model")
    if isinstance(ref, str):
        models = builtin_models()
        if ref not in models:
            raise KeyError(f"unknown model {ref!r}; built-in: {', '.join(sorted(models))}")
        return models[ref]
    if ref.loss is not None:
        return ref
    table = loss_param_table()
    return ref.model_copy(update={"loss": table.get(ref.name, table["generic"])})
