"""One shared constraint's flows played forward as they come and go, without SimPy events
(netsim's fast path for buffered asynchronous epochs, :mod:`netsim.epochs.buffered_arrays`).

Where every flow crosses at most one constraint that can saturate
(:func:`netsim.network.sharing.can_bind`), max-min fairness over the network decomposes into
one water-filling per such constraint, as :mod:`netsim.network.playback` plays a synchronous
phase. A buffered epoch's flows, though, are not known in advance: an upload starts when its
device has trained, which depends on when its download (on the same Wi-Fi cell, perhaps)
ended. :class:`SharedConstraint` therefore keeps one constraint's flows as they start and end,
each with the bits it has left, and re-shares them at each change by
:func:`netsim.network.sharing.water_filling_rates` (the one rule, with the network's
tolerance); the caller asks for the next finish and plays the constraints' finishes in time
order (tests/test_buffered_arrays.py checks the result against the flow network).

Capacities that change (a bandwidth trace): at each change the caller re-shares the flows
present under the new capacity, caps and coefficients (:meth:`SharedConstraint.replace`).

Cost: O(m log m) per start or finish for the m flows present on the constraint (a cell's
few jobs), against the flow network's groups, feeds and SimPy wake-ups.
"""

from __future__ import annotations

from typing import Any

from netsim import loopguard
from netsim.network.sharing import water_filling_one, water_filling_rates
from netsim.network.tolerances import CAPACITY_TOLERANCE

_INF = float("inf")
_EARLY_FINISHES = 16  # finishes in a row that end nothing, past which the loop is stuck


class SharedConstraint:
    """The flows present on one constraint (capacity ``capacity_bps``: bit/s on a link
    direction, a medium's air-time budget) and their rates, up to date at ``since_s``.

    A flow is kept as ``[bits left at since_s, cap (bit/s), coefficient, rate (bit/s),
    bits within which it counts as done]``, under the caller's key."""

    __slots__ = ("capacity_bps", "flows", "since_s", "version", "early")

    def __init__(self, capacity_bps: float) -> None:
        self.capacity_bps = float(capacity_bps)
        self.flows: dict[Any, list[float]] = {}
        self.since_s = 0.0
        self.version = 0
        """Moves on at every change (a finish computed before one is stale)."""
        self.early = 0
        """Finishes asked for in a row that found no flow done (woken early by rounding)."""

    def advance(self, now_s: float) -> None:
        """Move every flow's bits left forward to ``now_s`` (s, not before ``since_s``)."""
        dt = now_s - self.since_s
        if dt > 0.0:
            for f in self.flows.values():
                f[0] -= f[3] * dt
            self.since_s = now_s

    def add(self, key: Any, bits: float, cap_bps: float, coef: float, now_s: float,
            reshare: bool = True) -> None:
        """A flow of ``bits`` bits, standalone rate ``cap_bps`` and coefficient ``coef`` on
        this constraint starts at ``now_s`` (s). ``reshare`` False: the rates are left as they
        were until :meth:`reshare` (several flows starting at once: one re-share for all, the
        rates the last one's would give; nothing may read the constraint meanwhile)."""
        self.advance(now_s)
        self.since_s = now_s
        self.flows[key] = [bits, cap_bps, coef, 0.0, max(bits, 1.0) * CAPACITY_TOLERANCE]
        if reshare:
            self._reshare()
        else:
            self.version += 1  # (a finish computed before is stale, as after a re-share)

    def reshare(self) -> None:
        """Re-share the flows present (after :meth:`add` without it)."""
        self._reshare()

    def remove(self, key: Any, now_s: float) -> float:
        """Flow ``key`` leaves at ``now_s`` (s, cancelled); returns the bits it had left."""
        self.advance(now_s)
        left = self.flows.pop(key)[0]
        self._reshare()
        return left if left > 0.0 else 0.0

    def bits_left(self, key: Any, now_s: float) -> float:
        """The bits flow ``key`` has left at ``now_s`` (s)."""
        self.advance(now_s)
        left = self.flows[key][0]
        return left if left > 0.0 else 0.0

    def next_finish_s(self) -> float:
        """When the next flow's last bit leaves at the current rates (s; inf: no flow)."""
        at = _INF
        since = self.since_s
        for f in self.flows.values():
            rate = f[3]
            if rate > 0.0:
                t = since + (f[0] if f[0] > 0.0 else 0.0) / rate
                if t < at:
                    at = t
        return at

    def finish_due(self, now_s: float) -> list[Any]:
        """The flows whose last bit has left by ``now_s`` (s; within the tolerance), taken
        off in the order they started; the others re-shared."""
        self.advance(now_s)
        # (within the tolerance, or what is left would leave within the clock's rounding)
        done = [k for k, f in self.flows.items()
                if f[0] <= f[4] or (f[3] > 0.0 and now_s + f[0] / f[3] <= now_s)]
        if done:
            self.early = 0
            for k in done:
                del self.flows[k]
            self._reshare()
        else:
            # Termination: a finish asked for at next_finish_s() ends a flow, or leaves it
            # less than an ulp of the clock to go, which the rounding test above ends next
            self.early += 1
            if self.early > loopguard.bound(_EARLY_FINISHES):
                loopguard.stuck("netsim.network.online.SharedConstraint.finish_due",
                                loopguard.bound(_EARLY_FINISHES),
                                {"now_s": now_s, "capacity_bps": self.capacity_bps,
                                 "flows": [list(f) for f in self.flows.values()]})
        return done

    def replace(self, capacity_bps: float, now_s: float, flows: dict[Any, list[float]]
                ) -> None:
        """The capacities changed at ``now_s`` (s): from now on capacity ``capacity_bps``
        (bit/s or air-time budget) and ``flows`` (each kept as above, its bits left at
        ``now_s``, under its caller's key, in start order), re-shared (netsim's re-share at a
        capacity change, as the flow network's ``set_capacities``)."""
        self.capacity_bps = float(capacity_bps)
        self.flows = flows
        self.since_s = now_s
        self._reshare()

    def _reshare(self) -> None:
        self.version += 1
        flows = list(self.flows.values())
        if not flows:
            return
        if len(flows) == 1:  # (the common case, without the lists)
            f = flows[0]
            f[3] = water_filling_one(f[1], f[2], self.capacity_bps)
            return
        rates = water_filling_rates([f[1] for f in flows], [f[2] for f in flows],
                                    self.capacity_bps)
        for f, rate in zip(flows, rates, strict=True):
            f[3] = rate
