"""The favourite-child LP relaxation of m-SCT (Hanen and Munier), solved with scipy's HiGHS.

Variables: per edge (i, j) ``x_ij`` in [0, 1] (0: j is i's favourite child, same device, no
transfer), per operator a start ``s_i >= 0``, and the makespan ``w``::

    minimise w
    s_j >= s_i + p_i + c_ij x_ij            for every edge (i, j)
    sum_j x_ij >= outdeg(i) - 1             at most one favourite child per parent
    sum_i x_ij >= indeg(j) - 1              at most one favourite parent per child
    w >= s_i + p_i                          for every sink i

Rounding: an edge is favourite when ``x_ij < threshold``; conflicts keep each parent's and each
child's smallest ``x``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from netsim.opgraph.costs import CostModel, IndexedGraph


def favourite_children(ig: IndexedGraph, cost: CostModel, threshold: float = 0.5) -> tuple[list[int], float]:
    """Solve the LP and round it.

    Parameters
    ----------
    ig, cost
        The graph and cost model; ``p_i`` is the fastest device's compute time, ``c_ij`` the
        mean transfer time of the producer's tensor over device pairs (s).
    threshold
        Edges with ``x_ij`` below it become favourite edges.

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
    src = np.fromiter((i for i in range(n) for _ in ig.succs[i]), dtype=np.int64)
    dst = np.fromiter((j for i in range(n) for j in ig.succs[i]), dtype=np.int64)
    m = len(src)
    if m == 0:
        return [-1] * n, float(max((min(r) for r in cost.compute_s), default=0.0))
    scale = 1e6  # microseconds: better conditioned
    p = np.array([min(r) for r in cost.compute_s]) * scale
    sb = np.asarray(ig.send_bytes)
    c = np.array([cost.mean_comm_s(b) for b in sb])[src] * scale
    # variable layout: x (m), s (n), w (1)
    nv = m + n + 1
    e = np.arange(m)
    # precedence: s_i - s_j + c x <= -p_i
    rows_p = np.concatenate([e, e, e])
    cols_p = np.concatenate([m + src, m + dst, e])
    vals_p = np.concatenate([np.ones(m), -np.ones(m), c])
    b_p = -p[src]
    # favourite child: -sum_j x_ij <= 1 - outdeg(i)
    outdeg = np.bincount(src, minlength=n)
    indeg = np.bincount(dst, minlength=n)
    rows_c = m + src
    rows_q = m + n + dst
    b_c = np.concatenate([1.0 - outdeg, 1.0 - indeg])
    sinks = np.flatnonzero(outdeg == 0)
    k = len(sinks)
    rows_w = 2 * n + m + np.arange(k)
    rows = np.concatenate([rows_p, rows_c, rows_q, rows_w, rows_w])
    cols = np.concatenate([cols_p, e, e, m + sinks, np.full(k, nv - 1)])
    vals = np.concatenate([vals_p, -np.ones(m), -np.ones(m), np.ones(k), -np.ones(k)])
    a_ub = sp.csr_matrix((vals, (rows, cols)), shape=(m + 2 * n + k, nv))
    b_ub = np.concatenate([b_p, b_c, -p[sinks]])
    objective = np.zeros(nv)
    objective[-1] = 1.0
    bounds = [(0.0, 1.0)] * m + [(0.0, None)] * (n + 1)
    res = linprog(objective, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"favourite-child LP failed: {res.message}")
    x = res.x[:m]
    favourite = [-1] * n
    has_parent = np.zeros(n, dtype=bool)
    for idx in np.argsort(x, kind="stable"):
        if x[idx] >= threshold:
            break
        i, j = int(src[idx]), int(dst[idx])
        if favourite[i] < 0 and not has_parent[j]:
            favourite[i] = j
            has_parent[j] = True
    return favourite, float(res.fun) / scale
