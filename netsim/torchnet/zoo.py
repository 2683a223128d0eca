"""The torch backend's built-in networks, in plain torch (no torchvision).

Each is the network netsim/data/models.yaml describes under the same name, with exactly its
``params`` (tests/test_torch_backend.py checks the counts):

* ``small-cnn``: LeNet-5 on 1x28x28: conv 6@5x5 pad 2, max pool 2, conv 16@5x5, max pool 2,
  FC 400-120-84-10, ReLU between layers; 61,706 parameters.
* ``cnn-mnist``: McMahan et al.'s MNIST CNN (AISTATS 2017) as Flower's FedAvg MNIST baseline
  builds it: conv 32@5x5 pad 1, max pool 2 pad 1, conv 64@5x5 pad 1, max pool 2 pad 1,
  FC 3136-512, FC 512-10, ReLU; 1,663,370 parameters.
* ``mlp-digits``: dense 64-64-10 with ReLU on the flattened 8x8 digits (the real backend's
  network at its default width); 4,810 parameters.

Every layer with weights has a bias, so a model's parameters come as weight, bias, weight,
bias, ... (the layout :func:`netsim.training.mlp.prune_masks` prunes: the even positions).
Weights and biases are drawn by :func:`build` from PyTorch's default initialisation,
U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in the inputs of one output unit, from a
``torch.Generator`` (never torch's global generator).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from netsim.torchnet import TORCH_INPUT_SHAPES, TORCH_MODEL_DATA


def small_cnn() -> nn.Module:
    """LeNet-5 on 1x28x28 inputs, 10 classes (61,706 parameters)."""
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),    # 6 x 14 x 14
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),              # 16 x 5 x 5
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
    )


def cnn_mnist() -> nn.Module:
    """McMahan et al.'s MNIST CNN on 1x28x28 inputs, 10 classes (1,663,370 parameters)."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=1), nn.ReLU(), nn.MaxPool2d(2, padding=1),   # 32x14x14
        nn.Conv2d(32, 64, 5, padding=1), nn.ReLU(), nn.MaxPool2d(2, padding=1),  # 64x7x7
        nn.Flatten(),
        nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, 10),
    )


def mlp_digits() -> nn.Module:
    """Dense 64-64-10 with ReLU on 64 inputs (4,810 parameters)."""
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


#: The built-in torch networks: name -> a function that builds one (torch's default device).
TORCH_MODELS: dict[str, Callable[[], nn.Module]] = {
    "small-cnn": small_cnn,
    "cnn-mnist": cnn_mnist,
    "mlp-digits": mlp_digits,
}
#: Each network's input shape (one sample, without the batch dimension).
INPUT_SHAPES: dict[str, tuple[int, ...]] = TORCH_INPUT_SHAPES
#: Each network's data set (:mod:`netsim.torchnet.data`).
DATASETS: dict[str, str] = TORCH_MODEL_DATA


def param_count(module: nn.Module) -> int:
    """Number of parameters (weights and biases) of ``module``."""
    return sum(p.numel() for p in module.parameters())


def init_parameters(module: nn.Module, generator: torch.Generator) -> None:
    """Draw every weight and bias of ``module`` from U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    (PyTorch's default for Linear and Conv2d), in parameter order, from ``generator``."""
    params = list(module.parameters())
    with torch.no_grad():
        for k in range(0, len(params), 2):
            weight, bias = params[k], params[k + 1]
            bound = weight[0].numel() ** -0.5
            weight.uniform_(-bound, bound, generator=generator)
            bias.uniform_(-bound, bound, generator=generator)


def build(name: str, generator: torch.Generator) -> nn.Module:
    """Network ``name`` on the CPU in float32, its parameters drawn from ``generator``
    (built on the meta device first: torch's global generator is not drawn from).

    Raises
    ------
    ValueError
        ``name`` is not a built-in torch network, or its parameters are not laid out as
        weight, bias, weight, bias, ...
    """
    if name not in TORCH_MODELS:
        raise ValueError(f"model.name: the torch backend trains {sorted(TORCH_MODELS)}, "
                         f"got {name!r}")
    with torch.device("meta"):
        module = TORCH_MODELS[name]()
    module = module.to_empty(device="cpu").float()
    params = list(module.parameters())
    if len(params) % 2 or any(p.dim() < 2 for p in params[0::2]) \
            or any(p.dim() != 1 for p in params[1::2]):
        raise ValueError(f"torch network {name!r}: parameters not laid out as weight, bias, ...")
    init_parameters(module, generator)
    return module
