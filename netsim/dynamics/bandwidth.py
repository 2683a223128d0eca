"""Link capacity over time: piecewise constant per link direction (docs/dynamics.md).

- ``constant``: the scenario's ``bandwidth_bps`` for the whole run.
- ``lognormal``: capacity = ``bandwidth_bps`` x exp(x), x an AR(1) process per direction in
  pieces of ``step_s``: x_0 ~ N(0, sigma^2), x_k = rho x_(k-1) + sqrt(1 - rho^2) sigma e_k with
  rho = exp(-step_s / correlation_s). The median capacity is ``bandwidth_bps`` (netsim's
  formalization of "sigma of log capacity around the link's bandwidth"). Pieces are drawn in
  order from the dynamics stream, all directions at once, so they do not depend on when the
  engine asks.
- ``trace``: each listed link's rows (its value from ``time_s`` until its next row; before its
  first row, the scenario's value), repeated with the trace's span or held at the last value.

Directions are the topology's: link i's a->b is 2i, b->a is 2i + 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netsim.dynamics.traces import BandwidthTrace
from netsim.network.goodput import link_goodput, payload_bps

_INF = math.inf


class CapacitySchedule:
    """Capacities of every link direction over time; :meth:`at` is asked with times that never
    go back."""

    def __init__(self, base_bps: np.ndarray) -> None:
        self.base_bps = np.asarray(base_bps, dtype=float)

    @property
    def static(self) -> bool:
        """Whether capacities never change."""
        return True

    def at(self, t_s: float) -> np.ndarray:
        """Capacity of every direction at ``t_s`` (bit/s)."""
        return self.base_bps

    def next_change_s(self, t_s: float) -> float:
        """The first instant after ``t_s`` at which some capacity may change (s; inf: none)."""
        return _INF

    def forget_before(self, t_s: float) -> None:
        """Nothing before ``t_s`` (s) will be asked again (a schedule may drop it)."""

    def states(self) -> np.ndarray | None:
        """Every capacity vector the schedule can put in force, one row per state (bit/s per
        direction; rows may repeat), known up front; None where they are not (netsim's
        buffered epochs in arrays check every state a run can take:
        :meth:`netsim.epochs.buffered_arrays.BufferedPlayer.of`)."""
        return self.base_bps[None, :]


class LognormalCapacity(CapacitySchedule):
    """AR(1) log-normal pieces (see the module docstring)."""

    def __init__(self, base_bps: np.ndarray, sigma: float, correlation_s: float, step_s: float,
                 rng: np.random.Generator) -> None:
        super().__init__(base_bps)
        self.sigma, self.step_s = float(sigma), float(step_s)
        self.rho = math.exp(-step_s / correlation_s)
        self._rng = rng
        self._k = 0  # the latest piece drawn
        self._x = rng.standard_normal(len(self.base_bps)) * self.sigma
        self._pieces = {0: self.base_bps * np.exp(self._x)}  # drawn, not yet forgotten

    @property
    def static(self) -> bool:
        return self.sigma == 0.0

    def _piece(self, t_s: float) -> int:
        """The piece in force at ``t_s``: [k step, (k + 1) step), robust to rounding (a
        change instant computed as (k + 1) x step always starts piece k + 1)."""
        k = math.floor(t_s / self.step_s)
        if (k + 1) * self.step_s <= t_s:
            k += 1
        return int(k)

    def at(self, t_s: float) -> np.ndarray:
        k = self._piece(t_s)
        innovation = math.sqrt(1.0 - self.rho * self.rho) * self.sigma
        while self._k < k:  # pieces are drawn in order, whoever asks and when
            self._x = self.rho * self._x + innovation * self._rng.standard_normal(len(self._x))
            self._k += 1
            self._pieces[self._k] = self.base_bps * np.exp(self._x)
        caps = self._pieces.get(k)
        if caps is None:
            raise ValueError(f"capacities at {t_s} s were forgotten (asked back in time)")
        return caps

    def states(self) -> np.ndarray | None:
        """None while it changes: each piece is a fresh draw, unbounded below."""
        return self.base_bps[None, :] if self.static else None

    def forget_before(self, t_s: float) -> None:
        k = self._piece(t_s)
        for old in [j for j in self._pieces if j < k]:
            del self._pieces[old]

    def next_change_s(self, t_s: float) -> float:
        if self.static:
            return _INF
        return (self._piece(t_s) + 1) * self.step_s


class TraceCapacity(CapacitySchedule):
    """Capacities from a bandwidth trace (see the module docstring)."""

    def __init__(self, base_bps: np.ndarray, trace: BandwidthTrace, links: Sequence,
                 repeat: bool, goodput_factor: float = 1.0) -> None:
        """A trace's rates are bandwidths as ``links[].bandwidth_bps`` are: each link's
        capacity is its payload rate at its goodput factor (its own, else
        ``goodput_factor``, the scenario's: netsim.network.goodput)."""
        super().__init__(base_bps)
        self.repeat, self.span_s = repeat, float(trace.span_s)
        from netsim.dynamics.traces import link_series

        series = link_series(trace, links)
        times = sorted({float(t) for s in series.values() for t in s[0]})
        self._times = np.array(times)
        # capacity of every direction from each change time on, within one span
        table = np.tile(self.base_bps, (max(len(times), 1), 1))
        for i, (t, ab, ba) in series.items():
            row = np.searchsorted(t, self._times, side="right") - 1  # the link's row in force
            has = row >= 0
            factor = link_goodput(links[i], goodput_factor)
            table[has, 2 * i] = payload_bps(ab[row[has]], factor)
            table[has, 2 * i + 1] = payload_bps(ba[row[has]], factor)
        self._table = table

    @property
    def static(self) -> bool:
        return len(self._times) == 0

    def _local(self, t_s: float) -> tuple[float, float]:
        """(time within the current repetition, start of the repetition) (s)."""
        if self.repeat and self.span_s > 0.0:
            base = math.floor(t_s / self.span_s) * self.span_s
            return t_s - base, base
        return t_s, 0.0

    def at(self, t_s: float) -> np.ndarray:
        if self.static:
            return self.base_bps
        local, _ = self._local(t_s)
        k = int(np.searchsorted(self._times, local, side="right")) - 1
        if k < 0:  # before the first row of a repetition: the last rows of the previous one
            return self._table[-1] if self.repeat and t_s >= self.span_s else self.base_bps
        return self._table[k]

    def states(self) -> np.ndarray | None:
        """The scenario's capacities (before a trace's first row) and each row's."""
        return np.vstack([self.base_bps[None, :], self._table])

    def next_change_s(self, t_s: float) -> float:
        if self.static:
            return _INF
        local, base = self._local(t_s)
        k = int(np.searchsorted(self._times, local, side="right"))
        if k < len(self._times):
            return base + float(self._times[k])
        if self.repeat and self.span_s > 0.0:
            return base + self.span_s + float(self._times[0])
        return _INF
