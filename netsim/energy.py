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
        self._busy_since: dict[int, float] = {}  # the nodes computing now: since when (s)
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

    def track_online(self, online_s: Callable[[float], np.ndarray]) -> None:
        """Read each node's online time up to an instant from ``online_s(now_s)`` (s, array
        over nodes); without it every node is online for the whole run."""
        self._online_s = online_s

    def add_selected(self, nodes: np.ndarray, seconds: np.ndarray) -> None:
        """Nodes ``nodes`` were selected (took part in an epoch) for ``seconds`` (s) more."""
        np.add.at(self._selected_s, nodes, seconds)

    def _add_busy(self, node: int, seconds: float) -> None:
        self._busy_s[node] += seconds
        self._compute_total_j += seconds * float(self.power_busy_w[node])
        self._busy_idle_total_j += seconds * float(self.power_idle_w[node])

    def cancel_busy(self, node: int, now_s: float) -> None:
        """Node ``node`` stops now (``now_s``, s) whatever its state: a job booked to start
        later (its input still on the way) counts no busy time."""
        since = self._busy_since.pop(node, None)
        if since is not None:
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

    def set_idle(self, node: int, now_s: float) -> None:
        """Node ``node`` stops computing at ``now_s`` (s)."""
        since = self._busy_since.pop(node, None)
        if since is None:
            raise RuntimeError(f"node {node} is not busy")
        self._add_busy(node, now_s - since)

    def add_busy_many(self, nodes: Sequence[int], busy_s: Sequence[float]) -> None:
        """Node ``nodes[k]`` computed for ``busy_s[k]`` seconds (a finished job, booked at once:
        the engine's epoch fast path). None of them may be busy now."""
        since = self._busy_since
        for node in nodes:
            if node in since:
                raise RuntimeError(f"node {node} is already busy: a device runs one job at a time")
        at = np.asarray(nodes, dtype=np.intp)
        seconds = np.asarray(busy_s, dtype=float)
        np.add.at(self._busy_s, at, seconds)
        self._compute_total_j += float(np.dot(seconds, self.power_busy_w[at]))
        self._busy_idle_total_j += float(np.dot(seconds, self.power_idle_w[at]))

    def add_communication(self, node: int, energy_j: float) -> None:
        """Charge ``energy_j`` (J) of communication to ``node``."""
        self._communication_j[node] += energy_j
        self._communication_total_j += energy_j

    def add_communication_many(self, nodes: np.ndarray, energy_j: np.ndarray) -> None:
        """Charge ``energy_j[k]`` (J) to ``nodes[k]`` for every k, in order (repeats add up)."""
        np.add.at(self._communication_j, nodes, energy_j)
        self._communication_total_j += float(np.sum(energy_j))

    def add_radio(self, node: int, energy_j: float) -> None:
        """Charge ``energy_j`` (J; negative: a tail taken back) of radio energy to ``node``:
        communication energy, also counted in its radio part."""
        self._communication_j[node] += energy_j
        self._radio_j[node] += energy_j
        self._communication_total_j += energy_j
        self._radio_total_j += energy_j

    def add_radio_many(self, nodes: np.ndarray, energy_j: np.ndarray) -> None:
        """:meth:`add_radio` for each (node, J) pair; nodes may repeat."""
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
        busy = self._busy_s.copy()
        for i, since in sorted(self._busy_since.items()):
            busy[i] += max(now_s - since, 0.0)
        compute = busy * self.power_busy_w
        online: float | np.ndarray = now_s if self._online_s is None else self._online_s(now_s)
        if not self._sleeps:
            idle = np.maximum(online - busy, 0.0) * self.power_idle_w
            sleep = np.zeros(len(busy))
        else:
            has_sleep = ~np.isnan(self.power_sleep_w)
            selected = self._selected_s
            idle = np.maximum(np.where(has_sleep, selected, online) - busy, 0.0) * self.power_idle_w
            sleep = np.where(has_sleep, np.maximum(online - selected, 0.0)
                             * np.nan_to_num(self.power_sleep_w), 0.0)
        return EnergySnapshot(now_s, busy, compute, self.communication_j, idle, sleep,
                              self._radio_j.copy())

    def totals(self, now_s: float) -> EnergyTotals:
        """Energy by category summed over every node from 0 to ``now_s`` (s), the sums of
        :meth:`snapshot`'s arrays. Without online tracking or sleep powers (a static world)
        they come from running sums and the nodes computing now, never visiting every node:
        idle energy is ``now x (idle power of all nodes) - busy x idle power``."""
        if self._online_s is not None or self._sleeps:
            return self.snapshot(now_s).totals()
        for settle in self._settlers:
            settle()
        compute, busy_idle = self._compute_total_j, self._busy_idle_total_j
        for i, since in self._busy_since.items():
            extra = max(now_s - since, 0.0)
            compute += extra * float(self.power_busy_w[i])
            busy_idle += extra * float(self.power_idle_w[i])
        return EnergyTotals(now_s, compute, self._communication_total_j,
                            now_s * self._idle_w_total - busy_idle, 0.0, self._radio_total_j)
