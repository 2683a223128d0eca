"""Every flow re-shared at once (netsim.network.flows' module docstring): at a capacity change
or where the structure breaks (:meth:`Resharing._reshare`: caps re-read, groups and nests
rebuilt), and progressive filling over every flow while flows cross two unsafe links that do
not nest (the fallback, :func:`netsim.network.sharing.progressive_filling`).
:class:`Resharing` is mixed into :class:`netsim.network.flows.FlowNetwork`, whose state it
uses (:class:`netsim.network.flowbase.FlowNetworkBase`). Units: bits, bit/s, seconds."""

from __future__ import annotations

import heapq

import simpy

from netsim.network.flowbase import FlowNetworkBase
from netsim.network.flowstate import _coef, _Group, _Plan
from netsim.network.sharing import progressive_filling
from netsim.simclock import trigger_after


class Resharing(FlowNetworkBase):
    """The re-sharing part of :class:`netsim.network.flows.FlowNetwork` (a mixin)."""

    def _reshare(self, now: float) -> None:
        """Every flow present re-rated from the current capacities: caps re-read, safe and
        unsafe links and the groups rebuilt, rates by water-filling per group (nested groups
        where flows cross two unsafe constraints that nest, else progressive filling while a
        flow crosses two unsafe links). O(flows x hops)."""
        self.reshares += 1
        flows = self._active()
        for flow in flows:
            self._progress(flow, now)
        for g in self._groups.values():
            g.stamp = -1
        for nest in self._nests.values():
            nest.stamp = -1
            nest.release()
        self._nests, self._cells, self._touched = {}, {}, {}
        if not self._slack_made:
            self._make_slack()
        cap, slack = self._cap, list(self._empty_slack)
        for feed in self._feeds.values():
            feed.clear()
        for flow in flows:
            route = flow.route
            plan = _Plan(route, route.cap(cap), route.coefficients(cap), self._feeds,
                         self._never_bind, cap)
            if self._never_bind.counted_again:  # (every route present was planned before)
                raise RuntimeError("a re-share found a link direction to count again")
            flow.replan(plan)
            flow.group, flow.capped_in, flow.n_unsafe, flow.stamp = None, None, 0, -1
            if flow.cell is not None:
                flow.cell.stamp = -1  # (its entries are void)
                flow.cell = None
            medium = plan.medium
            for h, load, fed, ratio, _ in plan.steps:
                if fed is None:
                    slack[h] -= load
                else:
                    slack[h] -= self._feed(fed, medium, load, ratio, True)
        self._slack = slack
        self._groups, self._dirty, self._pending = {}, {}, []  # (every flow placed below)
        for h in sorted({h for flow in flows for h in flow.hops}):
            if slack[h] < 0.0:
                self._groups[h] = _Group(h, cap[h], now)
                for flow in self._link_flows[h]:
                    flow.n_unsafe += 1
        self._multi_unsafe = sum(1 for flow in flows if flow.n_unsafe > 1)
        if self._multi_unsafe and not self._build_nests(flows, now):
            self._progressive_filling(now)
            return
        self._fallback = False
        for flow in flows:
            if flow.cell is None:
                flow.rate = -1.0  # forces a fresh individual entry
                self._set_individual(flow, flow.cap, now)
        nested = self._nests.keys() | self._cells.keys()
        for h, g in self._groups.items():
            if h in nested:
                continue
            for flow in self._link_flows[h]:
                flow.capped_in = g
                flow.wt = _coef(flow, h)
                g.capped_sum += flow.cap * flow.wt
                heapq.heappush(g.capped, (-flow.cap, next(self._stamps), flow))
            self._rebalance(g, now)
        self._flush_nests(now)

    # -- fallback: progressive filling over every flow --------------------------------------
    def _request_recompute(self) -> None:
        if not self._recompute_pending:
            self._recompute_pending = True
            ev = simpy.Event(self.env)
            ev.callbacks.append(self._recompute)
            trigger_after(self.env, ev, 0.0)

    def _recompute(self, _event: simpy.Event) -> None:
        self._recompute_pending = False
        self._reshare(self.env.now)

    def _progressive_filling(self, now: float) -> None:
        """Every active flow re-rated by :func:`netsim.network.sharing.progressive_filling`, all as
        individual rates (no groups) until the network can decompose again."""
        self.full_recomputations += 1
        self._fallback = True
        for g in self._groups.values():
            g.settle(now)
            g.stamp = -1
        flows = self._active()
        for flow in flows:
            self._progress(flow, now)
            if flow.group is not None:
                flow.group.drop_member(flow)
                flow.group = None
            flow.capped_in = None
        rates = progressive_filling([flow.hops for flow in flows], self._cap,
                                    [flow.coefs for flow in flows])
        for flow, rate in zip(flows, rates, strict=True):
            flow.rate = rate
            self._push_flow(flow, now)
