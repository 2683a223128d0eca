"""Max-min fair sharing of link directions by flows: the rules every path of netsim uses.

netsim's flow model is plain max-min fairness: every flow gets the largest rate such that no
flow could go faster without slowing one that is not faster. It matched SimGrid's CM02 network
model with latency weighting off to 2.3e-13 on 257 cases; SimGrid's default additionally
weights each flow's share by its route's latency, which netsim does not.

Two routines, one rule:

- :func:`progressive_filling`: the general allocation over any routes (fill every flow's rate
  up together, freeze the flows of the link that saturates first, repeat). The flow network
  (netsim.network.flows) uses it whenever it re-shares everything at once: a flow crossing two
  saturated links, a capacity change, a return from that fallback.
- :func:`water_filling`: the allocation on one link direction whose flows cross no other
  saturated direction (the case max-min decomposes into): flows whose cap is below the fair
  share run at their cap, the others share what is left equally. The flow network keeps it
  incrementally per saturated link (its groups); the epoch fast path (netsim.network.playback,
  netsim.fastepoch) plays it forward without events.

:data:`CAPACITY_TOLERANCE` decides every tie of a rate with a capacity or a share, in every
path alike, so the paths agree to rounding (tests/test_fastepoch.py, tests/test_network.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

CAPACITY_TOLERANCE = 1e-9
"""Relative tolerance of every comparison of rates with capacities and shares."""


def progressive_filling(flow_hops: Sequence[Sequence[int]],
                        capacity_bps: Sequence[float]) -> list[float]:
    """Max-min fair rate (bit/s) of each flow, flow i crossing the link directions
    ``flow_hops[i]`` (indices into ``capacity_bps``, bit/s). A flow's rate is also bounded by
    each capacity on its route, so no separate cap is needed. O(hops log links)."""
    residual: dict[int, float] = {}
    count: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for f, hops in enumerate(flow_hops):
        for h in hops:
            if h in count:
                count[h] += 1
                members[h].append(f)
            else:
                count[h], residual[h], members[h] = 1, float(capacity_bps[h]), [f]
    key = {h: residual[h] / count[h] for h in count}
    heap = [(k, h) for h, k in key.items()]
    heapq.heapify(heap)
    rates: list[float | None] = [None] * len(flow_hops)
    while heap:
        share, h = heapq.heappop(heap)
        if count[h] == 0 or key[h] != share:
            continue
        for f in members[h]:
            if rates[f] is not None:
                continue
            rates[f] = share
            for hop in flow_hops[f]:
                residual[hop] -= share
                count[hop] -= 1
                if count[hop] > 0:
                    key[hop] = max(residual[hop], 0.0) / count[hop]
                    heapq.heappush(heap, (key[hop], hop))
    return [0.0 if r is None else r for r in rates]


def water_filling(cap_bps: np.ndarray, capacity_bps: float) -> np.ndarray:
    """Max-min fair rates (bit/s) of flows with standalone caps ``cap_bps`` sharing one link
    direction of ``capacity_bps`` (bit/s) and no other saturated one: every flow at its cap
    while the caps fit; else the flows below the fair share at their caps and the rest at the
    share. Vectorised, O(m log m)."""
    if cap_bps.sum() <= capacity_bps * (1.0 + CAPACITY_TOLERANCE):
        return cap_bps.astype(float, copy=True)
    order = np.argsort(cap_bps, kind="stable")
    caps = cap_bps[order]
    m = len(caps)
    before = np.cumsum(caps) - caps                       # caps of the flows capped before j
    share_if = (capacity_bps - before) / np.arange(m, 0, -1)  # the share if j is the first sharer
    capped = caps < share_if * (1.0 - CAPACITY_TOLERANCE)  # a prefix (the share only grows)
    first = int(np.argmin(capped)) if not capped.all() else m - 1
    rate = caps.copy()
    rate[first:] = share_if[first]
    out = np.empty(m)
    out[order] = rate
    return out
