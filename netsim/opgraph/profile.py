"""Load and save operator graphs in the JSON format of the shipped GNMT profile.

Format: ``{"name", "source", "nodes": [{id, name, op, compute_us, persistent_bytes,
temporary_bytes, output_bytes: [per output], colocation: ["loc:@NAME", ...]}], "edges": [{src,
dst, bytes, control}]}``. Times are converted to seconds, memory stays in bytes.

As in Baechi's profiles (``placer/placer_lib.py``, ``placer/m_etf.py``), an operator's outputs
include its persistent memory (a variable's output *is* its weights): Baechi frees ``outputs -
persistent`` after the last consumer and keeps the rest. netsim keeps ``memory_bytes`` (persistent)
for the whole step and ``output_bytes`` until the last consumer, so the loader stores the
outputs beyond the persistent part, and :func:`save_profile` writes them back added.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import networkx as nx

from netsim.opgraph.graph import node_reference_time_s, validate_graph

#: Built-in profiled graphs: name -> file in netsim/data/opgraphs.
PROFILES = {"gnmt": "gnmt_v2_forward.json"}

_LOC_PREFIX = "loc:@"

#: Batch of the built-in models' graphs in :func:`load_graph` (samples).
MODEL_BATCH_SAMPLES = 32


def load_profile(path: str | Path, ports: dict | None = None, pred_order: dict | None = None) -> nx.DiGraph:
    """Read an operator graph from a profile JSON file.

    Parameters
    ----------
    path
        File in the format of ``netsim/data/opgraphs/gnmt_v2_forward.json``.

    Returns
    -------
    networkx.DiGraph
        Nodes keyed by the file's integer ids with ``time_s`` (s), ``memory_bytes``,
        ``temporary_bytes``, ``output_bytes`` (sum over outputs less the persistent bytes they
        hold, at least 0; bytes), ``name``, ``op`` and,
        for colocated operators, ``colocation`` (the TensorFlow colocation target's name).
        Edges: ``bytes`` and ``tensors``, a list of ``(output port, bytes)``: the producer's
        distinct outputs on the edge, from the edge's ``ports`` list (or ``ports[(src, dst)]``
        given here) or, for a producer of one output, that output. Baechi sends each tensor
        separately and once per device (faithful mode does too); an edge of a multi-output
        producer without ports has no ``tensors`` (one tensor per producer, as before).
        ``pred_order`` (``dst -> [src, ...]``): the order of those operators' in-edges.

    Raises
    ------
    ValueError
        If the file is not a valid profile (missing keys, cycles, negative sizes).
    """
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    return profile_from_dict(data, ports, pred_order)


def profile_from_dict(data: dict, ports: dict | None = None, pred_order: dict | None = None) -> nx.DiGraph:
    """Build the graph from an already-parsed profile (see :func:`load_profile`)."""
    try:
        nodes, edges = data["nodes"], data["edges"]
    except (KeyError, TypeError) as exc:
        raise ValueError("profile needs 'nodes' and 'edges' lists") from exc
    g = nx.DiGraph(name=data.get("name", "graph"), source=data.get("source", ""))
    names: dict[str, int] = {}
    outputs: dict = {}
    for i, n in enumerate(nodes):
        try:
            outs = n.get("output_bytes", [])
            outs = [outs] if isinstance(outs, (int, float)) else outs
            outputs[n["id"]] = [float(o) for o in outs]
            persistent = float(n.get("persistent_bytes", 0))
            g.add_node(
                n["id"],
                name=n.get("name", str(n["id"])),
                op=n.get("op", ""),
                time_s=float(n["compute_us"]) * 1e-6,
                memory_bytes=persistent,
                temporary_bytes=float(n.get("temporary_bytes", 0)),
                output_bytes=max(0.0, float(sum(outs)) - persistent),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"nodes[{i}]: {exc}") from exc
        names[g.nodes[n["id"]]["name"]] = n["id"]
        locs = [c[len(_LOC_PREFIX) :] for c in n.get("colocation", []) if c.startswith(_LOC_PREFIX)]
        if locs:
            g.nodes[n["id"]]["colocation"] = locs[0]
    for target in {a["colocation"] for _, a in g.nodes(data=True) if "colocation" in a}:
        if target in names:
            g.nodes[names[target]]["colocation"] = target
    if pred_order:  # insert each operator's in-edges in the given order (dst -> [src, ...])
        rank = {(u, v): k for v, us in pred_order.items() for k, u in enumerate(us)}
        edges = sorted(edges, key=lambda e: rank.get((e.get("src"), e.get("dst")), -1))
        edges.sort(key=lambda e: e.get("dst", 0))
    for i, e in enumerate(edges):
        try:
            g.add_edge(e["src"], e["dst"], bytes=float(e.get("bytes", 0)))
            outs = outputs[e["src"]]
            on_edge = e.get("ports", (ports or {}).get((e["src"], e["dst"])))
            if on_edge is not None:
                g.edges[e["src"], e["dst"]]["tensors"] = [(int(p), outs[int(p)] if int(p) < len(outs) else 0.0)
                                                         for p in on_edge]
            elif len(outs) <= 1:
                g.edges[e["src"], e["dst"]]["tensors"] = [(0, float(e.get("bytes", 0)))]
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"edges[{i}]: {exc}") from exc
    validate_graph(g)
    return g


def save_profile(graph: nx.DiGraph, path: str | Path) -> None:
    """Write ``graph`` in the profile JSON format (times in microseconds, one output each, holding
    the persistent bytes as the loader expects)."""
    index = {n: i for i, n in enumerate(graph.nodes)}
    nodes = []
    for n, a in graph.nodes(data=True):
        nodes.append(
            {
                "id": index[n],
                "name": str(a.get("name", n)),
                "op": a.get("op", ""),
                "compute_us": node_reference_time_s(graph, n) * 1e6,
                "persistent_bytes": a.get("memory_bytes", 0.0),
                "temporary_bytes": a.get("temporary_bytes", 0.0),
                "output_bytes": [a.get("output_bytes", 0.0) + a.get("memory_bytes", 0.0)],
                "colocation": [_LOC_PREFIX + a["colocation"]] if "colocation" in a else [],
            }
        )
    edges = [
        {"src": index[u], "dst": index[v], "bytes": b, "control": False}
        for u, v, b in graph.edges(data="bytes", default=0.0)
    ]
    out = {"name": graph.graph.get("name", "graph"), "source": graph.graph.get("source", "")}
    out.update(nodes=nodes, edges=edges)
    Path(path).write_text(json.dumps(out), encoding="utf-8")


def gnmt_ports() -> tuple[dict, dict]:
    """``(src, dst) -> output ports`` of the shipped GNMT profile's edges whose producer has several
    outputs, and ``dst -> [src, ...]``, the GraphDef's input order where it differs from the
    profile's (``netsim/data/opgraphs/gnmt_v2_forward_ports.json``, its source in the file and
    in netsim/data/opgraphs/SOURCE.md)."""
    ref = resources.files("netsim") / "data" / "opgraphs" / "gnmt_v2_forward_ports.json"
    data = json.loads(ref.read_text(encoding="utf-8"))
    PORTS, PRED_ORDER = data["ports"], data["pred_order"]  # noqa: N806 (the file's names)

    ports = {}
    for entry in PORTS.split(","):
        edge, ps = entry.split(":")
        src, dst = edge.split(">")
        ports[(int(src), int(dst))] = [int(p) for p in ps.split(".")]
    order = {}
    for entry in PRED_ORDER.split(","):
        dst, us = entry.split(":")
        order[int(dst)] = [int(u) for u in us.split(".")]
    return ports, order


def builtin_names() -> list[str]:
    """Names accepted by :func:`load_graph` besides file paths."""
    from netsim.opgraph.zoo import MODEL_LAYERS

    return ["gnmt", "gnmt-train", "chain-N", "layered-N", "inception-N", "transformer-N", *MODEL_LAYERS]


def load_graph(spec: str, seed: int = 0) -> nx.DiGraph:
    """A graph from a file path or a built-in name.

    Built-ins: ``gnmt`` (the shipped forward profile), ``gnmt-train`` (forward + generated
    backward + update), ``chain-N``, ``layered-N`` (N operators), ``inception-N`` (N blocks),
    ``transformer-N`` (N layers, from a layer list, with backward), and each built-in model's
    forward graph for a batch of :data:`MODEL_BATCH_SAMPLES` (``small-cnn``, ``resnet18``,
    ``mlp-digits``: :mod:`netsim.opgraph.zoo`); synthetic ones use ``seed``.

    Raises
    ------
    ValueError
        If ``spec`` is neither an existing file nor a known name.
    """
    # local imports: the generators import this module's helpers
    import numpy as np

    from netsim.opgraph.backward import add_backward
    from netsim.opgraph.layers import graph_from_layers, transformer_layers
    from netsim.opgraph.synthetic import chain_graph, inception_graph, layered_dag
    from netsim.opgraph.zoo import model_layers

    if spec in PROFILES or spec == "gnmt-train":
        ref = resources.files("netsim") / "data" / "opgraphs" / PROFILES["gnmt"]
        with resources.as_file(ref) as p:
            g = load_profile(p, *gnmt_ports())
        return add_backward(g) if spec == "gnmt-train" else g
    layers = model_layers(spec, MODEL_BATCH_SAMPLES)
    if layers is not None:
        return graph_from_layers(layers, name=spec)
    match = re.fullmatch(r"(chain|layered|inception|transformer)-(\d+)", spec)
    if match:
        kind, n = match.group(1), int(match.group(2))
        if n < 1 or n > 100_000:
            raise ValueError(f"{spec}: N must be in [1, 100000]")
        rng = np.random.default_rng(seed)
        if kind == "chain":
            return chain_graph(n, rng)
        if kind == "layered":
            return layered_dag(n, rng)
        if kind == "inception":
            return inception_graph(n, rng)
        return add_backward(graph_from_layers(transformer_layers(n)))
    if Path(spec).is_file():
        return load_profile(spec)
    raise ValueError(f"unknown graph {spec!r}: give a profile JSON file or one of {builtin_names()}")
