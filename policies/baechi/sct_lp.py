"""The favourite-child LP relaxation of m-SCT (Hanen and Munier), solved with scipy's HiGHS.

Variables: per edge (i, j) ``x_ij`` in [0, 1] (0: j is i's favourite child, same device, no
transfer), per operator a start ``s_i >= 0``, and the makespan ``w``::

    minimise w
    s_j >= s_i + p_i + c_ij x_ij            for every edge (i, j)
    sum_j x_ij >= outdeg(i) - 1             at most one favourite child per parent
    sum_i x_ij >= indeg(j) - 1              at most one favourite parent per child
    w >= s_i + p_i                          for every sink i

It is solved in ``y_ij = 1 - x_ij`` (the same LP under an affine change of variables:
``sum_j y_ij <= 1``, ``s_j + c_ij y_ij >= s_i + p_i + c_ij``): from its slack basis (``y = 0``,
every edge a transfer) HiGHS' dual simplex needs about 40% fewer iterations than in the ``x``
form, and Devex pricing makes each iteration cheaper; together about half the LP time on the
benchmark's layered DAGs (10,000 operators). The optimal makespan is the same; the LP is very
degenerate (only the critical paths pin ``x``), so the optimal vertex returned, hence the
favourites off the critical paths, depends on the form and the solver's path. Any optimum is
the paper's LP solution.

Rounding: an edge is favourite when ``x_ij <= threshold`` (Baechi's ``round(x - threshold + 0.5)``
is 0 there, Python rounding half to even); conflicts keep each parent's and each child's smallest
``x`` (Baechi keeps the last edge in edge order, its code notes the conflict as a TODO).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from netsim.opgraph.costs import CostModel, IndexedGraph

SCALE = 1e6  # LP times in microseconds: better conditioned
HIGHS_OPTIONS = {"simplex_dual_edge_weight_strategy": "devex"}


def favourite_children(ig: IndexedGraph, cost: CostModel, threshold: float = 0.1) -> tuple[list[int], float]:
    """Solve the LP and round it.

    Parameters
    ----------
    ig, cost
        The graph and cost model; ``p_i`` is the fastest device's compute time, ``c_ij`` the
        mean transfer time of the producer's tensor over device pairs (s); with tensors per
        edge (``ig.per_tensor``) the sum over the edge's tensors.
    threshold
        Edges with ``x_ij`` at most this become favourite edges.

    Returns
    -------
    (favourite, makespan_lb_s)
        ``favourite[i]`` = i's favourite child index or -1; the LP's optimal makespan (s),
        a lower bound of the schedule without memory limits or channel contention.

    Raises
    ------
    RuntimeError
        If HiGHS fails (it should not: the LP is always feasible).
    """
    n = len(ig)
    src, dst = edge_arrays(ig)
    fastest = [min(r) for r in cost.compute_s]
    if len(src) == 0:
        return [-1] * n, float(max(fastest, default=0.0))
    p = np.array(fastest) * SCALE  # (us)
    if ig.per_tensor:  # an edge costs the sum of its tensors' transfers (Baechi's edge weight)
        per_tensor = cost.mean_comm_array_s(np.asarray(ig.tensor_bytes, dtype=float))
        on_edge = {(u, i): ts for i in range(n) for u, ts in zip(ig.preds[i], ig.in_tensors[i], strict=True)}
        c = np.array([sum(per_tensor[t] for t in on_edge[(u, j)]) for u, j in zip(src.tolist(), dst.tolist(), strict=True)]) * SCALE
    else:
        c = cost.mean_comm_array_s(np.asarray(ig.send_bytes, dtype=float))[src] * SCALE  # (us)
    y, makespan_us = solve_lp(n, src, dst, p, c)
    return round_favourites(n, src, dst, 1.0 - y, threshold), makespan_us / SCALE


def edge_arrays(ig: IndexedGraph) -> tuple[np.ndarray, np.ndarray]:
    """(producer, consumer) index of every edge, grouped by producer in index order."""
    outdeg = np.fromiter(map(len, ig.succs), dtype=np.int64, count=len(ig))
    src = np.repeat(np.arange(len(ig), dtype=np.int64), outdeg)
    dst = np.fromiter((j for s in ig.succs for j in s), dtype=np.int64, count=len(src))
    return src, dst


def solve_lp(n: int, src: np.ndarray, dst: np.ndarray, p: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, float]:
    """Solve the LP in the ``y = 1 - x`` form for ``n`` operators and the edges ``src -> dst``.

    ``p`` (per operator) and ``c`` (per edge) in microseconds. Returns ``(y, w)``: ``y`` per
    edge and the optimal makespan ``w`` (us).
    """
    m = len(src)
    nv = m + n + 1  # variables: y (m), s (n), w (1)
    e = np.arange(m)
    outdeg = np.bincount(src, minlength=n)
    sinks = np.flatnonzero(outdeg == 0)
    k = len(sinks)
    rows_w = m + 2 * n + np.arange(k)
    # precedence s_i - s_j - c y <= -p_i - c; parent's row sum_j y_ij <= 1; child's sum_i y_ij <= 1;
    # sink s_i - w <= -p_i
    rows = np.concatenate([e, e, e, m + src, m + n + dst, rows_w, rows_w])
    cols = np.concatenate([m + src, m + dst, e, e, e, m + sinks, np.full(k, nv - 1)])
    vals = np.concatenate([np.ones(m), -np.ones(m), -c, np.ones(m), np.ones(m), np.ones(k), -np.ones(k)])
    a_ub = sp.csr_matrix((vals, (rows, cols)), shape=(m + 2 * n + k, nv))
    b_ub = np.concatenate([-p[src] - c, np.ones(2 * n), -p[sinks]])
    objective = np.zeros(nv)
    objective[-1] = 1.0
    bounds = np.zeros((nv, 2))
    bounds[:m, 1] = 1.0
    bounds[m:, 1] = np.inf
    res = linprog(objective, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs-ds", options=HIGHS_OPTIONS)
    if res.status != 0:
        raise RuntimeError(f"favourite-child LP failed: {res.message}")
    return res.x[:m], float(res.fun)


def round_favourites(n: int, src: np.ndarray, dst: np.ndarray, x: np.ndarray, threshold: float) -> list[int]:
    """Favourite child per operator (-1: none): edges with ``x <= threshold`` by increasing ``x``
    (ties by edge order), skipping a parent or child already matched."""
    favourite = [-1] * n
    has_parent = [False] * n
    order = np.argsort(x, kind="stable")
    order = order[x[order] <= threshold]
    for i, j in zip(src[order].tolist(), dst[order].tolist(), strict=True):
        if favourite[i] < 0 and not has_parent[j]:
            favourite[i] = j
            has_parent[j] = True
    return favourite


LP_METHODS = ("highs", "highs-ds", "highs-ipm")
"""scipy's HiGHS methods :func:`baechi_favourite_children` accepts (``linprog``'s names)."""


def baechi_favourite_children(
    ig: IndexedGraph, cost: CostModel, threshold: float = 0.1, lp_method: str = "highs", lp_presolve: bool = True
) -> tuple[list[int], float]:
    """Baechi's own LP and rounding (``placer/m_sct.py``, ``FavoriteChildLPSolver``): the LP in the
    ``x`` form with its rows in Baechi's order (bounds as rows, edges numbered by producer in the
    graph's node order), edge costs the sum of the edge's tensors' whole-microsecond transfer
    times, solved by HiGHS (Baechi calls MOSEK, which this cannot run); an edge is favourite when
    ``round(x - threshold + 0.5)`` is 0, assigned in edge order as Baechi does (a later favourite
    edge of a parent replaces the earlier; a child's second favourite parent clears the first
    parent's favourite). The faithful mode's m-SCT uses it. Returns as
    :func:`favourite_children` (``favourite`` by ``ig`` index).

    ``lp_method`` and ``lp_presolve`` choose how HiGHS solves it (one of :data:`LP_METHODS`).
    The LP is degenerate: the optimal makespan is the same under every method, but the optimal
    point returned, hence the favourites off the critical paths and the step, depend on the
    solver. The default (dual simplex after presolve) reproduces Baechi's code run with HiGHS;
    ``benchmarks/baechi_compare.py`` prints GNMT's m-SCT under each (our study: Baechi calls
    MOSEK, whose point is one more of them)."""
    if lp_method not in LP_METHODS:
        raise ValueError(f"lp_method: must be one of {list(LP_METHODS)}, got {lp_method!r}")
    g = ig.graph
    nodes = list(g.nodes)
    nid = {v: k for k, v in enumerate(nodes)}
    edges = list(g.edges)  # by producer in node order: a node's out-edges are consecutive
    m, n = len(edges), len(nodes)
    if m == 0:
        return [-1] * len(ig), float(max((min(r) for r in cost.compute_s), default=0.0))
    p = np.array([round(min(cost.compute_s[ig.index[v]]) * SCALE, 6) for v in nodes])
    per_tensor = cost.mean_comm_array_s(np.asarray(ig.tensor_bytes, dtype=float)) * SCALE
    on_edge = {(ig.nodes[u], ig.nodes[i]): ts for i in range(len(ig)) for u, ts in zip(ig.preds[i], ig.in_tensors[i], strict=True)}
    w = np.array([float(round(sum(per_tensor[t] for t in on_edge[e]))) for e in edges])
    eid = {e: k for k, e in enumerate(edges)}
    src = np.fromiter((nid[u] for u, _ in edges), dtype=np.int64, count=m)
    dst = np.fromiter((nid[v] for _, v in edges), dtype=np.int64, count=m)
    outdeg = np.bincount(src, minlength=n)
    indeg = np.bincount(dst, minlength=n)
    in_edges = np.fromiter((eid[(x, v)] for v in nodes for x in g.predecessors(v)), dtype=np.int64, count=m)
    e, ones = np.arange(m), np.ones(m)
    # Baechi's rows, in its order: x <= 1 and -x <= 0 per edge; -s <= 0 per operator;
    # s_u - s_v + w x <= -p_u per edge; -sum of a parent's x <= 1 - outdeg; -sum of a child's
    # x <= 1 - indeg (operators with such edges only); s_v - w_makespan <= -p_v per operator
    r_prec, r_out = 2 * m + n, 3 * m + n
    has_out, has_in = np.flatnonzero(outdeg), np.flatnonzero(indeg)
    r_in = r_out + len(has_out)
    r_span = r_in + len(has_in)
    out_row = np.repeat(r_out + np.arange(len(has_out)), outdeg[has_out])  # edges already by producer
    in_row = np.repeat(r_in + np.arange(len(has_in)), indeg[has_in])
    rows = np.concatenate([2 * e, 2 * e + 1, 2 * m + np.arange(n), np.repeat(r_prec + e, 3), out_row, in_row,
                           np.repeat(r_span + np.arange(n), 2)])
    prec_cols = np.stack([m + src, m + dst, e], axis=1).ravel()
    prec_vals = np.stack([ones, -ones, w], axis=1).ravel()
    span_cols = np.stack([m + np.arange(n), np.full(n, m + n)], axis=1).ravel()
    span_vals = np.tile([1.0, -1.0], n)
    cols = np.concatenate([e, e, m + np.arange(n), prec_cols, e, in_edges, span_cols])
    vals = np.concatenate([ones, -ones, -np.ones(n), prec_vals, -ones, -ones, span_vals])
    rhs = np.concatenate([np.tile([1.0, 0.0], m), np.zeros(n), -p[src], 1.0 - outdeg[has_out],
                          1.0 - indeg[has_in], -p])
    a_ub = sp.csr_matrix((vals, (rows, cols)), shape=(len(rhs), m + n + 1))
    objective = np.zeros(m + n + 1)
    objective[-1] = 1.0
    res = linprog(objective, A_ub=a_ub, b_ub=rhs, bounds=(None, None), method=lp_method, options={"presolve": lp_presolve})
    if res.status != 0:  # the LP is always feasible and bounded: a numerical failure
        raise RuntimeError(f"favourite-child LP failed under lp_method={lp_method!r}, lp_presolve={lp_presolve}: "
                           f"{res.message} (the default, 'highs' with presolve, is the robust one)")
    favourite = [-1] * n
    parent = [-1] * n
    for k, a, b in zip(range(m), src.tolist(), dst.tolist(), strict=True):
        if round(float(res.x[k]) - threshold + 0.5) == 0:
            favourite[a] = b
            if parent[b] != -1:
                favourite[parent[b]] = -1
            parent[b] = a
    out = [-1] * len(ig)
    for k, f in enumerate(favourite):
        if f >= 0:
            out[ig.index[nodes[k]]] = ig.index[nodes[f]]
    return out, float(res.x[-1]) / SCALE

