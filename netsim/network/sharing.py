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
give exactly the rates they gave before media existed. Completion times match SimGrid 3.32's CM02
model and its Wi-Fi model to 2e-15 on random cells and stars (benchmarks/simgrid_media.py,
figures in docs/wireless.md); SimGrid's default model additionally weights each flow's share
by its route's latency, which netsim does not.

The rules, one place for every path:

- :func:`progressive_filling`: the general allocation over any routes (fill every flow's rate
  up together, freeze the flows of the constraint that saturates first, repeat). The flow
  network (netsim.network.flows) uses it whenever it re-shares everything at once.
- :func:`water_filling`: the allocation on one constraint whose flows cross no other
  saturated one (the case max-min decomposes into): flows whose cap is below the fair share run
  at their cap, the others share what is left equally. The flow network keeps it incrementally
  per saturated constraint (its groups, with :func:`fair_share`); the epoch fast path
  (netsim.network.playback, netsim.fastepoch) plays it forward without events.
- :func:`fair_share`: the equal rate of the sharing flows of one constraint;
  :func:`level_share` and :func:`rebalance_move`: the rule by which water-filling is kept
  incrementally as flows come and go (the flow network's groups, the array playback and the
  nested playback of cells under one link, netsim.network.nested, all restore it with these,
  each over its own bookkeeping).
- :func:`medium_budget`: a Wi-Fi cell's air-time budget with n active flows (contention).

:data:`CAPACITY_TOLERANCE` decides every tie of a rate with a capacity or a share, in every
path alike, so the paths agree to rounding (tests/test_fastepoch.py, tests/test_network.py);
it and the other tolerances of the flow arithmetic are in :mod:`netsim.network.tolerances`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import numpy as np

from netsim.network.tolerances import CAPACITY_TOLERANCE

_Rate = TypeVar("_Rate", float, np.ndarray)

_INF = float("inf")
_FEW = 4096
"""Below this many hops, :func:`can_bind` sorts (cheaper on few) where it otherwise takes
minima per flow or counts per pair (the same results)."""


def fair_share(capacity: float, capped_load: _Rate, sharing_weight: _Rate | int) -> _Rate:
    """The rate (bit/s) each sharing flow of one constraint gets: what the capped flows leave
    of ``capacity`` (their ``coef x cap`` summed in ``capped_load``) over the sharing flows'
    coefficients summed (``sharing_weight``; their count on a wired direction)."""
    return (capacity - capped_load) / sharing_weight


def level_share(capacity: float, capped_load: float, sharing_weight: float,
                n_sharing: int) -> float:
    """The share of one constraint kept by incremental water-filling: :func:`fair_share`
    while some flow shares; with none, inf while the capped flows fit (with the tolerance:
    nobody needs to share) and -inf otherwise (some capped flow must come to share)."""
    if n_sharing:
        return (capacity - capped_load) / sharing_weight
    return _INF if capped_load <= capacity * (1.0 + CAPACITY_TOLERANCE) else -_INF


def rebalance_move(share: float, lowest_sharing_cap: float | None,
                   highest_capped_cap: float | None) -> int:
    """The one rule of incremental water-filling, for the event-driven groups
    (netsim.network.flows) and the array playback (netsim.network.playback) alike: at
    ``share``, -1 when the sharing flow of lowest cap is below it (it must run at its cap),
    +1 when the capped flow of highest cap is above it (it must share), 0 when the
    allocation is the water-filling (each move changes the share; repeat until 0)."""
    if lowest_sharing_cap is not None and lowest_sharing_cap < share * (1.0 - CAPACITY_TOLERANCE):
        return -1
    if highest_capped_cap is not None and highest_capped_cap > share * (1.0 + CAPACITY_TOLERANCE):
        return 1
    return 0


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
                        capacity_bps: Sequence[float] | np.ndarray,
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


def water_filling_one(cap_bps: float, coef: float, capacity_bps: float) -> float:
    """:func:`water_filling` of one flow (bit/s): its cap while it fits, else the whole
    constraint (capacity over its coefficient)."""
    if coef * cap_bps <= capacity_bps * (1.0 + CAPACITY_TOLERANCE):
        return float(cap_bps)
    return capacity_bps / coef


def water_filling_rates(cap_bps: Sequence[float], coef: Sequence[float],
                        capacity_bps: float) -> list[float]:
    """:func:`water_filling` over Python lists, for the few flows of one constraint kept as
    they come and go (netsim.network.online): the same rule with the same tolerance (every
    flow at its cap while the caps fit; else, in order of caps, a flow below the fair share
    of the flows from it on runs at its cap, and the rest share), a loop instead of arrays
    (cheaper below a few dozen flows). Rates (bit/s) in the flows' order."""
    m = len(cap_bps)
    if m == 1:
        return [water_filling_one(cap_bps[0], coef[0], capacity_bps)]
    load = 0.0
    for c, a in zip(cap_bps, coef, strict=True):
        load += a * c
    if load <= capacity_bps * (1.0 + CAPACITY_TOLERANCE):
        return [float(c) for c in cap_bps]
    order = sorted(range(m), key=cap_bps.__getitem__)
    weight = 0.0
    for a in coef:
        weight += a
    out = [0.0] * m
    capped_load, share = 0.0, 0.0
    for j, k in enumerate(order):
        share = fair_share(capacity_bps, capped_load, weight)
        c = cap_bps[k]
        if c < share * (1.0 - CAPACITY_TOLERANCE) and j < m - 1:
            out[k] = c
            capped_load += coef[k] * c
            weight -= coef[k]
            continue
        for k2 in order[j:]:
            out[k2] = share
        break
    return out


def can_bind(owner: np.ndarray, hops: np.ndarray, coef: np.ndarray | None,
             cap_bps: np.ndarray, capacity: np.ndarray, passes: int = 4) -> np.ndarray:
    """Per constraint, whether it can ever saturate under the flows given (a phase of an
    epoch), or never can, whatever the rates the other constraints leave (netsim's bound).

    Flow ``owner[j]`` crosses constraint ``hops[j]`` with coefficient ``coef[j]`` (None: all
    1); ``cap_bps``: each flow's standalone rate (bit/s); ``capacity``: per constraint (bit/s
    on a link direction, a fraction of time on a medium). A constraint whose flows' caps fit
    (``sum coef x cap <= capacity``, with the tolerance) never binds.
    Tighter (what lets a phase through a Wi-Fi cell and a shared uplink decompose): the flows
    that share an *inner* constraint g (the one of fewest flows they cross that can bind)
    carry at most ``capacity(g) x max(coef_c / coef_g)`` over them on any other constraint c,
    since their load on g fits in its capacity: a cell of stations of rates r_i puts at most
    ``max r_i`` bit/s on its backhaul. The bound holds for every feasible allocation, so a
    constraint it clears never saturates and max-min fairness is the same without it.
    Repeated while it clears constraints (at most ``passes`` times). The work follows the
    hops given and the constraints they cross, not every constraint of the network
    (:func:`can_bind_blocks` reads the hops in blocks, for the routes of a whole fleet)."""
    capacity = np.asarray(capacity, dtype=float)
    if len(capacity) <= 4 * len(hops):  # (the constraints as numbered: about as many)
        return can_bind_blocks(lambda: ((owner, hops, coef),), cap_bps, capacity, passes)
    crossed, local = np.unique(hops, return_inverse=True)
    out = np.zeros(len(capacity), dtype=bool)
    out[crossed] = can_bind_blocks(lambda: ((owner, local.astype(np.intp), coef),), cap_bps,
                                   capacity[crossed], passes)
    return out


HopBlock = tuple[np.ndarray, np.ndarray, np.ndarray | None]
"""Hops of flows as :func:`can_bind` reads them: (owner, hops, coef; None: all 1)."""


def can_bind_blocks(blocks: Callable[[], Iterable[HopBlock]], cap_bps: np.ndarray,
                    capacity: np.ndarray, passes: int = 4) -> np.ndarray:
    """:func:`can_bind` of the hops ``blocks()`` yields, block after block: the same as over
    the blocks concatenated, bit for bit (every sum adds the same terms in the same order),
    without holding them all. ``blocks`` is called twice (once if it yields one block) and
    must yield the same blocks: the first time for each constraint's load and flows, the
    second to keep only the hops on constraints that load overfills (only they take part in
    the bound). Constraints numbered as ``capacity`` (per constraint: bit/s on a link
    direction, a fraction of time on a medium; O(len(capacity)) besides the hops);
    ``cap_bps``: each flow's standalone rate (bit/s)."""
    capacity = np.asarray(capacity, dtype=float)
    n_constraints, n_owners = len(capacity), len(cap_bps)
    limit = capacity * (1.0 + CAPACITY_TOLERANCE)
    summed = np.zeros(n_constraints)
    n_flows = np.zeros(n_constraints, dtype=np.intp)
    only: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    for k, (owner, hops, coef) in enumerate(blocks()):
        load = _loads(owner, coef, cap_bps)
        if k == 0:
            summed = np.bincount(hops, weights=load, minlength=n_constraints).astype(
                float, copy=False)  # (of no hops: integers)
            n_flows = np.bincount(hops, minlength=n_constraints)
            only = (owner, hops, np.ones(len(hops)) if coef is None else coef, load)
        else:  # (added in order, in place: the sums of one bincount over all the blocks)
            np.add.at(summed, hops, load)
            np.add.at(n_flows, hops, 1)
            only = None
    binding = (summed > limit) & (n_flows > 0)
    if only is not None:  # (one block: read once)
        keep = binding[only[1]]
        owner, hops, a, load = (x[keep] for x in only)
    else:
        n_kept = int(n_flows[binding].sum())
        owner = np.empty(n_kept, dtype=np.intp)
        hops = np.empty(n_kept, dtype=np.intp)
        a, load = np.empty(n_kept), np.empty(n_kept)
        filled = 0
        for block_owner, block_hops, coef in blocks():  # (the hops on those constraints)
            keep = binding[block_hops]
            end = filled + int(np.count_nonzero(keep))
            owner[filled:end], hops[filled:end] = block_owner[keep], block_hops[keep]
            a[filled:end] = 1.0 if coef is None else coef[keep]
            load[filled:end] = _loads(owner[filled:end], a[filled:end], cap_bps)
            filled = end
    for _ in range(passes):
        # only the hops on constraints that can still bind count (kept in their order)
        hit = binding[hops]
        if not hit.all():
            owner, hops, a, load = owner[hit], hops[hit], a[hit], load[hit]
        per_flow = np.bincount(owner, minlength=n_owners)
        if not len(per_flow) or per_flow.max() <= 1:
            break
        # each flow's inner constraint: the binding one it crosses with fewest flows; of
        # those, the one that lets it through slowest alone (capacity / coefficient: a cell
        # before the backhaul all its stations also cross, whose bound through the cell, the
        # fastest station, is the tighter); then the lowest index
        inner = _inner(owner, hops, n_flows, capacity, a, n_owners)
        own = inner[owner] == hops
        inner_coef = np.zeros(n_owners)
        inner_coef[owner[own]] = a[own]
        # a flow counts in full on its inner constraint; on the others, through its group
        # (constraint, inner constraint)
        new_load = np.bincount(hops[own], weights=load[own], minlength=n_constraints)
        via = ~own
        if via.any():
            c, g, at = _groups(hops[via], inner[owner[via]], n_constraints)
            total = np.bincount(at, weights=load[via])
            ratio = np.zeros(len(c))
            np.maximum.at(ratio, at, a[via] / inner_coef[owner[via]])
            bound = np.minimum(total, capacity[g] * ratio)
            new_load += np.bincount(c, weights=bound, minlength=n_constraints)
        cleared = binding & (new_load <= limit)
        if not cleared.any():
            break
        binding &= ~cleared
    return binding


def _loads(owner: np.ndarray, coef: np.ndarray | None, cap_bps: np.ndarray) -> np.ndarray:
    """Each hop's load at its flow's cap: coefficient x cap (bit/s, or a fraction of time)."""
    caps = np.asarray(cap_bps, dtype=float)[owner]
    return caps if coef is None else coef * caps


def _inner(owner: np.ndarray, hops: np.ndarray, n_flows: np.ndarray, capacity: np.ndarray,
           coef: np.ndarray, n_owners: int) -> np.ndarray:
    """Each flow's inner constraint (-1: none) among the hops given (``owner``, ``hops``,
    ``coef``): the one it crosses with fewest flows (``n_flows``, per constraint); of those,
    the one of least ``capacity / coef``; then the lowest index (``np.lexsort``'s order over
    the three). Minima per flow (O(hops)) rather than a sort, but for a few hops."""
    first = n_flows[hops]
    out = np.full(n_owners, -1, dtype=np.intp)
    if len(hops) < _FEW:
        order = np.lexsort((hops, capacity[hops] / coef, first, owner))
        head = order[np.concatenate([[True], owner[order][1:] != owner[order][:-1]])]
        out[owner[head]] = hops[head]
        return out
    least = np.full(n_owners, np.iinfo(first.dtype).max, dtype=first.dtype)
    np.minimum.at(least, owner, first)
    keep = first == least[owner]
    owner, hops, coef = owner[keep], hops[keep], coef[keep]
    if np.bincount(owner, minlength=n_owners).max(initial=0) <= 1:  # (no tie: decided)
        out[owner] = hops
        return out
    second = capacity[hops] / coef
    if np.isnan(second).any():  # (sorted last, where a minimum would propagate them)
        order = np.lexsort((hops, second, owner))
        head = order[np.concatenate([[True], owner[order][1:] != owner[order][:-1]])]
        out[owner[head]] = hops[head]
        return out
    least_second = np.full(n_owners, np.inf)
    np.minimum.at(least_second, owner, second)
    keep = second == least_second[owner]
    none = np.iinfo(np.intp).max
    lowest = np.full(n_owners, none, dtype=np.intp)
    np.minimum.at(lowest, owner[keep], hops[keep])
    return np.where(lowest == none, -1, lowest)


def _groups(c: np.ndarray, g: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct pairs (``c[j]``, ``g[j]``) (integers in [0, n)) in increasing order of
    (c, g), as their c and g, and each j's pair: ``np.unique(c x n + g,
    return_inverse=True)``, counted in an array of the pairs possible among the values
    present where there are many pairs and that is not much more than them, else sorted."""
    if len(c) >= _FEW and n <= 4 * len(c):
        c_values, c_at = _ranks(c, n)
        g_values, g_at = _ranks(g, n)
        width = len(g_values)
        if len(c_values) * width <= 4 * len(c):
            key = c_at * width + g_at
            present = np.bincount(key, minlength=len(c_values) * width) > 0
            pairs = np.flatnonzero(present)
            return (c_values[pairs // width], g_values[pairs % width],
                    (np.cumsum(present) - 1)[key])
    pairs, at = np.unique(c.astype(np.int64) * n + g, return_inverse=True)
    return pairs // n, pairs % n, at.astype(np.intp)


def _ranks(values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of integers in [0, n), counted in an
    array of n."""
    present = np.bincount(values, minlength=n) > 0
    return np.flatnonzero(present), (np.cumsum(present) - 1)[values]
