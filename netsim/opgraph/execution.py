"""Execute a placement of an operator graph as SimPy processes: one training step.

Each device runs one operator at a time. With a planned ``order`` (what the placers return) a
device runs its operators in that order, each when its inputs have arrived; without one it runs
the ready operator of lowest topological index. A tensor crossing devices is sent once per
(tensor, destination device), as soon as the producer ends. An operator has one tensor,
``send_bytes`` (see :func:`netsim.opgraph.graph.send_bytes`), unless the graph's edges name
their tensors (``tensors``, faithful mode: each distinct output is its own transfer, as in
Baechi; see :class:`netsim.opgraph.costs.IndexedGraph`):

- faithful mode: over Baechi's linear cost, occupying the sender's and the receiver's channel
  (in the plan's ``transfer_order`` when given, else first come first served);
- heterogeneous mode: through :class:`netsim.network.FlowNetwork` over the topology (max-min
  sharing, communication energy charged to the senders).

Memory per device: persistent bytes all step; temporary bytes while an operator runs; its
output from its start until its local consumers and its outgoing transfers have ended; a
received tensor from the transfer's start until its consumers on that device have ended. At
equal times frees come first. Exceeding a device's memory is an ``oom`` outcome (device, bytes,
time), never an exception.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx
import simpy

from netsim.energy import EnergyMeter
from netsim.opgraph.costs import CostModel, DeviceLike, IndexedGraph
from netsim.opgraph.graph import send_bytes

_MEMORY_REL_TOL = 1e-9


@dataclass(frozen=True)
class OutOfMemory:
    """Where and when a device's memory was exceeded: peak demand vs limit (bytes), time (s)."""

    device: str
    device_index: int
    required_bytes: float
    limit_bytes: float
    time_s: float


@dataclass
class StepResult:
    """Outcome of one simulated training step.

    Attributes
    ----------
    status
        ``"ok"``, ``"oom"`` (see ``oom``) or ``"failed"`` (see ``reason``).
    step_time_s
        Makespan of the step (s); NaN unless status is ok.
    peak_memory_bytes
        Peak memory per device (bytes), in device order.
    bytes_moved
        Bytes sent between devices.
    busy_s, energy_compute_j, energy_comm_j, energy_idle_j
        Per device (s, J); idle energy over the step's duration.
    ops, transfers
        ``(node, device, start_s, end_s)`` and ``(node, src, dst, bytes, start_s, end_s)``.
    memory_trace
        Per device, ``(time_s, level_bytes)`` after each change.
    """

    status: str
    step_time_s: float
    peak_memory_bytes: list[float]
    bytes_moved: float = 0.0
    busy_s: list[float] = field(default_factory=list)
    energy_compute_j: list[float] = field(default_factory=list)
    energy_comm_j: list[float] = field(default_factory=list)
    energy_idle_j: list[float] = field(default_factory=list)
    oom: OutOfMemory | None = None
    reason: str = ""
    ops: list = field(default_factory=list)
    transfers: list = field(default_factory=list)
    memory_trace: list = field(default_factory=list)

    @property
    def energy_j(self) -> float:
        """Total energy of the step (J)."""
        return float(sum(self.energy_compute_j) + sum(self.energy_comm_j) + sum(self.energy_idle_j))


def _resolve(graph: nx.DiGraph, placement: dict, devices: Sequence[DeviceLike]) -> dict:
    ids = {d.id: i for i, d in enumerate(devices)}
    out = {}
    for n in graph.nodes:
        if n not in placement:
            raise ValueError(f"placement: operator {n!r} has no device")
        d = placement[n]
        d = ids.get(d, d) if isinstance(d, str) else d
        if not isinstance(d, int) or not 0 <= d < len(devices):
            raise ValueError(f"placement[{n!r}]: device must be an index in [0, {len(devices) - 1}] or a device id")
        out[n] = d
    return out


def execute_placement(
    graph: nx.DiGraph,
    placement: dict,
    devices: Sequence[DeviceLike],
    topology=None,
    mode: str = "faithful",
    order: dict | None = None,
    transfer_order: list | None = None,
    release_s: dict | None = None,
) -> StepResult:
    """Simulate one step of ``graph`` placed on ``devices``.

    Parameters
    ----------
    graph
        Operator graph.
    placement
        Node -> device index (or device id).
    devices
        Devices: ``id``, ``memory_bytes``; ``flop_per_s`` (heterogeneous), ``power_busy_w`` and
        ``power_idle_w`` (W) when present.
    topology
        :class:`netsim.network.Topology` containing the device ids (heterogeneous mode).
    mode
        ``"faithful"`` or ``"heterogeneous"``.
    order, transfer_order
        The plan's operator ranks and channel reservation order (from a ``PlacementResult``).
        In faithful mode a planned transfer holds the sender's channel from its start and the
        receiver's from when that is free too, each for the transfer time (Baechi's channels).
    release_s
        Node -> earliest start (s): the plan's starts in faithful mode, where Baechi's scheduler
        lets an idle device start nothing before the time it decides (with ``order``).

    Returns
    -------
    StepResult

    Raises
    ------
    ValueError
        If the placement misses an operator or names an unknown device, or heterogeneous mode
        lacks a topology.
    """
    if mode == "heterogeneous" and topology is None:
        raise ValueError("topology: required in heterogeneous mode")
    where = _resolve(graph, placement, devices)
    ig = IndexedGraph(graph, per_tensor=mode == "faithful")
    cost = CostModel(ig, devices, mode, topology)
    return _Step(ig, cost, [where[n] for n in ig.nodes], devices, topology, order, transfer_order, release_s).run()


class _Step:
    def __init__(self, ig, cost, dev, devices, topology, order, transfer_order, release_s=None) -> None:
        self.ig, self.cost, self.dev, self.devices = ig, cost, dev, devices
        self.release = [release_s.get(n, 0.0) for n in ig.nodes] if release_s is not None else None
        self.env = env = simpy.Environment()
        nd = len(devices)
        busy_w = [float(getattr(d, "power_busy_w", 0.0)) for d in devices]
        idle_w = [float(getattr(d, "power_idle_w", 0.0)) for d in devices]
        self.net = None
        if cost.mode == "heterogeneous":
            from netsim.network import FlowNetwork

            extra = len(topology.node_ids)
            mi = [topology.index[d.id] for d in devices]
            pb, pi = [0.0] * extra, [0.0] * extra
            for k, j in enumerate(mi):
                pb[j], pi[j] = busy_w[k], idle_w[k]
            self.meter, self.meter_index = EnergyMeter(pb, pi), mi
            self.net = FlowNetwork(env, topology, self.meter)
        else:
            self.meter, self.meter_index = EnergyMeter(busy_w, idle_w), list(range(nd))
        n = len(ig)
        self.done = [env.event() for _ in range(n)]
        self.log: list[list[tuple[float, float]]] = [[(0.0, 0.0)] for _ in range(nd)]
        for i in range(n):
            self.log[dev[i]][0] = (0.0, self.log[dev[i]][0][1] + ig.memory_bytes[i])
        # transfers: one per (tensor, remote device)
        self.consumers_on: dict[tuple[int, int], int] = {}
        for v in range(n):
            for u, ts in zip(ig.preds[v], ig.in_tensors[v], strict=True):
                if dev[v] != dev[u]:
                    for t in ts:
                        self.consumers_on[(t, dev[v])] = self.consumers_on.get((t, dev[v]), 0) + 1
        self.pending_out = [sum(1 for v in ig.succs[i] if dev[v] == dev[i]) for i in range(n)]
        for t, _d in self.consumers_on:
            self.pending_out[ig.tensor_src[t]] += 1
        self.arrive = {k: env.event() for k in self.consumers_on}
        self.ops: list = []
        self.transfers: list = []
        self.finished = 0
        rank = {ig.index[k]: r for k, r in order.items()} if order is not None else None
        for d in range(nd):
            mine = [i for i in range(n) if dev[i] == d]
            if rank is not None:
                mine.sort(key=lambda i: (rank.get(i, math.inf), i))
            env.process(self._device(d, mine, rank is not None))
        self._start_transfers(transfer_order)

    # -- memory ---------------------------------------------------------------------------
    def _mem(self, d: int, delta: float) -> None:
        if delta:
            self.log[d].append((self.env.now, delta))

    def _release_output(self, i: int) -> None:
        self.pending_out[i] -= 1
        if self.pending_out[i] == 0:
            self._mem(self.dev[i], -self.ig.output_bytes[i])

    # -- processes ------------------------------------------------------------------------
    def _inputs(self, i: int, d: int):
        evs = []
        for u, ts in zip(self.ig.preds[i], self.ig.in_tensors[i], strict=True):
            if self.dev[u] == d:
                evs.append(self.done[u])
            else:
                evs.extend(self.arrive[(t, d)] for t in ts)
        return self.env.all_of(evs)

    def _device(self, d: int, mine: list[int], strict: bool):
        if strict:
            for i in mine:
                yield self._inputs(i, d)
                if self.release is not None and self.env.now < self.release[i]:
                    yield self.env.timeout(self.release[i] - self.env.now)
                yield from self._run(i, d)
            return
        ready: list[int] = []
        wake: list[simpy.Event | None] = [None]
        for i in mine:
            self.env.process(self._when_ready(i, d, ready, wake))
        for _ in mine:
            while not ready:
                wake[0] = self.env.event()
                yield wake[0]
            yield from self._run(heapq.heappop(ready), d)

    def _when_ready(self, i: int, d: int, ready: list[int], wake: list):
        yield self._inputs(i, d)
        heapq.heappush(ready, i)
        if wake[0] is not None and not wake[0].triggered:
            wake[0].succeed()

    def _run(self, i: int, d: int):
        env, ig = self.env, self.ig
        start = env.now
        self._mem(d, ig.temporary_bytes[i] + ig.output_bytes[i])
        self.meter.set_busy(self.meter_index[d], start)
        yield env.timeout(self.cost.compute_s[i][d])
        self.meter.set_idle(self.meter_index[d], env.now)
        self._mem(d, -ig.temporary_bytes[i])
        self.ops.append((ig.nodes[i], d, start, env.now))
        self.finished += 1
        if not ig.succs[i]:
            self._mem(d, -ig.output_bytes[i])
        for u, ts in zip(ig.preds[i], ig.in_tensors[i], strict=True):
            if self.dev[u] == d:
                self._release_output(u)
                continue
            for t in ts:
                key = (t, d)
                self.consumers_on[key] -= 1
                if self.consumers_on[key] == 0:
                    self._mem(d, -ig.tensor_bytes[t])
        self.done[i].succeed()

    def _start_transfers(self, transfer_order) -> None:
        ig, env = self.ig, self.env
        keys = list(self.consumers_on)
        if transfer_order is not None and self.cost.mode == "faithful":
            tid = ig.tensor_index
            planned = [(tid.get((ig.index[x[0]], x[2] if len(x) > 2 else None)), x[1]) for x in transfer_order]
            if set(planned) == set(keys):
                last: dict[int, simpy.Event] = {}
                for t, d in planned:
                    u = ig.tensor_src[t]
                    src = self.dev[u]
                    sent = env.event()
                    deps = [self.done[u]] + ([last[src]] if src in last else [])
                    env.process(self._send_split(t, src, d, deps, [last[d]] if d in last else [], sent))
                    last[src], last[d] = sent, self.arrive[(t, d)]
                return
        channels = [simpy.Resource(env, 1) for _ in self.devices]
        for t, d in sorted(keys, key=lambda k: (ig.tensor_src[k[0]], k)):
            u = ig.tensor_src[t]
            env.process(self._send(t, self.dev[u], d, [self.done[u]], channels))

    def _send_split(self, t: int, src: int, dst: int, send_deps, recv_deps, sent):
        """Baechi's transfer: the send holds ``src``'s channel for the transfer time from when the
        producer has ended and it is free; the receive holds ``dst``'s for as long from when the
        send has started and it is free (``placer/device.py``)."""
        env, nbytes, u = self.env, self.ig.tensor_bytes[t], self.ig.tensor_src[t]
        yield env.all_of(send_deps)
        start, w = env.now, self.cost.comm_s(nbytes, src, dst)
        env.process(self._fire_after(sent, w))
        self._mem(dst, nbytes)
        yield env.all_of(recv_deps)
        yield env.timeout(w)
        self.transfers.append((self.ig.nodes[u], src, dst, nbytes, start, env.now))
        self._release_output(u)
        self.arrive[(t, dst)].succeed()

    def _fire_after(self, ev, delay: float):
        yield self.env.timeout(delay)
        ev.succeed()

    def _send(self, t: int, src: int, dst: int, deps, channels):
        env, nbytes, u = self.env, self.ig.tensor_bytes[t], self.ig.tensor_src[t]
        yield env.all_of(deps)
        if self.net is not None:
            start = env.now
            self._mem(dst, nbytes)
            yield self.net.transfer(self.devices[src].id, self.devices[dst].id, nbytes)
        elif channels is None:
            start = env.now
            self._mem(dst, nbytes)
            yield env.timeout(self.cost.comm_s(nbytes, src, dst))
        else:
            a, b = sorted((src, dst))
            with channels[a].request() as ra:
                yield ra
                with channels[b].request() as rb:
                    yield rb
                    start = env.now
                    self._mem(dst, nbytes)
                    yield env.timeout(self.cost.comm_s(nbytes, src, dst))
        self.transfers.append((self.ig.nodes[u], src, dst, nbytes, start, env.now))
        self._release_output(u)
        self.arrive[(t, dst)].succeed()

    # -- result ---------------------------------------------------------------------------
    def run(self) -> StepResult:
        self.env.run()
        end = self.env.now
        traces, peaks, oom = [], [], None
        for d, events in enumerate(self.log):
            level, peak, trace = 0.0, 0.0, []
            limit = float(self.devices[d].memory_bytes)
            for t, delta in sorted(events):
                level += delta
                trace.append((t, level))
                if level > peak:
                    peak = level
                    if oom is None and level > limit * (1 + _MEMORY_REL_TOL):
                        oom = OutOfMemory(self.devices[d].id, d, level, limit, t)
            traces.append(trace)
            peaks.append(peak)
        snap = self.meter.snapshot(end)
        mi = self.meter_index
        res = StepResult("ok", end, peaks, memory_trace=traces, ops=self.ops, transfers=self.transfers)
        res.bytes_moved = float(sum(t[3] for t in self.transfers))
        res.busy_s = [float(snap.busy_s[j]) for j in mi]
        res.energy_compute_j = [float(snap.compute_j[j]) for j in mi]
        res.energy_idle_j = [float(snap.idle_j[j]) for j in mi]
        res.energy_comm_j = [float(snap.communication_j[j]) for j in mi]
        if self.finished < len(self.ig):
            res.status, res.step_time_s = "failed", math.nan
            res.reason = f"deadlock: {len(self.ig) - self.finished} operators never ran (order inconsistent with the graph)"
        elif oom is not None:
            res.status, res.step_time_s, res.oom = "oom", math.nan, oom
            res.reason = (f"out of memory on {oom.device}: {oom.required_bytes:.4g} bytes needed, "
                          f"{oom.limit_bytes:.4g} available, at {oom.time_s:.6g} s")
        return res


__all__ = ["OutOfMemory", "StepResult", "execute_placement", "send_bytes"]
