"""Build an operator graph from a model's layer list (FLOP, parameters, activation sizes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx


@dataclass(frozen=True)
class LayerSpec:
    """One layer of a sequential model.

    Attributes
    ----------
    name
        Unique layer name (becomes the node id).
    flop
        Forward FLOP per step (FLOP).
    params
        Number of parameters.
    activation_bytes
        Bytes of the layer's output activations per step.
    bytes_per_param
        Bytes per parameter (4 for float32).
    temporary_bytes
        Scratch memory while the layer runs (bytes).
    """

    name: str
    flop: float
    params: float
    activation_bytes: float
    bytes_per_param: float = 4.0
    temporary_bytes: float = 0.0


def graph_from_layers(layers: Sequence[LayerSpec], name: str = "model") -> nx.DiGraph:
    """The forward operator chain of a sequential model.

    Each layer becomes an operator with ``flop``, ``memory_bytes = params * bytes_per_param``
    (weights; :func:`netsim.opgraph.add_backward` adds gradients and optimizer state),
    ``temporary_bytes`` and ``output_bytes = activation_bytes``; consecutive layers are joined
    by an edge of the producer's activation bytes.

    Raises
    ------
    ValueError
        On duplicate names or negative sizes.
    """
    g = nx.DiGraph(name=name)
    prev = None
    for i, layer in enumerate(layers):
        if layer.name in g:
            raise ValueError(f"layers[{i}].name: duplicate {layer.name!r}")
        for field in ("flop", "params", "activation_bytes", "bytes_per_param", "temporary_bytes"):
            if getattr(layer, field) < 0:
                raise ValueError(f"layers[{i}].{field}: must be >= 0")
        g.add_node(
            layer.name,
            name=layer.name,
            op="layer",
            flop=float(layer.flop),
            memory_bytes=float(layer.params * layer.bytes_per_param),
            temporary_bytes=float(layer.temporary_bytes),
            output_bytes=float(layer.activation_bytes),
        )
        if prev is not None:
            g.add_edge(prev, layer.name, bytes=float(layers[i - 1].activation_bytes))
        prev = layer.name
    return g


def transformer_layers(
    n_layers: int, d_model: int = 512, seq_len: int = 128, batch: int = 16, vocab: int = 32000
) -> list[LayerSpec]:
    """Layer list of a decoder-only transformer (embedding, ``n_layers`` blocks, head).

    FLOP per block ~ 2 * tokens * 12 * d_model^2 (attention + MLP matmuls, forward);
    parameters 12 * d_model^2 per block; activations tokens * d_model * 4 bytes.
    """
    tokens = seq_len * batch
    act = tokens * d_model * 4.0
    out = [LayerSpec("embed", 2.0 * tokens * d_model, vocab * d_model, act)]
    for i in range(n_layers):
        p = 12.0 * d_model**2
        out.append(LayerSpec(f"block{i}", 2.0 * tokens * p, p, act, temporary_bytes=2 * act))
    out.append(LayerSpec("head", 2.0 * tokens * d_model * vocab, d_model * vocab, tokens * vocab * 4.0))
    return out
