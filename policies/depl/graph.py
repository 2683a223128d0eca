"""DepL's expanded graph and its shortest path (netsim's formalization of the papers' graph).

A vertex is (epoch, model variant, level of the planned loss quantile on a grid of step
``epsilon``). From a vertex at epoch ``k`` with variant ``m``:

* a *training edge* runs epoch ``k + 1`` with ``m`` on its cluster; its cost is the cluster's
  predicted energy (J), and it moves the quantile down the variant's curve;
* a *switch edge* ``m -> m'`` followed by training with ``m'``: progress carried by the one
  progress model's switch rule (:meth:`netsim.training.loss.LossPredictor.carry`: the loss
  learned is kept, not the samples, minus the pruning penalty) and ``switch_cost_j``.
  The new model's transfer is the next epoch's download, which netsim charges to every
  epoch on the training edge (each epoch's participants download the current variant).

Each training edge adds the progress model's gain for the epoch's cluster (its samples and its
participant count, :meth:`~netsim.training.loss.LossPredictor.gain`).
The planned level of a state is ``factor * mean(n_eff, m)``, or a function of (variant,
effective samples) when the spread depends on the state (DepL's analytic quantile with the
fitted level- and pruning-dependent run spread, :meth:`LossPredictor.quantile_of`): ``factor = exp(q_pi)`` of the
predictor's log-spread for DepL (the pi-quantile), 1 for expectation-driven planning.
Labels carry their exact ``n_eff``; the grid only merges labels: in each vertex the cheapest
label survives (so levels never stall below the grid step), then labels of one variant that
are beaten on both cost and progress are dropped (lossless). The answer is the cheapest label
whose level is <= the target, at any epoch up to the horizon.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from netsim.training.loss import LossPredictor, LossState


@dataclass(frozen=True)
class PathResult:
    """The cheapest path: variant per epoch, its cost (J), its final level and mean loss."""

    variants: tuple[int, ...]
    cost_j: float
    final_level: float
    final_mean: float


@dataclass(frozen=True)
class GraphSearch:
    """Outcome of one search: the path (None if no vertex meets the target) and the lowest
    level any path reached within the horizon (to report how far an infeasible goal is)."""

    path: PathResult | None
    best_level: float
    vertices: int


def _pareto(m: np.ndarray, n: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Indices of labels not beaten, within their variant, on both cost and progress."""
    order = np.lexsort((cost, -n, m))
    ms, cs = m[order], cost[order]
    shifted = cs - cs.min(initial=0.0)
    span = float(shifted.max(initial=0.0)) + 1.0
    seg = shifted - ms * span  # later variants sit below: the running min restarts per variant
    run_min = np.minimum.accumulate(seg)
    prev = np.concatenate([[np.inf], run_min[:-1]])
    new_group = np.concatenate([[True], ms[1:] != ms[:-1]])
    return order[new_group | (seg < prev)]


def search(pred: LossPredictor, epoch_cost_j: Sequence[float], epoch_gain: Sequence[float],
           target_loss: float, horizon: int, factor: float | Callable = 1.0,
           epsilon: float = 0.005,
           switch_cost_j: float = 0.0, start: LossState | None = None) -> GraphSearch:
    """Cheapest sequence of variants whose planned level ends <= ``target_loss``.

    Parameters
    ----------
    pred: the policy-side predictor (mean curves, switch losses, data efficiency).
    epoch_cost_j: predicted energy of one epoch with each variant (J); inf = not usable.
    epoch_gain: effective samples one epoch with each variant adds (the progress model's
        gain for that variant's cluster: its samples and participants).
    target_loss: the loss target the level must reach.
    horizon: most epochs in a plan.
    factor: level = factor x mean loss (exp of the pi-quantile of the log-spread for DepL),
        or a function (variants, n_eff arrays) -> levels.
    epsilon: grid step of the level (loss units); 0 keeps every non-dominated label.
    switch_cost_j: extra energy charged on a switch edge (J).
    start: the training state the plan starts from (online re-planning); default untrained.
    """
    cost_m = np.asarray(epoch_cost_j, dtype=float)
    gain = np.asarray(epoch_gain, dtype=float)
    level_of = factor if callable(factor) else \
        (lambda v, n: factor * np.asarray(pred.mean_of(v, n)))
    usable = np.flatnonzero(np.isfinite(cost_m))
    m = usable.copy()
    n0, v0 = (0.0, None) if start is None else (start.n_eff, start.variant)
    if v0 is None:
        n = gain[m].copy()
        cost = cost_m[m]
    else:
        n = np.asarray(pred.carry(np.full(len(m), n0), np.full(len(m), v0), m)) + gain[m]
        cost = cost_m[m] + switch_cost_j * (m != v0)
    layers: list[tuple[np.ndarray, np.ndarray]] = [(m, np.full(len(m), -1))]
    best: tuple[float, int, int] | None = None  # cost, layer, index
    best_level, vertices = math.inf, 0
    for k in range(horizon):
        level = np.asarray(level_of(m, n))
        vertices += len(m)
        if len(level):
            best_level = min(best_level, float(level.min()))
        done = level <= target_loss
        if done.any():
            j = np.flatnonzero(done)[np.argmin(cost[done])]
            if best is None or cost[j] < best[0]:
                best = (float(cost[j]), k, int(j))
        if k == horizon - 1:
            break
        go = np.flatnonzero(~done & (cost < (best[0] if best else np.inf)))
        if len(go) == 0 or len(usable) == 0:
            break
        src = np.repeat(go, len(usable))
        dst = np.tile(usable, len(go))
        n2 = pred.carry(n[src], m[src], dst) + gain[dst]  # the one progress model's rule
        c2 = cost[src] + cost_m[dst] + switch_cost_j * (dst != m[src])
        if epsilon > 0:
            lvl = np.asarray(level_of(dst, n2))
            key = dst * 10**9 + np.floor(lvl / epsilon).astype(np.int64)
            order = np.lexsort((-n2, c2, key))
            first = np.concatenate([[True], key[order][1:] != key[order][:-1]])
            sel = order[first]
        else:
            sel = np.arange(len(n2))
        sel = sel[_pareto(dst[sel], n2[sel], c2[sel])]
        m, n, cost = dst[sel], n2[sel], c2[sel]
        layers.append((m, src[sel]))
    if best is None:
        return GraphSearch(None, best_level, vertices)
    return GraphSearch(_backtrack(pred, layers, best, level_of, gain, (n0, v0)),
                       best_level, vertices)


def _backtrack(pred: LossPredictor, layers, best, level_of, gain, start) -> PathResult:
    cost, k, j = best
    seq = []
    while k >= 0:
        m, parent = layers[k]
        seq.append(int(m[j]))
        j = int(parent[j])
        k -= 1
    seq.reverse()
    n, prev = start
    for v in seq:
        if prev is not None:
            n = pred.carry(n, prev, v)
        n += gain[v]
        prev = v
    mean = float(pred.mean_of(seq[-1], n))
    return PathResult(tuple(seq), cost, float(level_of(np.array([seq[-1]]),
                                                       np.array([n]))[0]), mean)
