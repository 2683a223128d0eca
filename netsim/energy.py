"""Energy meters: piecewise-constant power integrated on state changes.

Every node has two power levels: ``power_busy_w`` while it computes and ``power_idle_w``
otherwise, for the whole run (network nodes have both at zero). In a changing world
(netsim.dynamics) a device draws nothing while offline, and, when it has a ``power_sleep_w``,
that power while online but not selected (category sleep); selected (taking part in the
running epoch) and not computing, it draws ``power_idle_w``. Energy is added when a node
changes state or when the meter is read, never on a clock tick (iFogSim's method). Communication
energy is charged per transfer by the network (bits x J/bit, to the sending node of each link);
the network books it in bulk, and every reading settles what is booked first.

Every joule belongs to exactly one node and one category: compute (busy time x busy power),
communication (transfers), idle (non-busy time x idle power; with a sleep power, non-busy
*selected* time) or sleep (online, not selected time x sleep power). The categories sum to the
total.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from netsim.smallsum import FEW_IN_ORDER

CATEGORIES = ("compute", "communication", "idle", "sleep")


@dataclass(frozen=True)
class EnergyTotals:
    """Energy by category summed over every node (J): since time 0, or over an interval (the
    difference of two). ``radio_j`` is the part of ``communication_j`` radios drew."""

    time_s: float
    compute_j: float
    communication_j: float
    idle_j: float
    sleep_j: float
    radio_j: float

    @property
    def total_j(self) -> float:
        """All categories (J)."""
        return self.compute_j + self.communication_j + self.idle_j + self.sleep_j

    def __sub__(self, earlier: EnergyTotals) -> EnergyTotals:
        return EnergyTotals(self.time_s - earlier.time_s, self.compute_j - earlier.compute_j,
                            self.communication_j - earlier.communication_j,
                            self.idle_j - earlier.idle_j, self.sleep_j - earlier.sleep_j,
                            self.radio_j - earlier.radio_j)

    def __add__(self, later: EnergyTotals) -> EnergyTotals:
        """Two intervals' energy together (consecutive phases of one epoch)."""
        return EnergyTotals(self.time_s + later.time_s, self.compute_j + later.compute_j,
                            self.communication_j + later.communication_j,
                            self.idle_j + later.idle_j, self.sleep_j + later.sleep_j,
                            self.radio_j + later.radio_j)


@dataclass(frozen=True)
class EnergySnapshot:
    """Cumulative per-node figures at one instant: arrays indexed like the meter's nodes."""

    time_s: float
    busy_s: np.ndarray
    compute_j: np.ndarray
    communication_j: np.ndarray
    idle_j: np.ndarray
    sleep_j: np.ndarray
    radio_j: np.ndarray
    """The part of ``communication_j`` that radios drew (base power and tails,
    netsim.network.radio); not a category of its own."""

    @property
    def total_j(self) -> float:
        """Total energy over all nodes and categories (J)."""
        return float(self.compute_j.sum() + self.communication_j.sum() + self.idle_j.sum()
                     + self.sleep_j.sum())

    @property
    def node_j(self) -> np.ndarray:
        """Energy per node over all categories (J)."""
        return self.compute_j + self.communication_j + self.idle_j + self.sleep_j

    def totals(self) -> EnergyTotals:
        """The categories summed over every node (J)."""
        return EnergyTotals(self.time_s, float(self.compute_j.sum()),
                            float(self.communication_j.sum()), float(self.idle_j.sum()),
                            float(self.sleep_j.sum()), float(self.radio_j.sum()))

    def __sub__(self, earlier: EnergySnapshot) -> EnergySnapshot:
        return EnergySnapshot(
            self.time_s - earlier.time_s,
            self.busy_s - earlier.busy_s,
            self.compute_j - earlier.compute_j,
            self.communication_j - earlier.communication_j,
            self.idle_j - earlier.idle_j,
            self.sleep_j - earlier.sleep_j,
            self.radio_j - earlier.radio_j,
        )


class EnergyMeter:
    """Per-node energy accounting for one run.

    Parameters
    ----------
    power_busy_w, power_idle_w
        Power drawn while computing and otherwise, per node (W).
    """

    def __init__(self, power_busy_w: Sequence[float] | np.ndarray,
                 power_idle_w: Sequence[float] | np.ndarray,
                 power_sleep_w: Sequence[float] | np.ndarray | None = None) -> None:
        """``power_sleep_w``: per node, power while online and not selected (W), NaN where the
        node has none (then that time is idle time, the static world's rule); None: NaN for
        every node."""
        if len(power_busy_w) != len(power_idle_w):
            raise ValueError("power_busy_w and power_idle_w must have one entry per node")
        self.power_busy_w = np.asarray(power_busy_w, dtype=float)
        self.power_idle_w = np.asarray(power_idle_w, dtype=float)
        n = len(power_busy_w)
        self.power_sleep_w = np.full(n, np.nan) if power_sleep_w is None \
            else np.asarray(power_sleep_w, dtype=float)
        self._sleeps = bool(np.any(~np.isnan(self.power_sleep_w)))
        self._selected_s = np.zeros(n)
        self._online_s: Callable[[float], np.ndarray] | None = None
        self._busy_s = np.zeros(n)
        # jobs ended since the last reading: node, seconds (added to _busy_s in bulk, in this
        # order, before any reading: the same per-node sums); the nodes' powers as Python
        # numbers, read once per node that computed (W)
        self._busy_nodes: list[int] = []
        self._busy_secs: list[float] = []
        self._powers_of: dict[int, tuple[float, float]] = {}
        self._busy_since: dict[int, float] = {}  # the nodes computing now: since when (s)
        # of those, the ones drawing power while computing (busy or idle power not 0): the
        # only ones a total adds anything for (the same sums, in the same order)
        self._powered_since: dict[int, float] = {}
        self._draws = (self.power_busy_w != 0.0) | (self.power_idle_w != 0.0)
        self._communication_j = np.zeros(n)
        self._radio_j = np.zeros(n)
        self._settlers: list[Callable[[], None]] = []
        # running sums over every node, so totals need not visit them (netsim's fleets):
        # busy x busy power, busy x idle power, communication, radio (J)
        self._compute_total_j = 0.0
        self._busy_idle_total_j = 0.0
        self._communication_total_j = 0.0
        self._radio_total_j = 0.0
        self._idle_w_total = float(self.power_idle_w.sum())
        self._has_sleep = ~np.isnan(self.power_sleep_w)
        self._nosleep_idle_w = float(self.power_idle_w[~self._has_sleep].sum())
        self._sleep_w_total = float(np.nan_to_num(self.power_sleep_w).sum())
        self._selected_idle_j = 0.0   # selected time x idle power, nodes with a sleep power
        self._selected_sleep_j = 0.0  # selected time x sleep power, the same nodes
        # nodes with a sleep power whose selected time may exceed their online time (their
        # sleep is clamped at 0): those selected since they were last seen not to
        self._maybe_over: set[int] = set()
        self._online_of: Callable[[np.ndarray, float], np.ndarray] | None = None
        self._weighted: Callable[[float], tuple[float, float]] | None = None

    def track_online(self, online_s: Callable[[float], np.ndarray],
                     online_of: Callable[[np.ndarray, float], np.ndarray] | None = None,
                     weighted: Callable[[float], tuple[float, float]] | None = None) -> None:
        """Read each node's online time up to an instant from ``online_s(now_s)`` (s, array
        over nodes); without it every node is online for the whole run. ``online_of(rows,
        now_s)``: the same for some nodes only; ``weighted(now_s)``: the online time summed
        over the nodes weighted by idle power (those without a sleep power) and by sleep
        power (those with one), W x s: then :meth:`totals` and :meth:`node_j_of` need not
        visit every node."""
        self._online_s, self._online_of, self._weighted = online_s, online_of, weighted

    def add_selected(self, nodes: np.ndarray, seconds: np.ndarray) -> None:
        """Nodes ``nodes`` were selected (took part in an epoch) for ``seconds`` (s) more."""
        np.add.at(self._selected_s, nodes, seconds)
        if self._sleeps:
            nodes = np.asarray(nodes, dtype=np.intp)
            sleeper = self._has_sleep[nodes]
            self._maybe_over.update(nodes[sleeper].tolist())
            secs = np.asarray(seconds, dtype=float)[sleeper]
            self._selected_idle_j += float(np.dot(secs, self.power_idle_w[nodes[sleeper]]))
            self._selected_sleep_j += float(np.dot(secs, self.power_sleep_w[nodes[sleeper]]))

    def _add_busy(self, node: int, seconds: float) -> None:
        self._busy_nodes.append(node)
        self._busy_secs.append(seconds)
        powers = self._powers_of.get(node)
        if powers is None:
            powers = self._powers_of[node] = (float(self.power_busy_w[node]),
                                              float(self.power_idle_w[node]))
        self._compute_total_j += seconds * powers[0]
        self._busy_idle_total_j += seconds * powers[1]

    def _busy_up_to_date(self) -> np.ndarray:
        """Busy seconds per node (s), the jobs ended since the last reading added."""
        if self._busy_nodes:
            np.add.at(self._busy_s, self._busy_nodes, self._busy_secs)  # (in order per node)
            self._busy_nodes.clear()
            self._busy_secs.clear()
        return self._busy_s

    def cancel_busy(self, node: int, now_s: float) -> None:
        """Node ``node`` stops now (``now_s``, s) whatever its state: a job booked to start
        later (its input still on the way) counts no busy time."""
        since = self._busy_since.pop(node, None)
        if since is not None:
            self._powered_since.pop(node, None)
            self._add_busy(node, max(now_s - since, 0.0))

    @property
    def n_nodes(self) -> int:
        """Number of metered nodes."""
        return len(self._busy_s)

    def set_busy(self, node: int, start_s: float) -> None:
        """Node ``node`` starts computing at ``start_s`` (s): now, or later when the start is
        already known (the engine books a job when its input's arrival time is known; a reading
        before ``start_s`` counts no busy time yet). A node runs one job at a time."""
        if node in self._busy_since:
            raise RuntimeError(f"node {node} is already busy: a device runs one job at a time")
        self._busy_since[node] = start_s
        if self._draws[node]:
            self._powered_since[node] = start_s

    def set_idle(self, node: int, now_s: float) -> None:
        """Node ``node`` stops computing at ``now_s`` (s)."""
        since = self._busy_since.pop(node, None)
        if since is None:
            raise RuntimeError(f"node {node} is not busy")
        self._powered_since.pop(node, None)
        self._add_busy(node, now_s - since)

    def add_busy_many(self, nodes: Sequence[int] | np.ndarray,
                      busy_s: Sequence[float] | np.ndarray) -> None:
        """Node ``nodes[k]`` computed for ``busy_s[k]`` seconds (a finished job, booked at once:
        the engine's epoch fast path). None of them may be busy now."""
        at = np.asarray(nodes, dtype=np.intp)
        since = self._busy_since
        if since and not since.keys().isdisjoint(at.tolist()):
            node = next(n for n in at.tolist() if n in since)
            raise RuntimeError(f"node {node} is already busy: a device runs one job at a time")
        seconds = np.asarray(busy_s, dtype=float)
        np.add.at(self._busy_up_to_date(), at, seconds)
        self._compute_total_j += float(np.dot(seconds, self.power_busy_w[at]))
        self._busy_idle_total_j += float(np.dot(seconds, self.power_idle_w[at]))

    def add_communication(self, node: int, energy_j: float) -> None:
        """Charge ``energy_j`` (J) of communication to ``node``."""
        self._communication_j[node] += energy_j
        self._communication_total_j += energy_j

    def add_communication_many(self, nodes: np.ndarray | list[int],
                               energy_j: np.ndarray | list[float]) -> None:
        """Charge ``energy_j[k]`` (J) to ``nodes[k]`` for every k, in order (repeats add up);
        the total grows by their sum as numpy sums them. A few charges as lists (an
        asynchronous epoch's one or two transfers) are added one at a time: the same sums
        (netsim.smallsum)."""
        if type(energy_j) is list and len(energy_j) < FEW_IN_ORDER:
            comm, total = self._communication_j, 0.0
            for node, joules in zip(nodes, energy_j, strict=True):
                comm[node] += joules
                total += joules
            self._communication_total_j += total
            return
        np.add.at(self._communication_j, nodes, energy_j)
        self._communication_total_j += float(np.sum(energy_j))

    def add_radio_in_order(self, nodes: Sequence[int], energy_j: Sequence[float]) -> None:
        """Charge ``energy_j[k]`` (J; negative: a tail taken back) of radio energy to
        ``nodes[k]`` for each k in turn (nodes may repeat): communication energy, also counted
        in its radio part; every sum, per node and in total, is the one adding the pairs one
        at a time gives, bit for bit."""
        np.add.at(self._communication_j, nodes, energy_j)  # (unbuffered: in order per node)
        np.add.at(self._radio_j, nodes, energy_j)
        communication, radio = self._communication_total_j, self._radio_total_j
        for joules in energy_j:
            communication += joules
            radio += joules
        self._communication_total_j, self._radio_total_j = communication, radio

    def add_radio_many(self, nodes: np.ndarray, energy_j: np.ndarray) -> None:
        """:meth:`add_radio_in_order`'s charges, the totals summed by numpy (pairwise)."""
        np.add.at(self._communication_j, nodes, energy_j)
        np.add.at(self._radio_j, nodes, energy_j)
        joules = float(np.sum(energy_j))
        self._communication_total_j += joules
        self._radio_total_j += joules

    def settle_with(self, settle: Callable[[], None]) -> None:
        """Call ``settle`` before every reading (a source booking its charges in bulk)."""
        self._settlers.append(settle)

    @property
    def communication_j(self) -> np.ndarray:
        """Cumulative communication energy per node so far (J); a copy."""
        for settle in self._settlers:
            settle()
        return self._communication_j.copy()

    def snapshot(self, now_s: float) -> EnergySnapshot:
        """Cumulative energy per node and category from time 0 to ``now_s`` (s)."""
        busy = self._busy_up_to_date().copy()
        for i, since in sorted(self._busy_since.items()):
            busy[i] += max(now_s - since, 0.0)
        compute = busy * self.power_busy_w
        online: float | np.ndarray = now_s if self._online_s is None else self._online_s(now_s)
        idle, sleep = self._idle_and_sleep(slice(None), busy, online)
        return EnergySnapshot(now_s, busy, compute, self.communication_j, idle, sleep,
                              self._radio_j.copy())

    def _idle_and_sleep(self, rows: slice | np.ndarray, busy: np.ndarray,
                        online: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Idle and sleep energy (J) of nodes ``rows`` with busy and online times (s): idle
        is non-busy online time at idle power, or, for a node with a sleep power, non-busy
        selected time; sleep is online, not selected time at sleep power (both >= 0)."""
        idle_w = self.power_idle_w[rows]
        if not self._sleeps:
            return np.maximum(online - busy, 0.0) * idle_w, np.zeros(len(busy))
        has = self._has_sleep[rows]
        selected = self._selected_s[rows]
        idle = np.maximum(np.where(has, selected, online) - busy, 0.0) * idle_w
        sleep = np.where(has, np.maximum(online - selected, 0.0)
                         * np.nan_to_num(self.power_sleep_w[rows]), 0.0)
        return idle, sleep

    def totals(self, now_s: float) -> EnergyTotals:
        """Energy by category summed over every node from 0 to ``now_s`` (s): the sums of
        :meth:`snapshot`'s arrays, from running sums and the nodes computing now, never
        visiting every node. Idle energy is the online time weighted by idle power (nodes
        without a sleep power; ``now x`` their idle power when everyone is always online)
        plus the selected time of nodes with one, minus busy time x idle power; sleep energy
        the online time weighted by sleep power minus their selected time x sleep power."""
        if self._online_s is not None and self._weighted is None:
            return self.snapshot(now_s).totals()
        for settle in self._settlers:
            settle()
        compute, busy_idle = self._compute_total_j, self._busy_idle_total_j
        for i, since in self._powered_since.items():
            extra = max(now_s - since, 0.0)
            compute += extra * float(self.power_busy_w[i])
            busy_idle += extra * float(self.power_idle_w[i])
        if self._weighted is not None:
            online_idle, online_sleep = self._weighted(now_s)
        else:
            online_idle, online_sleep = now_s * self._nosleep_idle_w, now_s * self._sleep_w_total
        sleep = 0.0
        if self._sleeps:
            sleep = online_sleep - self._selected_sleep_j + self._sleep_clamped_j(now_s)
        return EnergyTotals(now_s, compute, self._communication_total_j,
                            online_idle + self._selected_idle_j - busy_idle, sleep,
                            self._radio_total_j)

    def _sleep_clamped_j(self, now_s: float) -> float:
        """What the clamp of sleep time at 0 adds back (J): nodes selected for longer than
        they were online. Online time only grows, so a node found without excess leaves the
        set until it is selected again (readings come in time order, as the engine's)."""
        if not self._maybe_over:
            return 0.0
        rows = np.fromiter(self._maybe_over, dtype=np.intp, count=len(self._maybe_over))
        over = np.maximum(self._selected_s[rows] - self._online_rows(rows, now_s), 0.0)
        self._maybe_over.difference_update(rows[over <= 0.0].tolist())
        return float(np.dot(over, np.nan_to_num(self.power_sleep_w[rows])))

    def _online_rows(self, rows: np.ndarray, now_s: float) -> float | np.ndarray:
        """Online time of nodes ``rows`` from 0 to ``now_s`` (s; everyone online: now_s)."""
        if self._online_s is None:
            return now_s
        if self._online_of is not None:
            return self._online_of(rows, now_s)
        return self._online_s(now_s)[rows]

    def node_j_of(self, rows: np.ndarray, now_s: float) -> np.ndarray:
        """:meth:`snapshot`'s ``node_j`` for nodes ``rows`` only (J): the same formulas."""
        rows = np.asarray(rows, dtype=np.intp)
        for settle in self._settlers:
            settle()
        busy = self._busy_up_to_date()[rows]
        for k, r in enumerate(rows.tolist()):
            since = self._busy_since.get(r)
            if since is not None:
                busy[k] += max(now_s - since, 0.0)
        idle, sleep = self._idle_and_sleep(rows, busy, self._online_rows(rows, now_s))
        return busy * self.power_busy_w[rows] + self._communication_j[rows] + idle + sleep
