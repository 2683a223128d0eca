"""The flow-level network: transfers sharing link directions by max-min fairness.

A transfer is a *flow* over a route. A flow alone on a route of bottleneck bandwidth B and total
latency D moves S bytes in ``8*S/B + D`` seconds: the bits drain at the flow's rate, then the
last bit takes the route's latency to arrive. Concurrent flows share each link direction by
max-min fairness (SimGrid's flow model); rates change only when a flow starts or ends.

How rates are kept (netsim's algorithm, exact, checked against naive progressive filling in
tests/test_network.py). Each flow has a standalone cap: the smallest capacity on its route. A
link direction is *safe* while the caps of the flows crossing it sum to at most its capacity: it
can never bind. Flows that reach it through a medium count at most what the medium lets through
(netsim's bound, as :func:`netsim.network.sharing.can_bind`: the flows of a cell of stations of
rates r_i put at most ``max r_i`` on any link behind it), so an aggregator's link behind many
cells stays safe when the cells cannot fill it, however many stations they hold. When every flow crosses at most one unsafe link, max-min fairness decomposes
into one water-filling per unsafe link: flows whose cap is below the link's fair share run at
their cap, the others share what is left equally. Those sharing flows form a *group* with one
rate and one virtual clock (bits served per member), so a start or end changes one number, not
every member's rate: O(log n) per change with heaps by cap and by finishing point. If some flow
crosses two or more unsafe links, the network keeps *nested* groups where the unsafe
constraints nest (below), else it falls back to progressive filling over all flows, once per
simulated instant at which flows start or end, until the condition holds again.

Nested groups (netsim.network.nested's case, kept by events): the generated networks above about
3,000 devices, where every transfer crosses its cell's air time and the aggregator's link and
both bind. There the unsafe constraints nest when each flow crosses at most two, an *inner* one
(a cell, a backhaul) and an *outer* link direction (coefficient 1) that every flow of the inner
one also crosses, and each member's inner constraint is its own bottleneck but for the outer
one (``cap x coef >= inner capacity``). Then the members of an inner constraint always run at
one rate, the inner level ``capacity / sum of the members' coefficients`` unless the outer
share is lower, and the outer constraint water-fills its *entities*: the inner constraints, of
weight n (their members) capped at their level, and the flows crossing it alone, capped at
their standalone rate (:class:`_Cell`, :class:`_Nest`). An entity has one virtual clock (bits
per member); a sharing entity's clock runs with the outer one's (an offset), so a start or end
changes the numbers of its entity and the outer share: O(log n) per change with heaps by level
and by finishing point. The same :func:`netsim.network.sharing.level_share` and
:func:`~netsim.network.sharing.rebalance_move` keep both levels. A cell appearing or going
(a second member, the last but one leaving) changes its members only, an outer constraint
turning unsafe or safe the flows crossing it (once a phase); a change that breaks the nesting
re-shares every flow (:meth:`FlowNetwork._reshare` re-checks the structure: nested groups
where it nests, progressive filling where it does not). Counters: ``full_recomputations``
(progressive filling passes), ``reshares`` (every flow re-shared at once),
``nested_rebuilds`` (nests built by a re-share), ``nested_updates`` (nest rebalances).

Books left out (netsim.network.neverbind, ours): a link direction that every flow reaches
through one medium, whose budget x the flows' largest ratio of coefficients fits its capacity
(a station's own link; a cell's backhaul the cell cannot fill), can never become unsafe, so a
plan leaves it out of the per-transfer books (its flows, its headroom). It counts again, the
flows present joining its books in start order, when a route reaches it through a second
medium or loads it directly, and every direction counts again at a capacity change. The
rates and every result are those of full books (tests/test_never_bind.py).

Batching: transfers that start inside ``with network.batch():`` (the engine's downloads at the
start of an epoch) and transfers that end at the same instant are placed first and rebalanced
once per group, so n simultaneous starts cost O(n log n), not n rebalances.

Events: one shared wake-up per distinct instant at which transfers finish (and one per instant
of fallback recomputation), plus, for :meth:`FlowNetwork.transfer`, one event per transfer (its
arrival). :meth:`FlowNetwork.send` schedules no arrival event: it tells a callback the arrival
time when the last bit leaves, and the caller schedules what follows (the engine's epochs).

Accounting (:class:`netsim.network.ledger.TransferLedger`): a transfer's bytes, communication
energy and air time are booked when it starts and added to the per-node totals in bulk before
any reading; a capacity change settles the books first, so air time is at the station rates
of each transfer's start.

A changing world (netsim.dynamics): :meth:`FlowNetwork.cancel` stops a transfer at any instant
(a participant going offline), and :meth:`FlowNetwork.set_capacities` changes link capacities
at any instant. A cancel restores the sharing where the flow was, as an end does. A capacity
change that a flow present crosses re-shares every link among the flows present at that
instant with the same routines (the groups' water-filling, nested groups, or progressive
filling when a flow crosses two binding links that do not nest): every flow's standalone cap
is re-read from the new capacities and the groups rebuilt. A change that no flow present
crosses changes no rate and re-shares nothing.

The allocation is plain max-min fairness (:mod:`netsim.network.sharing`: the rules and the tolerance
every path shares, and the note on SimGrid's CM02 model, which netsim matches with latency
weighting off; SimGrid's default also weights shares by latency). This module keeps the rates
of flows in motion; :mod:`netsim.network.ledger` keeps the books (bytes, energy);
:mod:`netsim.simclock` schedules the wake-ups.

Where the code is: this module holds the public API and a transfer's start and end; the rest
of :class:`FlowNetwork` is mixed in from its parts, one job each, sharing the state declared in
:mod:`netsim.network.flowbase` (the per-flow and per-group state: :mod:`netsim.network.flowstate`):
:mod:`netsim.network.groups` (decomposed groups, directions turning unsafe and safe),
:mod:`netsim.network.nesting` (nested groups), :mod:`netsim.network.resharing` (every flow
re-shared, progressive filling) and :mod:`netsim.network.wakeups` (completions).
"""

from __future__ import annotations

import heapq
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np
import simpy

from netsim.energy import EnergyMeter
from netsim.network.flowstate import (
    _INF,
    _SHARING,
    _Cell,
    _Feed,
    _Flow,
    _Group,
    _Nest,
    _Plan,
    _Step,
    _Timed,
    _ungroup,
)
from netsim.network.groups import DecomposedGroups
from netsim.network.ledger import TransferLedger
from netsim.network.nesting import NestedGroups
from netsim.network.neverbind import NeverBinding
from netsim.network.radio import RadioMeter
from netsim.network.resharing import Resharing
from netsim.network.sharing import medium_budget
from netsim.network.tolerances import CAPACITY_TOLERANCE
from netsim.network.wakeups import Wakeups
from netsim.simclock import fire_after, trigger_after

if TYPE_CHECKING:
    from netsim.network.topology import Route, Topology

_TOL = CAPACITY_TOLERANCE


def _lowest_hop(flow: _Flow) -> int:
    """The lowest constraint ``flow`` crosses (:meth:`FlowNetwork._active`'s order)."""
    return min(flow.hops)


class FlowNetwork(NestedGroups, DecomposedGroups, Resharing, Wakeups):
    """Transfers over a :class:`~netsim.network.Topology`, max-min fair per link direction.

    Communication energy (bits x J/bit of every link crossed) is charged, when the transfer
    starts, to the node at the sending end of each link, in category communication.
    """

    def __init__(self, env: simpy.Environment, topology: Topology, meter: EnergyMeter) -> None:
        self.env, self.topology, self.meter = env, topology, meter
        n_dir = len(topology.constraint_capacity)
        self._cap = list(topology.constraint_capacity)  # its own: capacities may change
        self._first_medium = n_dir - len(topology.constraint_medium)  # media come after links
        # media whose budget shrinks with their active flows: constraint -> (onset, loss)
        self._contended = {n_dir - len(topology.constraint_medium) + k:
                           (medium.contention_onset_flows, medium.contention_loss_per_flow)
                           for k, medium in ((k, topology.media[m])
                                             for k, m in enumerate(topology.constraint_medium))
                           if getattr(medium, "contention_onset_flows", None) is not None}
        self._caps_changed = False  # routes' bottleneck_bps no longer the flows' caps
        # per route used (by id(route); the plan holds the route): what a transfer on it loads
        # under the capacities now (emptied whenever a capacity changes)
        self._plans: dict[int, _Plan] = {}
        # link directions that can never bind: no books kept for them (netsim.network.neverbind)
        self._never_bind = NeverBinding(topology.constraint_capacity, self._first_medium)
        self._routes = topology.route_cache
        # dicts as ordered sets: iteration order (and so every float sum) is reproducible
        # per constraint crossed so far (a fleet's millions of links cost nothing until used)
        self._link_flows: defaultdict[int, dict[_Flow, None]] = defaultdict(dict)
        # headroom per direction: capacity (with a relative tolerance) minus the caps of the
        # flows crossing it; negative exactly while the direction is unsafe (has a group)
        # (made at the first transfer or capacity change, :meth:`_make_slack`: a fleet of a
        # million whose epochs all play in arrays never needs its 2 million entries)
        self._empty_slack: list[float] = []
        self._slack: list[float] = []
        self._slack_made = False
        self._groups: dict[int, _Group] = {}
        # (constraint, medium) -> the flows fed to it through the medium (kept once used)
        self._feeds: dict[tuple[int, int], _Feed] = {}
        self._n_active = 0
        self._moving: dict[_Flow, None] = {}  # the flows in motion, in start order
        self._unsent_memo = (-1.0, -1, 0.0)  # (time, changes, unsent_j) of the last reading
        self._changes = 0  # flows started or ended (at one instant the bits left change only so)
        self._multi_unsafe = 0            # flows crossing two or more unsafe links
        # finish heaps; an entry (time_s, stamp, obj) is live while obj.stamp == stamp
        self._heap: list[tuple[float, int, _Flow]] = []          # individual flows
        self._group_heap: list[tuple[float, int, _Timed]] = []   # groups' next member finish
        self._stamps = itertools.count()
        self._wakeup_at = _INF
        self._wakeup_event: simpy.Event | None = None
        self._wakeup_callback = self._wakeup  # one bound method, not one per wake-up
        self._idle_wakeups, self._idle_at = 0, -_INF  # (netsim.network.wakeups' guard)
        self._recompute_pending = False
        self._fallback = False            # rates currently come from progressive filling
        self._batching = 0                # > 0: rebalances wait for the end of the batch
        self._dirty: dict[_Group, None] = {}
        # flows started in the running batch into a group they found: (flow, group), enrolled
        # at the batch's end (DecomposedGroups._enroll_pending)
        self._pending: list[tuple[_Flow, _Group]] = []
        # nested groups: outer constraint -> its nest, inner constraint -> its cell; entities
        # whose members changed (re-attached at the end of the batch)
        self._nests: dict[int, _Nest] = {}
        self._cells: dict[int, _Cell] = {}
        self._touched: dict[_Cell, None] = {}
        self._arrivals: list[tuple[Callable[[float], None], float]] = []  # send() callbacks due
        self.ledger = TransferLedger(topology, meter, self._cap)
        # flows present at a change of their station rates -> the rates of their start
        self._start_rates: dict[_Flow, tuple[float, ...]] = {}
        self.radio = RadioMeter(topology.radios, meter)
        self.ledger.before_settle = self.radio.flush
        self._book_route = self.ledger.booked_routes.append  # (the hot path's two appends)
        self._book_bytes = self.ledger.booked_bytes.append
        self.full_recomputations = 0
        self.reshares = 0         # every flow re-shared at once (capacities, structure)
        self.nested_rebuilds = 0  # nested groups built from scratch (in a re-share)
        self.nested_updates = 0   # nested water-fillings restored after a change

    @property
    def active_flows(self) -> int:
        """Number of transfers currently moving bits."""
        return self._n_active

    def rate_bps(self, flow: _Flow) -> float:
        """The rate (bit/s) at which ``flow`` (a handle from :meth:`send_on`) moves its bits
        now, whichever regime rates it (0 once it has left the network)."""
        if flow.done is None:
            return 0.0
        if flow.group is not None:
            return flow.group.rate
        cell = flow.cell
        if cell is not None:
            return cell.nest.share if cell.mode == _SHARING else cell.level
        return flow.rate

    def _active(self) -> list[_Flow]:
        """Every flow moving bits, in a reproducible order: by the lowest constraint it
        crosses, then by start (the books of a link direction list its flows in start order;
        a direction left out of them (netsim.network.neverbind) still counts here)."""
        return sorted(self._moving, key=_lowest_hop)

    def unsent_j(self) -> float:
        """Communication energy booked for the bits the transfers in progress have still to
        send (J): the ledger books a transfer's energy at its start; this much of it is not
        drawn yet."""
        if not self._n_active:
            return 0.0
        now = self.env.now
        at, changes, memo = self._unsent_memo
        if at == now and changes == self._changes:  # (an epoch's end is the next one's start)
            return memo
        total = 0.0
        progress = self._progress
        for flow in self._moving:  # (in start order: deterministic sums)
            progress(flow, now)
            total += flow.remaining * flow.route.total_energy_j_per_bit
        self._unsent_memo = (now, self._changes, total)
        return total

    @property
    def bytes_sent(self) -> np.ndarray:
        """Bytes each node has sent as the source of a transfer so far (a copy)."""
        return self.ledger.bytes_sent

    @property
    def bytes_received(self) -> np.ndarray:
        """Bytes each node has been sent as the destination of a transfer so far (a copy)."""
        return self.ledger.bytes_received

    def settle_accounting(self) -> None:
        """Book the bytes and energy of the transfers started since the last call
        (:meth:`TransferLedger.settle`)."""
        self.ledger.settle()

    def book(self, route_ids: Sequence[int], sizes_bytes: Sequence[float],
             capacity: np.ndarray | None = None) -> None:
        """Account transfers played forward outside the network (the engine's epoch fast path,
        netsim.fastepoch), or un-book the bits a cancelled transfer did not send (negative
        sizes): :meth:`TransferLedger.book` (``capacity``: the capacities in force at their
        start when not those in force now, for their air time)."""
        self.ledger.book(route_ids, sizes_bytes, capacity)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Start several transfers at this instant with one rebalance per shared link.

        Rates are exact when the block ends; no simulated time may pass inside it.
        """
        self._batching += 1
        try:
            yield
        finally:
            self._batching -= 1
            if not self._batching:
                self._flush(self.env.now)

    def transfer(self, src: str, dst: str, size_bytes: float) -> simpy.Event:
        """Start moving ``size_bytes`` from src to dst; the event fires when it has arrived."""
        done = simpy.Event(self.env)
        self._send(src, dst, size_bytes, done)
        return done

    def send(self, src: str, dst: str, size_bytes: float,
             on_arrival: Callable[[float], None]) -> None:
        """Start moving ``size_bytes`` from src to dst; ``on_arrival(arrival_s)`` is called as
        soon as the arrival time is known: when the last bit leaves (arrival minus the route's
        latency), or at once for a local or empty transfer. No arrival event is scheduled: the
        caller schedules what follows at ``arrival_s`` (two SimPy events fewer per epoch and
        participant in the engine than :meth:`transfer`). The callback runs after the network
        has settled at that instant, so it may start transfers itself.
        """
        self._send(src, dst, size_bytes, on_arrival)

    def send_on(self, route: Route, size_bytes: float,
                on_arrival: Callable[[float], None]) -> _Flow | None:
        """:meth:`send` over a route of this network's topology (``topology.route(src, dst)``),
        for callers that keep their routes (the engine: one per participant and direction).
        Returns the transfer's handle for :meth:`cancel` (None when it moves no bits)."""
        plan = self._plans.get(id(route))  # (a route planned has hops: not read again)
        if plan is not None or route.hops:
            return self._start(route, size_bytes, on_arrival, plan)
        self._arrive_later(on_arrival, 0.0)
        return None

    @property
    def capacity_bps(self) -> list[float]:
        """Capacity of every constraint now (link directions in bit/s, then media budgets),
        indexed like the topology's ``constraint_capacity`` (a copy)."""
        return list(self._cap)

    def cancel(self, flow: _Flow | None) -> float:
        """Stop the transfer ``flow`` now (its sender went offline); returns the bits it had
        left (0 if it had already left the network). Its arrival never fires; the links it
        crossed are re-shared among the others at this instant. The caller un-books the bits
        not sent (:meth:`book` with a negative size), so only sent bits cost energy and air
        time (the air time of the bits not sent is taken back at the station rates of the
        transfer's start, as it was booked)."""
        if flow is None or flow.done is None:
            return 0.0
        now = self.env.now
        self._progress(flow, now)
        left = flow.remaining
        self._leave(flow, now, arrive=False)
        start_rates = self._start_rates.pop(flow, None)
        if start_rates is not None and left > 0.0:  # (its station rates changed since)
            self.ledger.rebook_airtime(flow.route, left, start_rates)
        return left

    def set_capacities(self, directions: Sequence[int], capacity_bps: Sequence[float]) -> None:
        """Set the capacity of link directions ``directions`` (topology indices) to
        ``capacity_bps`` (bit/s, > 0) from now on: flows present are re-shared at once where
        one crosses a direction changed (a flow's cap, coefficients and shares depend only
        on the constraints it crosses; the others' headroom is reset). The transfers started
        so far are booked first, their air time at the station rates in force until now."""
        if not self._slack_made:
            self._make_slack()
        counted = self._never_bind.stop()  # (its bound assumed fixed capacities)
        if counted:
            self._count_again(counted)
        link_flows, touched = self._link_flows, False
        # air time is booked at the station rates of a transfer's start: the transfers started
        # under the rates in force until now are settled under them, and the flows present
        # keep their start's rates for the bits a cancel un-books (:meth:`cancel`)
        self.ledger.settle()
        self._keep_start_rates(directions)
        for h, c in zip(directions, capacity_bps, strict=True):
            self._cap[h] = float(c)
            self._empty_slack[h] = float(c) * (1.0 + _TOL)
            self._plans = {}
            if link_flows.get(h):
                touched = True
            else:
                self._slack[h] = self._empty_slack[h]
        self._caps_changed = True
        if touched:
            self._reshare(self.env.now)

    def _keep_start_rates(self, directions: Sequence[int]) -> None:
        """Before capacities ``directions`` change: note the station rates now of every flow
        present crossing one of them on a medium, unless noted at an earlier change (then
        those are its start's), and forget the flows that have left."""
        start_rates, link_flows = self._start_rates, self._link_flows
        for flow in [f for f in start_rates if f.done is None]:
            del start_rates[flow]
        cap = self._cap
        for h in directions:
            for flow in link_flows.get(h, ()):
                airtime = flow.route.airtime
                if airtime and flow not in start_rates:
                    start_rates[flow] = tuple(cap[d] for _, d in airtime)

    def _route_cap(self, route: Route) -> float:
        """A route's standalone rate now (bit/s): the smallest capacity (over coefficient)
        on it."""
        if not self._caps_changed:
            return route.bottleneck_bps
        return route.cap(self._cap)

    def _send(self, src: str, dst: str, size_bytes: float,
              done: simpy.Event | Callable[[float], None]) -> None:
        if src == dst:
            self._arrive_later(done, 0.0)
        else:
            self._start(self._routes.get((src, dst)) or self.topology.route(src, dst),
                        size_bytes, done)

    def _plan(self, route: Route) -> _Plan:
        """What a transfer starting on ``route`` now loads (kept per route until a capacity
        changes)."""
        plan = self._plans.get(id(route))
        if plan is None:
            never_bind = self._never_bind
            plan = _Plan(route, self._route_cap(route),
                         route.coefficients(self._cap) if route.rate_refs else None, self._feeds,
                         never_bind, self._cap)
            if never_bind.counted_again:
                counted, never_bind.counted_again = never_bind.counted_again, []
                self._count_again(counted)
            self._plans[id(route)] = plan
        return plan

    def _count_again(self, hops: list[int]) -> None:
        """Link directions ``hops``, left out of the books so far (netsim.network.neverbind),
        count from now on: every plan that left one out keeps it again (in place: the kept
        plans and the flows present's), and the flows present that cross one join its books,
        in start order."""
        counted = set(hops)
        plans = {id(plan): plan for plan in self._plans.values() if plan.left_out}
        for flow in self._moving:
            if flow.plan.left_out:
                plans[id(flow.plan)] = flow.plan
        added: dict[int, list[_Step]] = {}
        for key, plan in plans.items():
            steps = plan.count_again(counted, self._feeds)
            if steps:
                added[key] = steps
        link_flows, slack = self._link_flows, self._slack
        for flow in self._moving:
            steps = added.get(id(flow.plan), [])
            for h, load, feed, ratio, _ in steps:  # (_start's books of a hop)
                link_flows[h][flow] = None
                slack[h] -= load if feed is None else self._feed(feed, flow.plan.medium, load,
                                                                  ratio, True)

    def _make_slack(self) -> None:
        """Every direction's headroom, empty and now (capacity with the tolerance: no flow
        yet), made when first needed."""
        self._empty_slack = [c * (1.0 + _TOL) for c in self._cap]
        self._slack = list(self._empty_slack)
        self._slack_made = True

    def _start(self, route: Route, size_bytes: float, done: simpy.Event | Callable[[float], None],
               plan: _Plan | None = None) -> _Flow | None:
        """Start moving ``size_bytes`` on ``route`` (with hops; ``plan``: its plan now, when
        the caller has it)."""
        if not self._slack_made:
            self._make_slack()
        bits = 8.0 * float(size_bytes)
        if bits <= 0.0:
            self._book_route(route.id)  # bytes and energy: booked in bulk (TransferLedger)
            self._book_bytes(size_bytes)
            self._arrive_later(done, route.latency_s)
            return None
        if plan is None:
            plan = self._plans.get(id(route)) or self._plan(route)
        self._book_route(plan.route_id)  # (as above)
        self._book_bytes(size_bytes)
        now = self.env.now
        radios = plan.radios
        if radios:
            self.radio.start(radios, now)
        c = plan.cap
        flow = _Flow(plan, bits, done, now)
        self._n_active += 1
        self._moving[flow] = None
        self._changes += 1
        link_flows, slack, groups = self._link_flows, self._slack, self._groups
        budget = self._cap[plan.medium]  # (medium -1: never read)
        g = newly_unsafe = None
        n_unsafe, wt = 0, 1.0
        for h, load, feed, ratio, coef in plan.steps:
            link_flows[h][flow] = None
            if feed is None:
                left = slack[h] - load
            else:  # joins the flows fed to h through its medium (_feed, inline; from empty
                feed.n += 1  # too: 0.0 + load is load, and the bound was 0.0)
                feed.load = fed = feed.load + load
                ratios = feed.ratios
                ratios[ratio] = ratios.get(ratio, 0) + 1
                max_ratio = feed.max_ratio
                if ratio > max_ratio:
                    feed.max_ratio = max_ratio = ratio
                bound = budget * max_ratio
                if not bound < fed:  # (min(feed.load, bound))
                    bound = fed
                left = slack[h] - (bound - feed.bound)
                feed.bound = bound
            slack[h] = left
            if left < 0.0:
                g_h = groups.get(h)
                if g_h is not None:
                    n_unsafe += 1
                    g, wt = g_h, coef
                elif newly_unsafe is None:
                    newly_unsafe = [h]
                else:
                    newly_unsafe.append(h)
        flow.n_unsafe = n_unsafe
        if n_unsafe > 1:
            self._multi_unsafe += 1
        flow.wt = wt  # (its coefficient on g's link: _coef)
        if self._contended and self._contend(route):
            return flow
        if newly_unsafe is not None:
            for h in newly_unsafe:
                self._make_unsafe(h, now, flow)  # rates flow (this one too) from its group now
            if self._nests and flow.cell is None and self._nested_live():
                self._place_nested(flow, now)
        elif self._nests and self._place_nested(flow, now):
            pass
        elif self._fallback or (self._multi_unsafe and not self._nests):
            self._request_recompute()
        elif g is None:
            flow.rate = c
            flow.stamp = stamp = next(self._stamps)
            at = now + bits / c
            heapq.heappush(self._heap, (at, stamp, flow))
            if at < self._wakeup_at:
                self._arm(at)
        elif self._batching:  # it will (likely) share; the rebalance caps it otherwise.
            self._pending.append((flow, g))  # Enrolled at the batch's end, unless a nest
            self._dirty[g] = None  # forms meanwhile and takes it (_touch, inline)
        elif g.n_members and c >= g.rate:
            self._enroll(flow, g, now)  # (_join: a flow starting now has moved nothing)
            self._rebalance(g, now)
        else:
            self._add_capped(flow, g, now)
            self._touch(g, now)
        return flow

    def _contend(self, route: Route) -> bool:
        """Set the budgets of the contended media on ``route`` from their active flows now;
        True when one changed (then every flow is re-shared at this instant)."""
        changed = False
        for h in route.hops:
            figures = self._contended.get(h)
            if figures is not None:
                budget = medium_budget(len(self._link_flows[h]), *figures)
                if budget != self._cap[h]:
                    self._cap[h] = budget
                    self._empty_slack[h] = budget * (1.0 + _TOL)
                    self._plans = {}
                    self._caps_changed = changed = True
        if changed:
            self._request_recompute()
        return changed

    def _feed(self, feed: _Feed, medium: int, load: float, ratio: float, joins: bool) -> float:
        """A flow joins (or leaves) ``feed``, the flows fed to constraint h through ``medium``
        (``load``: its cap x coefficient on h; ``ratio``: its coefficients on h over on the
        medium); returns the change of their bounded load on h (what h's headroom loses).
        (:meth:`_start` and :meth:`_leave` do the same inline.)"""
        if joins:
            feed.n += 1
            feed.load += load
            feed.ratios[ratio] = feed.ratios.get(ratio, 0) + 1
            if ratio > feed.max_ratio:
                feed.max_ratio = ratio
        else:
            feed.n -= 1
            if not feed.n:
                bound = feed.bound
                feed.clear()
                return -bound
            feed.load -= load
            left = feed.ratios[ratio] - 1
            if left:
                feed.ratios[ratio] = left
            else:
                del feed.ratios[ratio]
                if ratio == feed.max_ratio:
                    feed.max_ratio = max(feed.ratios)
        bound = min(feed.load, self._cap[medium] * feed.max_ratio)
        change, feed.bound = bound - feed.bound, bound
        return change

    def _arrive_later(self, done: simpy.Event | Callable[[float], None], delay_s: float) -> None:
        """Arrival of a transfer that moves no bits through the network (local or empty)."""
        if isinstance(done, simpy.Event):
            trigger_after(self.env, done, delay_s)
        else:
            at = self.env.now + delay_s
            fire_after(self.env, 0.0, lambda _event: done(at))

    def _leave(self, flow: _Flow, now: float, arrive: bool = True) -> None:
        """Take a finished (or, ``arrive=False``, cancelled) flow off its links, fire its
        arrival after the route's latency, and restore fairness where it was."""
        done = flow.done
        flow.done = None  # (left the network: cancel() finds nothing to stop)
        plan = flow.plan
        radios = plan.radios
        if radios:
            self.radio.end(radios, now + flow.latency if arrive else now)
        if not arrive:
            pass
        elif type(done) is simpy.Event:
            trigger_after(self.env, done, flow.latency)
        else:  # send() callbacks; only simpy.Event itself is ever passed as an event
            self._arrivals.append((done, now + flow.latency))  # type: ignore[arg-type]
        self._n_active -= 1
        del self._moving[flow]
        self._changes += 1
        flow.stamp = -1
        g, c = _ungroup(flow)
        if flow.n_unsafe > 1:
            self._multi_unsafe -= 1
        if flow.cell is not None:
            self._exit(flow, now)
        link_flows, slack, groups = self._link_flows, self._slack, self._groups
        to_safe, empty_slack = None, self._empty_slack
        budget = self._cap[plan.medium]  # (medium -1: never read)
        for h, load, feed, ratio, _ in plan.steps:
            flows_h = link_flows[h]
            del flows_h[flow]
            if feed is not None:  # leaves the flows fed to h through its medium (_feed, inline)
                n = feed.n - 1
                if not n:
                    load = feed.bound
                    feed.clear()
                else:
                    feed.n = n
                    feed.load = fed = feed.load - load
                    ratios = feed.ratios
                    n_ratio = ratios[ratio] - 1
                    if n_ratio:
                        ratios[ratio] = n_ratio
                    else:
                        del ratios[ratio]
                        if ratio == feed.max_ratio:
                            feed.max_ratio = max(ratios)
                    bound = budget * feed.max_ratio
                    if not bound < fed:  # (min(feed.load, bound))
                        bound = fed
                    load = -(bound - feed.bound)
                    feed.bound = bound
            left = slack[h] + load if flows_h else empty_slack[h]  # (never negative)
            slack[h] = left
            if left >= 0.0 and h in groups:
                if to_safe is None:
                    to_safe = []
                to_safe.append(h)
        if to_safe is not None:
            for h in to_safe:
                self._make_safe(h, now)
        if self._contended:
            self._contend(flow.route)
        if self._fallback or self._recompute_pending or (self._multi_unsafe and not self._nests):
            self._request_recompute()
            return
        batching = self._batching
        if self._touched and not batching:
            self._flush_nests(now)
        if g is not None and groups.get(g.link) is g:
            if batching:  # (_touch, inline)
                self._dirty[g] = None
            else:
                self._rebalance(g, now)
        if c is not None and c is not g and groups.get(c.link) is c:
            self._touch(c, now)
