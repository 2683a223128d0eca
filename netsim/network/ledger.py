"""The network's books: bytes sent and received per node, communication energy per sender.

A transfer's bytes and energy (bits x J/bit of every link crossed, charged to the sending node
of each link) are booked when it starts: the hot path only appends its route and size, and
:meth:`TransferLedger.settle` adds them to the per-node totals in bulk (numpy, in start order)
before any reading (the energy meter calls it). A cancelled transfer (netsim.dynamics) is
un-booked by the bytes it did not send: only sent bits cost energy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from netsim.energy import EnergyMeter

if TYPE_CHECKING:
    from netsim.network.topology import Topology


class TransferLedger:
    """Bytes and communication energy of one network's transfers."""

    def __init__(self, topology: Topology, meter: EnergyMeter) -> None:
        self.topology, self.meter = topology, meter
        n_nodes = len(topology.node_ids)
        self._bytes_sent, self._bytes_received = np.zeros(n_nodes), np.zeros(n_nodes)
        # transfers started since the last settle(): route ids and sizes (bytes)
        self.booked_routes: list[int] = []
        self.booked_bytes: list[float] = []
        self._indexed_routes = 0
        self._route_first_sender = self._route_receiver = np.zeros(0, dtype=np.intp)
        self._route_charge_start = self._route_n_charges = np.zeros(0, dtype=np.intp)
        self._charge_sender = np.zeros(0, dtype=np.intp)
        self._charge_j_per_bit = np.zeros(0)
        meter.settle_with(self.settle)

    @property
    def bytes_sent(self) -> np.ndarray:
        """Bytes each node has sent as the source of a transfer so far (a copy)."""
        self.settle()
        return self._bytes_sent.copy()

    @property
    def bytes_received(self) -> np.ndarray:
        """Bytes each node has been sent as the destination of a transfer so far (a copy)."""
        self.settle()
        return self._bytes_received.copy()

    def settle(self) -> None:
        """Book the bytes and communication energy of the transfers started since the last
        call (the meter calls this before every reading). Per transfer the hot path only notes
        its route and size; here they are added in bulk, in start order, so every sum is the
        one a transfer-by-transfer loop would give."""
        if not self.booked_routes:
            return
        if len(self.topology.routes) > self._indexed_routes:
            self._index_routes()
        r = np.array(self.booked_routes, dtype=np.intp)
        size = np.array(self.booked_bytes, dtype=float)
        self.booked_routes.clear()  # (in place: the network holds their append methods)
        self.booked_bytes.clear()
        np.add.at(self._bytes_sent, self._route_first_sender[r], size)
        np.add.at(self._bytes_received, self._route_receiver[r], size)
        counts = self._route_n_charges[r]
        ends = np.cumsum(counts)
        charge = np.repeat(self._route_charge_start[r] - (ends - counts), counts) \
            + np.arange(int(ends[-1]) if len(ends) else 0)
        self.meter.add_communication_many(
            self._charge_sender[charge], np.repeat(8.0 * size, counts) * self._charge_j_per_bit[charge])

    def _index_routes(self) -> None:
        """Arrays over the topology's routes: first sender, receiver, charges (flattened)."""
        routes = self.topology.routes
        self._route_first_sender = np.array([r.senders[0] if r.senders else r.receiver
                                             for r in routes], dtype=np.intp)
        self._route_receiver = np.array([r.receiver for r in routes], dtype=np.intp)
        n_charges = np.array([len(r.charges) for r in routes], dtype=np.intp)
        self._route_n_charges = n_charges
        self._route_charge_start = np.cumsum(n_charges) - n_charges
        self._charge_sender = np.array([s for r in routes for s, _ in r.charges], dtype=np.intp)
        self._charge_j_per_bit = np.array([e for r in routes for _, e in r.charges], dtype=float)
        self._indexed_routes = len(routes)

    def book(self, route_ids: Sequence[int], sizes_bytes: Sequence[float]) -> None:
        """Account transfers played forward outside the network (the engine's epoch fast path,
        netsim.fastepoch): their bytes and communication energy, in this order, as if each had
        started here. ``route_ids``: ``Route.id`` of routes with hops (as :meth:`send_on`, a
        route without hops moves nothing and is not booked)."""
        self.booked_routes.extend(route_ids)
        self.booked_bytes.extend(sizes_bytes)
