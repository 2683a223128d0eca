"""A topology whose links form a tree, held in arrays: routes follow parent pointers.

What a generated fleet of a million devices runs on (:func:`netsim.devices.fleet_topology`):
the same constraints, stations, radios and :class:`~netsim.network.topology.Route` objects as
:class:`~netsim.network.topology.Topology` gives for the same links (a tree has one path
between two nodes, so minimum latency picks it), without a graph or a Python object per link.
Routes are built when first asked for. The route from the root to device row r has id
``2 r`` and the one back ``2 r + 1``; any other route gets the next id after ``2 x devices``.
:meth:`TreeTopology.root_routes` gives every device's pair as arrays in one pass.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import overload

import numpy as np

from netsim.network.topology import (
    MediumLike,
    RadioSet,
    Route,
    RouteStep,
    Topology,
    build_route,
)

BOOKS_KEPT_UP_TO = 200_000
"""Up to this many devices a tree keeps every device route's books once one is asked for
(:meth:`TreeTopology.route_books`: a few arrays of the fleet's size, gathered from at each
epoch's settling); above, it builds the books of the routes asked for each time (a fleet of
a million asks for a few hundred an epoch, and its memory is what counts)."""


class TreeTopology(Topology):
    """A tree of full-duplex links in arrays (see the module docstring).

    ``parent[v]``: v's parent node (-1 at the root), ``parent_link[v]`` the link joining them;
    per link: ends ``link_a``/``link_b`` (node indices), ``bandwidth_bps``, ``latency_s``,
    ``energy_j_per_bit``, ``rx_energy_j_per_bit``, radio figures and ``link_medium`` (its index
    in ``media``, -1: private). ``links``: the links as objects (a lazy sequence is fine: only
    asked for by index). The first ``n_devices`` nodes are devices; ``root`` is a device.
    """

    def __init__(self, node_ids: list[str], n_devices: int, root: int, parent: np.ndarray,
                 parent_link: np.ndarray, link_a: np.ndarray, link_b: np.ndarray,
                 bandwidth_bps: np.ndarray, latency_s: np.ndarray,
                 energy_j_per_bit: np.ndarray, rx_energy_j_per_bit: np.ndarray,
                 radio_power_w: np.ndarray, tail_s: np.ndarray, tail_power_w: np.ndarray,
                 link_medium: np.ndarray, media: Sequence[MediumLike], links: Sequence) -> None:
        self.node_ids = node_ids
        self.index = NodeIndex(node_ids, n_devices)  # type: ignore[assignment]
        self.links = links  # type: ignore[assignment]
        self.media = list(media)
        self.n_devices = n_devices
        self.root = root
        self.parent = np.asarray(parent, dtype=np.intp)
        self.parent_link = np.asarray(parent_link, dtype=np.intp)
        self.link_a, self.link_b = np.asarray(link_a, np.intp), np.asarray(link_b, np.intp)
        self.bandwidth_bps = np.asarray(bandwidth_bps, dtype=float)
        self.latency_s = np.asarray(latency_s, dtype=float)
        self.energy_j_per_bit = np.asarray(energy_j_per_bit, dtype=float)
        self.rx_energy_j_per_bit = np.asarray(rx_energy_j_per_bit, dtype=float)
        n_links = len(self.link_a)
        bw = np.repeat(self.bandwidth_bps, 2)
        self.capacity_bps = bw.tolist()
        n_dir = 2 * n_links
        # media: constraints after the link directions (wifi one, cellular two)
        kinds = [m.kind for m in self.media]
        width = np.array([1 if k == "wifi" else 2 for k in kinds], dtype=np.intp)
        first = n_dir + np.cumsum(width) - width
        self.constraint_medium = np.repeat(np.arange(len(kinds)), width).tolist()
        medium = np.asarray(link_medium, dtype=np.intp)
        member = medium >= 0
        station = np.where(self.link_a < n_devices, self.link_a, self.link_b)
        if np.any(member & (station >= n_devices)):
            bad = int(np.flatnonzero(member & (station >= n_devices))[0])
            raise ValueError(f"links[{bad}].medium: a member link needs a device end")
        first_pad, width_pad = np.append(first, -1), np.append(width, 1)  # (no media: -1)
        c = np.where(member, first_pad[medium], -1)
        cellular = member & (width_pad[medium] == 2)
        up, down = c, np.where(cellular, c + 1, c)
        station_is_a = station == self.link_a
        self._member_station = np.where(member, station, -1)
        self._member_ab = np.where(station_is_a, up, down)   # constraint a -> b
        self._member_ba = np.where(station_is_a, down, up)   # constraint b -> a
        self.direction_medium = np.repeat(  # type: ignore[assignment]
            np.where(member, medium, -1), 2)  # (an array: the ledger reads it as one)
        # radios: per link with radio power or a tail, one per device end (a, then b)
        has_radio = (radio_power_w > 0.0) | ((tail_s > 0.0) & (tail_power_w > 0.0))
        a_dev, b_dev = self.link_a < n_devices, self.link_b < n_devices
        ends = np.where(has_radio, a_dev.astype(np.intp) + b_dev, 0)
        self._radio_first = np.cumsum(ends) - ends
        self._radio_count = ends
        owner = np.repeat(np.arange(n_links), ends)
        second = np.arange(len(owner)) - self._radio_first[owner]  # 0: first end of its link
        node = np.where(a_dev[owner] & (second == 0), self.link_a[owner], self.link_b[owner])
        self.radios = RadioSet(  # type: ignore[assignment]
            node, owner, np.asarray(radio_power_w, float)[owner],
            np.asarray(tail_s, float)[owner], np.asarray(tail_power_w, float)[owner])
        self.constraint_capacity = self.capacity_bps + [1.0] * len(self.constraint_medium)
        self.route_cache: dict[tuple[str, str], Route] = {}
        self.routes = _TreeRoutes(self)  # type: ignore[assignment]
        self._extra: list[Route] = []
        self._kept_books: dict[str, np.ndarray] | None = None  # (:meth:`route_books`)
        self._depth = _depths(self.parent, root)
        # per (link, sending end) crossed so far: its step (:meth:`_step`)
        self._steps: dict[tuple[int, int], RouteStep] = {}
        # per node above a device asked for so far: the names and steps of the path from
        # the root down to it, and of the path from it up to the root (:meth:`_root_path`)
        self._from_root: dict[int, tuple[tuple[str, ...], tuple[RouteStep, ...]]] = {}
        self._to_root: dict[int, tuple[tuple[str, ...], tuple[RouteStep, ...]]] = {}

    def connected(self, a: str, b: str) -> bool:
        """Whether a route exists between nodes a and b (in a tree: both exist)."""
        return a in self.index and b in self.index

    def _path(self, src: int, dst: int) -> list[int]:
        """Node indices from src to dst along the tree."""
        up, down = [src], [dst]
        a, b = src, dst
        depth, parent = self._depth.item, self.parent.item  # (Python ints, no numpy scalars)
        da, db = depth(a), depth(b)
        while da > db:
            a = parent(a)
            up.append(a)
            da -= 1
        while db > da:
            b = parent(b)
            down.append(b)
            db -= 1
        while a != b:
            a, b = parent(a), parent(b)
            up.append(a)
            down.append(b)
        return up + down[-2::-1]

    def route(self, src: str, dst: str) -> Route:
        """The (cached) route from src to dst: the same object the graph topology builds.

        Raises
        ------
        KeyError
            If either node is unknown.
        """
        key = (src, dst)
        cached = self.route_cache.get(key)
        if cached is not None:
            return cached
        if src not in self.index or dst not in self.index:
            raise KeyError(f"unknown node in route {src!r} -> {dst!r}")
        s, d = self.index[src], self.index[dst]
        if s == self.root and d < self.n_devices:
            rid = 2 * d
        elif d == self.root and s < self.n_devices:
            rid = 2 * s + 1
        else:
            rid = 2 * self.n_devices + len(self._extra)
        if s == self.root and d != s:  # (a device's route from or to the root: the path
            names, steps = self._root_path(d, True)  # above it is its cell's, built once)
            route = build_route(names, steps, d, rid, self.n_devices)
        elif d == self.root and d != s:
            names, steps = self._root_path(s, False)
            route = build_route(names, steps, d, rid, self.n_devices)
        else:
            route = self._build(self._path(s, d), rid)
        self.route_cache[key] = route
        if rid >= 2 * self.n_devices:
            self._extra.append(route)
        return route

    def _build(self, nodes: list[int], rid: int) -> Route:
        """The route along ``nodes`` (:func:`~netsim.network.topology.build_route`)."""
        steps = []
        parent, parent_link = self.parent.item, self.parent_link.item
        step_of = self._steps
        for u, v in zip(nodes, nodes[1:], strict=False):
            link = parent_link(v) if parent(v) == u else parent_link(u)
            step = step_of.get((link, u))
            if step is None:
                step = step_of[(link, u)] = self._step(link, u, v)
            steps.append(step)
        names = self.node_ids
        return build_route(tuple([names[x] for x in nodes]), steps, nodes[-1], rid,
                           self.n_devices)

    def _root_path(self, v: int, down: bool) -> tuple[tuple[str, ...], tuple[RouteStep, ...]]:
        """The node names and steps of the path from the root down to v (``down``), or from
        v up to the root: v's parent's (kept per node: the devices of a cell share the path
        above their access point) with v's link added, the same as :meth:`_build` crosses
        along :meth:`_path`."""
        kept = self._from_root if down else self._to_root
        parent, parent_link, names = self.parent.item, self.parent_link.item, self.node_ids
        chain = [v]  # v and its ancestors whose paths are not kept yet, up to the root
        while chain[-1] != self.root and (len(chain) == 1 or chain[-1] not in kept):
            chain.append(parent(chain[-1]))
        top = chain.pop()
        path: tuple[tuple[str, ...], tuple[RouteStep, ...]] = \
            ((names[top],), ()) if top == self.root else kept[top]
        step_of = self._steps
        for u in reversed(chain):  # down from the top kept (or the root) to v
            p, link = top, parent_link(u)
            sender, receiver = (p, u) if down else (u, p)
            step = step_of.get((link, sender))
            if step is None:
                step = step_of[(link, sender)] = self._step(link, sender, receiver)
            if down:
                path = (path[0] + (names[u],), path[1] + (step,))
            else:
                path = ((names[u],) + path[0], (step,) + path[1])
            if u != v:
                kept[u] = path
            top = u
        return path

    def _step(self, link: int, u: int, v: int) -> RouteStep:
        """Link ``link`` crossed from its end u to its end v (Python numbers, read once per
        link and direction used: routes share their links near the root)."""
        forward = self.link_a.item(link) == u
        station = self._member_station.item(link)
        first = self._radio_first.item(link)
        return RouteStep(
            2 * link if forward else 2 * link + 1, u, self.energy_j_per_bit.item(link),
            self.bandwidth_bps.item(link), self.latency_s.item(link), station,
            (self._member_ab.item(link) if forward else self._member_ba.item(link))
            if station >= 0 else -1,
            self.rx_energy_j_per_bit.item(link), v,
            range(first, first + self._radio_count.item(link)))

    def root_routes(self) -> dict[str, dict[str, np.ndarray]]:
        """Every device's route from the root (``down``) and back (``up``) as arrays, in one
        pass: per direction ``route_id``, ``cap_bps`` (the bottleneck, inf without hops),
        ``latency_s``, ``j_per_bit`` (the route's charges summed), ``hop_start``/``hops``/
        ``rate_ref`` and ``radio_start``/``radio_ids`` (CSR, rows = device rows), the same
        figures :meth:`route` builds one by one, summed in the same order. The ledger's books
        of these routes are not kept for every device: :meth:`route_books` gathers them for
        the routes that carry a transfer (:meth:`root_books` for some device rows)."""
        rows = np.arange(self.n_devices)
        return {name: self._root_arrays(rows, upward, books=False)
                for name, upward in (("down", False), ("up", True))}

    def root_books(self, rows: np.ndarray, upward: bool) -> dict[str, np.ndarray]:
        """What the ledger books for the routes of device ``rows`` from the root (or, with
        ``upward``, to it): ``first_sender``, ``receiver``, and the charges
        (``charge_start``/``charge_node``/``charge_j_per_bit``) and air time
        (``air_start``/``air_station``/``air_direction``) in CSR form, row k for ``rows[k]``:
        the figures :meth:`route` builds one by one."""
        return self._root_arrays(np.asarray(rows, dtype=np.intp), upward, books=True)

    def _root_arrays(self, rows: np.ndarray, upward: bool, books: bool
                     ) -> dict[str, np.ndarray]:
        """The routes of device ``rows`` from the root (``upward``: to it) as arrays: the
        route table's columns (:meth:`root_routes`), or the ledger's books (``books``)."""
        n = self.n_devices
        m = len(rows)
        chain = [rows]
        while True:  # ancestors, until every chain has reached the root
            nxt = np.where(chain[-1] >= 0, self.parent[np.maximum(chain[-1], 0)], -1)
            nxt = np.where(chain[-1] == self.root, -1, nxt)
            if not (nxt >= 0).any():
                break
            chain.append(nxt)
        edges = []  # per level: (child, parent, link, valid)
        for k in range(len(chain) - 1):
            child, par = chain[k], chain[k + 1]
            ok = (child >= 0) & (par >= 0)
            link = np.where(ok, self.parent_link[np.maximum(child, 0)], -1)
            edges.append((child, par, link, ok))
        order = edges if upward else edges[::-1]
        hop_cols, ref_cols, radio_cols = [], [], []
        charge_node, charge_j, air_station, air_dir = [], [], [], []
        cap = np.full(m, np.inf)
        latency = np.zeros(m)
        j_per_bit = np.zeros(m)
        for child, par, link, ok in order:
            lk = np.maximum(link, 0)
            sender = child if upward else par
            receiver = par if upward else child
            forward = self.link_a[lk] == sender
            hop = np.where(ok, 2 * lk + np.where(forward, 0, 1), -1)
            member = ok & (self._member_station[lk] >= 0)
            if books:
                rx = self.rx_energy_j_per_bit[lk]
                charged = ok & (rx > 0.0) & (receiver < n) & (receiver >= 0)
                charge_node += [np.where(ok, sender, -1), np.where(charged, receiver, -1)]
                charge_j += [self.energy_j_per_bit[lk], rx]
                air_station += [np.where(member, self._member_station[lk], -1)]
                air_dir += [hop]
                continue
            med = np.where(member, np.where(forward, self._member_ab[lk],
                                            self._member_ba[lk]), -1)
            hop_cols += [hop, med]
            ref_cols += [np.full(m, -1), np.where(member, hop, -1)]
            bw = np.where(ok, self.bandwidth_bps[lk], np.inf)
            cap = np.minimum(cap, bw)
            latency = np.where(ok, latency + self.latency_s[lk], latency)
            j_per_bit = np.where(ok, j_per_bit + self.energy_j_per_bit[lk], j_per_bit)
            rx = self.rx_energy_j_per_bit[lk]
            charged = ok & (rx > 0.0) & (receiver < n) & (receiver >= 0)
            j_per_bit = np.where(charged, j_per_bit + rx, j_per_bit)
            first, count = self._radio_first[lk], np.where(ok, self._radio_count[lk], 0)
            radio_cols += [np.where(count > 0, first, -1), np.where(count > 1, first + 1, -1)]
        if books:
            first = np.full(m, -1)
            if len(order):
                first = np.where(order[0][3], order[0][0] if upward else order[0][1], -1)
            empty = np.zeros((m, 0), dtype=np.intp)
            return {"first_sender": np.where(first >= 0, first, rows),  # (no hop: itself)
                    "receiver": np.full(m, self.root) if upward else rows.copy(),
                    **_csr(np.stack(charge_node, axis=1) if charge_node else empty,
                           np.stack(charge_j, axis=1) if charge_j else empty.astype(float),
                           "charge_start", "charge_node", "charge_j_per_bit"),
                    **_csr(np.stack(air_station, axis=1) if air_station else empty,
                           np.stack(air_dir, axis=1) if air_dir else empty,
                           "air_start", "air_station", "air_direction")}
        empty = np.zeros((m, 0), dtype=np.intp)
        return {"route_id": 2 * rows + (1 if upward else 0), "cap_bps": cap,
                "latency_s": latency, "j_per_bit": j_per_bit,
                **_csr(np.stack(hop_cols, axis=1) if hop_cols else empty,
                       np.stack(ref_cols, axis=1) if ref_cols else empty,
                       "hop_start", "hops", "rate_ref"),
                **_csr(np.stack(radio_cols, axis=1) if radio_cols else empty, None,
                       "radio_start", "radio_ids", "")}

    def route_books(self, ids: list[int]) -> dict[str, np.ndarray]:
        """What the ledger books per route, for routes ``ids`` (in order): first sender,
        receiver, charges (node, J/bit) and air time (station, link direction) in CSR form
        (``*_count`` per route): gathered from :meth:`root_books`' arrays for the devices'
        routes to and from the root, or built from the routes themselves where one is not."""
        rid = np.asarray(ids, dtype=np.intp)
        if not len(rid) or rid.max() >= 2 * self.n_devices:
            return route_books_of([self.routes[i] for i in ids])
        row, up = rid // 2, rid % 2 == 1
        if self.n_devices <= BOOKS_KEPT_UP_TO:  # (every route's books, gathered once)
            if self._kept_books is None:
                every = np.arange(self.n_devices)
                self._kept_books = _joined(self.root_books(every, False),
                                           self.root_books(every, True))
            books, at = self._kept_books, np.where(up, self.n_devices + row, row)
        else:  # (the routes asked for only: a fleet of a million asks for few)
            books = _joined(self.root_books(row[~up], False), self.root_books(row[up], True))
            at = np.empty(len(rid), dtype=np.intp)  # (row k of the answer: ids[k]'s)
            at[np.flatnonzero(~up)] = np.arange(int((~up).sum()))
            at[np.flatnonzero(up)] = int((~up).sum()) + np.arange(int(up.sum()))
        out = {k: books[k][at] for k in ("first_sender", "receiver")}
        for name, a, b in (("charge", "charge_node", "charge_j_per_bit"),
                           ("air", "air_station", "air_direction")):
            first, count = books[name + "_first"][at], books[name + "_count"][at]
            take = np.repeat(first - (np.cumsum(count) - count), count) \
                + np.arange(int(count.sum()))
            out[name + "_count"] = count
            out[a] = books[a][take]
            out[b] = books[b][take]
        return out

    def route_by_id(self, rid: int) -> Route:
        """The route with id ``rid`` (built if needed)."""
        if rid >= 2 * self.n_devices:
            return self._extra[rid - 2 * self.n_devices]
        row, back = divmod(rid, 2)
        root, dev = self.node_ids[self.root], self.node_ids[row]
        return self.route(dev, root) if back else self.route(root, dev)


class NodeIndex(Mapping[str, int]):
    """Node id -> index in a tree topology: the devices' dict (:attr:`devices`, which the
    device table shares, read-only) and the other nodes' (a fleet's million ids are indexed
    once, not once per table)."""

    __slots__ = ("devices", "_others")

    def __init__(self, node_ids: Sequence[str], n_devices: int) -> None:
        self.devices: dict[str, int] = dict(zip(node_ids[:n_devices], range(n_devices),
                                                strict=True))
        self._others = dict(zip(node_ids[n_devices:], range(n_devices, len(node_ids)),
                                strict=True))

    def __getitem__(self, key: str) -> int:
        i = self.devices.get(key)
        return self._others[key] if i is None else i

    def __contains__(self, key: object) -> bool:
        return key in self.devices or key in self._others

    def __iter__(self) -> Iterator[str]:
        yield from self.devices
        yield from self._others

    def __len__(self) -> int:
        return len(self.devices) + len(self._others)


class _TreeRoutes(Sequence[Route]):
    """A tree topology's routes by id, built when asked for."""

    def __init__(self, topology: TreeTopology) -> None:
        self._topology = topology

    def __len__(self) -> int:
        return 2 * self._topology.n_devices + len(self._topology._extra)

    @overload
    def __getitem__(self, i: int) -> Route: ...
    @overload
    def __getitem__(self, i: slice) -> list[Route]: ...

    def __getitem__(self, i: int | slice) -> Route | list[Route]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._topology.route_by_id(i)


def route_books_of(routes: Sequence[Route]) -> dict[str, np.ndarray]:
    """:meth:`TreeTopology.route_books` of route objects (any topology's)."""
    return {
        "first_sender": np.array([r.senders[0] if r.senders else r.receiver for r in routes],
                                 dtype=np.intp),
        "receiver": np.array([r.receiver for r in routes], dtype=np.intp),
        "charge_count": np.array([len(r.charges) for r in routes], dtype=np.intp),
        "charge_node": np.array([x for r in routes for x, _ in r.charges], dtype=np.intp),
        "charge_j_per_bit": np.array([e for r in routes for _, e in r.charges], dtype=float),
        "air_count": np.array([len(r.airtime) for r in routes], dtype=np.intp),
        "air_station": np.array([x for r in routes for x, _ in r.airtime], dtype=np.intp),
        "air_direction": np.array([d for r in routes for _, d in r.airtime], dtype=np.intp)}


def _joined(down: dict[str, np.ndarray], up: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Two sets of :meth:`TreeTopology.root_books` (rows of down routes, then of up routes)
    as one: per row its first sender, receiver, and each CSR's first entry and count
    (``charge_first``/``charge_count``, ``air_first``/``air_count``) into the values joined."""
    out = {k: np.concatenate([down[k], up[k]]) for k in ("first_sender", "receiver")}
    for name, a, b in (("charge", "charge_node", "charge_j_per_bit"),
                       ("air", "air_station", "air_direction")):
        start_d, start_u = down[name + "_start"], up[name + "_start"]
        out[name + "_first"] = np.concatenate([start_d[:-1], len(down[a]) + start_u[:-1]])
        out[name + "_count"] = np.concatenate([np.diff(start_d), np.diff(start_u)])
        out[a] = np.concatenate([down[a], up[a]])
        out[b] = np.concatenate([down[b], up[b]])
    return out


def _csr(cols: np.ndarray, refs: np.ndarray | None, start_name: str, values_name: str,
         refs_name: str) -> dict[str, np.ndarray]:
    """Rows of ``cols`` (-1: absent) in CSR form, row-major (each row's order kept), with
    the parallel ``refs``."""
    mask = cols >= 0
    start = np.zeros(len(cols) + 1, dtype=np.intp)
    np.cumsum(mask.sum(axis=1), out=start[1:])
    out = {start_name: start, values_name: cols[mask].astype(np.intp)}
    if refs is not None:
        out[refs_name] = refs[mask] if refs.dtype.kind == "f" else refs[mask].astype(np.intp)
    return out


def _depths(parent: np.ndarray, root: int) -> np.ndarray:
    """Each node's depth below ``root`` (the root 0); every node must reach the root."""
    depth = np.full(len(parent), -1, dtype=np.intp)
    depth[root] = 0
    todo = depth < 0
    for _ in range(len(parent)):
        if not todo.any():
            break
        p = parent[todo]
        known = (p >= 0) & (depth[np.maximum(p, 0)] >= 0)
        idx = np.flatnonzero(todo)[known]
        depth[idx] = depth[parent[idx]] + 1
        todo[idx] = False
    if todo.any():
        raise ValueError(f"node {int(np.flatnonzero(todo)[0])} is not connected to the root")
    return depth
