"""The sharing core: max-min fair rates of flows over weighted capacity constraints.

Every constraint is ``sum over its flows of coef x rate <= capacity``. A wired link direction
has coefficient 1 and its capacity in bit/s; a shared medium (netsim.network.topology) is an
air-time budget (capacity: the fraction of time the channel gives, 1 without contention) and a
flow crossing it from or to a station of rate r has coefficient 1/r: it uses x/r of the air
time (SimGrid's Wi-Fi model, Guegan et al., MSWiM 2022). Rates are max-min fair on
throughput over all constraints jointly, as SimGrid's LMM solves them: every flow gets the
largest rate such that none could go faster without slowing one that is not faster. Where all
coefficients are 1 (no media) this is plain max-min fairness, and the arithmetic below is the
same operation for operation (coefficient sums are exact integers), so networks without media
give exactly the rates they gave before media existed. It matched SimGrid's CM02 network model
with latency weighting off to 2.3e-13 on 257 cases; SimGrid's default additionally weights
each flow's share by its route's latency, which netsim does not.

The rules, one place for every path:

- :func:`progressive_filling`: the general allocation over any routes (fill every flow's rate
  up together, freeze the flows of the constraint that saturates first, repeat). The flow
  network (netsim.network.flows) uses it whenever it re-shares everything at once.
- :func:`water_filling`: the allocation on one constraint whose flows cross no other
  saturated one (the case max-min decomposes into): flows whose cap is below the fair share run
  at their cap, the others share what is left equally. The flow network keeps it incrementally
  per saturated constraint (its groups, with :func:`fair_share`); the epoch fast path
  (netsim.network.playback, netsim.fastepoch) plays it forward without events.
- :func:`fair_share`: the equal rate of the sharing flows of one constraint.
- :func:`medium_budget`: a Wi-Fi cell's air-time budget with n active flows (contention).

:data:`CAPACITY_TOLERANCE` decides every tie of a rate with a capacity or a share, in every
path alike, so the paths agree to rounding (tests/test_fastepoch.py, tests/test_network.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

_Rate = TypeVar("_Rate", float, np.ndarray)

CAPACITY_TOLERANCE = 1e-9
"""Relative tolerance of every comparison of rates with capacities and shares."""


def fair_share(capacity: float, capped_load: _Rate, sharing_weight: _Rate | int) -> _Rate:
    """The rate (bit/s) each sharing flow of one constraint gets: what the capped flows leave
    of ``capacity`` (their ``coef x cap`` summed in ``capped_load``) over the sharing flows'
    coefficients summed (``sharing_weight``; their count on a wired direction)."""
    return (capacity - capped_load) / sharing_weight


MIN_MEDIUM_BUDGET = 0.01
"""Smallest air-time budget a contended Wi-Fi cell keeps (netsim's formalization: the linear
decay would otherwise reach zero and stop every flow)."""


def medium_budget(n_flows: int, onset_flows: int | None, loss_per_flow: float) -> float:
    """A Wi-Fi cell's air-time budget (fraction of time) with ``n_flows`` active flows:
    ``1 - loss_per_flow x max(0, n - onset)`` (SimGrid's linear decay form), at least
    :data:`MIN_MEDIUM_BUDGET`; 1 without contention figures (``onset_flows`` None)."""
    if onset_flows is None or n_flows <= onset_flows:
        return 1.0
    return max(1.0 - loss_per_flow * (n_flows - onset_flows), MIN_MEDIUM_BUDGET)


def progressive_filling(flow_hops: Sequence[Sequence[int]],
                        capacity_bps: Sequence[float],
                        flow_coefs: Sequence[Sequence[float] | None] | None = None
                        ) -> list[float]:
    """Max-min fair rate (bit/s) of each flow, flow i crossing the constraints
    ``flow_hops[i]`` (indices into ``capacity_bps``) with coefficients ``flow_coefs[i]``
    (parallel to its hops; None: all 1, a wired route). A flow's rate is also bounded by each
    constraint on its route (capacity / coefficient), so no separate cap is needed.
    O(hops log constraints)."""
    residual: dict[int, float] = {}
    count: dict[int, float] = {}  # coefficient sums of the unfrozen flows (counts when all 1)
    members: dict[int, list[int]] = {}
    coefs_of = flow_coefs if flow_coefs is not None else [None] * len(flow_hops)
    for f, hops in enumerate(flow_hops):
        coefs = coefs_of[f]
        for j, h in enumerate(hops):
            a = 1.0 if coefs is None else coefs[j]
            if h in count:
                count[h] += a
                members[h].append(f)
            else:
                count[h], residual[h], members[h] = a, float(capacity_bps[h]), [f]
    key = {h: residual[h] / count[h] for h in count}
    heap = [(k, h) for h, k in key.items()]
    heapq.heapify(heap)
    rates: list[float | None] = [None] * len(flow_hops)
    left = {h: len(m) for h, m in members.items()}  # unfrozen flows per constraint
    while heap:
        share, h = heapq.heappop(heap)
        if left[h] == 0 or key[h] != share:
            continue
        for f in members[h]:
            if rates[f] is not None:
                continue
            rates[f] = share
            coefs = coefs_of[f]
            for j, hop in enumerate(flow_hops[f]):
                a = 1.0 if coefs is None else coefs[j]
                residual[hop] -= a * share
                left[hop] -= 1
                if left[hop] > 0:
                    count[hop] -= a
                    key[hop] = max(residual[hop], 0.0) / count[hop]
                    heapq.heappush(heap, (key[hop], hop))
    return [0.0 if r is None else r for r in rates]


def water_filling(cap_bps: np.ndarray, capacity_bps: float,
                  coef: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates (bit/s) of flows with standalone caps ``cap_bps`` sharing one
    constraint of ``capacity_bps`` (coefficients ``coef``; None: all 1, a wired direction)
    and no other saturated one: every flow at its cap while the caps fit; else the flows below
    the fair share at their caps and the rest at the share. Vectorised, O(m log m)."""
    load = cap_bps if coef is None else coef * cap_bps
    if load.sum() <= capacity_bps * (1.0 + CAPACITY_TOLERANCE):
        return cap_bps.astype(float, copy=True)
    order = np.argsort(cap_bps, kind="stable")
    caps = cap_bps[order]
    m = len(caps)
    loads = load[order]
    before = np.cumsum(loads) - loads                     # load of the flows capped before j
    weight = np.arange(m, 0, -1) if coef is None else np.cumsum(coef[order][::-1])[::-1]
    share_if = fair_share(capacity_bps, before, weight)   # the share if j is the first sharer
    capped = caps < share_if * (1.0 - CAPACITY_TOLERANCE)  # a prefix (the share only grows)
    first = int(np.argmin(capped)) if not capped.all() else m - 1
    rate = caps.copy()
    rate[first:] = share_if[first]
    out = np.empty(m)
    out[order] = rate
    return out
