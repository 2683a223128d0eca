"""Decomposed water-filling groups (netsim.network.flows' module docstring, "How rates are
kept"): a flow's rate as it runs alone, capped or as a sharing member of the group of its one
unsafe link direction; a direction turning unsafe (its group made, or a nest or a re-share
where its flows cross two) and safe again. :class:`DecomposedGroups` is mixed into
:class:`netsim.network.flows.FlowNetwork`, whose state it uses
(:class:`netsim.network.flowbase.FlowNetworkBase`); the sharing core is
:mod:`netsim.network.sharing`'s (``level_share``, ``rebalance_move``). Units: bits, bit/s,
seconds."""

from __future__ import annotations

import heapq

from netsim.network.flowbase import FlowNetworkBase
from netsim.network.flowstate import _INF, _coef, _Flow, _Group
from netsim.network.sharing import level_share, rebalance_move


class DecomposedGroups(FlowNetworkBase):
    """The decomposed groups' part of :class:`netsim.network.flows.FlowNetwork` (a mixin)."""

    def _push_flow(self, flow: _Flow, now: float) -> None:
        flow.stamp = stamp = next(self._stamps)
        finish = now + flow.remaining / flow.rate if flow.rate > 0.0 else _INF
        heapq.heappush(self._heap, (finish, stamp, flow))
        if finish < self._wakeup_at:
            self._arm(finish)

    def _progress(self, flow: _Flow, now: float) -> None:
        """Bring ``flow.remaining`` up to ``now`` (whatever its current regime)."""
        g = flow.group
        if g is not None:
            g.settle(now)
            flow.remaining = max(flow.target - g.clock, 0.0)
        elif flow.cell is not None:
            flow.remaining = max(flow.target - flow.cell.clock_at(now), 0.0)
        else:
            flow.remaining = max(flow.remaining - flow.rate * (now - flow.updated), 0.0)
        flow.updated = now

    def _set_individual(self, flow: _Flow, rate: float, now: float) -> None:
        if flow.group is None and flow.rate == rate:
            return
        self._progress(flow, now)
        if flow.group is not None:
            flow.group.drop_member(flow)
            flow.group = None
        flow.rate = rate
        self._push_flow(flow, now)

    def _join(self, flow: _Flow, g: _Group, now: float) -> None:
        """``flow`` becomes a sharing member of g (its progress brought up to ``now``)."""
        self._progress(flow, now)
        flow.stamp = -1  # its individual finish entry is void
        self._enroll(flow, g, now)

    def _enroll(self, flow: _Flow, g: _Group, now: float) -> None:
        """``flow``, its ``remaining`` up to ``now`` and no live finish entry of its own (as a
        flow starting now), becomes a sharing member of g."""
        g.settle(now)
        flow.group = g
        flow.target = g.clock + flow.remaining
        g.n_members += 1
        g.weight += flow.wt
        stamp = next(self._stamps)
        heapq.heappush(g.by_cap, (flow.cap, stamp, flow))
        heapq.heappush(g.finishing, (flow.target, stamp, flow))

    def _add_capped(self, flow: _Flow, g: _Group, now: float) -> None:
        self._set_individual(flow, flow.cap, now)
        flow.capped_in = g
        g.capped_sum += flow.cap * flow.wt
        heapq.heappush(g.capped, (-flow.cap, next(self._stamps), flow))

    def _touch(self, g: _Group, now: float) -> None:
        """g's membership changed: rebalance now, or at the end of the running batch."""
        if self._batching:
            self._dirty[g] = None
        else:
            self._rebalance(g, now)

    def _flush(self, now: float) -> None:
        """The end of a batch: the flows it started enrolled, the groups and nests whose
        members changed rebalanced."""
        if self._pending:
            self._enroll_pending(now)
        dirty = self._dirty
        while dirty:
            g = next(iter(dirty))
            del dirty[g]
            if self._groups.get(g.link) is g and not (
                    self._fallback or (self._multi_unsafe and not self._nests)):
                self._rebalance(g, now)
        if self._touched:
            self._flush_nests(now)

    def _enroll_pending(self, now: float) -> None:
        """Enroll the flows that started in the batch into the groups they found, in start
        order (what joining each at its start would have done: no time passes in a batch, so
        the groups' clocks and the flows' bits are the same; a group's heaps get its members in
        the same order). A flow placed meanwhile is left where it is: a nest formed in the
        batch took it into a cell (the saving: no join, then lift), a re-share rated it, or it
        left; one whose group ended meanwhile runs at its cap, as :meth:`_make_safe` sets a
        group's members."""
        pending, self._pending = self._pending, []
        groups = self._groups
        for flow, g in pending:
            if flow.group is not None or flow.cell is not None or flow.capped_in is not None \
                    or flow.stamp != -1 or flow.done is None:
                continue
            if groups.get(g.link) is g:
                self._enroll(flow, g, now)
            else:
                self._set_individual(flow, flow.cap, now)

    def _rebalance(self, g: _Group, now: float) -> None:
        """Restore water-filling on g's link: capped flows below the share, members above."""
        g.settle(now)
        by_cap, capped = g.by_cap, g.capped
        moves = 4 * (len(by_cap) + len(capped)) + 8
        while True:
            n = g.n_members
            share = level_share(g.capacity, g.capped_sum, g.weight, n)
            while by_cap and by_cap[0][2].group is not g:  # (entries of flows moved on)
                heapq.heappop(by_cap)
            while capped and capped[0][2].capped_in is not g:
                heapq.heappop(capped)
            move = rebalance_move(share, by_cap[0][0] if by_cap else None,
                                  -capped[0][0] if capped else None)
            if move < 0:
                self._add_capped(heapq.heappop(by_cap)[2], g, now)
            elif move > 0:
                flow = heapq.heappop(capped)[2]
                flow.capped_in = None
                g.capped_sum -= flow.cap * flow.wt
                self._join(flow, g, now)
            else:
                break
            moves -= 1
            if moves < 0:
                raise RuntimeError(f"water-filling on link {g.link} did not settle")
        g.rate = rate = share if n and share > 0.0 else 0.0
        fin = g.finishing
        while fin and (fin[0][2].group is not g or fin[0][2].target != fin[0][0]):
            heapq.heappop(fin)
        g.stamp = stamp = next(self._stamps)
        if fin and rate > 0.0:
            at = now + max(fin[0][0] - g.clock, 0.0) / rate
            heapq.heappush(self._group_heap, (at, stamp, g))
            if at < self._wakeup_at:
                self._arm(at)

    def _make_unsafe(self, h: int, now: float, starting: _Flow) -> None:
        """Constraint h has become unsafe as ``starting`` starts: its water-filling group (a
        new cell of a nest, or a re-share at this instant where the flows no longer
        decompose)."""
        g = _Group(h, self._cap[h], now)
        self._groups[h] = g
        multi, beyond = self._multi_unsafe, False
        for flow in self._link_flows[h]:
            flow.n_unsafe += 1
            if flow.n_unsafe == 2:
                self._multi_unsafe += 1
            elif flow.n_unsafe > 2:
                beyond = True
        if beyond:  # flows now cross three or more: neither groups nor nests rate them
            self._request_recompute()  # (the batched pass at this instant rates everything)
            return
        if self._multi_unsafe != multi and self._nested_live():  # flows now cross two
            if not (self._nest_cell(h, now, starting) or self._nest_outer(h, now, starting)):
                self._request_recompute()  # the batched pass at this instant rates everything
            return
        if self._fallback or (self._multi_unsafe and not self._nests) \
                or (self._nests and self._recompute_pending):
            self._request_recompute()  # the batched pass at this instant rates everything
            return
        for flow in self._link_flows[h]:
            flow.wt = _coef(flow, h)
        if self._batching:  # more starts follow: the share will drop, most flows will share
            for flow in self._link_flows[h]:
                self._join(flow, g, now)
        else:
            for flow in self._link_flows[h]:
                self._add_capped(flow, g, now)
        self._touch(g, now)

    def _make_safe(self, h: int, now: float) -> None:
        g = self._groups.pop(h)
        g.stamp = -1
        for flow in self._link_flows[h]:
            flow.n_unsafe -= 1
            if flow.n_unsafe == 1:
                self._multi_unsafe -= 1
            if flow.capped_in is g:
                flow.capped_in = None
            if flow.group is g:
                self._set_individual(flow, flow.cap, now)
        if self._nests:
            nest = self._nests.pop(h, None)
            if nest is not None:  # an outer constraint no longer binds
                nest.stamp = -1
                if self._nested_live():
                    self._unnest(nest, now)
                else:
                    self._request_recompute()
                nest.release()
            cell = self._cells.pop(h, None)
            if cell is not None and self._nested_live():
                self._dissolve(cell, now)
