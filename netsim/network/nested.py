"""Max-min fair sharing of nested constraints played forward without events: groups (cells)
under one shared outer constraint (the aggregator's link).

The epoch fast path (:mod:`netsim.fastepoch`) uses this where a phase's flows cross two
constraints that can bind, nested: each flow crosses at most one *inner* constraint (a cell's
air time, or a backhaul) and the outer one, every flow of an inner constraint crosses the same
outer one with coefficient 1 (a link direction), and each flow's standalone rate is what its
inner constraint gives it alone (``cap x coef = inner capacity``: the cell is its bottleneck).
Then (netsim's derivation from progressive filling) the members of one inner constraint always
run at one rate: the inner level ``capacity / sum of the members' coefficients`` (no member's
cap lies below it: ``capacity / sum >= capacity / own coef = cap``), unless the outer level is
lower. The outer constraint sees each group as one entity of weight ``n`` (its members present,
coefficient 1 each) capped at its inner level, and water-fills those entities: the group's
members run at ``min(inner level, outer level)``. Flows crossing only the outer constraint are
groups of one, capped at their standalone rate. This is the water-filling of
:mod:`netsim.network.sharing` (:func:`level_share`, :func:`rebalance_move`) over groups whose
caps change as members come and go, with one virtual clock per group (bits served per member)
and one for the outer share; the flow network reaches the same rates by progressive filling
(tests/test_media.py checks the two against each other and against the fluid replay).

Cost: O(log g) heap work per start and finish for g groups, plus the rebalance's moves. A
member that joins or leaves a group that keeps sharing the outer link (the common step where
that link binds: a city's uploads, benchmarks/city.py) changes the group in place: its clock
and its heap entries stay, its level is pushed only when it falls, and a join checks only its
own group and the capped ones against the lower share (no other group can have come below it).
"""

from __future__ import annotations

import heapq

import numpy as np

from netsim import loopguard
from netsim.network.playback import constant_rates_until
from netsim.network.sharing import level_share, rebalance_move, water_filling
from netsim.network.tolerances import clock_reached, due_limit_s

_INF = float("inf")
_IDLE, _SHARING, _CAPPED = 0, 1, 2


def nested_together(bits: float, group: np.ndarray, coef: np.ndarray,
                    group_capacity: np.ndarray, outer_capacity: float) -> np.ndarray:
    """Seconds each flow takes when every flow starts at once with ``bits`` bits (the epoch's
    downloads): a group's members share its level and finish together, so the outer
    constraint is one weighted water-filling over the groups present."""
    return bits / _together_rates(group, coef, group_capacity, outer_capacity)


def _together_rates(group: np.ndarray, coef: np.ndarray, group_capacity: np.ndarray,
                    outer_capacity: float) -> np.ndarray:
    """Each flow's rate (bit/s) when every flow starts at once with the same size: kept to
    the end (the sharing groups finish first, the capped ones keep their levels)."""
    n_groups = len(group_capacity)
    n = np.bincount(group, minlength=n_groups).astype(float)
    weight = np.bincount(group, weights=coef, minlength=n_groups)
    present = n > 0
    level = np.full(n_groups, np.inf)
    level[present] = group_capacity[present] / weight[present]
    rate = np.full(n_groups, np.inf)
    rate[present] = water_filling(level[present], outer_capacity, n[present])
    return rate[group]


def nested_last_bit_times(start_s: np.ndarray, bits: np.ndarray, group: np.ndarray,
                          coef: np.ndarray, group_capacity: np.ndarray,
                          outer_capacity: float) -> np.ndarray:
    """When each flow's last bit leaves (s), flow j starting at ``start_s[j]`` with
    ``bits[j]`` bits in group ``group[j]`` (its inner constraint, or a group of its own) with
    coefficient ``coef[j]`` there; ``group_capacity``: each group's capacity (a cell's air-time
    budget, a link's bit/s; a group of one: its flow's standalone rate with coefficient 1);
    ``outer_capacity``: the shared outer constraint's bit/s. See the module for when this is
    the max-min allocation."""
    return nested_last_bit_times_until(start_s, bits, group, coef, group_capacity,
                                       outer_capacity)[0]


def nested_last_bit_times_until(start_s: np.ndarray, bits: np.ndarray, group: np.ndarray,
                                coef: np.ndarray, group_capacity: np.ndarray,
                                outer_capacity: float, until_s: float = _INF
                                ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nested_last_bit_times` played up to ``until_s`` (s; every flow starts before
    it): (when each flow's last bit leaves (s; inf: after ``until_s``), the bits each has left
    at ``until_s``; 0 for those done), as :func:`netsim.network.playback.last_bit_times_until`
    gives them on one constraint."""
    m = len(start_s)
    if m == 0:
        return np.empty(0), np.empty(0)
    if np.all(start_s == start_s[0]) and np.all(bits == bits[0]):
        return constant_rates_until(start_s, _together_rates(group, coef, group_capacity,
                                                             outer_capacity),
                                    bits, until_s)
    out = np.empty(m)
    order = np.argsort(start_s, kind="stable")
    starts = start_s[order].tolist()
    sizes = bits[order].tolist()
    grp = group[order].tolist()
    wts = coef[order].tolist()
    gcap = np.asarray(group_capacity, dtype=float).tolist()
    n_groups = len(gcap)
    finished = [0.0] * m
    # per group: members present, their coefficients summed, level, mode, clock, and the
    # stamps that keep its entries in the level heaps (lst) and the due heaps (dst) current
    count = [0] * n_groups
    wsum = [0.0] * n_groups
    level = [_INF] * n_groups
    mode = [_IDLE] * n_groups
    gclock = [0.0] * n_groups  # idle or capped: the group's clock at gtime (bits per member)
    gtime = [0.0] * n_groups
    offset = [0.0] * n_groups  # sharing: the group's clock minus the outer clock
    lst = [0] * n_groups
    dst = [0] * n_groups
    pushed = [_INF] * n_groups  # sharing: the level of its entry pushed last (at least its
    # lowest entry's: that entry is still in sh_level while its stamp is current)
    lowered: list[int] = []  # sharing groups whose level members joining took below pushed[g]
    # since sh_level was last read: their levels are pushed before it is read again
    members: list[list[tuple[float, int]]] = [[] for _ in range(n_groups)]  # (target, flow)
    # the outer constraint: sharing groups (rate = share) and capped ones (rate = level). A
    # sharing group's entries in sh_level (those of its current stamp) may lie above its
    # level or below it (members left since: the lowest entry is moved up to the level when
    # it surfaces); whenever the heap is read the lowest is not above it (a join that takes
    # the level below the entry pushed last has the new level pushed first: ``lowered``), so
    # the heap's top, once moved up, is the lowest level
    sh_level: list[tuple[float, int, int]] = []   # min-heap (level, lst, group)
    cp_level: list[tuple[float, int, int]] = []   # max-heap (-level, lst, group)
    sh_due: list[tuple[float, int, int]] = []     # (next target - offset: outer clock, dst, g)
    cp_due: list[tuple[float, int, int]] = []     # (time of the next finish (s), dst, g)
    n_sharing, w_sharing, capped_load = 0, 0.0, 0.0
    outer = 0.0        # the outer clock: bits served per sharing member
    share = _INF
    now = starts[0]
    heappush, heappop, heapreplace = heapq.heappush, heapq.heappop, heapq.heapreplace
    reached_at = clock_reached  # (this module's, looked up per call: tests replace it)

    def clock_of(g: int) -> float:
        if mode[g] == _SHARING:
            return outer + offset[g]
        if mode[g] == _CAPPED:
            return gclock[g] + level[g] * (now - gtime[g])
        return gclock[g]

    def detach(g: int) -> None:
        """Take group g out of the outer sets, its clock settled at ``now``."""
        nonlocal n_sharing, w_sharing, capped_load
        c = clock_of(g)
        if mode[g] == _SHARING:
            n_sharing -= 1
            w_sharing = w_sharing - count[g] if n_sharing else 0.0
        elif mode[g] == _CAPPED:
            capped_load -= count[g] * level[g]
        mode[g] = _IDLE
        gclock[g], gtime[g] = c, now
        lst[g] += 1
        dst[g] += 1

    def to_capped(g: int) -> None:
        nonlocal capped_load
        mode[g] = _CAPPED
        capped_load += count[g] * level[g]
        heappush(cp_level, (-level[g], lst[g], g))
        rest = members[g][0][0] - gclock[g]
        heappush(cp_due, (now + (rest if rest > 0.0 else 0.0) / level[g], dst[g], g))

    def to_sharing(g: int) -> None:
        nonlocal n_sharing, w_sharing
        mode[g] = _SHARING
        offset[g] = gclock[g] - outer
        n_sharing += 1
        w_sharing += count[g]
        heappush(sh_level, (level[g], lst[g], g))
        pushed[g] = level[g]
        heappush(sh_due, (members[g][0][0] - offset[g], dst[g], g))

    def attach(g: int) -> None:
        """Put group g back with its new members: capped, the rebalance moves it if needed."""
        if not count[g]:
            wsum[g], level[g] = 0.0, _INF
            return
        level[g] = gcap[g] / wsum[g]
        if n_sharing and level[g] >= share:
            to_sharing(g)
        else:
            to_capped(g)

    def stuck(what: str, most: int) -> None:
        loopguard.stuck(f"netsim.network.nested.nested_last_bit_times_until{what}", most,
                        {"start_s": start_s, "bits": bits, "group": group, "coef": coef,
                         "group_capacity": np.asarray(group_capacity, dtype=float),
                         "outer_capacity": float(outer_capacity), "until_s": float(until_s)})

    most_moves = loopguard.bound(2 * n_groups + 2)

    def rebalance() -> float:
        # (each group moves at most twice: water-filling's moves go one way)
        for g in lowered:  # (the levels members' joins lowered, pushed before the heap is read)
            if mode[g] == _SHARING and level[g] < pushed[g]:
                heappush(sh_level, (level[g], lst[g], g))
                pushed[g] = level[g]
        lowered.clear()
        moves = 0
        while True:
            moves += 1
            if moves > most_moves:
                stuck(" (rebalance)", most_moves)
            s = level_share(outer_capacity, capped_load, w_sharing, n_sharing)
            while sh_level:
                lv, st, g = sh_level[0]
                if st != lst[g]:
                    heappop(sh_level)
                elif lv < level[g]:  # (its level rose since: the entry moves up to it)
                    heapreplace(sh_level, (level[g], st, g))
                    pushed[g] = level[g]
                else:
                    break
            while cp_level and cp_level[0][1] != lst[cp_level[0][2]]:
                heappop(cp_level)
            move = rebalance_move(s, sh_level[0][0] if sh_level else None,
                                  -cp_level[0][0] if cp_level else None)
            if move < 0:
                g = heappop(sh_level)[2]
                detach(g)
                to_capped(g)
            elif move > 0:
                g = heappop(cp_level)[2]
                detach(g)
                to_sharing(g)
            else:
                return s if n_sharing else _INF

    def finish(g: int, reached: float) -> None:
        """Group g's members whose targets are reached leave (at least the first: it is
        due); g is detached and its clock settled."""
        detach(g)
        heap = members[g]
        k = heappop(heap)[1]
        while True:
            finished[k] = now
            count[g] -= 1
            wsum[g] -= wts[k]
            if not heap or heap[0][0] > reached:
                break
            k = heappop(heap)[1]

    def finish_sharing(g: int, reached: float) -> bool:
        """Sharing group g's members whose targets are reached leave (at least the first;
        g's entry is the top of sh_due); True when g keeps sharing with those left (its level
        rose: it stays above the share; its entry in sh_due replaced by its next finish),
        False when it was detached (to be attached again)."""
        nonlocal w_sharing
        heap = members[g]
        k = heappop(heap)[1]
        gone = 0
        while True:
            finished[k] = now
            gone += 1
            wsum[g] -= wts[k]
            if not heap or heap[0][0] > reached:
                break
            k = heappop(heap)[1]
        left = count[g] - gone
        if left and n_sharing > 1 and gcap[g] / wsum[g] >= share:
            count[g] = left
            level[g] = gcap[g] / wsum[g]  # (its entry in sh_level, now below: moved up when
            w_sharing -= gone             # it surfaces)
            heapreplace(sh_due, (heap[0][0] - offset[g], dst[g], g))
            return True
        heappop(sh_due)
        detach(g)  # (with its members before they left)
        count[g] = left
        return False

    nxt = 0
    # Termination: every pass but the last starts or finishes a flow (the group whose finish
    # set the instant is reached by netsim.network.tolerances' rules): at most 2m + 1 passes
    passes, most = 0, loopguard.bound(2 * m + 2)
    while True:
        passes += 1
        if passes > most:
            stuck("", most)
        # the next instant: a start, a sharing group's or a capped group's next finish
        at_start = starts[nxt] if nxt < m else _INF
        at = _INF  # (the next finish)
        while sh_due and sh_due[0][1] != dst[sh_due[0][2]]:
            heappop(sh_due)
        if sh_due and share > 0.0:
            at = now + (sh_due[0][0] - outer) / share
        while cp_due and cp_due[0][1] != dst[cp_due[0][2]]:
            heappop(cp_due)
        if cp_due and cp_due[0][0] < at:
            at = cp_due[0][0]
        finishing = at <= at_start  # (finishes where the instant is a finish's, as in
        if not finishing:           # netsim.network.playback)
            at = at_start
        if at == _INF or at > until_s:  # (nothing left to happen, or past the horizon)
            break
        if n_sharing and at > now:
            outer += share * (at - now)
        now = at
        touched: list[int] = []
        joined = -1  # (the sharing group one member joined in place; -2: several)
        if finishing:
            if n_sharing:
                reached = reached_at(outer, share, now)
                while sh_due:
                    key, st, g = sh_due[0]
                    if st != dst[g]:
                        heappop(sh_due)
                        continue
                    if key > reached:
                        break
                    # (the group's clock is outer + offset; as the flow network's nests)
                    c = reached + offset[g]
                    own = reached_at(outer + offset[g], share, now)
                    if not finish_sharing(g, c if c > own else own):
                        touched.append(g)
            limit = due_limit_s(now) if cp_due else _INF
            while cp_due and (cp_due[0][1] != dst[cp_due[0][2]] or cp_due[0][0] <= limit):
                _, st, g = heappop(cp_due)
                if st == dst[g]:
                    finish(g, reached_at(clock_of(g), level[g], now))
                    touched.append(g)
        while nxt < m and starts[nxt] <= now:
            k = nxt
            nxt += 1
            g = grp[k]
            if mode[g] == _SHARING and n_sharing > 1 and not finishing:
                # joins its sharing group: the group's level falls; it stays sharing if
                # that level is still at least the share (the rebalance below checks the
                # new share), with its clock and its entries as they are
                t = outer + offset[g] + sizes[k]
                heap = members[g]
                heappush(heap, (t, k))
                count[g] += 1
                wsum[g] += wts[k]
                lvl = gcap[g] / wsum[g]
                if lvl >= share:
                    level[g] = lvl
                    w_sharing += 1
                    if lvl < pushed[g] and (not lowered or lowered[-1] != g):
                        lowered.append(g)  # (pushed before sh_level is read: rebalance())
                    if heap[0][1] == k:  # (its first target: the group's next finish)
                        dst[g] += 1
                        heappush(sh_due, (t - offset[g], dst[g], g))
                    joined = g if joined == -1 else -2
                    continue
                count[g] -= 1  # (detached below with the members it had)
                detach(g)
                count[g] += 1
                touched.append(g)
                continue
            if mode[g] != _IDLE:
                detach(g)
            touched.append(g)
            if not count[g]:
                gclock[g], gtime[g] = 0.0, now
            heappush(members[g], (gclock[g] + sizes[k], k))
            count[g] += 1
            wsum[g] += wts[k]
        if not touched and joined >= 0:
            # one member joined a sharing group and nothing else changed: the share fell, so
            # only that group can have come below it (the rest were at least the old share)
            while cp_level and cp_level[0][1] != lst[cp_level[0][2]]:
                heappop(cp_level)
            s = level_share(outer_capacity, capped_load, w_sharing, n_sharing)
            if rebalance_move(s, level[joined], -cp_level[0][0] if cp_level else None) == 0:
                share = s
                continue
        for g in (touched if len(touched) < 2 else dict.fromkeys(touched)):
            if mode[g] == _IDLE:
                attach(g)
        if len(sh_level) > 2 * n_sharing + 64:  # (mostly stale or outdated entries: rebuilt)
            sh_level[:] = [(level[g], lst[g], g) for g in range(n_groups)
                           if mode[g] == _SHARING]
            heapq.heapify(sh_level)
            for _, _, g in sh_level:
                pushed[g] = level[g]
        share = rebalance()
    left_bits = [0.0] * m
    if until_s < _INF:  # the flows still moving at until_s: their bits left then
        if n_sharing and share > 0.0:
            outer += share * (until_s - now)
        now = until_s
        for g in range(n_groups):
            if count[g]:
                c = clock_of(g)
                for t, k in members[g]:
                    finished[k], left_bits[k] = _INF, (t - c if t > c else 0.0)
        for k in range(nxt, m):  # (not started: the caller leaves such flows out)
            finished[k], left_bits[k] = _INF, sizes[k]
    out[order] = finished
    rest = np.empty(m)
    rest[order] = left_bits
    return out, rest
