"""Generate the backward pass and weight update of a forward operator graph.

A training step is forward + backward + update. For every forward operator ``u`` the result has

- ``grad:u``: the backward operator, twice the forward work (the usual 2x for matmul-like
  operators), or u's ``backward_flop`` where u has one (a traced model's per-operator count,
  :func:`netsim.torchnet.graph.backward_flop`), holding ``u``'s gradient buffer
  (``memory_bytes`` = u's weights' size), with u's temporary memory, producing the gradients
  w.r.t. u's inputs (``output_bytes`` = the bytes of u's incoming edges);
- edges ``grad:v -> grad:u`` for each forward edge ``u -> v`` (same bytes: the gradient of a
  tensor has its size), and ``u -> grad:u`` carrying u's activations (so the forward output
  stays live until the backward has used it, which is where training memory goes);
- ``update:u`` for operators with weights: an optimizer step of 2 FLOP per parameter (float32
  assumed) holding one optimizer-state buffer of the weights' size (momentum SGD), fed by
  ``grad:u -> update:u`` (the gradient's bytes).

``grad:u`` and ``update:u`` are colocated with ``u`` (as Baechi does): they share u's
``colocation`` key, or u's node name when it has none.
"""

from __future__ import annotations

import networkx as nx

from netsim.opgraph.graph import REFERENCE_FLOP_PER_S, node_reference_time_s

BACKWARD_WORK_FACTOR = 2.0
UPDATE_FLOP_PER_BYTE = 2.0 / 4.0  # 2 FLOP per float32 parameter


def add_backward(forward: nx.DiGraph) -> nx.DiGraph:
    """Return a new graph: ``forward`` plus its backward operators and weight updates.

    Parameters
    ----------
    forward
        Forward operator graph (see :mod:`netsim.opgraph.graph`).

    Returns
    -------
    networkx.DiGraph
        Training-step graph with 2-3x the operators.
    """
    g = forward.copy()
    g.graph["name"] = f"{forward.graph.get('name', 'graph')}-train"
    for u, a in forward.nodes(data=True):
        key = a.get("colocation", str(a.get("name", u)))
        g.nodes[u]["colocation"] = key
        grad = f"grad:{u}"
        attrs = {
            "name": grad,
            "op": "grad",
            "memory_bytes": float(a.get("memory_bytes", 0.0)),
            "temporary_bytes": float(a.get("temporary_bytes", 0.0)),
            "output_bytes": float(sum(b for _, _, b in forward.in_edges(u, data="bytes", default=0.0))),
            "colocation": key,
        }
        if "backward_flop" in a:
            attrs["flop"] = float(a["backward_flop"])
        elif "flop" in a:
            attrs["flop"] = BACKWARD_WORK_FACTOR * float(a["flop"])
        else:
            attrs["time_s"] = BACKWARD_WORK_FACTOR * node_reference_time_s(forward, u)
        g.add_node(grad, **attrs)
        g.add_edge(u, grad, bytes=float(a.get("output_bytes", 0.0)))
        weights = float(a.get("memory_bytes", 0.0))
        if weights > 0.0:
            upd = f"update:{u}"
            flop = UPDATE_FLOP_PER_BYTE * weights
            g.add_node(
                upd,
                name=upd,
                op="update",
                memory_bytes=weights,
                temporary_bytes=0.0,
                output_bytes=0.0,
                colocation=key,
                **({"flop": flop} if "flop" in a else {"time_s": flop / REFERENCE_FLOP_PER_S}),
            )
            g.add_edge(grad, upd, bytes=weights)
    for u, v, b in forward.edges(data="bytes", default=0.0):
        g.add_edge(f"grad:{v}", f"grad:{u}", bytes=float(b))
    return g
