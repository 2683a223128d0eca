"""Link directions that can never bind, left out of the event path's per-transfer books
(netsim's formalization, ours).

:class:`netsim.network.flows.FlowNetwork` keeps, per link direction, the flows crossing it and
its headroom (capacity minus what they can load), to learn when it becomes unsafe. A flow that
reaches a link direction h through a medium f counts there at most ``f's budget x the largest
ratio of its flows' coefficients on h and on f`` (the network's ``_Feed`` bound). While every
route planned so far reaches h through one medium f, that bound, with f's budget at its
largest (1: contention only lowers it) and the largest ratio of those routes, caps h's books
whatever flows come and go: while it is at most h's capacity, h's headroom can never go
negative, so h never becomes unsafe, and keeping its books is wasted work. A station's own link (its load is at most its rate, through its cell) and a
cell's backhaul that the cell cannot fill are such directions: on the generated fleets they are
two of a transfer's four constraints.

:class:`NeverBinding` decides, as each route is planned, which of its link hops to leave out
of the books, and grows the bound as routes are planned. A hop whose bound passes its
capacity, that a route reaches through a second medium (where several cells' links meet they
tend to bind: counted at once rather than after many plans), or that a route loads directly
(not through a medium), counts from then on: the
network adds the flows present that left it out (:meth:`FlowNetwork._count_again`). A
capacity change ends the leaving-out for the rest of the run (the bound assumed fixed
capacities). Rates and every result are the same as with full books: only the bookkeeping of a
direction that could not bind is skipped. Units: bit/s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from netsim.network.sharing import CAPACITY_TOLERANCE

if TYPE_CHECKING:
    from netsim.network.flowstate import _Plan

# a bound within half the tolerance of the capacity leaves out its direction: a station's own
# link, of rate r, is bound by 1 / (1 / r), which rounds to r or one unit off; the books'
# headroom has the whole tolerance (capacity x (1 + tolerance)), so it still never goes negative
_MARGIN = 1.0 + 0.5 * CAPACITY_TOLERANCE


class NeverBinding:
    """Which link directions the event path's books leave out (the module docstring)."""

    __slots__ = ("active", "_first_medium", "_budget", "_feeder", "_bound", "_kept",
                 "_left_out")

    def __init__(self, constraint_capacity: Sequence[float], first_medium: int) -> None:
        """``constraint_capacity``: the topology's (link directions in bit/s, then media
        budgets); ``first_medium``: the index of the first medium constraint."""
        self.active = True
        self._first_medium = first_medium
        # a medium's largest budget: contention only lowers it (a capacity change ends this)
        self._budget = [max(float(c), 1.0) for c in constraint_capacity]
        self._feeder: dict[int, int] = {}   # h -> the one medium its planned flows cross
        self._bound: dict[int, float] = {}  # h -> that medium's budget x largest ratio (bit/s)
        self._kept: set[int] = set()        # link directions counted from now on
        self._left_out: set[int] = set()    # left out of some plan made so far

    def split(self, plan: _Plan, capacity: Sequence[float]) -> list[int]:
        """Leave out of ``plan`` the link hops that can never bind (under ``capacity``, per
        constraint, in force since the run began); returns the hops left out of earlier plans
        that count from now on (the network adds their flows present)."""
        if not self.active or plan.medium < 0:  # (no medium: every hop loaded directly)
            return self._keep([h for h in plan.hops if h < self._first_medium])
        first_medium, kept, feeder, bound = self._first_medium, self._kept, self._feeder, \
            self._bound
        medium = plan.medium
        budget = self._budget[medium]
        keep, left, now_counted = [], [], []
        for step in plan.all_steps:
            h = step[0]
            if h >= first_medium or h in kept:
                keep.append(step)
                continue
            # (a link hop of a route with a medium is loaded through it: step[2] == (h, medium))
            if feeder.setdefault(h, medium) == medium:
                limit = budget * step[3]
                if limit > bound.get(h, 0.0):
                    bound[h] = limit
                if bound[h] <= capacity[h] * _MARGIN:
                    left.append(step)
                    self._left_out.add(h)
                    continue
            # fed through a second medium (the links of several cells: where they meet, they
            # tend to bind), or its bound passed its capacity: counted from now on
            keep.append(step)
            kept.add(h)
            if h in self._left_out:
                self._left_out.discard(h)
                now_counted.append(h)
        if left:
            plan.steps, plan.left_out = tuple(keep), tuple(left)
        return now_counted

    def _keep(self, hops: list[int]) -> list[int]:
        """Count ``hops`` from now on; returns those left out of some plan so far."""
        now_counted = [h for h in hops if h in self._left_out]
        self._kept.update(hops)
        self._left_out.difference_update(now_counted)
        return now_counted

    def stop(self) -> list[int]:
        """Count every link direction from now on (a capacity changes); returns those left out
        of some plan so far (the network adds their flows present)."""
        self.active = False
        now_counted = sorted(self._left_out)
        self._left_out.clear()
        return now_counted
