"""Layer lists of the built-in models (``netsim/data/models.yaml``), for their operator graphs.

Each function returns one sample's forward layers as :class:`netsim.opgraph.layers.LayerSpec`
(FLOP with a multiply-add as 2 FLOP, parameters, output activation bytes in float32, temporary
bytes for a layer's internal tensors); :func:`model_layers` scales them to a batch. Parameters
and forward FLOP add up to the model's entry in ``models.yaml`` (a test checks it); training FLOP
are three times the forward (``add_backward`` doubles each layer for its backward).

Granularity: LeNet-5 and the MLP layer by layer; ResNet-18 by residual block (the stem, eight
basic blocks with their shortcut inside, the pooled classifier), so its graph is a chain of ten
operators whose temporaries hold the block's inner activation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from netsim.opgraph.layers import LayerSpec

FLOAT_BYTES = 4.0


def _conv(k: int, c_in: int, c_out: int, h_out: int, bias: bool = True) -> tuple[float, float]:
    """(multiply-adds, parameters) of a k x k convolution producing h_out x h_out x c_out."""
    return float(h_out * h_out * c_out * c_in * k * k), float(c_out * c_in * k * k + (c_out if bias else 0))


def lenet5() -> list[LayerSpec]:
    """LeNet-5 on 28x28 inputs (models.yaml ``small-cnn``): 61,706 parameters, 416,520 MAC."""
    layers = []
    mac, p = _conv(5, 1, 6, 28)  # padded to 28x28, then 2x2 pooling
    layers.append(LayerSpec("conv1", 2 * mac, p, 14 * 14 * 6 * FLOAT_BYTES, temporary_bytes=28 * 28 * 6 * FLOAT_BYTES))
    mac, p = _conv(5, 6, 16, 10)
    layers.append(LayerSpec("conv2", 2 * mac, p, 5 * 5 * 16 * FLOAT_BYTES, temporary_bytes=10 * 10 * 16 * FLOAT_BYTES))
    for name, n_in, n_out in (("fc1", 400, 120), ("fc2", 120, 84), ("fc3", 84, 10)):
        layers.append(LayerSpec(name, 2.0 * n_in * n_out, n_in * n_out + n_out, n_out * FLOAT_BYTES))
    return layers


def mlp_digits() -> list[LayerSpec]:
    """Dense 64-64-10 on 8x8 digits (models.yaml ``mlp-digits``): 4,810 parameters, 4,736 MAC."""
    return [
        LayerSpec(name, 2.0 * n_in * n_out, n_in * n_out + n_out, n_out * FLOAT_BYTES)
        for name, n_in, n_out in (("dense1", 64, 64), ("dense2", 64, 10))
    ]


def resnet18_cifar() -> list[LayerSpec]:
    """ResNet-18 for CIFAR-10 (models.yaml ``resnet18``): 11,173,962 parameters, 0.556 G MAC.

    Convolutions without bias, each followed by batch norm (2 parameters per channel).
    """
    mac, p = _conv(3, 3, 64, 32, bias=False)
    layers = [LayerSpec("stem", 2 * mac, p + 2 * 64, 32 * 32 * 64 * FLOAT_BYTES)]
    c_in, h = 64, 32
    for stage, c_out in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            h_out = h // stride
            mac1, p1 = _conv(3, c_in, c_out, h_out, bias=False)
            mac2, p2 = _conv(3, c_out, c_out, h_out, bias=False)
            mac, p = mac1 + mac2, p1 + p2 + 4 * c_out
            if stride != 1 or c_in != c_out:  # 1x1 projection shortcut with batch norm
                mac_s, p_s = _conv(1, c_in, c_out, h_out, bias=False)
                mac, p = mac + mac_s, p + p_s + 2 * c_out
            act = h_out * h_out * c_out * FLOAT_BYTES
            layers.append(LayerSpec(f"layer{stage + 1}.{block}", 2 * mac, p, act, temporary_bytes=act))
            c_in, h = c_out, h_out
    layers.append(LayerSpec("fc", 2.0 * 512 * 10, 512 * 10 + 10, 10 * FLOAT_BYTES))
    return layers


#: Built-in model name -> its one-sample forward layer list.
MODEL_LAYERS: dict[str, Callable[[], list[LayerSpec]]] = {
    "small-cnn": lenet5,
    "resnet18": resnet18_cifar,
    "mlp-digits": mlp_digits,
}


def model_layers(name: str, batch_samples: int, bytes_per_param: float = 4.0) -> list[LayerSpec] | None:
    """The forward layers of built-in model ``name`` for a batch of ``batch_samples``.

    FLOP, activation and temporary bytes scale with the batch; parameters do not. Returns None
    for a name that is not built in.
    """
    build = MODEL_LAYERS.get(name)
    if build is None:
        return None
    return [
        replace(
            layer,
            flop=layer.flop * batch_samples,
            activation_bytes=layer.activation_bytes * batch_samples,
            temporary_bytes=layer.temporary_bytes * batch_samples,
            bytes_per_param=bytes_per_param,
        )
        for layer in build()
    ]
