"""Radio energy: the base power of a radio while it has a transfer in progress, and its tail.

Huang et al.'s power model (MobiSys 2012, "A Close Examination of Performance and Power
Characteristics of 4G LTE Networks", Table 3 and Section 3.3): while a radio moves data it
draws ``alpha_u x uplink throughput + alpha_d x downlink throughput + beta``; after its last
transfer it stays in a high-power *tail* state for a while before it sleeps. netsim charges
the per-bit parts per transfer (the network's ledger: ``energy_j_per_bit`` to the sender,
``rx_energy_j_per_bit`` to a receiving device) and this module charges the rest, per radio
(one device end of one link, :class:`netsim.network.topology.Radio`):

- ``radio_power_w`` (beta) for the time the radio has at least one transfer in progress on
  the link, from the transfer's start to its arrival (waiting for air time included);
- ``tail_power_w`` for ``tail_s`` after each such busy period ends, cut short where the next
  busy period starts (a tail that outlasts the run is charged in full: the radio does stay up).

Booking (netsim's formalization): a busy period's base energy and its whole tail are charged
when the period ends, less the part of the previous period's tail it covers (a period that
starts inside that tail cuts it short). Every booking is then >= 0 (a period takes back at
most one tail and books a new one), so every interval's booked energy is >= 0, also when a
period outlives the interval (an asynchronous job, docs/async.md); a reading between periods
is what the radio drew up to the end of its last period plus its full tail. All of it is
communication energy; :attr:`RadioMeter.radio_j` is that part per node.

One state machine serves both paths: the event-driven network calls :meth:`RadioMeter.start`
and :meth:`RadioMeter.end` as transfers start and arrive; the epoch fast path hands a whole
epoch's intervals to :meth:`RadioMeter.play`, which books what the two methods would book for
them in time order, in arrays (tests/test_media.py checks one against the other).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netsim.energy import EnergyMeter
from netsim.network.topology import Radio, RadioSet

_NEVER = -float("inf")


class _RadioState:
    """One radio's figures (Python numbers) and state, kept once it has been used."""

    __slots__ = ("power_w", "tail_s", "tail_w", "node", "active", "since", "period_end",
                 "refund")

    def __init__(self, power_w: float, tail_s: float, tail_w: float, node: int) -> None:
        self.power_w, self.tail_s, self.tail_w, self.node = power_w, tail_s, tail_w, node
        self.active = 0            # transfers in progress
        self.since = 0.0           # start of the current busy period (s)
        self.period_end = 0.0      # latest arrival seen in the current period
        self.refund = 0.0          # previous tail's part the running period covers (J)


class RadioMeter:
    """The radios of one network and the energy they draw (charged to ``meter``).

    The figures are read from the radios' arrays and the state of a busy period is kept
    only for radios that have had one on the event path; when each radio's last period ended
    is an array (-inf: never), which :meth:`play` reads and writes in bulk."""

    def __init__(self, radios: Sequence[Radio], meter: EnergyMeter) -> None:
        self.radios = RadioSet.of(radios)
        self.meter = meter
        self._state: dict[int, _RadioState] = {}  # per radio used
        self._power_w = self.radios.power_w
        self._tail_s = self.radios.tail_s
        self._tail_w = self.radios.tail_power_w
        self._node = self.radios.node
        self._last_end: np.ndarray | None = None  # per radio (s), made on first use
        self._open = 0  # radios with a transfer in progress (event path)
        # energy booked by end() since the last flush: (node, J) in booking order, added to
        # the meter in bulk before any reading (the ledger's settle flushes first)
        self._due_nodes: list[int] = []
        self._due_j: list[float] = []
        meter.settle_with(self.flush)

    def flush(self) -> None:
        """Add the energy booked since the last call to the meter, in booking order (the same
        sums as adding each at once: :meth:`EnergyMeter.add_radio_in_order`)."""
        if self._due_nodes:
            self.meter.add_radio_in_order(self._due_nodes, self._due_j)
            self._due_nodes.clear()
            self._due_j.clear()

    def __bool__(self) -> bool:
        return len(self.radios) > 0

    def _new_state(self, r: int) -> _RadioState:
        """Radio r's state, made on its first use."""
        state = self._state[r] = _RadioState(float(self._power_w[r]), float(self._tail_s[r]),
                                             float(self._tail_w[r]), int(self._node[r]))
        return state

    def _ends(self) -> np.ndarray:
        """When each radio's last busy period ended (s; -inf: never), made on first use."""
        if self._last_end is None:
            self._last_end = np.full(len(self.radios), _NEVER)
        return self._last_end

    def start(self, radio_ids: Sequence[int], now_s: float) -> None:
        """A transfer on each radio of ``radio_ids`` starts at ``now_s`` (s)."""
        states = self._state
        ends = self._ends()
        for r in radio_ids:
            st = states.get(r) or self._new_state(r)
            if st.active:
                st.active += 1
                continue
            last = float(ends[r])
            since = now_s
            if last > _NEVER:
                if now_s < last:  # (an arrival booked ahead of this start: one period)
                    since = last
                    cut = st.tail_s
                else:  # (the tail left; only a positive cut is taken back)
                    cut = st.tail_s - (now_s - last)
                tail_w = st.tail_w
                if cut > 0.0 and tail_w > 0.0:  # taken back when this period ends
                    st.refund = cut * tail_w
            st.since = st.period_end = since
            st.active = 1
            self._open += 1

    def end(self, radio_ids: Sequence[int], arrival_s: float) -> None:
        """A transfer on each radio of ``radio_ids`` arrives at ``arrival_s`` (s)."""
        states = self._state
        ends = self._ends()
        for r in radio_ids:
            st = states[r]
            active = st.active - 1
            st.active = active
            until = st.period_end
            if arrival_s > until:
                st.period_end = until = arrival_s
            if active:
                continue
            joules = st.power_w * (until - st.since) + st.tail_w * st.tail_s
            refund = st.refund
            if refund:
                st.refund = 0.0
            if joules > 0.0 or refund > 0.0:
                self._due_nodes.append(st.node)
                self._due_j.append(joules - refund)
            ends[r] = until
            self._open -= 1

    def play(self, radio: np.ndarray, start_s: np.ndarray, arrival_s: np.ndarray,
             first_phase: int | None = None) -> None:
        """Transfers k = 0.. on radio ``radio[k]`` (a transfer on several radios is one entry
        per radio) from ``start_s[k]`` to ``arrival_s[k]`` (s), no transfer in progress on
        these radios before: the energy :meth:`start` and :meth:`end` would book for them in
        time order (an arrival before a start at the same instant), vectorised.

        Per radio, sorted by time, the running count of transfers in progress splits the
        entries into busy periods; each period books its base energy and whole tail, and
        takes back the part of the previous period's tail it covers (the previous one of the
        same call, or the radio's last period before the call).

        ``first_phase``: the entries are two phases, the first ``first_phase`` entries and the
        rest (an epoch's downloads and uploads). Where each radio has at most one transfer in
        each phase, each lasting some time, and a radio's second starts no earlier than its
        first arrives, every transfer is a busy period of its own: they are booked so without
        sorting the instants (the same periods, in the same order)."""
        radio = np.asarray(radio, dtype=np.intp)
        m = len(radio)
        if m == 0:
            return
        self.flush()  # (what end() booked comes first)
        start_s, arrival_s = np.asarray(start_s, float), np.asarray(arrival_s, float)
        periods = None if first_phase is None else _phase_periods(radio, start_s, arrival_s,
                                                                  first_phase)
        if periods is None:
            periods = _sorted_periods(radio, start_s, arrival_s)
        r, since, until = periods
        first = np.ones(len(r), dtype=bool)
        first[1:] = r[1:] != r[:-1]
        states = self._state
        if self._open and any(k in states and states[k].active for k in r[first].tolist()):
            raise ValueError("RadioMeter.play: a transfer is in progress on one of the radios")
        ends = self._ends()
        power, tail_s, tail_w = self._power_w[r], self._tail_s[r], self._tail_w[r]
        # the end of the period before each one on its radio (-inf: none)
        before = np.empty(len(r))
        before[1:] = until[:-1]
        before[first] = ends[r[first]]
        if np.any(since < before):  # (an arrival booked ahead: the period ends there at least)
            until, before = _ends_merged(since, until, before, first)
        had = before > _NEVER
        ahead = had & (since < before)  # (an arrival booked ahead of this start: one period)
        since = np.where(ahead, before, since)
        cut = np.where(ahead, tail_s, np.maximum(tail_s - (since - np.where(had, before, 0.0)),
                                                 0.0))
        refund = np.where(had & (cut > 0.0) & (tail_w > 0.0), cut * tail_w, 0.0)
        booked = power * (until - since) + tail_w * tail_s
        node = self._node[r]
        joules = np.where(booked > 0.0, booked, 0.0) - refund
        self.meter.add_radio_many(node, joules)
        last = np.ones(len(r), dtype=bool)
        last[:-1] = r[1:] != r[:-1]
        ends[r[last]] = until[last]


def _ends_merged(since: np.ndarray, until: np.ndarray, before: np.ndarray, first: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Busy periods (per radio, in time order; ``first``: a radio's first) that start before
    the previous period's end, booked ahead (an arrival after a later start): as
    :meth:`RadioMeter.start` and :meth:`RadioMeter.end` keep them, such a period runs from
    that end and ends no earlier than it, and the next period's previous end is its own.
    Returns the periods' ends and previous ends (s)."""
    until, before = until.copy(), before.copy()
    for i in range(len(until)):
        if not first[i]:
            before[i] = until[i - 1]
        begin = before[i] if since[i] < before[i] else since[i]
        if until[i] < begin:
            until[i] = begin
    return until, before


def _sorted_periods(radio: np.ndarray, start_s: np.ndarray, arrival_s: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The busy periods of transfers on ``radio`` from ``start_s`` to ``arrival_s`` (s): per
    radio, sorted by time (an arrival before a start at the same instant), the running count
    of transfers in progress splits them; (radio, start, end) of each, in radio then time
    order."""
    m = len(radio)
    times = np.concatenate([start_s, arrival_s])
    is_start = np.concatenate([np.ones(m, dtype=bool), np.zeros(m, dtype=bool)])
    owner = np.concatenate([radio, radio])
    order = np.lexsort((is_start, times, owner))
    times, is_start, owner = times[order], is_start[order], owner[order]
    active = np.cumsum(np.where(is_start, 1, -1))  # (each radio's entries net to zero)
    opens = is_start & (active == 1)
    closes = ~is_start & (active == 0)
    return owner[opens], times[opens], times[closes]


def _phase_periods(radio: np.ndarray, start_s: np.ndarray, arrival_s: np.ndarray,
                   split: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_sorted_periods` of two phases (entries before and from ``split``) where each
    transfer is a busy period of its own: each radio at most once in each phase, every
    transfer lasting some time (start before arrival), and a radio's second transfer starting
    no earlier than its first arrives; None where that does not hold."""
    if not np.all(start_s < arrival_s):
        return None
    order = np.argsort(radio, kind="stable")  # (per radio: its first phase's entry first)
    r = radio[order]
    same = r[1:] == r[:-1]
    if same.any():
        later = order[1:][same]  # (the second entry of a radio: it must be of the second
        earlier = order[:-1][same]  # phase, the first of the first, and start after it)
        if np.any(earlier >= split) or np.any(later < split) \
                or np.any(start_s[later] < arrival_s[earlier]):
            return None
        if len(r) > 2 and np.any(same[1:] & same[:-1]):  # (three entries of one radio)
            return None
    return r, start_s[order], arrival_s[order]
