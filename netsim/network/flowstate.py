"""The state :class:`netsim.network.flows.FlowNetwork` keeps per flow and per sharing group
(split out of netsim.network.flows: what the rates are kept in, not how): a flow in motion
(:class:`_Flow`), the flows a medium feeds into a link (:class:`_Feed`), a water-filling group
of one unsafe constraint (:class:`_Group`), and the nested groups of an outer constraint
(:class:`_Nest`) and its entities (:class:`_Cell`; netsim.network.nesting). Units: bits, bit/s,
seconds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import simpy

if TYPE_CHECKING:
    from netsim.network.neverbind import NeverBinding
    from netsim.network.topology import Route

_INF = float("inf")
_IDLE, _SHARING, _CAPPED = 0, 1, 2  # a nested entity: detached, at the outer share, at its level


class _Plan:
    """What a transfer on one route loads, under the capacities in force when it was made
    (a flow keeps its plan: its leave takes back exactly what its start added). A network
    keeps one per route used (while the capacities do not change), so a transfer's start
    reads them instead of computing them: ``hops`` (the route's ``flow_hops``), its
    ``route_id``, ``radios`` and ``latency`` (s), ``cap`` (its standalone rate), ``coefs``
    (None: all 1), ``feeder`` (the hop of its first medium, -1 without one) and its
    constraint ``medium`` (-1), and per hop ``steps``: (constraint, its
    load cap x coefficient, its :class:`_Feed` (of the constraint and the medium) or None
    where the load counts directly, the ratio of its coefficients on the hop and on the
    medium, its coefficient on the hop). ``own_bottleneck``: what
    :meth:`netsim.network.nesting.NestedGroups._own_bottleneck` found for a flow on it, per
    (outer, inner) constraint (valid while the plan is: a capacity change on its route
    re-plans every flow on it, and the network makes new plans). ``steps`` leaves out those
    of ``left_out``, the link hops that can never bind (netsim.network.neverbind), whose books
    the network does not keep: their steps carry no feed until :meth:`count_again`."""

    __slots__ = ("route", "hops", "cap", "coefs", "feeder", "medium", "steps", "own_bottleneck",
                 "left_out", "route_id", "radios", "latency")
    steps: tuple[_Step, ...]
    left_out: tuple[_Step, ...]

    def __init__(self, route: Route, cap: float, coefs: tuple[float, ...] | None,
                 feeds: dict[tuple[int, int], _Feed], never_bind: NeverBinding | None = None,
                 capacity: Sequence[float] = ()) -> None:
        """``feeds``: the network's, by (constraint, medium) (one is added where missing);
        ``never_bind``: which link hops to leave out (None: none), under ``capacity``."""
        self.route, self.cap, self.coefs = route, cap, coefs
        # what a transfer's start and end read of the route (kept here: once the plan is made,
        # they need not touch the route object)
        self.route_id, self.radios, self.latency = route.id, route.radios, route.latency_s
        self.hops = hops = route.flow_hops
        self.own_bottleneck: dict[tuple[int, int], bool] = {}
        self.left_out = ()
        if coefs is None:  # (no medium on the route: every coefficient 1, no feed)
            self.feeder = self.medium = -1
            self.steps = tuple([(h, cap, None, 0.0, 1.0) for h in hops])
            if never_bind is not None:
                never_bind.loads_directly(hops)
            return
        feeder = -1
        for j, r in enumerate(route.rate_refs):
            if r >= 0:
                feeder = j
                break
        self.feeder = feeder
        self.medium = medium = hops[feeder] if feeder >= 0 else -1
        if feeder < 0:
            self.steps = tuple([(h, cap * c, None, 0.0, c) for h, c in zip(hops, coefs, strict=True)])
            if never_bind is not None:
                never_bind.loads_directly(hops)
            return
        on_medium = coefs[feeder]
        leaves_out = None if never_bind is None or not never_bind.active \
            else never_bind.leaves_out
        first_medium = never_bind.first_medium if never_bind is not None else 0
        steps: list[_Step] = []
        left: list[_Step] = []
        for j, h in enumerate(hops):
            coef = coefs[j]
            if j == feeder:
                steps.append((h, cap * coef, None, 0.0, coef))
                continue
            ratio = coef / on_medium
            if leaves_out is not None and h < first_medium \
                    and leaves_out(h, medium, ratio, capacity[h]):
                left.append((h, cap * coef, None, ratio, coef))  # (its feed: count_again's)
                continue
            feed = feeds.get((h, medium))
            if feed is None:
                feed = feeds[(h, medium)] = _Feed()
            steps.append((h, cap * coef, feed, ratio, coef))
        self.steps = tuple(steps)
        if left:
            self.left_out = tuple(left)

    def count_again(self, hops: set[int], feeds: dict[tuple[int, int], _Feed]) -> list[_Step]:
        """Keep books again for the hops of ``hops`` this plan left out (their steps back in
        ``steps``, in route order, each with its feed from ``feeds``: the network's, one added
        where missing); returns those steps."""
        back: list[_Step] = []
        for h, load, _, ratio, coef in self.left_out:
            if h in hops:
                feed = feeds.get((h, self.medium))
                if feed is None:
                    feed = feeds[(h, self.medium)] = _Feed()
                back.append((h, load, feed, ratio, coef))
        if back:
            order = self.hops.index
            self.steps = tuple(sorted(self.steps + tuple(back), key=lambda step: order(step[0])))
            self.left_out = tuple([step for step in self.left_out if step[0] not in hops])
        return back


class _Flow:
    """A transfer in motion: ``remaining`` bits (as of ``updated``, s) at ``rate`` bit/s
    while it runs alone or capped, else at its group's or entity's rate."""

    __slots__ = ("hops", "cap", "remaining", "rate", "updated", "stamp", "done", "latency",
                 "group", "target", "n_unsafe", "capped_in", "route", "coefs", "wt", "cell",
                 "plan")

    def __init__(self, plan: _Plan, bits: float,
                 done: simpy.Event | Callable[[float], None] | None, now: float) -> None:
        self.plan = plan  # what it loads (its route's under the capacities of its start)
        self.route = plan.route
        self.hops, self.cap, self.remaining = plan.hops, plan.cap, bits
        self.latency = plan.latency
        self.coefs = plan.coefs  # per hop (1 on a link, 1/r on a medium); None: all 1
        # (hops: each constraint once, a medium crossed twice with its coefficients summed)
        self.wt = 1.0       # the coefficient on its unsafe constraint (its group's)
        self.done = done  # the arrival event, or a callback told the arrival time (send)
        self.rate, self.updated, self.stamp = 0.0, now, -1  # stamp: its live heap entry's
        self.group: _Group | None = None  # sharing member of this unsafe link's group
        self.target = 0.0                 # finishing point on the group's clock (bits)
        self.n_unsafe = 0                 # unsafe links on the route
        self.capped_in: _Group | None = None  # crosses this group's link, running at its cap
        self.cell: _Cell | None = None    # member of this entity of a nested outer constraint

    def replan(self, plan: _Plan) -> None:
        """Load ``plan`` from now on (a re-share: the capacities changed)."""
        self.plan, self.cap, self.coefs = plan, plan.cap, plan.coefs


class _Feed:
    """The flows crossing constraint h fed through one medium f (netsim's bound, as
    :func:`netsim.network.sharing.can_bind`): their load on h is at most their caps summed and
    at most f's budget x the largest ratio of their coefficients on h and on f (a cell of
    stations of rates r_i puts at most ``max r_i`` bit/s on its backhaul), whatever the rates.
    A network keeps one per (h, f) pair used, empty (n 0) while no flow is in it: the plans of
    the routes through it point at it."""

    __slots__ = ("n", "load", "ratios", "max_ratio", "bound")

    def __init__(self) -> None:
        self.n = 0
        self.load = 0.0           # the members' coefficient x cap on h, summed
        self.ratios: dict[float, int] = {}  # coefficient on h / on f -> members with it
        self.max_ratio = 0.0
        self.bound = 0.0          # what it counts on h's headroom now

    def clear(self) -> None:
        """Empty it (its last member left, or a re-share counts every flow again)."""
        self.n, self.load, self.max_ratio, self.bound = 0, 0.0, 0.0, 0.0
        self.ratios.clear()


# a plan's step: (constraint, load cap x coefficient, its feed or None, ratio, coefficient)
_Step = tuple[int, float, _Feed | None, float, float]


class _Group:
    """Water-filling state of one unsafe link direction."""

    __slots__ = ("link", "capacity", "n_members", "weight", "by_cap", "capped", "capped_sum",
                 "rate", "clock", "updated", "finishing", "stamp")

    def __init__(self, link: int, capacity: float, now: float) -> None:
        self.link, self.capacity = link, capacity
        self.n_members = 0
        self.weight = 0.0  # members' coefficients summed (their count on a link direction)
        self.by_cap: list[tuple[float, int, _Flow]] = []      # min-heap of members' caps
        self.capped: list[tuple[float, int, _Flow]] = []      # max-heap (-cap) of capped flows
        self.capped_sum = 0.0  # capped flows' coefficient x cap, summed
        self.rate, self.clock, self.updated = 0.0, 0.0, now
        self.finishing: list[tuple[float, int, _Flow]] = []   # min-heap of members' targets
        self.stamp = -1

    def settle(self, now: float) -> None:
        self.clock += self.rate * (now - self.updated)
        self.updated = now

    def drop_member(self, flow: _Flow) -> None:
        self.n_members -= 1
        self.weight = self.weight - flow.wt if self.n_members else 0.0  # (no drift when empty)


class _Nest:
    """Water-filling of one outer constraint (a link direction) over the entities
    (:class:`_Cell`) of the flows crossing it: an entity of n members counts n while it
    shares (each member at ``share`` bit/s) and ``n x level`` (bit/s) while capped at its
    level. ``clock``: bits served per sharing member."""

    __slots__ = ("link", "capacity", "n_sharing", "w_sharing", "n_capped", "capped_load",
                 "share", "clock", "updated", "by_level", "capped", "due", "stamp")

    def __init__(self, link: int, capacity: float, now: float) -> None:
        self.link, self.capacity = link, capacity
        self.n_sharing, self.w_sharing = 0, 0.0  # sharing entities; their members summed
        self.n_capped, self.capped_load = 0, 0.0  # capped entities; their n x level summed
        self.share = _INF                         # bit/s per sharing member
        self.clock, self.updated = 0.0, now
        self.by_level: list[tuple[float, int, _Cell]] = []  # min-heap of sharing levels
        self.capped: list[tuple[float, int, _Cell]] = []    # max-heap (-level) of capped ones
        self.due: list[tuple[float, int, _Cell]] = []  # sharing ones' next finish, on clock
        self.stamp = -1

    def clock_at(self, now: float) -> float:
        """Bits served per sharing member by ``now`` (s)."""
        if self.n_sharing and now > self.updated:  # (the share is inf while none shares)
            return self.clock + self.share * (now - self.updated)
        return self.clock

    def settle(self, now: float) -> None:
        self.clock = self.clock_at(now)
        self.updated = now

    def release(self) -> None:
        """Drop its heaps' entries once it has ended (no longer the network's nest of its
        link): its entities refer to it, its heaps to them, so the nest, its entities and the
        finished flows their heaps still hold would otherwise be freed only by the cyclic
        collector (thousands of objects per epoch, and its passes over them)."""
        self.by_level.clear()
        self.capped.clear()
        self.due.clear()


class _Cell:
    """An entity of a nested outer constraint (:class:`_Nest`): the flows of one inner
    constraint (``link``: a cell's air time, a backhaul), or one flow crossing the outer one
    alone (``link`` -1, ``capacity`` its standalone rate, weight 1). Its members run at one
    rate: its level ``capacity / weight`` (bit/s; ``weight``: their coefficients on the inner
    constraint summed) while capped, else the outer share. ``clock``: bits served per member
    (while sharing: the outer clock plus ``offset``); ``finishing``: members' targets on it."""

    __slots__ = ("nest", "link", "capacity", "n_members", "weight", "counted", "level", "mode",
                 "clock", "updated", "offset", "finishing", "stamp")

    def __init__(self, nest: _Nest, link: int, capacity: float, now: float) -> None:
        self.nest, self.link, self.capacity = nest, link, capacity
        self.n_members, self.weight = 0, 0.0
        self.counted = 0    # members counted in the nest's sums while attached
        self.level = _INF   # bit/s per member, set when attached
        self.mode = _IDLE
        self.clock, self.updated, self.offset = 0.0, now, 0.0
        self.finishing: list[tuple[float, int, _Flow]] = []  # min-heap of members' targets
        self.stamp = -1     # its live entries' (in the nest's heaps and the group heap)

    def clock_at(self, now: float) -> float:
        """Bits served per member by ``now`` (s)."""
        if self.mode == _SHARING:
            return self.nest.clock_at(now) + self.offset
        if self.mode == _CAPPED:
            return self.clock + self.level * (now - self.updated)
        return self.clock


_Timed = _Group | _Cell | _Nest  # what the group heap wakes up


def _ungroup(flow: _Flow) -> tuple[_Group | None, _Group | None]:
    """Take ``flow`` out of the decomposed groups it is in (a sharing member's group, the group
    whose link it crosses at its cap); returns them (either may be None)."""
    g, c = flow.group, flow.capped_in
    if g is not None:
        g.drop_member(flow)
        flow.group = None
    if c is not None:
        c.capped_sum -= flow.cap * flow.wt
        flow.capped_in = None
    return g, c


def _coef(flow: _Flow, h: int) -> float:
    """The flow's coefficient on constraint h (1 on a link direction, 1/r on a medium)."""
    coefs = flow.coefs
    return 1.0 if coefs is None else coefs[flow.hops.index(h)]
