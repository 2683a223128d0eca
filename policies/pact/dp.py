"""Dynamic programming over PACT's time-expanded graph (minimum energy to each vertex).

The graph is acyclic in time (every edge takes at least one slot), so one pass in slot order
solves it (:func:`solve_timed`). When the deadline is not binding the time coordinate can be
dropped: the graph over (loss level, variant) is acyclic in (variant, level) order when
variants only move forward (with ``allow_unprune`` the passes repeat until nothing improves),
and :func:`solve_untimed` solves it in O(V^2 J^2); the planner uses it first and keeps its
path when that path meets the deadline (then it is also optimal in the timed graph).

Both return the cheapest path to a target vertex as a list of :class:`Edge`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policies.pact.graph import Levels, RunTable

_TOL = 1e-12


@dataclass(frozen=True)
class Edge:
    """One edge of a path: a run in ``variant`` for work ``need[k]`` within ``slots`` slots
    (``slots`` = 0 in the untimed graph)."""

    variant: int
    k: int
    slots: int = 0


def _weights(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Edge weights from a run-cost table and a need-index matrix (-1: no edge)."""
    w = table[np.maximum(idx, 0)]
    w[idx < 0] = np.inf
    return w


def _terminal_best(energy: np.ndarray, levels: Levels, variants: list[int]):
    """(energy, level, variant) of the cheapest target vertex; energy has levels x variants."""
    best = (np.inf, -1, -1)
    for v in variants:
        t = levels.terminal[v]
        if t >= energy.shape[0]:
            continue
        j = t + int(np.argmin(energy[t:, v]))
        if energy[j, v] < best[0]:
            best = (float(energy[j, v]), j, v)
    return best


def solve_untimed(levels: Levels, runs: dict[int, RunTable],
                  nidx: dict[tuple[int, int], np.ndarray], variants: list[int],
                  start: tuple[int, int | None], unprune: bool) -> tuple[float, list[Edge]]:
    """Cheapest path from ``start`` = (level, variant or None) to a target, ignoring time.

    Returns (energy_j, edges); energy inf and no edges if no target is reachable.
    """
    n_lv, n_v = len(levels.n), max(variants) + 1
    energy = np.full((n_lv, n_v), np.inf)
    pred = np.full((n_lv, n_v, 3), -1, dtype=np.int64)       # source level, variant, k
    j_s, v_s = start
    for v in variants if v_s is None else [v_s]:
        energy[j_s, v] = 0.0
    w = {pair: _weights(runs[pair[1]].energy_j, idx) for pair, idx in nidx.items()}
    for _ in range(len(variants) + 1 if unprune else 1):
        changed = False
        for v in variants:
            ww, kk = w[(v, v)], nidx[(v, v)]
            for j0 in np.flatnonzero(np.isfinite(energy[:, v])):
                cand = energy[j0, v] + ww[j0]
                better = np.flatnonzero(cand < energy[:, v] - _TOL)
                if len(better):
                    energy[better, v] = cand[better]
                    pred[better, v] = np.stack([np.full(len(better), j0), np.full(len(better), v),
                                                kk[j0, better]], axis=1)
            for v2 in variants:
                if v2 == v or (v2 < v and not unprune):
                    continue
                total = energy[:, v][:, None] + w[(v, v2)]
                j0 = np.argmin(total, axis=0)
                val = total[j0, np.arange(n_lv)]
                better = np.flatnonzero(val < energy[:, v2] - _TOL)
                if len(better):
                    changed = True
                    energy[better, v2] = val[better]
                    pred[better, v2] = np.stack([j0[better], np.full(len(better), v),
                                                 nidx[(v, v2)][j0[better], better]], axis=1)
        if not changed:
            break
    total, j, v = _terminal_best(energy, levels, variants)
    if not np.isfinite(total):
        return np.inf, []
    edges = []
    while pred[j, v, 0] >= 0:
        j0, v0, k = pred[j, v]
        edges.append(Edge(int(v), int(k)))
        j, v = int(j0), int(v0)
    return total, edges[::-1]


def solve_timed(levels: Levels, runs: dict[int, RunTable],
                nidx: dict[tuple[int, int], np.ndarray], variants: list[int],
                start: tuple[int, int | None], unprune: bool,
                n_slots: int) -> tuple[float, list[Edge]]:
    """Cheapest path from ``start`` to a target within ``n_slots`` time slots.

    ``runs[v].energy_j`` has shape (work amounts, n_slots): the cheapest run within s + 1
    slots. Returns (energy_j, edges) as :func:`solve_untimed`.
    """
    n_lv, n_v = len(levels.n), max(variants) + 1
    energy = np.full((n_slots + 1, n_lv, n_v), np.inf)
    pred = np.full((n_slots + 1, n_lv, n_v, 4), -1, dtype=np.int64)  # sigma, level, variant, k
    j_s, v_s = start
    for v in variants if v_s is None else [v_s]:
        energy[0, j_s, v] = 0.0
    pairs = [(v0, v) for v0 in variants for v in variants
             if unprune or v >= v0]
    # weights[pair]: (slots, J, J) = cost of the edge within sigma slots, sigma = 1..n_slots
    weights = {p: np.moveaxis(_weights(runs[p[1]].energy_j, nidx[p]), 2, 0) for p in pairs}
    for s in range(1, n_slots + 1):
        src = energy[s - 1::-1] if s > 0 else energy[:0]   # src[sigma - 1] = energy[s - sigma]
        src = src[:s]
        for v0, v in pairs:
            ws = weights[(v0, v)][:s]                      # (s, J, J)
            if not np.isfinite(src[:, :, v0]).any():
                continue
            total = src[:, :, v0][:, :, None] + ws          # (sigma, j0, j)
            flat = total.reshape(s * n_lv, n_lv)
            arg = np.argmin(flat, axis=0)
            val = flat[arg, np.arange(n_lv)]
            better = np.flatnonzero(val < energy[s, :, v] - _TOL)
            if len(better):
                sig, j0 = np.divmod(arg[better], n_lv)
                energy[s, better, v] = val[better]
                pred[s, better, v] = np.stack([sig + 1, j0, np.full(len(better), v0),
                                               nidx[(v0, v)][j0, better]], axis=1)
    best = (np.inf, -1, -1, -1)
    for s in range(n_slots + 1):
        e, j, v = _terminal_best(energy[s], levels, variants)
        if e < best[0]:
            best = (e, s, j, v)
    total, s, j, v = best
    if not np.isfinite(total):
        return np.inf, []
    edges = []
    while s > 0 and pred[s, j, v, 0] >= 0:
        sig, j0, v0, k = pred[s, j, v]
        edges.append(Edge(int(v), int(k), int(sig)))
        s, j, v = s - int(sig), int(j0), int(v0)
    return total, edges[::-1]
