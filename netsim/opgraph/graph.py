"""Operator-graph attributes and helpers shared by the loaders, generators and placers.

An operator graph is a :class:`networkx.DiGraph`. Node attributes (SI units):

- ``time_s``: compute time on the reference device (s), and/or ``flop``: work (FLOP);
- optional ``backward_flop``: the work of the operator's backward (FLOP), which
  :func:`netsim.opgraph.add_backward` takes instead of twice ``flop``;
- ``memory_bytes``: persistent memory (weights, gradients, optimizer state), held all step;
- ``temporary_bytes``: scratch memory held while the operator runs;
- ``output_bytes``: the operator's output tensors, live until their last consumer ends;
- optional ``colocation`` (str): operators with the same key must share a device.

Edge attribute ``bytes``: the tensor moved along the edge (bytes).
"""

from __future__ import annotations

from collections.abc import Mapping

import networkx as nx

#: Reference device speed used to convert between ``time_s`` and ``flop`` when only one is
#: given (FLOP/s). An assumption (roughly a 2017 data-centre GPU's sustained rate), documented
#: in netsim/data/opgraphs/SOURCE.md; the faithful mode never needs it for profiled graphs.
REFERENCE_FLOP_PER_S = 1.0e13

NODE_DEFAULTS = {"memory_bytes": 0.0, "temporary_bytes": 0.0, "output_bytes": 0.0}


def node_time_s(graph: nx.DiGraph, node: object, flop_per_s: float = REFERENCE_FLOP_PER_S) -> float:
    """Compute time of ``node`` on a device of ``flop_per_s`` (FLOP/s), in seconds.

    Uses ``flop / flop_per_s`` when the node has ``flop``, else ``time_s`` scaled from the
    reference device (``time_s * REFERENCE_FLOP_PER_S / flop_per_s``).
    """
    attrs = graph.nodes[node]
    if "flop" in attrs:
        return float(attrs["flop"]) / flop_per_s
    return float(attrs.get("time_s", 0.0)) * REFERENCE_FLOP_PER_S / flop_per_s


def node_reference_time_s(graph: nx.DiGraph, node: object) -> float:
    """Compute time on the reference device (s): ``time_s`` if present, else flop / reference."""
    return attrs_reference_time_s(graph.nodes[node])


def attrs_reference_time_s(attrs: dict) -> float:
    """:func:`node_reference_time_s` from a node's attribute dict (s)."""
    if "time_s" in attrs:
        return float(attrs["time_s"])
    return float(attrs.get("flop", 0.0)) / REFERENCE_FLOP_PER_S


def total_memory_bytes(graph: nx.DiGraph) -> float:
    """Sum over operators of persistent + temporary + output memory (bytes).

    This is the quantity ``--memory FRACTION`` refers to: a fraction f gives each device
    ``f * total_memory_bytes(graph)``.
    """
    return float(
        sum(
            a.get("memory_bytes", 0.0) + a.get("temporary_bytes", 0.0) + a.get("output_bytes", 0.0)
            for _, a in graph.nodes(data=True)
        )
    )


def send_bytes(graph: nx.DiGraph, node: object) -> float:
    """Bytes moved when ``node``'s output crosses to another device: its largest out-edge (bytes).

    One transfer per (operator, remote device) carries this many bytes; consumers on the same
    device share it.
    """
    return out_edges_send_bytes(graph.succ[node])


def out_edges_send_bytes(out_edges: Mapping[object, Mapping]) -> float:
    """:func:`send_bytes` from a node's successor -> edge-attributes mapping (bytes)."""
    sizes = [float(a.get("bytes", 0.0)) for a in out_edges.values()]
    return max(sizes) if sizes else 0.0


def validate_graph(graph: nx.DiGraph) -> None:
    """Check the graph is a DAG with non-negative attributes.

    Raises
    ------
    ValueError
        Naming the first offending node or edge.
    """
    if not nx.is_directed_acyclic_graph(graph):
        raise ValueError("operator graph has a cycle")
    for n, a in graph.nodes(data=True):
        if "time_s" not in a and "flop" not in a:
            raise ValueError(f"operator {n!r}: needs 'time_s' or 'flop'")
        for key in ("time_s", "flop", "memory_bytes", "temporary_bytes", "output_bytes"):
            if key in a and not float(a[key]) >= 0.0:
                raise ValueError(f"operator {n!r}: {key} must be >= 0, got {a[key]!r}")
    for u, v, b in graph.edges(data="bytes", default=0.0):
        if not float(b) >= 0.0:
            raise ValueError(f"edge {u!r}->{v!r}: bytes must be >= 0, got {b!r}")


def with_defaults(graph: nx.DiGraph) -> nx.DiGraph:
    """Fill missing memory attributes with 0 and missing edge bytes with 0 (in place)."""
    for _, a in graph.nodes(data=True):
        for key, value in NODE_DEFAULTS.items():
            a.setdefault(key, value)
    for _, _, a in graph.edges(data=True):
        a.setdefault("bytes", 0.0)
    return graph
