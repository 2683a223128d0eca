"""Nested groups kept by events (netsim.network.flows' module docstring, "Nested groups"): the
entities of an outer constraint (:class:`~netsim.network.flowstate._Nest`, one per outer link
direction) and their members (:class:`~netsim.network.flowstate._Cell`), built, updated and
finished as flows start and end. :class:`NestedGroups` is mixed into
:class:`netsim.network.flows.FlowNetwork`, whose state and primitives it uses (declared in
:class:`netsim.network.flowbase.FlowNetworkBase`); the sharing core is
:mod:`netsim.network.sharing`'s (``level_share``, ``rebalance_move``). Units: bits, bit/s,
seconds."""

from __future__ import annotations

import heapq
from typing import cast

from netsim import loopguard
from netsim.network.flowbase import FlowNetworkBase
from netsim.network.flowstate import (
    _CAPPED,
    _IDLE,
    _INF,
    _SHARING,
    _Cell,
    _coef,
    _Flow,
    _Group,
    _Nest,
    _ungroup,
)
from netsim.network.sharing import level_share, rebalance_move
from netsim.network.tolerances import CAPACITY_TOLERANCE as _TOL
from netsim.network.tolerances import clock_reached


class NestedGroups(FlowNetworkBase):
    """The nested-groups half of :class:`netsim.network.flows.FlowNetwork` (a mixin: the
    network's state and primitives it uses are declared in
    :class:`netsim.network.flowbase.FlowNetworkBase`)."""

    def _nested_live(self) -> bool:
        """Whether the nests rate their flows now (no re-share pending, no fallback)."""
        return not (self._fallback or self._recompute_pending)

    def _own_bottleneck(self, flow: _Flow, outer: int, inner: int) -> bool:
        """Whether ``inner`` is ``flow``'s bottleneck but for ``outer`` (its standalone rate
        off the outer constraint x its coefficient on ``inner`` reaches inner's capacity,
        with the tolerance): then it never runs below its entity's level. Found once per
        plan and pair of constraints (the flows of one route ask it again and again)."""
        memo = flow.plan.own_bottleneck
        key = (outer, inner)
        found = memo.get(key)
        if found is None:
            cap, coefs = self._cap, flow.coefs
            own = min(cap[h] / (1.0 if coefs is None else coefs[j])
                      for j, h in enumerate(flow.hops) if h != outer)
            found = memo[key] = own * _coef(flow, inner) >= cap[inner] * (1.0 - _TOL)
        return found

    def _nested_plan(self, flows: list[_Flow]) -> dict[int, int] | None:
        """Each inner constraint's outer one when the unsafe constraints nest (the module's
        conditions), else None. O(flows x hops)."""
        groups, link_flows, first_medium = self._groups, self._link_flows, self._first_medium
        outer_of: dict[int, int] = {}
        for flow in flows:
            if flow.n_unsafe < 2:
                continue
            if flow.n_unsafe > 2:
                return None
            a, b = (h for h in flow.hops if h in groups)
            # the outer one: a link direction, the one of more flows (a cell's aggregator link)
            key_a = (a < first_medium, len(link_flows[a]), -a)
            o, i = (a, b) if key_a > (b < first_medium, len(link_flows[b]), -b) else (b, a)
            if o >= first_medium or outer_of.setdefault(i, o) != o:
                return None
        if not outer_of or set(outer_of.values()) & outer_of.keys():
            return None
        for i, o in outer_of.items():  # every flow of an inner constraint crosses its outer one
            for flow in link_flows[i]:
                if flow.n_unsafe != 2 or not self._own_bottleneck(flow, o, i):
                    return None
        return outer_of

    def _build_nests(self, flows: list[_Flow], now: float) -> bool:
        """Rate the flows of nested unsafe constraints by nests (a re-share, after the groups
        were rebuilt): False, with nothing changed, when they do not nest."""
        outer_of = self._nested_plan(flows)
        if outer_of is None:
            return False
        self.nested_rebuilds += 1
        cap, nests, cells = self._cap, self._nests, self._cells
        for o in sorted(set(outer_of.values())):
            nests[o] = _Nest(o, cap[o], now)
        for i in sorted(outer_of):
            cells[i] = _Cell(nests[outer_of[i]], i, cap[i], now)
        for flow in flows:
            nest, cell = None, None
            for h in flow.hops:
                nest, cell = nests.get(h, nest), cells.get(h, cell)
            if cell is not None:
                self._enter(flow, cell, _coef(flow, cell.link), now)
            elif nest is not None:
                self._enter(flow, _Cell(nest, -1, flow.cap, now), 1.0, now)
        return True

    def _place_nested(self, flow: _Flow, now: float) -> bool:
        """Rate a starting flow from the nests: a member of its inner constraint's cell, or an
        entity of its own under its outer constraint. False when it crosses neither (a
        decomposed group rates it); a re-share is requested where it breaks the nesting."""
        nest, cell, crossed = None, None, 0
        nests, cells, groups = self._nests, self._cells, self._groups
        for h in flow.hops:
            if h in groups:
                crossed += 1
                nest, cell = nests.get(h, nest), cells.get(h, cell)
        if nest is None and cell is None:
            return False
        if not self._nested_live() or nest is None or crossed != (1 if cell is None else 2) \
                or (cell is not None and (cell.nest is not nest
                                          or not self._own_bottleneck(flow, nest.link,
                                                                      cell.link))):
            self._request_recompute()
            return True
        if flow.group is not None or flow.capped_in is not None:
            self._lift(flow, now)  # (placed by a decomposed group before its link nested)
        if cell is None:
            self._enter(flow, _Cell(nest, -1, flow.cap, now), 1.0, now)
        else:
            self._enter(flow, cell, _coef(flow, cell.link), now)
        if not self._batching:
            self._flush_nests(now)
        return True

    def _nest_cell(self, h: int, now: float, starting: _Flow) -> bool:
        """Constraint h has just become unsafe (``starting`` starts): where its other flows
        are entities of their own under one nest and the nesting holds, they become the
        members of a new cell (``starting`` is placed after). False, nothing changed, where
        it does not."""
        nest: _Nest | None = None
        members = []
        for flow in self._link_flows[h]:
            if flow.n_unsafe != 2:
                return False
            if flow is starting:
                outer = next((self._nests[k] for k in flow.hops if k in self._nests), None)
            else:
                entity = flow.cell
                if entity is None or entity.link >= 0:
                    return False
                outer = entity.nest
                members.append(flow)
            if outer is None or (nest is not None and outer is not nest) \
                    or not self._own_bottleneck(flow, outer.link, h):
                return False
            nest = outer
        if nest is None:
            return False
        cell = self._cells[h] = _Cell(nest, h, self._cap[h], now)
        for flow in members:
            self._progress(flow, now)
            self._exit(flow, now)
            self._enter(flow, cell, _coef(flow, h), now)
        return True

    def _nest_outer(self, o: int, now: float, starting: _Flow) -> bool:
        """Link direction o has just become unsafe (``starting`` starts) and some of its
        flows cross another unsafe constraint: where each such constraint is a decomposed
        group all of whose flows cross o, and the nesting holds, o becomes a nest (those
        groups its cells, its other flows entities of their own; ``starting`` is placed
        after). False, nothing changed, where it does not. O(flows of o)."""
        groups, cells, link_flows = self._groups, self._cells, self._link_flows
        if o >= self._first_medium:
            return False
        inner: dict[int, None] = {}
        for flow in link_flows[o]:
            n_unsafe = flow.n_unsafe
            if n_unsafe == 2:
                for h in flow.hops:  # (its other unsafe constraint)
                    if h != o and h in groups:
                        inner[h] = None
                        break
            elif n_unsafe > 2:
                return False
        for i in inner:
            if i in self._nests or i in cells:
                return False
            for flow in link_flows[i]:
                if flow.n_unsafe != 2 or o not in flow.hops \
                        or not self._own_bottleneck(flow, o, i):
                    return False
        nest = self._nests[o] = _Nest(o, self._cap[o], now)
        for i in inner:
            old = groups[i]
            old.stamp = -1
            self._dirty.pop(old, None)
            groups[i] = _Group(i, self._cap[i], now)  # (unused while i is a cell)
            cell = cells[i] = _Cell(nest, i, self._cap[i], now)
            for flow in link_flows[i]:  # (``starting`` too: the old group may hold it)
                self._progress(flow, now)
                flow.group = flow.capped_in = None  # (out of the old group, dropped whole)
                if flow is not starting:
                    self._enter(flow, cell, _coef(flow, i), now)
        for flow in link_flows[o]:
            if flow.n_unsafe == 1:
                self._lift(flow, now)
                if flow is not starting:
                    self._enter(flow, _Cell(nest, -1, flow.cap, now), 1.0, now)
        return True

    def _lift(self, flow: _Flow, now: float) -> None:
        """Take ``flow`` (its ``remaining`` brought up to now) out of a decomposed group."""
        self._progress(flow, now)
        _ungroup(flow)

    def _unnest(self, nest: _Nest, now: float) -> None:
        """Nest's outer constraint no longer binds: its cells become decomposed groups (their
        members sharing, the rebalance capping any below the share), its own entities
        individual flows at their caps. O(flows of the outer constraint)."""
        for i in [i for i, cell in self._cells.items() if cell.nest is nest]:
            cell = self._cells.pop(i)
            cell.stamp = -1  # (dropped whole with its nest: its entries void, its members'
            g = self._groups[i]  # counts left as they are)
            for flow in self._link_flows[i]:
                if flow.cell is cell:
                    self._progress(flow, now)
                    flow.cell = None
                    self._enroll(flow, g, now)
            self._touch(g, now)
        for flow in self._link_flows[nest.link]:
            own = flow.cell
            if own is not None:
                self._progress(flow, now)
                own.stamp = -1  # (as above)
                flow.cell = None
                flow.rate = -1.0  # forces a fresh individual entry
                self._set_individual(flow, flow.cap, now)

    def _dissolve(self, cell: _Cell, now: float) -> None:
        """Cell's constraint no longer binds: each member becomes an entity of its own."""
        self._detach(cell, now)
        for flow in list(self._link_flows[cell.link]):
            if flow.cell is cell:
                self._progress(flow, now)
                self._exit(flow, now)
                self._enter(flow, _Cell(cell.nest, -1, flow.cap, now), 1.0, now)

    def _enter(self, flow: _Flow, cell: _Cell, wt: float, now: float) -> None:
        """``flow`` (its ``remaining`` up to now) becomes a member of ``cell`` with
        coefficient ``wt`` on its inner constraint; re-attached at the flush."""
        self._detach(cell, now)
        flow.cell, flow.wt, flow.stamp = cell, wt, -1
        flow.target = target = cell.clock + flow.remaining
        cell.n_members += 1
        cell.weight += wt
        heapq.heappush(cell.finishing, (target, next(self._stamps), flow))
        self._touched[cell] = None

    def _exit(self, flow: _Flow, now: float) -> None:
        """``flow`` leaves its entity (finished, cancelled or moved)."""
        cell = cast(_Cell, flow.cell)
        self._detach(cell, now)
        cell.n_members -= 1
        cell.weight = cell.weight - flow.wt if cell.n_members else 0.0  # (no drift when empty)
        flow.cell = None
        self._touched[cell] = None

    def _detach(self, cell: _Cell, now: float) -> None:
        """Take ``cell`` out of its nest's water-filling, its clock settled at ``now``
        (before its members change, or it moves between sharing and capped)."""
        mode = cell.mode
        if mode == _IDLE:
            return
        nest = cell.nest
        nest.settle(now)
        if mode == _SHARING:
            cell.clock = nest.clock + cell.offset
            nest.n_sharing -= 1
            nest.w_sharing = nest.w_sharing - cell.counted if nest.n_sharing else 0.0
        else:
            cell.clock += cell.level * (now - cell.updated)
            nest.n_capped -= 1
            nest.capped_load = nest.capped_load - cell.counted * cell.level \
                if nest.n_capped else 0.0
        cell.updated, cell.mode, cell.stamp = now, _IDLE, -1

    def _first_target(self, cell: _Cell) -> float:
        """The smallest finishing point of cell's members (bits on its clock)."""
        fin = cell.finishing
        while fin[0][2].cell is not cell or fin[0][2].target != fin[0][0]:
            heapq.heappop(fin)
        return fin[0][0]

    def _attach(self, cell: _Cell, now: float) -> None:
        """Put a detached cell with members back into its nest: at its level, capped or
        sharing as the share now suggests (the nest's rebalance corrects it)."""
        cell.counted = cell.n_members
        cell.level = cell.capacity / cell.weight
        nest = cell.nest
        nest.settle(now)
        if nest.n_sharing and cell.level >= nest.share:
            self._to_sharing(cell)
        else:
            self._to_capped(cell, now)

    def _to_capped(self, cell: _Cell, now: float) -> None:
        nest = cell.nest
        cell.mode, cell.updated = _CAPPED, now
        cell.stamp = stamp = next(self._stamps)
        nest.n_capped += 1
        nest.capped_load += cell.counted * cell.level
        heapq.heappush(nest.capped, (-cell.level, stamp, cell))
        at = now + max(self._first_target(cell) - cell.clock, 0.0) / cell.level
        heapq.heappush(self._group_heap, (at, stamp, cell))
        if at < self._wakeup_at:
            self._arm(at)

    def _to_sharing(self, cell: _Cell) -> None:
        nest = cell.nest
        cell.mode = _SHARING
        cell.stamp = stamp = next(self._stamps)
        cell.offset = cell.clock - nest.clock  # (the nest settled at this instant)
        nest.n_sharing += 1
        nest.w_sharing += cell.counted
        heapq.heappush(nest.by_level, (cell.level, stamp, cell))
        heapq.heappush(nest.due, (self._first_target(cell) - cell.offset, stamp, cell))

    def _flush_nests(self, now: float) -> None:
        """Re-attach the entities whose members changed and restore their nests'
        water-filling (at the end of a batch, or at once)."""
        touched, self._touched = self._touched, {}
        if not self._nested_live():
            return  # (the re-share pending at this instant rebuilds them)
        nests, cells = self._nests, self._cells
        changed: dict[_Nest, None] = {}
        for cell in touched:
            nest = cell.nest
            if nests.get(nest.link) is not nest:
                continue
            changed[nest] = None
            if cell.n_members and cell.mode == _IDLE \
                    and (cell.link < 0 or cells.get(cell.link) is cell):
                self._attach(cell, now)
        for nest in changed:
            self._rebalance_nest(nest, now)

    def _rebalance_nest(self, nest: _Nest, now: float) -> None:
        """Restore water-filling on the nest's outer constraint (entities at their level
        below the share, the others sharing it) and schedule its next sharing finish."""
        self.nested_updates += 1
        nest.settle(now)
        by_level, capped = nest.by_level, nest.capped
        moves = most = loopguard.bound(4 * (len(by_level) + len(capped)) + 8)
        while True:
            share = level_share(nest.capacity, nest.capped_load, nest.w_sharing, nest.n_sharing)
            while by_level and by_level[0][1] != by_level[0][2].stamp:
                heapq.heappop(by_level)
            while capped and capped[0][1] != capped[0][2].stamp:
                heapq.heappop(capped)
            move = rebalance_move(share, by_level[0][0] if by_level else None,
                                  -capped[0][0] if capped else None)
            if move < 0:
                cell = heapq.heappop(by_level)[2]
                self._detach(cell, now)
                self._to_capped(cell, now)
            elif move > 0:
                cell = heapq.heappop(capped)[2]
                self._detach(cell, now)
                self._to_sharing(cell)
            else:
                break
            moves -= 1
            if moves < 0:
                loopguard.stuck("netsim.network.nesting._rebalance_nest", most,
                                {"now_s": now, "link": nest.link, "capacity": nest.capacity})
        nest.share = (share if share > 0.0 else 0.0) if nest.n_sharing else _INF
        nest.stamp = stamp = next(self._stamps)
        due = nest.due
        while due and due[0][1] != due[0][2].stamp:
            heapq.heappop(due)
        if due and nest.share > 0.0:
            at = now + max(due[0][0] - nest.clock, 0.0) / nest.share
            heapq.heappush(self._group_heap, (at, stamp, nest))
            if at < self._wakeup_at:
                self._arm(at)

    def _finish_sharing(self, nest: _Nest, now: float) -> None:
        """The nest's next sharing finish is due: end the members due in each sharing entity
        whose next finishing point the outer clock has reached."""
        nest.settle(now)
        reached = clock_reached(nest.clock, nest.share, now)  # (as _finish_group_members)
        due, cells = nest.due, []
        while due and (due[0][1] != due[0][2].stamp or due[0][0] <= reached):
            _, stamp, cell = heapq.heappop(due)
            if stamp == cell.stamp:
                cells.append(cell)
        for cell in cells:
            own = clock_reached(nest.clock + cell.offset, nest.share, now)
            self._finish_members(cell, max(reached + cell.offset, own), now)
        if not cells:  # woken early (float rounding): its next finish back
            self._rebalance_nest(nest, now)

    def _finish_capped(self, cell: _Cell, now: float) -> None:
        """A capped entity's next member finish is due."""
        self._finish_members(cell, clock_reached(cell.clock_at(now), cell.level, now), now)

    def _finish_members(self, cell: _Cell, reached: float, now: float) -> None:
        """End cell's members whose finishing points are within ``reached`` (bits on its
        clock); the cell is re-attached at the flush (with its next finish)."""
        self._detach(cell, now)
        fin, leaving = cell.finishing, []
        while fin:
            target, _, flow = fin[0]
            if flow.cell is not cell or flow.target != target:
                heapq.heappop(fin)
            elif target <= reached:
                heapq.heappop(fin)
                leaving.append(flow)
            else:
                break
        self._touched[cell] = None
        for flow in leaving:  # (all collected first: a cell dissolving moves the rest)
            flow.remaining = 0.0
            self._leave(flow, now)
