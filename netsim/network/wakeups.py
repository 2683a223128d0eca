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

from netsim import loopguard
from netsim.network.flowbase import FlowNetworkBase
from netsim.network.flowstate import _INF, _Cell, _Group, _Nest
from netsim.network.tolerances import clock_reached, due_limit_s
from netsim.simclock import trigger_after

_BULK_AFTER = 32  # members ending at one instant after which the rest are ended in bulk
_IDLE_WAKEUPS = 64
"""Wake-ups in a row at one instant that end no transfer, past which the network reports a
stuck loop (netsim.loopguard): a wake-up armed at the earliest finish ends it (the finish
rules of netsim.network.tolerances), else re-arms at a later instant; a few woken early by
float rounding are normal."""


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
        heap, gheap, limit = self._heap, self._group_heap, due_limit_s(now)
        # Finishes happen at a finish's instant (netsim.network.tolerances): a wake-up armed
        # for an entry superseded since (a flow that joined a group) ends nothing, not even a
        # finish due within the time slack after it, as the array players end nothing at a
        # start; the next wake-up is armed at the earliest live finish
        while heap and heap[0][1] != heap[0][2].stamp:
            heapq.heappop(heap)
        while gheap and gheap[0][1] != gheap[0][2].stamp:
            heapq.heappop(gheap)
        if (heap[0][0] if heap else _INF) > now and (gheap[0][0] if gheap else _INF) > now:
            if armed:
                self._rearm(event)
            return
        active = self._n_active
        # (a group's entry due now ends a member; one woken early by rounding is put back
        # later than now: entries that end nothing are few, bounded here)
        early, most = 0, loopguard.bound(2 * len(gheap) + _IDLE_WAKEUPS)
        self._batching += 1
        try:
            while True:  # in finishing order across both heaps
                at = heap[0][0] if heap else _INF
                if gheap and gheap[0][0] < at:
                    if gheap[0][0] > limit:
                        break
                    _, stamp, g = heapq.heappop(gheap)
                    if stamp == g.stamp:
                        before = self._n_active
                        if type(g) is _Group:
                            self._finish_group_members(g, now)
                        elif type(g) is _Cell:
                            self._finish_capped(g, now)
                        else:
                            self._finish_sharing(cast(_Nest, g), now)
                        if self._n_active == before:
                            early += 1
                            if early > most:
                                self._stuck(now, most)
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
        if self._n_active == active and armed:  # (ended nothing: count it, at this instant)
            self._idle_wakeups = self._idle_wakeups + 1 if self._idle_at == now else 1
            self._idle_at = now
            if self._idle_wakeups > loopguard.bound(_IDLE_WAKEUPS):
                self._stuck(now, loopguard.bound(_IDLE_WAKEUPS))
        if armed and self._wakeup_event is event:
            self._rearm(event)  # (SimPy is done with it: it is scheduled again)
        if self._arrivals and not self._batching:
            arrivals, self._arrivals = self._arrivals, []
            for on_arrival, at in arrivals:
                on_arrival(at)

    def _stuck(self, now: float, most: int) -> None:
        """Wake-ups at ``now`` that end nothing passed their bound (netsim.loopguard)."""
        loopguard.stuck("netsim.network.flows.FlowNetwork (wake-ups)", most,
                        {"now_s": now, "active_flows": self._n_active,
                         "capacity": list(self._cap)})

    def _finish_group_members(self, g: _Group, now: float) -> None:
        g.settle(now)
        fin, due = g.finishing, 0
        # due: within the tolerance of the clock, or within the wake-up's time slack (the one
        # _wakeup allows): a finish closer than that cannot be scheduled later than now, and
        # putting it back would wake at this instant again and again
        reached = clock_reached(g.clock, g.rate, now)
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
