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
  length is exponential (memoryless). Every device has its own stream of draws (counter-based,
  keyed by the dynamics stream and the device index, netsim.dynamics.counter_rng): its
  sessions do not depend on when the engine asks, nor on the other devices.
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

from netsim.dynamics.counter_rng import stream_key, uniforms
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

    def transitions(self, devices: np.ndarray, t_s: np.ndarray,
                    online: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`transition` of each device (distinct) at its change instant: (states from
        then on, next changes (s))."""
        out = [self.transition(int(d), float(t), bool(o))
               for d, t, o in zip(devices, t_s, online, strict=True)]
        return (np.array([x[0] for x in out], dtype=bool),
                np.array([x[1] for x in out], dtype=float))


class AlwaysOnline(SessionSource):
    """Every device online for the whole run."""

    def initial(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(n, dtype=bool), np.full(n, _INF)

    def next_change_s(self, device: int, t_s: float, online: bool) -> float:
        return _INF


class MarkovSessions(SessionSource):
    """Markov on/off sessions with a diurnal cycle (see the module docstring).

    ``mean_online_s``, ``mean_offline_s``: per device (s); ``always``: devices that never go
    offline (the aggregator); ``seed``: the dynamics stream's seed sequence. Draws are
    counter-based (:mod:`netsim.dynamics.counter_rng`): device d's k-th draw is a function of
    (seed, d, k), computed in arrays for every device that changes at once.
    """

    def __init__(self, mean_online_s: np.ndarray, mean_offline_s: np.ndarray,
                 diurnal_amplitude: float, always: np.ndarray,
                 seed: np.random.SeedSequence) -> None:
        self.mean_online_s = np.asarray(mean_online_s, dtype=float)
        self.mean_offline_s = np.asarray(mean_offline_s, dtype=float)
        self.amplitude = float(diurnal_amplitude)
        self.always = np.asarray(always, dtype=bool)
        self._key = stream_key(np.random.SeedSequence(
            seed.entropy, spawn_key=(*seed.spawn_key, 1)))
        self._initial_key = stream_key(np.random.SeedSequence(
            seed.entropy, spawn_key=(*seed.spawn_key, 0)))
        self._draws = np.zeros(len(self.always), dtype=np.int64)

    def _draw(self, devices: np.ndarray) -> np.ndarray:
        """The next draw of each device (distinct), in (0, 1)."""
        u = uniforms(self._key, devices, self._draws[devices])
        self._draws[devices] += 1
        return u

    def initial(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        on_mean, off_mean = self.mean_online_s, self.mean_offline_s / (1.0 + self.amplitude)
        p_online = on_mean / (on_mean + off_mean)
        devices = np.arange(n)
        online = (uniforms(self._initial_key, devices, np.zeros(n, dtype=np.int64))
                  < p_online) | self.always
        change = np.full(n, _INF)
        moving = np.flatnonzero(~self.always)
        change[moving] = self.next_changes(moving, np.zeros(len(moving)), online[moving])
        return online, change

    def next_changes(self, devices: np.ndarray, t_s: np.ndarray,
                     online: np.ndarray) -> np.ndarray:
        """When each device (distinct), entering state ``online`` at ``t_s``, next changes (s):
        an online session's exponential length; an offline gap by thinning against the
        diurnal rate."""
        devices = np.asarray(devices, dtype=np.intp)
        out = np.full(len(devices), _INF)
        moving = ~self.always[devices]
        on = moving & np.asarray(online, dtype=bool)
        if on.any():
            d = devices[on]
            out[on] = t_s[on] - self.mean_online_s[d] * np.log(self._draw(d))
        pending = np.flatnonzero(moving & ~np.asarray(online, dtype=bool))
        t = np.asarray(t_s, dtype=float)[pending].copy()
        while len(pending):
            d = devices[pending]
            peak = (1.0 + self.amplitude) / self.mean_offline_s[d]  # thinning bound (1/s)
            t = t - np.log(self._draw(d)) / peak
            rate = (1.0 + self.amplitude * np.cos(2.0 * math.pi * t / DAY_S)) \
                / self.mean_offline_s[d]
            accept = self._draw(d) * peak <= rate
            out[pending[accept]] = t[accept]
            pending, t = pending[~accept], t[~accept]
        return out

    def next_change_s(self, device: int, t_s: float, online: bool) -> float:
        return float(self.next_changes(np.array([device]), np.array([t_s]),
                                       np.array([online]))[0])

    def transitions(self, devices: np.ndarray, t_s: np.ndarray,
                    online: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        state = ~np.asarray(online, dtype=bool)
        return state, self.next_changes(devices, np.asarray(t_s, dtype=float), state)


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
    it records every online interval and each device's online time.

    Work follows the devices that change: the changes are kept in a queue (the first ones
    sorted once, later ones in a heap), and advancing pops those due and draws their next
    ones in arrays; nothing visits the whole fleet per step. Weighted online time (a power
    per device, :meth:`track`) is kept as running sums, so the energy meter can read a
    fleet's idle and sleep energy without visiting it."""

    def __init__(self, source: SessionSource, n: int) -> None:
        self.source = source
        online, change = source.initial(n)
        self.online = np.array(online, dtype=bool)
        self.next_change_s = np.array(change, dtype=float)
        self._now = 0.0
        self._online_since = np.where(self.online, 0.0, np.nan)
        self._online_acc = np.zeros(n)
        self._closed: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (device, start, end)
        self._killed = np.zeros(n, dtype=bool)
        finite = np.flatnonzero(np.isfinite(self.next_change_s))
        self._first = finite[np.argsort(self.next_change_s[finite], kind="stable")]
        self._first_s = self.next_change_s[self._first]
        self._at = 0                                  # first changes popped so far
        self._heap: list[tuple[float, int]] = []      # later changes (time, device)
        self._tracked: dict[str, tuple[np.ndarray, list[float]]] = {}

    @property
    def static(self) -> bool:
        """Whether nobody ever changes state (the always-online world)."""
        return isinstance(self.source, AlwaysOnline)

    @property
    def killed(self) -> np.ndarray:
        """Devices taken offline for good (an empty battery), read-only view."""
        view = self._killed.view()
        view.setflags(write=False)
        return view

    def track(self, name: str, weight: np.ndarray) -> None:
        """Keep ``sum_i weight[i] x online time of i`` as running sums (:meth:`weighted_s`)."""
        w = np.asarray(weight, dtype=float)
        on = self.online
        self._tracked[name] = (w, [float(np.dot(w, self._online_acc)), float(w[on].sum()),
                                   float(np.dot(w[on], self._online_since[on]))])

    def weighted_s(self, name: str, t_s: float) -> float:
        """``sum_i weight[i] x online time of i from 0 to t_s`` (weight x s; :meth:`track`)."""
        _, (acc, rate, since) = self._tracked[name]
        return acc + rate * t_s - since

    def _due(self, t_s: float) -> np.ndarray:
        """Devices whose (live) next change is at or before ``t_s``, each once."""
        out = []
        k = int(np.searchsorted(self._first_s, t_s, side="right"))
        if k > self._at:
            cand, times = self._first[self._at:k], self._first_s[self._at:k]
            out.append(cand[self.next_change_s[cand] == times])
            self._at = k
        heap, change = self._heap, self.next_change_s
        popped = []
        while heap and heap[0][0] <= t_s:
            at, d = heapq.heappop(heap)
            if change[d] == at:
                popped.append(d)
        if popped:
            out.append(np.array(popped, dtype=np.intp))
        if not out:
            return np.zeros(0, dtype=np.intp)
        return np.unique(np.concatenate(out)) if len(out) > 1 else out[0]

    def next_change_at(self) -> float:
        """The earliest change still to come (s; inf: none)."""
        change = self.next_change_s
        while self._at < len(self._first) and \
                change[self._first[self._at]] != self._first_s[self._at]:
            self._at += 1  # (stale: the device changed, or was killed)
        while self._heap and change[self._heap[0][1]] != self._heap[0][0]:
            heapq.heappop(self._heap)
        first = self._first_s[self._at] if self._at < len(self._first) else _INF
        return float(min(first, self._heap[0][0] if self._heap else _INF))

    def advance(self, t_s: float) -> None:
        """Apply every change up to and including ``t_s`` (s), each device's in time order."""
        if t_s < self._now:
            raise ValueError(f"the availability timeline cannot go back ({t_s} < {self._now})")
        self._now = t_s
        due = self._due(t_s)
        change = self.next_change_s
        while len(due):
            at = change[due]
            state, nxt = self.source.transitions(due, at, self.online[due])
            flip = state != self.online[due]
            self._toggle(due[flip], at[flip])
            change[due] = nxt
            again = nxt <= t_s
            later = ~again & np.isfinite(nxt)
            for x, d in zip(nxt[later].tolist(), due[later].tolist(), strict=True):
                heapq.heappush(self._heap, (x, d))
            due = due[again]

    def _toggle(self, devices: np.ndarray, at: np.ndarray) -> None:
        """Devices ``devices`` (distinct) change state at ``at`` (s)."""
        if not len(devices):
            return
        was = self.online[devices]
        off, on = devices[was], devices[~was]
        since = self._online_since[off]
        end = at[was]
        self._online_acc[off] += end - since
        self._closed.append((off, since, end))
        for w, sums in self._tracked.values():
            sums[0] += float(np.dot(w[off], end - since))
            sums[1] += float(w[on].sum() - w[off].sum())
            sums[2] += float(np.dot(w[on], at[~was]) - np.dot(w[off], since))
        self._online_since[off] = np.nan
        self._online_since[on] = at[~was]
        self.online[devices] = ~was

    def kill(self, d: int, t_s: float) -> None:
        """Device ``d`` goes offline at ``t_s`` (s, not before the last advance) for good."""
        if self.online[d]:
            self._toggle(np.array([d]), np.array([max(t_s, float(self._online_since[d]))]))
        self.next_change_s[d] = _INF
        self._killed[d] = True

    def online_time_s(self, t_s: float) -> np.ndarray:
        """Each device's online time from 0 to ``t_s`` (s; ``t_s`` not before the last
        advance and not past the next change)."""
        running = np.where(self.online, t_s - np.nan_to_num(self._online_since), 0.0)
        return self._online_acc + running

    def online_time_of(self, rows: np.ndarray, t_s: float) -> np.ndarray:
        """:meth:`online_time_s` of devices ``rows`` only; a row past the devices (a network
        node: an edge aggregator, a router) is always on (``t_s``), as the meter's whole
        reading pads it (netsim.engine.World)."""
        rows = np.asarray(rows, dtype=np.intp)
        n = len(self.online)
        if len(rows) and int(rows.max()) >= n:
            out = np.full(len(rows), float(t_s))
            mine = rows < n
            out[mine] = self.online_time_of(rows[mine], t_s)
            return out
        on = self.online[rows]
        running = np.where(on, t_s - np.nan_to_num(self._online_since[rows]), 0.0)
        return self._online_acc[rows] + running

    def intervals_s(self, t_s: float) -> list[list[float]]:
        """Each device's online intervals up to ``t_s`` (s), flat: [start0, end0, ...]."""
        n = len(self.online)
        if self._closed:
            dev = np.concatenate([c[0] for c in self._closed])
            start = np.concatenate([c[1] for c in self._closed])
            end = np.concatenate([c[2] for c in self._closed])
        else:
            dev, start, end = np.zeros(0, np.intp), np.zeros(0), np.zeros(0)
        order = np.lexsort((start, dev))
        dev, start, end = dev[order], start[order], end[order]
        bounds = np.searchsorted(dev, np.arange(n + 1))
        flat = np.stack([start, end], axis=1).ravel().tolist()
        since = self._online_since.tolist()
        out = []
        for d in range(n):
            closed = flat[2 * bounds[d]:2 * bounds[d + 1]]
            if self.online[d]:
                closed = closed + [since[d], t_s]
            out.append(closed)
        return out
