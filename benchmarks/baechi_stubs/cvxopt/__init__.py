"""Stands in for cvxopt (Baechi's m-SCT LP, solved there with MOSEK): ``matrix``, ``spmatrix`` and ``solvers.lp`` on scipy's HiGHS."""

import types

import numpy as np
from scipy import sparse
from scipy.optimize import linprog


def matrix(values):
    """A dense column vector, as a flat float array."""
    return np.asarray(values, dtype=float).ravel()


def spmatrix(values, rows, cols):
    """A sparse matrix from (value, row, column) triples."""
    return sparse.csr_matrix((np.asarray(values, float), (np.asarray(rows), np.asarray(cols))))


def _lp(c, G, h, solver=None):  # noqa: N803 (cvxopt's names)
    """minimize c'x subject to G x <= h, x free (cvxopt.solvers.lp's form); ``solver`` is ignored."""
    n = len(c)
    if G.shape[1] < n:  # spmatrix sizes itself to the largest index given
        G = sparse.hstack([G, sparse.csr_matrix((G.shape[0], n - G.shape[1]))]).tocsr()  # noqa: N806
    res = linprog(c, A_ub=G, b_ub=h, bounds=(None, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"HiGHS: {res.message}")
    return {"x": list(res.x), "status": "optimal"}


solvers = types.SimpleNamespace(lp=_lp)
