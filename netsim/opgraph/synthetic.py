"""Seeded generators of synthetic training graphs: chains, layered random DAGs, Inception-like
blocks.

All sizes are drawn from the ``numpy.random.Generator`` passed in; the same generator state gives
the same graph. Times are on the reference device (``time_s``, s), sizes in bytes.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

#: Default ranges (low, high) of the drawn attributes.
TIME_S = (1.0e-4, 1.0e-3)
MEMORY_BYTES = (1.0e6, 1.0e7)
TEMPORARY_BYTES = (0.0, 1.0e6)
OUTPUT_BYTES = (1.0e5, 1.0e6)


def _add_op(g: nx.DiGraph, node: object, rng: np.random.Generator, kind: str = "op") -> None:
    g.add_node(
        node,
        name=str(node),
        op=kind,
        time_s=float(rng.uniform(*TIME_S)),
        memory_bytes=float(rng.uniform(*MEMORY_BYTES)),
        temporary_bytes=float(rng.uniform(*TEMPORARY_BYTES)),
        output_bytes=float(rng.uniform(*OUTPUT_BYTES)),
    )


def _link(g: nx.DiGraph, u: object, v: object) -> None:
    g.add_edge(u, v, bytes=g.nodes[u]["output_bytes"])


def chain_graph(n_ops: int, rng: np.random.Generator) -> nx.DiGraph:
    """A chain of ``n_ops`` operators 0 -> 1 -> ... (edge bytes = producer's output_bytes).

    Examples
    --------
    >>> g = chain_graph(3, np.random.default_rng(0))
    >>> list(g.edges)
    [(0, 1), (1, 2)]
    """
    g = nx.DiGraph(name=f"chain-{n_ops}")
    for i in range(n_ops):
        _add_op(g, i, rng)
        if i:
            _link(g, i - 1, i)
    return g


def layered_dag(
    n_ops: int,
    rng: np.random.Generator,
    width: int | None = None,
    max_parents: int = 3,
) -> nx.DiGraph:
    """A layered random DAG: ``n_ops`` operators in layers of about ``width`` (default
    ``max(2, round(sqrt(n_ops) / 2))``); each operator past the first layer gets 1 to
    ``max_parents`` parents drawn from the previous two layers.
    """
    width = width or max(2, round(np.sqrt(n_ops) / 2))
    g = nx.DiGraph(name=f"layered-{n_ops}")
    layers: list[list[int]] = []
    node = 0
    while node < n_ops:
        size = min(n_ops - node, max(1, int(rng.integers(width // 2 + 1, width + width // 2 + 1))))
        layer = list(range(node, node + size))
        node += size
        pool = [p for prev in layers[-2:] for p in prev]
        for v in layer:
            _add_op(g, v, rng)
            if pool:
                k = int(rng.integers(1, min(max_parents, len(pool)) + 1))
                for u in rng.choice(pool, size=k, replace=False):
                    _link(g, int(u), v)
        layers.append(layer)
    return g


def inception_graph(n_blocks: int, rng: np.random.Generator, branches: int = 4) -> nx.DiGraph:
    """Inception-like blocks: a stem, then per block ``branches`` parallel branches of 1 to 3
    operators between a split and a concat operator; blocks are chained.
    """
    g = nx.DiGraph(name=f"inception-{n_blocks}")
    _add_op(g, "stem", rng, "stem")
    prev = "stem"
    for b in range(n_blocks):
        concat = f"b{b}/concat"
        tails = []
        for r in range(branches):
            last = prev
            for k in range(int(rng.integers(1, 4))):
                node = f"b{b}/r{r}/op{k}"
                _add_op(g, node, rng, "conv")
                _link(g, last, node)
                last = node
            tails.append(last)
        _add_op(g, concat, rng, "concat")
        g.nodes[concat]["memory_bytes"] = 0.0
        for t in tails:
            _link(g, t, concat)
        prev = concat
    return g
