"""A scenario's model given as the PyTorch model itself (``model: {torch: ...}``,
docs/byo-model.md): what netsim reads of it without importing torch or the model's code.

``model: {torch: {factory: "pkg.mod:factory", input_shape: [1, 28, 28]}}`` names a model. When
the scenario is resolved (:func:`netsim.measuring.measured_scenario`, ``netsim run`` once before it runs,
:func:`netsim.simulate`, :func:`netsim.training.models.resolve_model`), it is measured into a
:class:`~netsim.scenario.schema.ModelSpec` by :func:`netsim.torchnet.scenario.measure_model`
(parameters, bytes per parameter, training FLOP per sample, variants; the generic loss curve
unless the scenario gives ``loss:``). The resolved spec keeps the source (``ModelSpec.torch``):
the torch backend trains that model on ``torch.data``, and the ``baechi`` policy and
``netsim place SCENARIO.yaml`` place its operator graph.

Here, with neither torch nor the factory imported (a scenario that does not name a PyTorch
model never imports :mod:`netsim.torchnet` either):

- the factory is code: a scenario file's factory is imported only on the user's word
  (``--allow-imports``; netsim.scenario.trust's gate, field ``model.torch.factory``), and
  ``netsim validate`` lists it among the imports (:func:`model_imports`); the built-in
  networks (``small-cnn``, ``cnn-mnist``, ``mlp-digits``) are netsim's own code;
- paths in the ``torch`` block (a ``file.py:factory``, ``data: {npz: ...}``) and
  ``policies.baechi.graph`` are relative to the scenario file (:func:`resolve_model_paths`,
  as trace paths are);
- the checks (:func:`torch_model_problems`): torch installed, the real backend refused, and
  with the torch backend a data set that fits the input shape and holds integer labels (an
  ``.npz``'s checks cached per file state);
- run ids name the factory file and the data file by their content (:func:`hashed_source`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from netsim.filedigest import trace_digest
from netsim.scenario.errors import Problem
from netsim.scenario.schema import ModelSpec, TorchModelSpec, TorchSource

#: The field that names the factory (its path in problems and in ``netsim validate``).
FACTORY_FIELD = "model.torch.factory"
#: The field problems about the model itself are reported at.
MODEL_FIELD = "model.torch"
#: The field of the data set.
DATA_FIELD = "model.torch.data"


def is_file_factory(factory: str) -> bool:
    """Whether ``factory`` names a file (``path/file.py:attr``) rather than a module."""
    module = factory.rpartition(":")[0]
    return module.endswith(".py") or "/" in module or "\\" in module


def source_of(model: Any) -> TorchSource | None:
    """The torch source of a scenario's ``model`` (a TorchModelSpec, a measured ModelSpec, or
    their raw mappings), or None when it is none or not valid on its own (the schema reports
    that)."""
    if isinstance(model, TorchModelSpec | ModelSpec):
        return model.torch
    raw = model.get("torch") if isinstance(model, Mapping) else None
    if isinstance(raw, TorchSource):
        return raw
    if not isinstance(raw, Mapping):
        return None
    try:
        return TorchSource.model_validate(raw)
    except ValidationError:
        return None


def is_torch_form(model: Any) -> bool:
    """Whether a scenario's ``model`` (object or raw mapping) names a PyTorch model."""
    if isinstance(model, TorchModelSpec | ModelSpec):
        return model.torch is not None
    return isinstance(model, Mapping) and model.get("torch") is not None


def input_shape_of(source: TorchSource) -> tuple[int, ...]:
    """The source's input shape (a built-in network's own when not given)."""
    from netsim.torchnet import TORCH_INPUT_SHAPES

    if source.input_shape is not None:
        return tuple(source.input_shape)
    return TORCH_INPUT_SHAPES[source.factory]


def default_name(factory: str) -> str:
    """A model's name when the scenario gives none: a built-in network's name, else the
    factory's (``pkg.mod:make_cnn`` -> ``make_cnn``)."""
    from netsim.torchnet import TORCH_MODEL_DATA

    if factory in TORCH_MODEL_DATA:
        return factory
    return factory.rpartition(":")[2].split(".")[-1] or "torch-model"


def model_imports(model: Any) -> list[tuple[str, str]]:
    """(field, name) of the code a scenario's ``model`` names: its factory, unless it is a
    built-in network (netsim's own code). Read, never imported."""
    source = source_of(model)
    if source is None:
        return []
    from netsim.torchnet import TORCH_MODEL_DATA

    if source.factory in TORCH_MODEL_DATA:
        return []
    return [(FACTORY_FIELD, source.factory)]


def _absolute(value: str, folder: str | Path) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else Path(folder).absolute() / path)


def resolve_model_paths(data: dict[str, Any], folder: str | Path) -> dict[str, Any]:
    """``data`` with the paths of its ``model.torch`` block (a ``file.py:factory``'s file, the
    ``data.npz``) and of ``policies.baechi.graph`` (a file) made absolute against ``folder``
    (the scenario file's); a copy where anything changed, values that are not strings left
    for the schema."""
    out = data
    model = data.get("model")
    torch = model.get("torch") if isinstance(model, dict) else None
    if isinstance(torch, dict):
        new = dict(torch)
        factory = torch.get("factory")
        if isinstance(factory, str) and is_file_factory(factory):
            module, _, attr = factory.rpartition(":")
            new["factory"] = f"{_absolute(module, folder)}:{attr}"
        npz = torch.get("data")
        if isinstance(npz, dict) and isinstance(npz.get("npz"), str) and npz["npz"]:
            new["data"] = {**npz, "npz": _absolute(npz["npz"], folder)}
        if new != torch:
            out = {**out, "model": {**model, "torch": new}}  # type: ignore[dict-item]
    policies = data.get("policies")
    baechi = policies.get("baechi") if isinstance(policies, dict) else None
    graph = baechi.get("graph") if isinstance(baechi, dict) else None
    if isinstance(graph, str) and graph.endswith(".json"):
        path = _absolute(graph, folder)
        if path != graph:
            out = {**out, "policies": {**policies, "baechi": {**baechi, "graph": path}}}  # type: ignore[dict-item]
    return out


# -- the checks that need no torch -----------------------------------------------------------

def torch_model_problems(data: Mapping[str, Any]) -> list[Problem]:
    """The problems of a scenario's torch model found without importing torch or the
    factory: torch not installed; the real backend on it; with the torch backend, no data
    set, a shipped set's package missing, or a data set whose samples do not fit the input
    shape or whose labels are not integers."""
    raw = data.get("model")
    if not is_torch_form(raw):
        return []
    from importlib.util import find_spec

    from netsim.torchnet import DATA_SHAPES, MISSING_TORCH, TORCH_MODEL_DATA, missing_packages

    training = data.get("training")
    backend = training.get("backend") if isinstance(training, Mapping) \
        else getattr(training, "backend", None)
    out = []
    if find_spec("torch") is None:
        out.append(Problem(MODEL_FIELD, MISSING_TORCH))
    if backend == "real" and not isinstance(raw, ModelSpec):  # (a ModelSpec's name is checked)
        out.append(Problem("training.backend", "the real backend trains only mlp-digits; a "
                                               "PyTorch model (model.torch) trains with "
                                               "backend: torch"))
    source = source_of(raw)
    if backend != "torch" or source is None:
        return out
    shape = input_shape_of(source)
    dataset = source.data if source.data is not None else TORCH_MODEL_DATA.get(source.factory)
    if dataset is None:
        return out + [Problem(DATA_FIELD, "the torch backend trains your model on data you "
                                          "give: data: {npz: PATH} (arrays x and y) or a "
                                          "shipped set (mnist, digits)")]
    if isinstance(dataset, str):
        if DATA_SHAPES[dataset] != shape:
            out.append(Problem(DATA_FIELD, f"the {dataset} data set's samples are "
                                           f"{list(DATA_SHAPES[dataset])}, but input_shape is "
                                           f"{list(shape)}"))
        out += [Problem(DATA_FIELD, f"the {dataset} data set needs {name}: "
                                    'pip install -e ".[torch]"')
                for name in missing_packages("", dataset) if name != "torch"]
        return out
    message = npz_problem(dataset.npz, shape)
    return out + ([Problem(f"{DATA_FIELD}.npz", message)] if message else [])


def npz_problem(path: str, shape: tuple[int, ...]) -> str:
    """What is wrong with the ``.npz`` at ``path`` as data for a model of input ``shape``
    ('' when nothing is); cached per file state."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        return f"cannot read {path!r}: {exc.strerror or exc}"
    return _npz_problem(path, stat.st_mtime_ns, stat.st_size, tuple(shape))


@functools.lru_cache(maxsize=32)
def _npz_problem(path: str, mtime_ns: int, size: int, shape: tuple[int, ...]) -> str:
    try:
        load_npz(path, shape)
    except ValueError as exc:
        return str(exc)
    return ""


def load_npz(path: str, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The samples (float32, N x ``shape``) and labels (int64, N) of an ``.npz`` with arrays
    ``x`` and ``y``.

    Raises
    ------
    ValueError
        Naming what is wrong: unreadable, no ``x`` or ``y``, samples that do not fit
        ``shape`` or are not real numbers (or not finite), labels that are not integers
        >= 0, fewer than two samples.
    """
    try:
        with np.load(path, allow_pickle=False) as f:
            if not hasattr(f, "files"):
                raise ValueError(f"{path!r} is a single .npy array, not an .npz with arrays "
                                 "x and y")
            names = list(f.files)
            if "x" not in names or "y" not in names:
                raise ValueError(f"{path!r} needs arrays x (samples) and y (labels); it has "
                                 f"{', '.join(names) or 'none'}")
            x, y = f["x"], f["y"]
    except ValueError:
        raise
    except Exception as exc:  # zipfile, pickle refusals, OSError
        raise ValueError(f"cannot read {path!r} as .npz: {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]}") from None
    if x.dtype.kind not in "fiu":
        raise ValueError(f"x must hold real numbers (float), got dtype {x.dtype}")
    if tuple(x.shape[1:]) != tuple(shape):
        raise ValueError(f"x is {' x '.join(str(d) for d in x.shape) or 'a scalar'}: its "
                         f"samples are {list(x.shape[1:])}, but input_shape is {list(shape)}")
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise ValueError(f"y must be integer labels, one per sample (shape N), got "
                         f"{y.dtype} of shape {list(y.shape)}")
    if len(y) != len(x):
        raise ValueError(f"x holds {len(x)} samples but y {len(y)} labels")
    if len(y) < 2:
        raise ValueError(f"needs at least two samples, got {len(y)}")
    if y.min() < 0:
        raise ValueError(f"labels must be 0, 1, ..., got {int(y.min())}")
    xf = np.asarray(x, dtype=np.float32)
    if not np.isfinite(xf).all():
        raise ValueError("x holds values that are not finite (nan or inf as float32)")
    return xf, np.asarray(y, dtype=np.int64)


def hashed_source(model: dict[str, Any]) -> None:
    """In a model's JSON data (run ids, scenario hashes), name a factory file and a data file
    by their content (``sha256:...``) rather than their paths, and leave out ``torch: null``
    (a model given by its figures hashes as before the field existed). In place."""
    if "torch" in model and model["torch"] is None:
        del model["torch"]
    torch = model.get("torch")
    if not isinstance(torch, dict):
        return
    factory = torch.get("factory")
    if isinstance(factory, str) and is_file_factory(factory):
        module, _, attr = factory.rpartition(":")
        torch["factory"] = f"{trace_digest(module)}:{attr}"
    data = torch.get("data")
    if isinstance(data, dict) and isinstance(data.get("npz"), str):
        torch["data"] = {**data, "npz": trace_digest(data["npz"])}


