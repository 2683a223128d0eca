"""Who is online when: one timeline of online/offline sessions per device, advanced with the clock.

Sources of sessions (docs/dynamics.md):

- ``always``: every device online for the whole run (the static world, and ``bernoulli``,
  whose per-epoch draw is a volunteering decision of a device that stays on: today's meaning).
- ``markov``: alternating online sessions and offline gaps. An online session lasts an
  exponential time of mean ``mean_online_s``; an offline gap ends at rate
  ``(1 + A cos(2 pi t / 24 h)) / mean_offline_s`` (A = ``diurnal_amplitude``), so the odds of
  being online follow a 24 h cycle, highest at the run's start (netsim's formalization: the
  two means and the amplitude are the contract; the cosine and its phase are ours). Gaps are
  drawn by thinning. A device starts online with the stationary probability at t = 0,
  ``mean_online / (mean_online + mean_offline / (1 + A))``, and each first session's residual
  length is exponential (memoryless). Every device has its own generator, spawned from the
  dynamics stream by device index: its sessions do not depend on when the engine asks.
- ``trace``: the online intervals of a trace file (devices not listed always online),
  repeated with the trace's span or held at its last state.

The aggregator is always online (netsim's formalization). A device whose battery empties is
taken offline for the rest of the run (:meth:`AvailabilityTimeline.kill`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from netsim.dynamics.traces import AvailabilityTrace

DAY_S = 86_400.0
_INF = math.inf


class SessionSource:
    """Where the sessions come from: the length of the state entered at ``t_s``."""

    def initial(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(online at t = 0, time of each device's first change (s; inf: never))."""
        raise NotImplementedError

    def next_change_s(self, device: int, t_s: float, online: bool) -> float:
        """When ``device``, entering state ``online`` at ``t_s``, next changes (s; inf: never)."""
        raise NotImplementedError

    def transition(self, device: int, t_s: float, online: bool) -> tuple[bool, float]:
        """At a change instant ``t_s`` of ``device`` (online before: ``online``): its state from
        ``t_s`` on and when it next changes (s). A session process flips the state; a trace
        says what it holds (a seam between repetitions may change nothing)."""
        return not online, self.next_change_s(device, t_s, not online)


class AlwaysOnline(SessionSource):
    """Every device online for the whole run."""

    def initial(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(n, dtype=bool), np.full(n, _INF)

    def next_change_s(self, device: int, t_s: float, online: bool) -> float:
        return _INF


class MarkovSessions(SessionSource):
    """Markov on/off sessions with a diurnal cycle (see the module docstring).

    ``mean_online_s``, ``mean_offline_s``: per device (s); ``always``: devices that never go
    offline (the aggregator); ``seed``: the dynamics stream's seed sequence.
    """

    def __init__(self, mean_online_s: np.ndarray, mean_offline_s: np.ndarray,
                 diurnal_amplitude: float, always: np.ndarray,
                 seed: np.random.SeedSequence) -> None:
        self.mean_online_s = np.asarray(mean_online_s, dtype=float)
        self.mean_offline_s = np.asarray(mean_offline_s, dtype=float)
        self.amplitude = float(diurnal_amplitude)
        self.always = np.asarray(always, dtype=bool)
        self._seed = seed
        self._rngs: dict[int, np.random.Generator] = {}

    def _rng(self, device: int) -> np.random.Generator:
        rng = self._rngs.get(device)
        if rng is None:
            rng = np.random.default_rng(np.random.SeedSequence(
                self._seed.entropy, spawn_key=(*self._seed.spawn_key, 1, device)))
            self._rngs[device] = rng
        return rng

    def initial(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(np.random.SeedSequence(
            self._seed.entropy, spawn_key=(*self._seed.spawn_key, 0)))
        on_mean, off_mean = self.mean_online_s, self.mean_offline_s / (1.0 + self.amplitude)
        p_online = on_mean / (on_mean + off_mean)
        online = (rng.random(n) < p_online) | self.always
        change = np.full(n, _INF)
        for d in np.flatnonzero(~self.always):
            change[d] = self.next_change_s(int(d), 0.0, bool(online[d]))
        return online, change

    def next_change_s(self, device: int, t_s: float, online: bool) -> float:
        if self.always[device]:
            return _INF
        rng = self._rng(device)
        if online:
            return t_s + float(rng.exponential(self.mean_online_s[device]))
        peak = (1.0 + self.amplitude) / self.mean_offline_s[device]  # thinning bound (1/s)
        t = t_s
        while True:
            t += float(rng.exponential(1.0 / peak))
            rate = (1.0 + self.amplitude * math.cos(2.0 * math.pi * t / DAY_S)) \
                / self.mean_offline_s[device]
            if rng.random() * peak <= rate:
                return t


class TraceSessions(SessionSource):
    """The online intervals of a trace (see the module docstring); ``ids``: device ids in
    table order; devices the trace does not list are always online."""

    def __init__(self, trace: AvailabilityTrace, ids: Sequence[str], repeat: bool) -> None:
        self.trace, self.repeat = trace, repeat
        self._series = [_merged(trace.intervals[d]) if d in trace.intervals else None
                        for d in ids]
        self.span_s = float(trace.span_s)

    def _state_at(self, device: int, t_s: float) -> tuple[bool, float]:
        """(online at ``t_s``, next change after ``t_s``)."""
        series = self._series[device]
        if series is None:
            return True, _INF
        starts, ends = series
        if not len(starts):  # listed, never online
            return False, _INF
        base = 0.0
        if self.repeat and self.span_s > 0.0:
            base = math.floor(t_s / self.span_s) * self.span_s
        elif t_s >= self.span_s:  # held at its last state
            return bool(len(ends) and ends[-1] >= self.span_s), _INF
        local = t_s - base
        k = int(np.searchsorted(ends, local, side="right"))  # first interval ending after t
        if k < len(starts) and starts[k] <= local:
            return True, base + float(ends[k])
        if k < len(starts):
            return False, base + float(starts[k])
        if self.repeat and self.span_s > 0.0:  # offline until the next repetition's first start
            return False, base + self.span_s + float(starts[0])
        return False, _INF

    def initial(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        online, change = np.ones(n, dtype=bool), np.full(n, _INF)
        for d in range(n):
            online[d], change[d] = self._state_at(d, 0.0)
        return online, change

    def next_change_s(self, device: int, t_s: float, online: bool) -> float:
        return self._state_at(device, t_s)[1]

    def transition(self, device: int, t_s: float, online: bool) -> tuple[bool, float]:
        state, at = self._state_at(device, t_s)
        if state == online and at <= t_s:  # (never: the next change is after t_s)
            at = _INF
        return state, at


def _merged(series: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Online intervals without empty ones (a zero-length interval only lists its device) and
    with touching ones joined (the device stays online across the seam)."""
    starts, ends = (np.asarray(a, dtype=float) for a in series)
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if len(starts) > 1:
        cut = np.flatnonzero(starts[1:] > ends[:-1]) + 1  # a gap starts a new interval
        first = np.concatenate([[0], cut])
        last = np.concatenate([cut - 1, [len(starts) - 1]])
        starts, ends = starts[first], ends[last]
    return starts, ends


class AvailabilityTimeline:
    """Each device's online state over time, advanced monotonically with the engine's clock;
    it records every online interval and each device's online time."""

    def __init__(self, source: SessionSource, n: int) -> None:
        self.source = source
        self.online, self.next_change_s = source.initial(n)
        self._now = 0.0
        self._online_since = np.where(self.online, 0.0, np.nan)
        self._online_acc = np.zeros(n)
        self._intervals: list[list[float]] = [[] for _ in range(n)]
        self._killed = np.zeros(n, dtype=bool)
        self._first_change = float(self.next_change_s.min(initial=_INF))

    @property
    def static(self) -> bool:
        """Whether nobody ever changes state (the always-online world)."""
        return isinstance(self.source, AlwaysOnline)

    def advance(self, t_s: float) -> None:
        """Apply every change up to and including ``t_s`` (s), in time order."""
        if t_s < self._now:
            raise ValueError(f"the availability timeline cannot go back ({t_s} < {self._now})")
        self._now = t_s
        if self._first_change > t_s:
            return
        change = self.next_change_s
        due = [(float(change[d]), int(d)) for d in np.flatnonzero(change <= t_s)]
        heapq.heapify(due)
        while due:
            at, d = heapq.heappop(due)
            state, nxt = self.source.transition(d, at, bool(self.online[d]))
            if state != self.online[d]:
                self._toggle(d, at)
            change[d] = nxt
            if nxt <= t_s:
                heapq.heappush(due, (nxt, d))
        self._first_change = float(change.min(initial=_INF))

    def _toggle(self, d: int, at: float) -> None:
        if self.online[d]:
            self._online_acc[d] += at - self._online_since[d]
            self._intervals[d] += [float(self._online_since[d]), at]
            self._online_since[d] = np.nan
        else:
            self._online_since[d] = at
        self.online[d] = not self.online[d]

    def kill(self, d: int, t_s: float) -> None:
        """Device ``d`` goes offline at ``t_s`` (s, not before the last advance) for good."""
        if self.online[d]:
            self._toggle(d, max(t_s, float(self._online_since[d])))
        self.next_change_s[d] = _INF
        self._killed[d] = True
        self._first_change = float(self.next_change_s.min(initial=_INF))

    def online_time_s(self, t_s: float) -> np.ndarray:
        """Each device's online time from 0 to ``t_s`` (s; ``t_s`` not before the last
        advance and not past the next change)."""
        running = np.where(self.online, t_s - np.nan_to_num(self._online_since), 0.0)
        return self._online_acc + running

    def intervals_s(self, t_s: float) -> list[list[float]]:
        """Each device's online intervals up to ``t_s`` (s), flat: [start0, end0, ...]."""
        out = []
        for d, closed in enumerate(self._intervals):
            if self.online[d]:
                out.append(closed + [float(self._online_since[d]), t_s])
            else:
                out.append(list(closed))
        return out
