"""The network's books: bytes sent and received per node, communication energy per charge,
air time per station.

A transfer's bytes, energy (bits x J/bit of every charge of its route: the sending node of
each link, a receiving device's ``rx_energy_j_per_bit``) and air time (bits / station rate of
every medium crossed, to the station) are booked when it starts: the hot path only appends its
route and size, and :meth:`TransferLedger.settle` adds them to the per-node totals in bulk
(numpy, in start order) before any reading (the energy meter calls it). A cancelled transfer
(netsim.dynamics) is un-booked by the bytes it did not send: only sent bits cost energy and
air time.

Air time is its bits over the station rates in force when the transfer starts (a transfer
whose station rate changes while it moves keeps its start's air time: netsim's
approximation). Pending bookings are settled under the capacities the ledger reads
(``capacity``, the network's own list changed in place): the network settles them before it
changes a capacity (:meth:`netsim.network.flows.FlowNetwork.set_capacities`), so each is
settled under the rates of its start; transfers played forward outside the network (the
array path) that start under other rates are booked with those rates
(:meth:`TransferLedger.book` with ``capacity``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from netsim.energy import EnergyMeter
from netsim.network.tree import route_books_of
from netsim.smallsum import FEW_IN_ORDER

if TYPE_CHECKING:
    from netsim.network.topology import Route, Topology

_FEW_TRANSFERS = 4
"""Transfers up to which :meth:`TransferLedger._settle` books one at a time in Python."""


class TransferLedger:
    """Bytes and communication energy of one network's transfers."""

    def __init__(self, topology: Topology, meter: EnergyMeter,
                 capacity: list[float] | None = None) -> None:
        """``capacity``: every constraint's capacity now (the network's own list, changed in
        place; default the topology's), for the station rates of air time."""
        self.topology, self.meter = topology, meter
        self.capacity = topology.constraint_capacity if capacity is None else capacity
        n_nodes = len(topology.node_ids)
        self._bytes_sent, self._bytes_received = np.zeros(n_nodes), np.zeros(n_nodes)
        self._airtime_s = np.zeros(n_nodes)
        self._medium_airtime_s = np.zeros(len(topology.media))
        self._direction_medium = np.asarray(getattr(topology, "direction_medium", []),
                                            dtype=np.intp)
        self._route_air_start = self._route_n_air = np.zeros(0, dtype=np.intp)
        self._air_station = self._air_direction = np.zeros(0, dtype=np.intp)
        self._media = bool(topology.constraint_medium)
        # transfers started since the last settle(): route ids and sizes (bytes)
        self.booked_routes: list[int] = []
        self.booked_bytes: list[float] = []
        # route id (>= 0) -> its row in the arrays below (-1: not indexed yet)
        self._slot = np.full(0, -1, dtype=np.int32)
        self._n_indexed = 0
        self._route_first_sender = self._route_receiver = np.zeros(0, dtype=np.intp)
        self._route_charge_start = self._route_n_charges = np.zeros(0, dtype=np.intp)
        self._charge_sender = np.zeros(0, dtype=np.intp)
        self._charge_j_per_bit = np.zeros(0)
        # route id -> its books as Python numbers (:meth:`_books_of_slot`), for _settle_few
        self._few_books: dict[int, tuple[int, int, tuple[tuple[int, float], ...],
                                         tuple[tuple[int, int], ...]]] = {}
        meter.settle_with(self.settle)
        # called first by every settle (the radios' energy booked in bulk: its order per node
        # is then the order of the events, radio energy of arrivals before the transfers' own)
        self.before_settle: Callable[[], None] | None = None

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

    @property
    def airtime_s(self) -> np.ndarray:
        """Air time each station has used on media so far (s): bits / station rate of its
        transfers (a copy)."""
        self.settle()
        return self._airtime_s.copy()

    @property
    def airtime_by_medium_s(self) -> np.ndarray:
        """Air time used on each medium so far (s), in the topology's ``media`` order: the
        air time of its stations' transfers summed (a copy)."""
        self.settle()
        return self._medium_airtime_s.copy()

    def settle(self) -> None:
        """Book the bytes and communication energy of the transfers started since the last
        call (the meter calls this before every reading), their air time at the station rates
        in force now. Per transfer the hot path only notes its route and size; here they are
        added in bulk, in start order, so every sum is the one a transfer-by-transfer loop
        would give."""
        if self.before_settle is not None:
            self.before_settle()
        if not self.booked_routes:
            return
        routes, sizes = self.booked_routes, self.booked_bytes
        self._settle(routes, np.array(sizes, dtype=float), self.capacity)
        routes.clear()  # (in place: the network holds their append methods)
        sizes.clear()

    def _settle(self, route_ids: Sequence[int], size: np.ndarray,
                capacity: Sequence[float] | np.ndarray) -> None:
        """Add transfers on ``route_ids`` of ``size`` bytes each to the books, in order, their
        air time at the station rates of ``capacity`` (per constraint)."""
        if len(route_ids) <= _FEW_TRANSFERS and self._settle_few(route_ids, size, capacity):
            return
        ids = self.index(route_ids)
        r = self._slot[ids]
        np.add.at(self._bytes_sent, self._route_first_sender[r], size)
        np.add.at(self._bytes_received, self._route_receiver[r], size)
        counts = self._route_n_charges[r]
        ends = np.cumsum(counts)
        charge = np.repeat(self._route_charge_start[r] - (ends - counts), counts) \
            + np.arange(int(ends[-1]) if len(ends) else 0)
        self.meter.add_communication_many(
            self._charge_sender[charge], np.repeat(8.0 * size, counts) * self._charge_j_per_bit[charge])
        if self._media:
            counts = self._route_n_air[r]
            if counts.any():
                ends = np.cumsum(counts)
                air = np.repeat(self._route_air_start[r] - (ends - counts), counts) \
                    + np.arange(int(ends[-1]))
                direction = self._air_direction[air]
                if isinstance(capacity, np.ndarray):
                    rate = capacity[direction].astype(float)
                else:  # (a list the network changes in place)
                    rate = np.fromiter(map(capacity.__getitem__, direction.tolist()),
                                       dtype=float, count=len(direction))
                seconds = np.repeat(8.0 * size, counts) / rate
                np.add.at(self._airtime_s, self._air_station[air], seconds)
                np.add.at(self._medium_airtime_s, self._direction_medium[direction], seconds)

    def _settle_few(self, route_ids: Sequence[int], size: np.ndarray,
                    capacity: Sequence[float] | np.ndarray) -> bool:
        """:meth:`_settle` of a few transfers on routes indexed already, one at a time in
        Python (an asynchronous epoch books one or two: numpy's fixed cost per call was most
        of it): the same additions in the same order per node, each route's books read once
        from the arrays. False (nothing booked) where a route is not indexed yet or the
        charges are too many for the meter's sum in order."""
        slot, books = self._slot, self._few_books
        found = []
        charges = 0
        for rid in route_ids:
            entry = books.get(rid)
            if entry is None:
                if rid >= len(slot) or slot.item(rid) < 0:
                    return False
                entry = books[rid] = self._books_of_slot(slot.item(rid))
            found.append(entry)
            charges += len(entry[2])
        if charges >= FEW_IN_ORDER:
            return False
        sent, received = self._bytes_sent, self._bytes_received
        nodes: list[int] = []
        joules: list[float] = []
        sizes = size.tolist()
        for (first_sender, receiver, charged, _), nbytes in zip(found, sizes, strict=True):
            sent[first_sender] += nbytes
            received[receiver] += nbytes
            bits = 8.0 * nbytes
            for node, j_per_bit in charged:
                nodes.append(node)
                joules.append(bits * j_per_bit)
        self.meter.add_communication_many(nodes, joules)
        if self._media:
            airtime, medium_airtime, media = (self._airtime_s, self._medium_airtime_s,
                                              self._direction_medium)
            for (_, _, _, aired), nbytes in zip(found, sizes, strict=True):
                bits = 8.0 * nbytes
                for station, direction in aired:
                    seconds = bits / float(capacity[direction])
                    airtime[station] += seconds
                    medium_airtime[media[direction]] += seconds
        return True

    def _books_of_slot(self, r: int) -> tuple[int, int, tuple[tuple[int, float], ...],
                                              tuple[tuple[int, int], ...]]:
        """The books of the route in slot ``r`` as Python numbers: first sender, receiver,
        (sender, J/bit) per charge, (station, constraint) per medium crossed."""
        c0, nc = self._route_charge_start.item(r), self._route_n_charges.item(r)
        a0, na = self._route_air_start.item(r), self._route_n_air.item(r)
        sender, j_per_bit = self._charge_sender, self._charge_j_per_bit
        station, direction = self._air_station, self._air_direction
        charged = tuple((sender.item(c), j_per_bit.item(c)) for c in range(c0, c0 + nc))
        aired = tuple((station.item(a), direction.item(a)) for a in range(a0, a0 + na))
        return (self._route_first_sender.item(r), self._route_receiver.item(r), charged, aired)

    def rebook_airtime(self, route: Route, bits: float, start_rates: Sequence[float]) -> None:
        """Move the air time of ``bits`` bits on ``route`` booked (or to be booked) at the
        station rates in force now to the rates ``start_rates`` (bit/s, one per medium
        crossed, in ``route.airtime``'s order): add ``bits / now - bits / start`` per medium.
        A cancelled transfer whose station rate changed while it moved is un-booked (negative
        size) at the rates in force when it is cancelled: this puts the bits it did not send
        back at its start's rates (:meth:`netsim.network.flows.FlowNetwork.cancel`)."""
        capacity = self.capacity
        for (station, d), start in zip(route.airtime, start_rates, strict=True):
            seconds = bits / capacity[d] - bits / start
            if seconds:
                self._airtime_s[station] += seconds
                self._medium_airtime_s[self._direction_medium[d]] += seconds

    def index(self, route_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Index the routes ``route_ids`` not indexed yet, in one pass (a caller that knows
        the routes its transfers will take: one call instead of one per settling); returns
        the ids as an array."""
        ids = np.asarray(route_ids, dtype=np.intp)
        if not len(ids):
            return ids
        top = int(ids.max())
        if top >= len(self._slot):  # (grown by a quarter at least: ids arrive in any order)
            grown = np.full(max(top + 1, len(self._slot) * 5 // 4), -1, dtype=np.int32)
            grown[:len(self._slot)] = self._slot
            self._slot = grown
        missing = self._slot[ids] < 0
        if missing.any():  # (in the order of their first transfer)
            fresh, first = np.unique(ids[missing], return_index=True)
            self._index_routes(fresh[np.argsort(first)])
        return ids

    def _index_routes(self, ids: np.ndarray) -> None:
        """Add the routes ``ids`` (not indexed yet) to the arrays: first sender, receiver,
        charges and air time (flattened); only routes that carried a transfer are indexed
        (a fleet's topology gives them as arrays, :meth:`TreeTopology.route_books`)."""
        books_of = getattr(self.topology, "route_books", None)
        books = books_of(ids.tolist()) if books_of is not None \
            else route_books_of([self.topology.routes[i] for i in ids.tolist()])
        base = self._n_indexed
        self._slot[ids] = np.arange(base, base + len(ids), dtype=np.int32)
        self._n_indexed = base + len(ids)
        n_charges, n_air = books["charge_count"], books["air_count"]
        charge_base, air_base = len(self._charge_sender), len(self._air_station)
        cat = np.concatenate
        self._route_first_sender = cat([self._route_first_sender, books["first_sender"]])
        self._route_receiver = cat([self._route_receiver, books["receiver"]])
        self._route_n_charges = cat([self._route_n_charges, n_charges])
        self._route_charge_start = cat([self._route_charge_start,
                                        charge_base + np.cumsum(n_charges) - n_charges])
        self._charge_sender = cat([self._charge_sender, books["charge_node"]])
        self._charge_j_per_bit = cat([self._charge_j_per_bit, books["charge_j_per_bit"]])
        self._route_n_air = cat([self._route_n_air, n_air])
        self._route_air_start = cat([self._route_air_start, air_base + np.cumsum(n_air) - n_air])
        self._air_station = cat([self._air_station, books["air_station"]])
        self._air_direction = cat([self._air_direction, books["air_direction"]])

    def route_j_per_bit(self, route_id: int) -> float:
        """Energy of one bit over route ``route_id`` (J/bit, receivers' costs included): its
        charges summed, as :attr:`netsim.network.topology.Route.total_energy_j_per_bit`, read
        from the books (indexed on first use) without building the route."""
        books = self._few_books.get(route_id)
        if books is None:  # (the books a few transfers' settling reads too: _settle_few)
            if route_id >= len(self._slot) or self._slot.item(route_id) < 0:
                self.index([route_id])
            books = self._few_books[route_id] = self._books_of_slot(self._slot.item(route_id))
        return float(sum(j_per_bit for _, j_per_bit in books[2]))

    def book(self, route_ids: Sequence[int], sizes_bytes: Sequence[float],
             capacity: np.ndarray | None = None) -> None:
        """Account transfers played forward outside the network (the engine's epoch fast path,
        netsim.fastepoch): their bytes and communication energy, in this order, as if each had
        started here. ``route_ids``: ``Route.id`` of routes with hops (as :meth:`send_on`, a
        route without hops moves nothing and is not booked).

        ``capacity`` (every constraint's capacity, bit/s): the transfers started under these
        rates, not those in force now (a changing world's uploads that start after a
        capacity change the network has not seen yet): the pending bookings are settled first,
        then these at once, their air time at ``capacity``'s station rates."""
        if capacity is None:
            self.booked_routes.extend(route_ids)
            self.booked_bytes.extend(sizes_bytes)
            return
        self.settle()
        if len(route_ids):
            self._settle(route_ids, np.asarray(sizes_bytes, dtype=float),
                         np.asarray(capacity, dtype=float))
