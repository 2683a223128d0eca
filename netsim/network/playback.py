"""Max-min fair sharing of one constraint (a link direction or a medium) by flows that start at
known times (no SimPy events).

The epoch fast path (:mod:`netsim.fastepoch`) uses this where every flow of a phase crosses at
most one link direction that can bind: there max-min fairness over the whole network reduces to
one water-filling per such direction (:mod:`netsim.network.sharing`), exactly the decomposition
:mod:`netsim.network.flows` keeps with its groups, and each direction can be played forward on its own. This is that group algorithm
(netsim's, see netsim.network.flows) as one loop over a direction's flows: flows whose cap is below the
fair share run at their cap, the others share what is left equally and advance one virtual
clock (bits served per sharing flow). While the caps of the flows present sum to at most the
capacity (with the network's relative tolerance) every flow runs at its cap. The same
tolerances as netsim.network.flows decide ties, so both give the same times to rounding
(tests/test_fastepoch.py checks them against each other). :func:`last_bit_times_until` stops
at a horizon (a capacity change, netsim.dynamics) with the bits each flow has left then.

Cost: O(m log m) for m flows, one loop step per start and per finish (most steps of a saturated
phase find every flow sharing and skip the water-filling's checks).
"""

from __future__ import annotations

import heapq
from typing import NoReturn

import numpy as np

from netsim import loopguard
from netsim.network.sharing import fair_share, level_share, rebalance_move, water_filling
from netsim.network.tolerances import CAPACITY_TOLERANCE as _TOL
from netsim.network.tolerances import clock_reached, due_limit_s

_INF = float("inf")
_UNSET = -float("inf")  # (every clock value and time is finite)


def last_bit_times(start_s: np.ndarray, cap_bps: np.ndarray, bits: np.ndarray,
                   capacity_bps: float, coef: np.ndarray | None = None) -> np.ndarray:
    """When each flow's last bit leaves (s) on one shared constraint.

    Parameters
    ----------
    start_s: when each flow starts (s), in any order.
    cap_bps: each flow's standalone rate (bit/s, > 0): the smallest capacity on its route.
    bits: each flow's size (bits, >= 0).
    capacity_bps: the shared constraint's capacity (bit/s on a link direction; a medium's
        air-time budget).
    coef: each flow's coefficient on it (1/r on a medium; None: all 1, a link direction).
    """
    return last_bit_times_until(start_s, cap_bps, bits, capacity_bps, coef)[0]


def last_bit_times_until(start_s: np.ndarray, cap_bps: np.ndarray, bits: np.ndarray,
                         capacity_bps: float, coef: np.ndarray | None = None,
                         until_s: float = _INF) -> tuple[np.ndarray, np.ndarray]:
    """:func:`last_bit_times` played up to ``until_s`` (s; every flow starts before it):
    (when each flow's last bit leaves (s; inf: after ``until_s``), the bits each has left at
    ``until_s`` (0 for those done)). Where the capacities change at ``until_s``
    (netsim.dynamics), the flows left go on from there with those bits, as the flow network
    re-shares them (:meth:`netsim.network.flows.FlowNetwork.set_capacities`)."""
    m = len(start_s)
    if m == 0:
        return np.empty(0), np.empty(0)
    if m > 1 and np.all(start_s == start_s[0]) and np.all(bits == bits[0]):
        return _together(float(start_s[0]), cap_bps, float(bits[0]), capacity_bps, coef,
                         until_s)
    out = np.empty(m)
    order = np.argsort(start_s, kind="stable")
    starts = start_s[order].tolist()
    caps = cap_bps[order].tolist()
    sizes = bits[order].tolist()
    # each flow's weight in the share and its load on the constraint (coefficient x cap)
    wts = [1.0] * m if coef is None else coef[order].tolist()
    loads = caps if coef is None else (coef[order] * cap_bps[order]).tolist()
    finished = [0.0] * m
    # a flow shares while target[k] is set (its finishing point on the clock, bits), runs at
    # its cap while due[k] is set (when its last bit leaves, s); _UNSET otherwise
    target = [_UNSET] * m
    due = [_UNSET] * m
    left = [0.0] * m        # capped: bits left at ``since``
    since = [0.0] * m
    by_target: list[tuple[float, int]] = []   # sharing flows, min-heap of targets
    by_cap: list[tuple[float, int]] = []      # sharing flows, min-heap of caps
    capped_desc: list[tuple[float, int]] = [] # capped flows, max-heap of caps (-cap)
    capped_due: list[tuple[float, int]] = []  # capped flows, min-heap of finishing times
    safe_limit = capacity_bps * (1.0 + _TOL)
    heappush, heappop = heapq.heappush, heapq.heappop
    now, clock, share = starts[0], 0.0, _INF
    n_sharing, n_capped = 0, 0
    w_sharing = 0.0  # the sharing flows' weights summed (their count on a link direction)
    capped_sum, cap_sum = 0.0, 0.0  # loads of the capped flows, of every flow present
    stale = 0  # entries of finished flows in by_cap
    nxt = 0
    rebalance = False
    # Termination: every pass but the last starts or finishes a flow (the flow whose finish
    # set the instant is reached by netsim.network.tolerances' rules), so there are at most
    # 2m + 1; a rebalance moves each flow present at most twice (water-filling's moves go one
    # way: a flow that leaves a set does not come back in the same rebalance).
    passes, most = 0, loopguard.bound(2 * m + 2)

    while True:
        passes += 1
        if passes > most:
            _stuck("last_bit_times_until", most, start_s, cap_bps, bits, capacity_bps, coef,
                   until_s)
        if rebalance:  # every flow at its cap while the caps fit, else water-filling
            rebalance = False
            if cap_sum <= safe_limit:
                if n_sharing:
                    for _, k in by_cap:
                        if target[k] != _UNSET:
                            _drop_to_cap(k, clock, now, target, left, since, due, caps,
                                         capped_due, capped_desc)
                            capped_sum += loads[k]
                            n_capped += 1
                    by_cap.clear()
                    by_target.clear()
                    n_sharing = stale = 0
                    w_sharing = 0.0
                share = _INF
            else:
                if stale > n_sharing + 64:  # mostly finished flows: rebuild, not pop them
                    by_cap = [(c, k) for c, k in by_cap if target[k] != _UNSET]
                    heapq.heapify(by_cap)
                    stale = 0
                # (stale heap entries, of flows that moved on, are dropped only when they
                # surface below the share, or above it: elsewhere they cannot change the answer)
                # (each flow moves at most twice; a pass may also drop a stale entry)
                moves, most_moves = 0, loopguard.bound(2 * (n_sharing + n_capped) + len(by_cap)
                                                       + len(capped_desc) + 2)
                while True:  # the core's rule (rebalance_move) until it says balanced
                    moves += 1
                    if moves > most_moves:
                        _stuck("last_bit_times_until (rebalance)", most_moves, start_s,
                               cap_bps, bits, capacity_bps, coef, until_s)
                    share = level_share(capacity_bps, capped_sum, w_sharing, n_sharing)
                    move = rebalance_move(share, by_cap[0][0] if by_cap else None,
                                          -capped_desc[0][0] if capped_desc else None)
                    if move < 0:  # a sharing flow whose cap is below the share
                        k = heappop(by_cap)[1]
                        if target[k] != _UNSET:
                            _drop_to_cap(k, clock, now, target, left, since, due, caps,
                                         capped_due, capped_desc)
                            n_sharing -= 1
                            w_sharing = w_sharing - wts[k] if n_sharing else 0.0
                            n_capped += 1
                            capped_sum += loads[k]
                    elif move > 0:  # a capped flow above the share joins the sharing ones
                        k = heappop(capped_desc)[1]
                        if due[k] != _UNSET:
                            rest = left[k] - caps[k] * (now - since[k])
                            target[k] = t = clock + (rest if rest > 0.0 else 0.0)
                            due[k] = _UNSET
                            heappush(by_target, (t, k))
                            heappush(by_cap, (caps[k], k))
                            n_sharing += 1
                            w_sharing += wts[k]
                            n_capped -= 1
                            capped_sum -= loads[k]
                    else:
                        break
                if share < 0.0:
                    share = 0.0

        # the next instant: a start, a sharing flow's finish, or a capped flow's finish
        at_start = starts[nxt] if nxt < m else _INF
        at = _INF  # (the next finish)
        if n_sharing:  # (then a live entry exists)
            t, k = by_target[0]
            while target[k] != t:
                heappop(by_target)
                t, k = by_target[0]
            if share > 0.0:
                at = now + (t - clock) / share
        if n_capped:
            while capped_due:
                t, k = capped_due[0]
                if due[k] == t:
                    if t < at:
                        at = t
                    break
                heappop(capped_due)
        # finishes at this instant where it is a finish's: as the flow network's wake-ups, a
        # start before every finish ends nothing (a finish due within the time slack of it
        # happens at its own instant)
        finishing = at <= at_start
        if not finishing:
            at = at_start
        if at == _INF or at > until_s:  # (nothing left to happen, or past the horizon)
            break
        # finishes at this instant (the network's tolerances: netsim.network.flows)
        if n_sharing:
            clock += share * (at - now)
            now = at
            reached = clock_reached(clock, share, now)
            while finishing and by_target and by_target[0][0] <= reached:
                t, k = heappop(by_target)
                if target[k] == t:
                    target[k], finished[k] = _UNSET, now
                    n_sharing -= 1
                    w_sharing = w_sharing - wts[k] if n_sharing else 0.0
                    cap_sum -= loads[k]
                    stale += 1  # its by_cap entry
        else:
            now = at
        if n_capped and finishing:
            limit = due_limit_s(now)
            while capped_due and capped_due[0][0] <= limit:
                t, k = heappop(capped_due)
                if due[k] == t:
                    due[k], finished[k] = _UNSET, now
                    n_capped -= 1
                    capped_sum -= loads[k]
                    cap_sum -= loads[k]
        # starts at this instant; several together join the sharing flows when the caps of
        # all will not fit (the network's batch: the rebalance caps the slow ones)
        if nxt < m and starts[nxt] <= now:
            first = nxt
            nxt += 1
            while nxt < m and starts[nxt] <= now:
                nxt += 1
            together = nxt - first > 1 and cap_sum + sum(loads[first:nxt]) > safe_limit
            for k in range(first, nxt):
                c = caps[k]
                cap_sum += loads[k]
                if together or (n_sharing and c >= share):
                    target[k] = t = clock + sizes[k]
                    n_sharing += 1
                    w_sharing += wts[k]
                    heappush(by_target, (t, k))
                    heappush(by_cap, (c, k))
                else:
                    left[k], since[k] = sizes[k], now
                    due[k] = t = now + sizes[k] / c
                    n_capped += 1
                    capped_sum += loads[k]
                    heappush(capped_due, (t, k))
                    heappush(capped_desc, (-c, k))
        # Most steps of a saturated phase find every flow sharing and no cap below the new
        # share: then the rebalance would only compute that share
        if not n_capped and n_sharing and cap_sum > safe_limit and stale <= n_sharing + 64:
            share = fair_share(capacity_bps, capped_sum, w_sharing)
            if by_cap[0][0] >= share * (1.0 - _TOL):
                continue
        rebalance = True
    if until_s == _INF and (n_sharing or n_capped):  # (nothing can move them: no capacity)
        for k in range(m):
            if target[k] != _UNSET or due[k] != _UNSET:
                finished[k] = _INF
    left_bits = [0.0] * m
    if until_s < _INF:  # the flows still moving at until_s: their bits left then
        served = clock + (share * (until_s - now) if n_sharing and share > 0.0 else 0.0)
        for k in range(m):
            if k >= nxt:  # (not started: the caller leaves such flows out)
                rest = sizes[k]
            elif target[k] != _UNSET:
                rest = target[k] - served
            elif due[k] != _UNSET:
                rest = left[k] - caps[k] * (until_s - since[k])
            else:
                continue
            finished[k], left_bits[k] = _INF, (rest if rest > 0.0 else 0.0)
    out[order] = finished
    rest_out = np.empty(m)
    rest_out[order] = left_bits
    return out, rest_out


def _stuck(function: str, most: int, start_s: np.ndarray, cap_bps: np.ndarray,
           bits: np.ndarray, capacity_bps: float, coef: np.ndarray | None,
           until_s: float) -> NoReturn:
    loopguard.stuck(f"netsim.network.playback.{function}", most,
                    {"start_s": start_s, "cap_bps": cap_bps, "bits": bits,
                     "capacity_bps": float(capacity_bps), "coef": coef,
                     "until_s": float(until_s)})


def _drop_to_cap(k: int, clock: float, now: float, target: list[float], left: list[float],
                 since: list[float], due: list[float], caps: list[float],
                 capped_due: list[tuple[float, int]],
                 capped_desc: list[tuple[float, int]]) -> None:
    """Sharing flow k runs at its cap from ``now``: what is left of it leaves at that rate."""
    rest = target[k] - clock
    left[k], since[k] = (rest if rest > 0.0 else 0.0), now
    target[k] = _UNSET
    due[k] = t = now + left[k] / caps[k]
    heapq.heappush(capped_due, (t, k))
    heapq.heappush(capped_desc, (-caps[k], k))


def _together(start_s: float, cap_bps: np.ndarray, bits: float, capacity_bps: float,
              coef: np.ndarray | None, until_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Equal flows starting together (the epoch's downloads): one water-filling, vectorised;
    (last-bit times (s; inf after ``until_s``), bits left at ``until_s``).

    The flows below the fair share run at their caps, the rest at the share; the sharing ones
    all finish first (the capped ones are slower and as large), so no rate ever changes."""
    rate = water_filling(cap_bps, capacity_bps, coef)
    return constant_rates_until(start_s, rate, bits, until_s)


def constant_rates_until(start_s: float | np.ndarray, rate_bps: np.ndarray,
                         bits: float | np.ndarray,
                         until_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Flows that keep their rates (bit/s) from ``start_s`` (s): (when each last bit leaves
    (s; inf: after ``until_s``), the bits each has left at ``until_s``; 0 for those done)."""
    done = start_s + bits / rate_bps
    if until_s == _INF:
        return done, np.zeros(len(rate_bps))
    moving = done > until_s
    left = np.zeros(len(rate_bps))
    if moving.any():  # (their rates are finite)
        start = np.broadcast_to(start_s, rate_bps.shape)[moving]
        size = np.broadcast_to(bits, rate_bps.shape)[moving]
        left[moving] = np.maximum(size - rate_bps[moving] * (until_s - start), 0.0)
    return np.where(moving, _INF, done), left
