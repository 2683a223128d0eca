"""A plain synchronous epoch played forward in arrays, without SimPy events (netsim's fast path).

A *plain* epoch is netsim's synchronous epoch with participants only (no clusters) on an idle
network: every participant downloads the variant from the aggregator at the epoch's start,
trains, and uploads its update. Its timeline needs no event queue when the flows of each phase
can be played forward link by link:

- downloads and uploads cross disjoint link directions (true of any tree, such as the
  generated networks and every star), so the two phases never share a link, except a Wi-Fi
  cell's one air-time budget, where every download must have left before the first upload
  starts;
- in each phase, every flow crosses at most one *binding* constraint: one that can saturate
  (:func:`netsim.network.sharing.can_bind`: its flows' caps overfill it, and the cells behind
  it can fill it). Every other constraint never binds, and max-min fairness over the network
  decomposes into one water-filling per binding constraint (:mod:`netsim.network.playback`),
  exactly as :mod:`netsim.network.flows` keeps it;
- or the binding constraints are *nested* (:func:`_nested`): flows cross at most two, an inner
  one (a cell, a backhaul) and one outer link direction (the aggregator's) that every flow of
  each inner one also crosses, each flow's inner constraint being its bottleneck but for the
  outer link. Then a cell's members share one rate and the outer link water-fills the cells
  (:mod:`netsim.network.nested`): the generated networks whose cells together can fill the
  aggregator's link (above about 3,000 devices with the catalog's cells).

Then the downloads (all starting now, all the same size) are one vectorised water-filling each;
each participant's training starts when its download arrives and lasts samples x FLOP per sample
/ FLOP/s; each upload starts when training ends, and the uploads on one binding direction are
played forward by :func:`netsim.network.playback.last_bit_times` (nested:
:func:`netsim.network.nested.nested_last_bit_times`). When a condition fails (a mesh whose
routes cross several binding links, transfers still moving, clusters) the engine runs the epoch
as SimPy events (netsim.engine), which stay the reference: tests/test_fastepoch.py checks that
both give the same times, energy and bytes to rounding.

In a changing world (netsim.dynamics) the capacities are piecewise constant and known in
advance (:class:`CapacityPieces`). A phase is then played piece by piece (:func:`play_phase`):
each piece starts with the flows present and the bits they have left, under that piece's
capacities, standalone rates and medium coefficients, up to the next change, as the flow
network re-shares its flows at each change (``FlowNetwork.set_capacities``); each piece must
meet the conditions above on its own, else the epoch runs as events
(tests/test_capacity_pieces.py).

Cost: O(n log n) numpy work per epoch and one small loop step per contended upload, instead of
about three SimPy events and their heap operations per participant (benchmarks/engine.py (c)).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from netsim import loopguard
from netsim.network import Route
from netsim.network.nested import nested_last_bit_times_until
from netsim.network.playback import constant_rates_until, last_bit_times_until
from netsim.network.radio import RadioMeter
from netsim.network.sharing import can_bind
from netsim.network.tolerances import CAPACITY_TOLERANCE

_INF = float("inf")
MAX_PIECES_PER_PHASE = 10_000_000
"""Capacity changes one phase may cross before :func:`play_phase` reports a stuck loop
(netsim.loopguard)."""


@dataclass(frozen=True)
class RouteTable:
    """Routes as arrays, one row per route: ``Route.id``, the standalone rate (bit/s, the
    smallest capacity over coefficient on it; inf without hops), the latency (s), and the
    constraints crossed in CSR form (``hops[hop_start[r]:hop_start[r + 1]]``) with, per hop,
    the directed link whose capacity is the station rate of a medium hop (``rate_ref``; -1 on
    a link hop: coefficient 1)."""

    route_id: np.ndarray
    cap_bps: np.ndarray
    latency_s: np.ndarray
    hop_start: np.ndarray
    hops: np.ndarray
    rate_ref: np.ndarray
    radios: tuple[tuple[int, ...], ...] = ()
    """Per route, the radios active while a transfer on it is in progress
    (:attr:`netsim.network.topology.Route.radios`)."""
    radio_start: np.ndarray | None = None
    radio_ids: np.ndarray | None = None
    """``radios`` in CSR form (``radio_ids[radio_start[r]:radio_start[r + 1]]``; set by
    :meth:`of`)."""

    def __post_init__(self) -> None:
        """Read-only arrays: a table handed to policies (through the device table) cannot be
        changed by them."""
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @classmethod
    def of(cls, routes: Sequence[Route]) -> RouteTable:
        """The table of ``routes``, in their order."""
        counts = np.array([len(r.hops) for r in routes], dtype=np.intp)
        start = np.zeros(len(routes) + 1, dtype=np.intp)
        np.cumsum(counts, out=start[1:])
        total = int(start[-1])
        return cls(np.array([r.id for r in routes], dtype=np.intp),
                   np.array([r.bottleneck_bps for r in routes], dtype=float),
                   np.array([r.latency_s for r in routes], dtype=float),
                   start, np.fromiter((h for r in routes for h in r.hops), dtype=np.intp,
                                      count=total),
                   np.fromiter((x for r in routes for x in (r.rate_refs or (-1,) * len(r.hops))),
                               dtype=np.intp, count=total),
                   tuple(r.radios for r in routes),
                   np.concatenate([[0], np.cumsum([len(r.radios) for r in routes])]
                                  ).astype(np.intp),
                   np.fromiter((x for r in routes for x in r.radios), dtype=np.intp))

    def hops_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The hops of the routes ``rows``: (position in ``rows`` of each hop, hop, its
        rate reference)."""
        counts = self.hop_start[rows + 1] - self.hop_start[rows]
        total = int(counts.sum())
        owner = np.repeat(np.arange(len(rows)), counts)
        at = np.repeat(self.hop_start[rows] - (np.cumsum(counts) - counts), counts) \
            + np.arange(total)
        return owner, self.hops[at], self.rate_ref[at]

    def blocks(self, size: int = 1 << 18) -> Iterator[tuple[np.ndarray, np.ndarray,
                                                             np.ndarray]]:
        """:meth:`hops_of` every row in order, in blocks of consecutive rows of at most
        ``size`` hops each (or one row): the arrays of ``hops_of(np.arange(len(route_id)))``
        cut at row boundaries, the hops and rate references read-only views of the table's."""
        start = self.hop_start
        n = len(start) - 1
        r = 0
        while r < n:
            end = min(max(int(np.searchsorted(start, start[r] + size, side="right")) - 1,
                          r + 1), n)
            first, last = int(start[r]), int(start[end])
            yield (np.repeat(np.arange(r, end), np.diff(start[r:end + 1])),
                   self.hops[first:last], self.rate_ref[first:last])
            r = end


def hop_coefficients(rate_ref: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Each hop's coefficient under ``capacity`` (per constraint): 1 on a link direction,
    1 / station rate on a medium (:meth:`netsim.network.topology.Route.coefficients`)."""
    out = np.ones(len(rate_ref))
    medium = rate_ref >= 0
    if medium.any():
        out[medium] = 1.0 / capacity[rate_ref[medium]]
    return out


def hop_rates(hops: np.ndarray, rate_ref: np.ndarray, capacity_bps: np.ndarray) -> np.ndarray:
    """What each hop lets one flow through alone under ``capacity_bps`` (per constraint):
    its capacity over its coefficient (bit/s; a medium: budget x station rate)."""
    capacity = np.asarray(capacity_bps, dtype=float)
    return capacity[hops] / hop_coefficients(rate_ref, capacity)


def route_caps(routes: RouteTable, capacity_bps: np.ndarray) -> np.ndarray:
    """Each route's standalone rate under ``capacity_bps`` (per constraint): the smallest
    capacity over coefficient on it (:meth:`netsim.network.topology.Route.cap`); inf for a
    route without hops."""
    counts = np.diff(routes.hop_start)
    out = np.full(len(counts), np.inf)
    has = counts > 0
    if has.any():
        per_hop = hop_rates(routes.hops, routes.rate_ref, capacity_bps)
        out[has] = np.minimum.reduceat(per_hop, routes.hop_start[:-1][has])
    return out


def flow_caps(owner_hops: tuple[np.ndarray, np.ndarray, np.ndarray], n_flows: int,
              capacity_bps: np.ndarray) -> np.ndarray:
    """Each of ``n_flows`` flows' standalone rate under ``capacity_bps`` (bit/s; inf without
    hops), from their hops as :meth:`RouteTable.hops_of` gives them (owners in order): the
    :func:`route_caps` of their routes."""
    owner, hops, refs = owner_hops
    out = np.full(n_flows, np.inf)
    if len(hops):
        first = np.flatnonzero(np.concatenate([[True], owner[1:] != owner[:-1]]))
        out[owner[first]] = np.minimum.reduceat(hop_rates(hops, refs, capacity_bps), first)
    return out


@dataclass(frozen=True)
class CapacityPieces:
    """Capacities that change at known instants (netsim.dynamics: piecewise constant):
    ``capacity_at(t)``, every constraint's capacity in force at ``t`` (s; bit/s on a link
    direction, a medium's air-time budget), and ``next_change_s(t)``, the first instant after
    ``t`` at which it may change (s, > t; inf: never)."""

    capacity_at: Callable[[float], np.ndarray]
    next_change_s: Callable[[float], float]


@dataclass(frozen=True)
class PlainEpoch:
    """One plain epoch's timeline, per participant (s)."""

    download_arrival_s: np.ndarray
    """When the variant has arrived (training starts)."""
    trained_s: np.ndarray
    """When training ends and the upload starts."""
    upload_arrival_s: np.ndarray
    """When the update has arrived at the aggregator."""
    capacity_changes: int = 0
    """How many capacity changes fell inside a phase, after its first transfer started and
    before its last bit left (a changing world's epoch, played piece by piece:
    :func:`play_phase`)."""


def play_phase(start_s: np.ndarray, rows: np.ndarray, routes: RouteTable,
               bits: float | np.ndarray, capacity_bps: np.ndarray,
               owner_hops: tuple[np.ndarray, np.ndarray, np.ndarray],
               onset_flows: np.ndarray | None = None,
               pieces: CapacityPieces | None = None) -> tuple[np.ndarray, int] | None:
    """When each flow's last bit leaves (s), flow j starting at ``start_s[j]`` on route
    ``rows[j]`` with ``bits`` bits (one size for all, or each flow's), and how many capacity
    changes fell inside the phase; None
    if some flow crosses two binding constraints or a contended medium could pass its onset
    (its budget would change with its flows: events). ``owner_hops``: ``routes.hops_of(rows)``;
    ``onset_flows``: per constraint, the flows from which a medium's budget shrinks (inf:
    never; None: no contended medium).

    ``pieces`` (a changing world): the capacities change at known instants; the phase is
    played piece by piece, each piece from the flows present at its start with the bits they
    have left, under that piece's capacities, caps and coefficients (the flow network
    re-shares them so at each change), each piece meeting the conditions above on its own
    (else None). Without ``pieces``: ``capacity_bps`` and the caps ``routes`` holds."""
    if pieces is None:
        sizes = np.array(np.broadcast_to(np.asarray(bits, dtype=float), (len(rows),)))
        played = _play_piece(start_s, routes.cap_bps[rows], sizes, capacity_bps, owner_hops,
                             onset_flows, _INF)
        return None if played is None else (played[0], 0)
    stopped = play_phase_stopping(start_s, rows, routes, bits, capacity_bps, owner_hops,
                                  onset_flows, pieces, None)
    return None if stopped is None else (stopped.last_bit_s, stopped.capacity_changes)


@dataclass(frozen=True)
class StoppedPhase:
    """A phase whose flows may be stopped mid-transfer (:func:`play_phase_stopping`)."""

    last_bit_s: np.ndarray
    """When each flow's last bit left (s; inf: it was stopped first)."""
    cut_bits: np.ndarray
    """The bits each flow had left when it was stopped (NaN: it was not)."""
    capacity_changes: int


def play_phase_stopping(start_s: np.ndarray, rows: np.ndarray, routes: RouteTable,
                        bits: float | np.ndarray,
                        capacity_bps: np.ndarray,
                        owner_hops: tuple[np.ndarray, np.ndarray, np.ndarray],
                        onset_flows: np.ndarray | None, pieces: CapacityPieces | None,
                        stop_s: np.ndarray | None) -> StoppedPhase | None:
    """:func:`play_phase` where flow j is stopped at ``stop_s[j]`` (s, >= its start; inf:
    never; None: no flow is) unless its last bit has left by then (a finish at its stop
    instant comes first): its sender went offline, its battery emptied, or the epoch closed.
    A stop is one more piece boundary, as a capacity change is: the flows present are played
    up to it, the stopped ones leave with the bits they have left (the flow network's
    ``cancel``), and the others go on from there with theirs, re-shared (netsim's, as the
    flow network re-shares at a cancel). Each piece meets the array path's conditions on its
    own, else None. Without ``pieces`` the capacities are ``capacity_bps`` throughout and the
    caps those ``routes`` holds."""
    m = len(rows)
    last_bit = np.full(m, _INF)
    left = np.array(np.broadcast_to(np.asarray(bits, dtype=float), (m,)))  # (its own)
    cut_bits = np.full(m, np.nan)
    waiting = np.ones(m, dtype=bool)  # not done, not stopped
    t = float(start_s.min()) if m else 0.0
    changes = boundaries = 0
    static_caps = routes.cap_bps[rows] if pieces is None else None
    # Termination: each pass plays one piece, which ends strictly after it begins (checked):
    # at a capacity change, or at the earliest stop of a flow still moving, which stops it
    # (a stop at or before a piece's start stops its flow before the piece); the flows'
    # rates are positive, so the phase ends after finitely many pieces; the bound is on how
    # many a phase may cross (a piece per ms for 2.8 hours)
    most = loopguard.bound(MAX_PIECES_PER_PHASE)
    while True:
        until = _INF if pieces is None else pieces.next_change_s(t)
        if not until > t or boundaries >= most:
            loopguard.stuck("netsim.fastepoch.play_phase", most, {
                "start_s": start_s, "rows": rows, "bits": bits, "piece_start_s": t,
                "next_change_s": until, "pieces_crossed": boundaries, "left": left},
                None if until > t else f"was told the capacities change next at {until!r} s, "
                "not after the piece's start")
        if stop_s is not None:  # (stopped at the piece's start, or before: not played)
            due = waiting & (stop_s <= t) & (start_s <= t)
            if due.any():
                cut_bits[due] = left[due]
                waiting &= ~due
        end = until
        present = waiting & (start_s < until)
        if present.any():
            capacity = capacity_bps if pieces is None else pieces.capacity_at(t)
            played = _piece_of(start_s, left, present, t, capacity, owner_hops, onset_flows,
                               until, static_caps)
            if played is None:
                return None
            done_s, rest = played
            if stop_s is not None:  # the earliest stop before its flow's last bit: the end
                at = np.flatnonzero(present)
                early = stop_s[at] < np.minimum(done_s, until)
                if early.any():
                    end = float(stop_s[at][early].min())
                    present = waiting & (start_s < end)
                    played = _piece_of(start_s, left, present, t, capacity, owner_hops,
                                       onset_flows, end, static_caps)
                    if played is None:
                        return None
                    done_s, rest = played
            at = np.flatnonzero(present)
            done = done_s <= end
            last_bit[at[done]] = done_s[done]
            waiting[at[done]] = False
            left[at[~done]] = rest[~done]
        if not waiting.any() or end == _INF:
            return StoppedPhase(last_bit, cut_bits, changes)
        boundaries += 1
        if end == until:  # a change inside the phase: the next piece
            changes += 1
        t = end


def _piece_of(start_s: np.ndarray, left: np.ndarray, present: np.ndarray, t: float,
              capacity: np.ndarray, owner_hops: tuple[np.ndarray, np.ndarray, np.ndarray],
              onset_flows: np.ndarray | None, until_s: float,
              static_caps: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_play_piece` of the flows ``present`` (a mask) from ``t`` (s) to ``until_s``
    with the bits they have left, their caps under ``capacity`` (``static_caps``: the
    route table's, where the capacities never change)."""
    at = np.flatnonzero(present)
    hops_in = _subset(owner_hops, present)
    caps = flow_caps(hops_in, len(at), capacity) if static_caps is None else static_caps[at]
    return _play_piece(np.maximum(start_s[at], t), caps, left[at], capacity, hops_in,
                       onset_flows, until_s)


def _subset(owner_hops: tuple[np.ndarray, np.ndarray, np.ndarray], keep: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hops (as :meth:`RouteTable.hops_of` gives them) of the flows ``keep`` (a mask),
    owners renumbered in their order."""
    if keep.all():
        return owner_hops
    owner, hops, refs = owner_hops
    sel = keep[owner]
    return (np.cumsum(keep) - 1)[owner[sel]], hops[sel], refs[sel]


def _play_piece(start_s: np.ndarray, caps: np.ndarray, bits: np.ndarray,
                capacity_bps: np.ndarray,
                owner_hops: tuple[np.ndarray, np.ndarray, np.ndarray],
                onset_flows: np.ndarray | None, until_s: float
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """Flows of standalone rates ``caps`` (bit/s) with ``bits`` bits each, starting at
    ``start_s`` (s, before ``until_s``), under constant capacities up to ``until_s``:
    (when each last bit leaves (s; inf: after ``until_s``), the bits each has left then), or
    None (see :func:`play_phase`)."""
    owner, hops, refs = owner_hops
    media = bool(len(refs)) and bool(refs.max() >= 0)
    coef = hop_coefficients(refs, capacity_bps) if media else None
    if onset_flows is not None and len(hops):
        crossed, flows_on = np.unique(hops, return_counts=True)
        if np.any(flows_on > onset_flows[crossed]):
            return None
    capacity = np.asarray(capacity_bps, dtype=float)
    binding = can_bind(owner, hops, coef, caps, capacity)
    hit = binding[hops]
    # alone on every constraint it crosses (inf cap: at once)
    last_bit, left = constant_rates_until(start_s, caps, bits, until_s)
    if len(owner) and hit.any() and np.bincount(owner[hit]).max() > 1:
        nested = _nested(owner, hops, coef, hit, caps, capacity)
        if nested is None:
            return None
        flows, group, group_coef, group_capacity, outer = nested
        last_bit[flows], left[flows] = nested_last_bit_times_until(
            start_s[flows], bits[flows], group, group_coef, group_capacity,
            float(capacity[outer]), until_s)
        hit &= ~np.isin(owner, flows)  # (the other flows: one binding constraint each)
    shared_owner, shared_hop = owner[hit], hops[hit]
    if len(shared_owner) >= _BATCHED_FLOWS:
        batched = _independent_groups(shared_owner, shared_hop,
                                      None if coef is None else coef[hit], caps, capacity)
        if batched is not None:  # many constraints, no flow capped below its share: at once
            group, group_coef, group_capacity = batched
            last_bit[shared_owner], left[shared_owner] = nested_last_bit_times_until(
                start_s[shared_owner], bits[shared_owner], group, group_coef,
                group_capacity, _INF, until_s)
            shared_owner = shared_owner[:0]
    if len(shared_owner):
        shared_coef = None if coef is None else coef[hit]
        order = np.argsort(shared_hop, kind="stable")
        flows, links = shared_owner[order], shared_hop[order]
        cuts = np.flatnonzero(np.diff(links)) + 1
        for group in np.split(np.arange(len(flows)), cuts):
            f = flows[group]
            last_bit[f], left[f] = last_bit_times_until(
                start_s[f], caps[f], bits[f], float(capacity[links[group[0]]]),
                None if shared_coef is None else shared_coef[order[group]], until_s)
    return last_bit, left


#: From this many flows on binding constraints (each flow on one), a phase whose flows can
#: all take their constraint's whole capacity alone plays every constraint in one call
#: (:func:`_independent_groups`) instead of one call each: an edge round's cells
#: (benchmarks/hierarchical.py).
_BATCHED_FLOWS = 64


def _independent_groups(owner: np.ndarray, hop: np.ndarray, coef: np.ndarray | None,
                        caps: np.ndarray, capacity: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Flows ``owner`` each on one binding constraint ``hop`` (coefficient ``coef`` there;
    None: 1) as the groups of :func:`~netsim.network.nested.nested_last_bit_times_until`
    under no outer constraint (infinite capacity: the groups never meet): (each flow's
    group, its coefficient, each group's capacity); None where some flow's standalone rate
    is below what its constraint gives it alone (cap x coef < capacity: it would be capped
    below its share there, which the groups do not model; then: one call per constraint).
    Within a group, members share its capacity in proportion to 1 / coef, as
    :func:`~netsim.network.playback.last_bit_times_until` shares it when no cap binds."""
    a = np.ones(len(hop)) if coef is None else coef
    if np.any(caps[owner] * a < capacity[hop] * (1.0 - CAPACITY_TOLERANCE)):
        return None
    inner, group = np.unique(hop, return_inverse=True)
    return group, a, capacity[inner]


def _nested(owner: np.ndarray, hops: np.ndarray, coef: np.ndarray | None, hit: np.ndarray,
            caps: np.ndarray, capacity: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int] | None:
    """Where some flows cross two binding constraints: the nested case of
    :mod:`netsim.network.nested` (cells under one outer link direction), as (flows on the
    outer constraint, each one's group, its coefficient there, each group's capacity, the
    outer constraint), or None when the phase is not nested (then: events)."""
    per_flow = np.bincount(owner[hit], minlength=len(caps))
    if per_flow.max() > 2:
        return None
    two = per_flow[owner] == 2
    pair_hops = hops[hit & two]
    outer = int(np.bincount(pair_hops).argmax())
    n_two = int((per_flow == 2).sum())
    on_outer = hops == outer
    if int((on_outer & two).sum()) != n_two:  # some pair does not include the outer one
        return None
    a = np.ones(len(hops)) if coef is None else coef
    if np.any(a[on_outer] != 1.0):  # the outer constraint must be a link direction
        return None
    inner_at = hit & two & ~on_outer
    inner = np.unique(hops[inner_at])
    single = hit & (per_flow[owner] == 1)
    if np.isin(hops[single], inner).any():  # an inner constraint's flow misses the outer one
        return None
    # each member's rate on its route but the outer link is what its cell gives it alone
    # (cap x coef = capacity): the outer link's own capacity never caps below its share
    members, inner_hop = owner[inner_at], hops[inner_at]
    own_cap = np.full(len(caps), np.inf)
    np.minimum.at(own_cap, owner[~on_outer], capacity[hops[~on_outer]] / a[~on_outer])
    if np.any(own_cap[members] * a[inner_at]
              < capacity[inner_hop] * (1.0 - CAPACITY_TOLERANCE)):
        return None
    direct = owner[single & on_outer]
    flows = np.concatenate([members, direct])
    group = np.concatenate([np.searchsorted(inner, inner_hop),
                            len(inner) + np.arange(len(direct))])
    group_coef = np.concatenate([a[inner_at], np.ones(len(direct))])
    group_capacity = np.concatenate([capacity[inner],
                                     np.minimum(own_cap[direct], capacity[outer])])
    return flows, group, group_coef, group_capacity, outer


def book_radios(radio: RadioMeter, now_s: float | np.ndarray, rows: np.ndarray, down: RouteTable,
                up: RouteTable, plan: PlainEpoch, uploading: np.ndarray | None = None,
                moving: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """A plain epoch's radio energy (netsim.network.radio) as the event path drives it: each
    download from ``now_s`` to its arrival, each upload from the end of training to its
    arrival, on the radios of their routes. ``uploading`` (a mask): the participants whose
    upload started (the others' upload times are not read); where a transfer was stopped,
    ``plan`` holds when (netsim.epochs.stopping). ``moving``: which participants' downloads
    and uploads move bytes (a transfer of none wakes no radio: the event path's; None:
    all)."""
    if not radio:
        return
    down_mask = None if moving is None or moving[0].all() else moving[0]
    up_mask = uploading
    if moving is not None and not moving[1].all():
        up_mask = moving[1] if up_mask is None else up_mask & moving[1]
    ids, starts, arrivals = [], [], []
    for table, begin, end, mask in (
            (down, np.broadcast_to(np.asarray(now_s, dtype=float), (len(rows),)),
             plan.download_arrival_s, down_mask),
            (up, plan.trained_s, plan.upload_arrival_s, up_mask)):
        radio_start, radio_ids = table.radio_start, table.radio_ids
        if radio_start is None or radio_ids is None or not len(radio_ids):
            continue
        moved = rows
        if mask is not None:
            moved, begin, end = rows[mask], begin[mask], end[mask]
        counts = radio_start[moved + 1] - radio_start[moved]
        at = np.repeat(radio_start[moved] - (np.cumsum(counts) - counts), counts) \
            + np.arange(int(counts.sum()))
        ids.append(radio_ids[at])
        starts.append(np.repeat(begin, counts))
        arrivals.append(np.repeat(end, counts))
    if ids:  # (two phases: the downloads' entries first, if any)
        radio.play(np.concatenate(ids), np.concatenate(starts), np.concatenate(arrivals),
                   first_phase=len(ids[0]) if len(ids) == 2 else None)


def play_plain_epoch(now_s: float | np.ndarray, rows: np.ndarray, compute_s: np.ndarray,
                     bits: float | np.ndarray, down: RouteTable, up: RouteTable,
                     capacity_bps: np.ndarray, pieces: CapacityPieces | None = None,
                     onset_flows: np.ndarray | None = None,
                     up_bits: float | np.ndarray | None = None) -> PlainEpoch | None:
    """The timeline of a plain epoch starting at ``now_s`` (s; one instant, or each
    participant's download its own: a hierarchical round's edges at their own pace) on an
    idle network, or None when it needs the event engine (see the module's conditions).

    ``rows``: each participant's row in ``down`` (aggregator to it) and ``up`` (it to the
    aggregator); ``compute_s``: its training time (s); ``bits``: what each download moves
    (bits; one size for all, the variant's, or each participant's); ``up_bits``: what each
    upload moves (bits; None: as its download).
    ``pieces``: in a world whose capacities change (netsim.dynamics), the capacities over time
    (``capacity_bps`` and the caps the tables hold are then not read): each phase is played
    piece by piece (:func:`play_phase`). ``onset_flows``: per constraint, where a contended
    medium's budget starts to shrink (:func:`play_phase`).

    Both phases may cross one constraint (a Wi-Fi cell's single air-time budget): they are
    still played apart when, on every such constraint, every download's last bit has left
    before the first upload starts (then no flow of one phase ever meets one of the other
    there); else the epoch needs the event engine.
    """
    down_hops, up_hops = down.hops_of(rows), up.hops_of(rows)
    both = np.isin(up_hops[1], down_hops[1])  # (sets of the hops crossed: work follows them)
    start = np.array(np.broadcast_to(np.asarray(now_s, dtype=float), (len(rows),)))
    played = play_phase(start, rows, down, bits, capacity_bps, down_hops, onset_flows, pieces)
    if played is None:
        return None
    last_bit, changes = played
    arrival = last_bit + down.latency_s[rows]
    trained = arrival + compute_s
    if both.any():  # constraints of both phases: the downloads there end before uploads start
        shared = np.unique(up_hops[1][both])
        on_down, on_up = np.isin(down_hops[1], shared), np.isin(up_hops[1], shared)
        last_down = np.full(len(shared), -np.inf)
        np.maximum.at(last_down, np.searchsorted(shared, down_hops[1][on_down]),
                      last_bit[down_hops[0][on_down]])
        first_up = np.full(len(shared), np.inf)
        np.minimum.at(first_up, np.searchsorted(shared, up_hops[1][on_up]),
                      trained[up_hops[0][on_up]])
        if np.any(last_down > first_up):
            return None
    played = play_phase(trained, rows, up, bits if up_bits is None else up_bits, capacity_bps,
                        up_hops, onset_flows, pieces)
    if played is None:
        return None
    last_up, up_changes = played
    return PlainEpoch(arrival, trained, last_up + up.latency_s[rows], changes + up_changes)
