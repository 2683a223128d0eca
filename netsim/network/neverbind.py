"""Link directions that can never bind, left out of the event path's per-transfer books
(netsim's formalization, ours).

:class:`netsim.network.flows.FlowNetwork` keeps, per link direction, the flows crossing it and
its headroom (capacity minus what they can load), to learn when it becomes unsafe. A flow that
reaches a link direction h through a medium f counts there at most ``f's budget x the largest
ratio of its flows' coefficients on h and on f`` (the network's ``_Feed`` bound). While every
route planned so far reaches h through one medium f, that bound, with f's budget at its
largest (1: contention only lowers it) and the largest ratio of those routes, caps h's books
whatever flows come and go: while it is at most h's capacity, h's headroom can never go
negative, so h never becomes unsafe, and keeping its books is wasted work. A station's own
link (its load is at most its rate, through its cell) and a cell's backhaul that the cell
cannot fill are such directions: on the generated fleets they are two of a transfer's four
constraints.

:class:`NeverBinding` decides, as each route is planned, which of its link hops to leave out
of the books, and grows the bound as routes are planned. A hop whose bound passes its
capacity, that a route reaches through a second medium (where several cells' links meet they
tend to bind: counted at once rather than after many plans), or that a route loads directly
(not through a medium), counts from then on: the network adds the flows present that left it
out (:meth:`FlowNetwork._count_again`). A capacity change ends the leaving-out for the rest of
the run (the bound assumed fixed capacities). Rates and every result are the same as with full books: only the bookkeeping of a
direction that could not bind is skipped. Units: bit/s.
"""

from __future__ import annotations

from collections.abc import Sequence

from netsim.network.tolerances import CAPACITY_TOLERANCE

# a bound within half the tolerance of the capacity leaves out its direction: a station's own
# link, of rate r, is bound by 1 / (1 / r), which rounds to r or one unit off; the books'
# headroom has the whole tolerance (capacity x (1 + tolerance)), so it still never goes negative
_MARGIN = 1.0 + 0.5 * CAPACITY_TOLERANCE


class NeverBinding:
    """Which link directions the event path's books leave out (the module docstring)."""

    __slots__ = ("active", "first_medium", "counted_again", "_budget", "_feeder", "_bound",
                 "_kept", "_left_out")

    def __init__(self, constraint_capacity: Sequence[float], first_medium: int) -> None:
        """``constraint_capacity``: the topology's (link directions in bit/s, then media
        budgets); ``first_medium``: the index of the first medium constraint."""
        self.active = True
        self.first_medium = first_medium
        # hops left out of earlier plans that count from now on: the network adds their flows
        # present (FlowNetwork._count_again) and empties the list
        self.counted_again: list[int] = []
        # a medium's largest budget: contention only lowers it (a capacity change ends this);
        # media only (after the link directions), by constraint - first_medium
        self._budget = [max(float(c), 1.0) for c in constraint_capacity[first_medium:]]
        self._feeder: dict[int, int] = {}   # h -> the one medium its planned flows cross
        self._bound: dict[int, float] = {}  # h -> that medium's budget x largest ratio (bit/s)
        self._kept: set[int] = set()        # link directions counted from now on
        self._left_out: set[int] = set()    # left out of some plan made so far

    def leaves_out(self, h: int, medium: int, ratio: float, capacity_bps: float) -> bool:
        """Whether a plan being made leaves out link direction h (of capacity
        ``capacity_bps``), which its route reaches through ``medium`` with coefficients' ratio
        ``ratio`` (on h over on the medium); the bound grows with it."""
        if h in self._kept:
            return False
        if self._feeder.setdefault(h, medium) == medium:
            limit = self._budget[medium - self.first_medium] * ratio
            bound = self._bound.get(h, 0.0)
            if limit > bound:
                self._bound[h] = bound = limit
            if bound <= capacity_bps * _MARGIN:
                self._left_out.add(h)
                return True
        # fed through a second medium (the links of several cells: where they meet, they tend
        # to bind), or its bound passed its capacity: counted from now on
        self._keep(h)
        return False

    def loads_directly(self, hops: Sequence[int]) -> None:
        """A plan being made loads ``hops`` directly (no medium before them): no bound but
        the flows' caps, so its link directions count from now on."""
        for h in hops:
            if h < self.first_medium and h not in self._kept:
                self._keep(h)

    def _keep(self, h: int) -> None:
        self._kept.add(h)
        if h in self._left_out:
            self._left_out.discard(h)
            self.counted_again.append(h)

    def stop(self) -> list[int]:
        """Count every link direction from now on (a capacity changes); returns those left out
        of some plan so far (the network adds their flows present)."""
        self.active = False
        now_counted = sorted(self._left_out)
        self._left_out.clear()
        return now_counted
