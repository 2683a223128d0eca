"""Completions (netsim.network.flows' module docstring, "Events"): one shared SimPy wake-up
per distinct instant at which transfers finish, the finishes of individual flows, of a
group's members (in bulk when many end together) and, through netsim.network.nesting, of
nested entities, then the arrivals told to :meth:`~netsim.network.flows.FlowNetwork.send`'s
callbacks. :class:`Wakeups` is mixed into :class:`netsim.network.flows.FlowNetwork`, whose
state it uses (:class:`netsim.network.flowbase.FlowNetworkBase`). Units: seconds, bits."""

from __future__ import annotations

import heapq
from typing import cast

import simpy

from netsim.network.flowbase import FlowNetworkBase
from netsim.network.flowstate import _INF, _Cell, _Group, _Nest
from netsim.network.sharing import CAPACITY_TOLERANCE as _TOL
from netsim.simclock import trigger_after

_BULK_AFTER = 32  # members ending at one instant after which the rest are ended in bulk


class Wakeups(FlowNetworkBase):
    """The completions' part of :class:`netsim.network.flows.FlowNetwork` (a mixin)."""

    # Invariant: a wake-up is scheduled at or before the earliest live finish. Every push arms
    # one if it is earlier than the armed one (a superseded wake-up still fires, finds nothing
    # due and returns); when the armed one fires, the next is armed after it has run.
    def _arm(self, at: float, fired: simpy.Event | None = None) -> None:
        """Schedule the wake-up at ``at`` (s, now or later). ``fired``: the wake-up whose
        callback is running (SimPy has taken it off its queue and its callbacks off it),
        scheduled again instead of a new event (most wake-ups arm the next one so)."""
        self._wakeup_at = at
        env = self.env
        if fired is None:
            self._wakeup_event = ev = simpy.Event(env)
            ev.callbacks.append(self._wakeup_callback)
        else:
            self._wakeup_event = ev = fired
            ev.callbacks = [self._wakeup_callback]
        now = env.now
        trigger_after(env, ev, at - now if at > now else 0.0)

    def _rearm(self, fired: simpy.Event | None = None) -> None:
        """Arm a wake-up at the earliest live finish, dropping superseded entries on the way
        (``fired``: as :meth:`_arm`'s)."""
        heap, gheap = self._heap, self._group_heap
        while heap and heap[0][1] != heap[0][2].stamp:
            heapq.heappop(heap)
        while gheap and gheap[0][1] != gheap[0][2].stamp:
            heapq.heappop(gheap)
        at = heap[0][0] if heap else _INF
        if gheap and gheap[0][0] < at:
            at = gheap[0][0]
        self._wakeup_at, self._wakeup_event = _INF, None
        if at < _INF:
            self._arm(at, fired)

    def _wakeup(self, event: simpy.Event) -> None:
        now = self.env.now
        armed = event is self._wakeup_event  # else superseded: the armed one is still due
        heap, gheap, limit = self._heap, self._group_heap, now * (1.0 + 1e-12) + 1e-12
        self._batching += 1
        try:
            while True:  # in finishing order across both heaps
                at = heap[0][0] if heap else _INF
                if gheap and gheap[0][0] < at:
                    if gheap[0][0] > limit:
                        break
                    _, stamp, g = heapq.heappop(gheap)
                    if stamp == g.stamp:
                        if type(g) is _Group:
                            self._finish_group_members(g, now)
                        elif type(g) is _Cell:
                            self._finish_capped(g, now)
                        else:
                            self._finish_sharing(cast(_Nest, g), now)
                elif at <= limit:
                    _, stamp, flow = heapq.heappop(heap)
                    if stamp == flow.stamp:
                        flow.remaining = 0.0
                        self._leave(flow, now)
                else:
                    break
        finally:
            self._batching -= 1
        if not self._batching:
            self._flush(now)
        if armed and self._wakeup_event is event:
            self._rearm(event)  # (SimPy is done with it: it is scheduled again)
        if self._arrivals and not self._batching:
            arrivals, self._arrivals = self._arrivals, []
            for on_arrival, at in arrivals:
                on_arrival(at)

    def _finish_group_members(self, g: _Group, now: float) -> None:
        g.settle(now)
        fin, due = g.finishing, 0
        # due: within the tolerance of the clock, or within the wake-up's time slack (the one
        # _wakeup allows): a finish closer than that cannot be scheduled later than now, and
        # putting it back would wake at this instant again and again
        reached = g.clock + max(max(abs(g.clock), 1.0) * _TOL, g.rate * (abs(now) * 1e-12 + 1e-12))
        while fin:
            target, _, flow = fin[0]
            if flow.group is not g or flow.target != target:
                heapq.heappop(fin)
            elif target <= reached:
                if due == _BULK_AFTER and len(fin) > 4 * _BULK_AFTER:
                    self._finish_in_bulk(g, reached, now)  # many end together (a batch)
                    return
                heapq.heappop(fin)
                due += 1
                flow.remaining = 0.0
                self._leave(flow, now)
            else:
                break
        if not due:  # woken early (float rounding): put its next finish back
            self._touch(g, now)

    def _finish_in_bulk(self, g: _Group, reached: float, now: float) -> None:
        """End every member due by ``reached`` at once: one pass and a sort instead of a heap
        pop each, in the order the pops would give ((target, stamp) entries are unique)."""
        due = sorted(e for e in g.finishing if e[0] <= reached)
        rest = [e for e in g.finishing if e[0] > reached]
        heapq.heapify(rest)
        g.finishing = rest
        for target, _, flow in due:
            if flow.group is g and flow.target == target:
                flow.remaining = 0.0
                self._leave(flow, now)
