"""Devices and cost models for placing and executing operator graphs.

Two modes:

- ``faithful``: Baechi's model. Identical devices running each operator for its profiled
  reference time; a transfer of b bytes between any two devices takes
  ``FAITHFUL_S_PER_BYTE * b + FAITHFUL_LATENCY_S`` (their fitted GPU-to-GPU line,
  0.0001754 us/byte + 134 us), rounded to whole microseconds as Baechi's ``get_comm_cost``,
  once per tensor, and each device has one channel serialising its sends and receives.
- ``heterogeneous`` (netsim's extension): an operator takes ``flop / flop_per_s`` on each device;
  a transfer takes ``8 b / bottleneck_bps + latency_s`` over the scenario's route (planning
  estimate); execution moves tensors through the engine's flow network (max-min sharing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import networkx as nx
import numpy as np

from netsim.opgraph.graph import (
    REFERENCE_FLOP_PER_S,
    attrs_reference_time_s,
    node_time_s,
    out_edges_send_bytes,
)

FAITHFUL_S_PER_BYTE = 0.0001754e-6
FAITHFUL_LATENCY_S = 134e-6
MODES = ("faithful", "heterogeneous")


class DeviceLike(Protocol):
    """What placement needs of a device (the scenario's devices fit)."""

    @property
    def id(self) -> str: ...

    @property
    def memory_bytes(self) -> float: ...


@dataclass(frozen=True)
class PlacementDevice:
    """A device for placement: id, memory (bytes), speed (FLOP/s), power busy/idle (W)."""

    id: str
    memory_bytes: float
    flop_per_s: float = REFERENCE_FLOP_PER_S
    power_busy_w: float = 0.0
    power_idle_w: float = 0.0


def identical_devices(n: int, memory_bytes: float, **kwargs: float) -> list[PlacementDevice]:
    """``n`` identical devices ``gpu0..gpu{n-1}`` of ``memory_bytes`` each (bytes)."""
    return [PlacementDevice(f"gpu{i}", float(memory_bytes), **kwargs) for i in range(n)]


class IndexedGraph:
    """A graph's operators in topological order with array attributes (for the placers).

    Nodes that all carry ``topo_rank`` are ordered by it instead (Baechi's tie order on a fused
    graph, which need not be topological; the placers only use the order to break ties).

    Attributes: ``nodes`` (index -> node), ``index`` (node -> index), ``preds``/``succs``
    (index lists), ``time_ref_s``, ``memory_bytes``, ``temporary_bytes``, ``output_bytes``,
    ``send_bytes`` (lists), ``group`` (index -> colocation group id or -1).

    Tensors, what crosses devices (each is sent at most once to each device): ``tensor_src``,
    ``tensor_bytes``, ``tensor_key`` (per tensor id), ``out_tensors[u]`` (u's tensor ids) and
    ``in_tensors[i][k]`` (the tensor ids on the edge ``preds[i][k] -> i``). With
    ``per_tensor`` and edges carrying ``tensors`` (a list of ``(key, bytes)``, one per distinct
    output of the producer on that edge, as Baechi's placement graph: see
    :func:`netsim.opgraph.profile.load_profile`), an edge's tensors are those; otherwise each
    producer has one tensor of ``send_bytes`` (key ``None``) that every out-edge carries.
    ``per_tensor`` (bool) says whether any edge had ``tensors``.
    """

    def __init__(self, graph: nx.DiGraph, per_tensor: bool = True) -> None:
        self.graph = graph
        ranks = dict(graph.nodes(data="topo_rank"))
        if ranks and None not in ranks.values():  # Baechi's tie order (see grouping.baechi_topo_rank)
            self.nodes = sorted(graph.nodes, key=ranks.__getitem__)
        else:
            self.nodes = list(nx.topological_sort(graph))
        self.index = idx = {n: i for i, n in enumerate(self.nodes)}
        self.preds: list[list[int]] = []
        self.succs: list[list[int]] = []
        self.time_ref_s: list[float] = []
        self.memory_bytes: list[float] = []
        self.temporary_bytes: list[float] = []
        self.output_bytes: list[float] = []
        self.send_bytes: list[float] = []
        self.group: list[int] = []
        keys: dict[str, int] = {}
        succ = dict(graph.adjacency())  # node -> {successor: edge attributes}
        data = dict(graph.nodes(data=True))
        for n in self.nodes:  # one pass: faster than a comprehension per attribute
            out_edges, a = succ[n], data[n]
            self.preds.append([idx[u] for u in graph.predecessors(n)])
            self.succs.append([idx[v] for v in out_edges])
            self.send_bytes.append(out_edges_send_bytes(out_edges))
            self.time_ref_s.append(attrs_reference_time_s(a))
            self.memory_bytes.append(float(a.get("memory_bytes", 0.0)))
            self.temporary_bytes.append(float(a.get("temporary_bytes", 0.0)))
            self.output_bytes.append(float(a.get("output_bytes", 0.0)))
            self.group.append(keys.setdefault(a["colocation"], len(keys)) if "colocation" in a else -1)
        self.n_groups = len(keys)
        self._tensors(graph, per_tensor)

    def _tensors(self, graph: nx.DiGraph, per_tensor: bool) -> None:
        self.tensor_src: list[int] = []
        self.tensor_bytes: list[float] = []
        self.tensor_key: list = []
        self.out_tensors: list[list[int]] = [[] for _ in self.nodes]
        self.in_tensors: list[list[list[int]]] = []
        self.tensor_index: dict = {}
        self.per_tensor = False
        tid = self.tensor_index

        def tensor(u: int, key, nbytes: float) -> int:
            t = tid.get((u, key))
            if t is None:
                t = tid[(u, key)] = len(self.tensor_src)
                self.tensor_src.append(u)
                self.tensor_bytes.append(nbytes)
                self.tensor_key.append(key)
                self.out_tensors[u].append(t)
            elif nbytes > self.tensor_bytes[t]:
                self.tensor_bytes[t] = nbytes
            return t

        nodes, pred = self.nodes, graph.pred
        for i, n in enumerate(nodes):
            row = []
            for ui in self.preds[i]:
                ts = pred[n][nodes[ui]].get("tensors") if per_tensor else None
                if ts:
                    self.per_tensor = True
                    row.append([tensor(ui, key, float(b)) for key, b in ts])
                else:
                    row.append([tensor(ui, None, self.send_bytes[ui])])
            self.in_tensors.append(row)

    def __len__(self) -> int:
        return len(self.nodes)


class CostModel:
    """Compute and transfer times of an :class:`IndexedGraph` on a list of devices.

    Parameters
    ----------
    ig
        The indexed graph.
    devices
        Devices (``memory_bytes``; ``flop_per_s`` used in heterogeneous mode).
    mode
        ``"faithful"`` or ``"heterogeneous"``.
    topology
        A :class:`netsim.network.Topology` holding the device ids (heterogeneous mode only;
        ``None`` there means all pairs at the faithful line's cost).

    Raises
    ------
    ValueError
        On an unknown mode or a device pair without a route.
    """

    def __init__(self, ig: IndexedGraph, devices: Sequence[DeviceLike], mode: str = "faithful", topology=None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: must be one of {MODES}, got {mode!r}")
        self.mode, self.n_devices = mode, len(devices)
        self.memory_bytes = [float(d.memory_bytes) for d in devices]
        n_dev = len(devices)
        if mode == "faithful":
            self.compute_s = [[t] * n_dev for t in ig.time_ref_s]
        else:
            speeds = [float(getattr(d, "flop_per_s", REFERENCE_FLOP_PER_S)) for d in devices]
            self.compute_s = [[node_time_s(ig.graph, n, s) for s in speeds] for n in ig.nodes]
        self.s_per_byte = np.full((n_dev, n_dev), FAITHFUL_S_PER_BYTE)
        self.latency_s = np.full((n_dev, n_dev), FAITHFUL_LATENCY_S)
        if mode == "heterogeneous" and topology is not None:
            for a, da in enumerate(devices):
                for b, db in enumerate(devices):
                    if a != b:
                        route = topology.route(da.id, db.id)
                        self.s_per_byte[a, b] = 8.0 / route.bottleneck_bps
                        self.latency_s[a, b] = route.latency_s
        np.fill_diagonal(self.s_per_byte, 0.0)
        np.fill_diagonal(self.latency_s, 0.0)
        self._spb = self.s_per_byte.tolist()
        self._lat = self.latency_s.tolist()
        self.round_us = mode == "faithful"  # Baechi's cost function rounds to whole microseconds

    def comm_s(self, nbytes: float, src: int, dst: int) -> float:
        """Time to move ``nbytes`` (bytes) from device ``src`` to ``dst`` when alone (s)."""
        if src == dst:
            return 0.0
        t = self._spb[src][dst] * nbytes + self._lat[src][dst]
        return round(t * 1e6) * 1e-6 if self.round_us else t

    def comm_row_s(self, nbytes: float, src: int) -> list[float]:
        """:meth:`comm_s` of ``nbytes`` (bytes) from ``src`` to each device in turn (s), 0.0 to
        ``src`` itself."""
        spb, lat = self._spb[src], self._lat[src]
        if self.round_us:
            return [round((spb[d] * nbytes + lat[d]) * 1e6) * 1e-6 for d in range(self.n_devices)]
        return [spb[d] * nbytes + lat[d] for d in range(self.n_devices)]

    def mean_comm_s(self, nbytes: float) -> float:
        """Average over ordered device pairs of :meth:`comm_s` (s); 0 with one device."""
        return float(self.mean_comm_array_s(np.asarray([nbytes], dtype=float))[0])

    def mean_comm_array_s(self, nbytes: np.ndarray) -> np.ndarray:
        """:meth:`mean_comm_s` of each entry of ``nbytes`` (bytes), as an array (s)."""
        n = self.n_devices
        if n < 2:
            return np.zeros(len(nbytes))
        off = ~np.eye(n, dtype=bool)
        t = self.s_per_byte[off] * nbytes[:, None] + self.latency_s[off]
        if self.round_us:
            t = np.round(t * 1e6) * 1e-6
        return np.mean(t, axis=1)
