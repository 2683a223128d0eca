"""Live-memory timeline of one device during list scheduling.

Events are (time_s, delta_bytes), kept sorted with frees before allocations at equal times.
An allocation whose free time is not known yet (its tensor's consumers are not all scheduled)
stays allocated to the end, so the timeline is an upper bound of the final one: every check made
against it stays valid once frees are added. Persistent memory is held for the whole step and
kept apart (``persistent_bytes``); ``peak_dynamic_bytes`` is an upper bound of the dynamic part.
"""

from __future__ import annotations

import bisect


class MemoryTimeline:
    """Memory of one device with capacity ``limit_bytes`` (bytes)."""

    def __init__(self, limit_bytes: float) -> None:
        self.limit_bytes = float(limit_bytes)
        self.persistent_bytes = 0.0
        self.peak_dynamic_bytes = 0.0
        self.total_bytes = 0.0  # dynamic level after the last event
        self._events: list[tuple[float, float]] = []

    def suffix_max(self, t0_s: float) -> float:
        """Upper bound of the dynamic level over [t0_s, end) (bytes).

        The level just before ``t0_s`` counts only when no event falls at ``t0_s``: frees at
        ``t0_s`` come before an allocation made at ``t0_s`` (as in the executor).
        """
        ev = self._events
        level = best = self.total_bytes
        k = len(ev) - 1
        while k >= 0:
            t_s, delta = ev[k]
            if t_s < t0_s:
                break
            level -= delta  # the level after event k - 1
            if level > best and (t_s > t0_s or (k > 0 and ev[k - 1][0] >= t0_s)):
                best = level
            k -= 1
        return best

    def fits(self, t0_s: float, need_bytes: float, persistent_bytes: float) -> bool:
        """Whether ``need_bytes`` held from ``t0_s`` on and ``persistent_bytes`` held all step fit."""
        room = self.limit_bytes - self.persistent_bytes - persistent_bytes
        if self.peak_dynamic_bytes > room:
            return False
        return self.suffix_max(t0_s) + need_bytes <= room

    def allocate(self, t_s: float, nbytes: float, until_s: float | None = None) -> None:
        """Hold ``nbytes`` from ``t_s`` (to ``until_s`` if known, else until :meth:`free`)."""
        if nbytes <= 0.0:
            return
        peak = self.suffix_max(t_s) + nbytes
        if peak > self.peak_dynamic_bytes:
            self.peak_dynamic_bytes = peak
        _insort(self._events, (t_s, nbytes))
        self.total_bytes += nbytes
        if until_s is not None:
            self.free(until_s, nbytes)

    def free(self, t_s: float, nbytes: float) -> None:
        """Release ``nbytes`` at ``t_s`` (s)."""
        if nbytes <= 0.0:
            return
        _insort(self._events, (t_s, -nbytes))
        self.total_bytes -= nbytes

    def add_persistent(self, nbytes: float) -> None:
        """Hold ``nbytes`` for the whole step."""
        self.persistent_bytes += nbytes

    def peak_bytes(self) -> float:
        """Exact peak (persistent + dynamic) of the current timeline (bytes)."""
        level = best = 0.0
        for _, delta in self._events:
            level += delta
            if level > best:
                best = level
        return self.persistent_bytes + best


TAIL = 8
"""Events searched from the end first: most land among the last few (times near the front)."""


def _insort(events: list[tuple[float, float]], event: tuple[float, float]) -> None:
    """``bisect.insort(events, event)``, searching the last :data:`TAIL` events first."""
    k = len(events)
    if k == 0 or events[-1] <= event:
        events.append(event)
    elif k > TAIL and events[k - TAIL] <= event:
        bisect.insort(events, event, k - TAIL + 1)
    else:
        bisect.insort(events, event)
