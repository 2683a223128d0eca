"""The ``baechi`` policy: model-parallel training of one replica placed by Baechi's algorithms.

At ``reset`` it builds the training-step operator graph of the scenario's model for one batch:
the graph file ``graph`` where given, a PyTorch model's own fx graph (``model: {torch: ...}``:
:mod:`netsim.torchnet.graph`), a built-in model's own layers (:mod:`netsim.opgraph.zoo`), any
other model as a chain of ``n_layers`` equal layers from its spec; then the generated backward
and update (a PyTorch model's and a ``*-train`` file's graph have theirs). It takes the
``max_devices`` fastest devices holding samples, runs m-TOPO, m-ETF and m-SCT (heterogeneous mode, the
scenario's network: its links and shared media, the engine's own topology, so a transfer
across a Wi-Fi or cellular cell is charged its air time as every other transfer is) plus the
best single device, simulates each feasible placement for one step and keeps the shortest
step: never slower than not splitting when one device holds the graph.
Each epoch it trains one model-parallel cluster on the chosen devices with all their samples
(the engine's cluster model: compute shares from the simulated step's busy times). In a
changing world, an epoch in which a placed device is away places again on the fastest
available devices (each device set placed once per run).

The first decision's ``info`` (the epochs table's ``info`` column), and that of each decision
that places again, records the placement, small enough to store per run
(:func:`placement_info`): ``placement_algorithm`` (the one chosen), ``placement_step_s``
(simulated step time of each candidate, s; null when it does not fit),
``placement_s`` (each candidate's placement wall time, s), ``placement_status`` (each
candidate's outcome), ``placement_devices`` and ``placement_memory_bytes`` (the devices placed
on and their capacities, bytes) and ``placement_peak_memory_bytes`` (the chosen placement's
peak memory per device, bytes). Every decision carries ``algorithm`` and ``step_time_s``.
"""

from __future__ import annotations

import functools
import math
from typing import Annotated, Any

import networkx as nx
import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from netsim.opgraph.backward import add_backward
from netsim.opgraph.costs import PlacementDevice
from netsim.opgraph.layers import LayerSpec, graph_from_layers
from netsim.opgraph.zoo import model_layers
from netsim.policy import ClusterDecision, Decision, Observation, register
from policies.baechi.place import Candidate, best_placement


class BaechiParams(BaseModel):
    """Parameters of the baechi policy: ``n_layers`` and ``activation_bytes_per_sample`` (bytes)
    shape models that are neither built in nor PyTorch models; ``batch_samples`` is the batch
    of one step.

    graph: an operator graph to place instead of the model's: a profile JSON file (the format
        docs/baechi.md documents; relative to the scenario file) or a built-in graph name as
        `netsim place` takes them; a graph not named ``*-train`` gets its backward added.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    n_layers: Annotated[int, Field(ge=1, le=512)] = 8
    max_devices: Annotated[int, Field(ge=1, le=16)] = 4
    batch_samples: Annotated[int, Field(ge=1, le=1_000_000)] = 32
    activation_bytes_per_sample: Annotated[float, Field(gt=0)] = 65536.0
    graph: Annotated[str, Field(min_length=1)] | None = None

    @model_serializer(mode="wrap")
    def _absent_graph_left_out(self, handler: SerializerFunctionWrapHandler) -> Any:
        """``graph`` is left out of the parameters' data while absent: the run ids of runs
        without it stay what they were."""
        data = handler(self)
        if isinstance(data, dict) and "graph" in data and data["graph"] is None:
            del data["graph"]
        return data

    @field_validator("graph")
    @classmethod
    def _graph_loads(cls, value: str | None) -> str | None:
        if value is not None:
            _file_graph(value)  # (a ValueError naming what is wrong: the field's problem)
        return value


def _file_graph(spec: str) -> nx.DiGraph:
    """The training-step graph ``spec`` names (``baechi.graph``), read once per file state."""
    import os

    try:
        stat = os.stat(spec)
        key: tuple[str, int, int] = (spec, stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = (spec, 0, 0)
    return _load_graph(*key)


@functools.lru_cache(maxsize=8)
def _load_graph(spec: str, mtime_ns: int, size: int) -> nx.DiGraph:
    from netsim.opgraph import load_graph

    try:
        graph = load_graph(spec)
    except OSError as exc:
        raise ValueError(f"cannot read {spec!r}: {exc.strerror or exc}") from None
    trained = spec.endswith("-train") or spec.startswith("transformer-") \
        or str(graph.graph.get("name", "")).endswith("-train")  # (as netsim place reads it)
    return graph if trained else add_backward(graph)


def scenario_graph(scenario: Any, p: BaechiParams) -> nx.DiGraph:
    """The training-step graph the policy places: ``p.graph`` where given, else the scenario's
    PyTorch model's own (netsim.torchnet.graph, for a batch of ``p.batch_samples``), else
    :func:`model_graph` of the model's figures."""
    m = scenario.model
    if p.graph is not None:
        return _file_graph(p.graph).copy()
    if getattr(m, "torch", None) is not None:
        from netsim.torchnet.scenario import training_graph_of

        return training_graph_of(m.torch, p.batch_samples, m.name)
    return model_graph(m.params, m.bytes_per_param, m.train_flop_per_sample, p, m.name)


def model_graph(params: float, bytes_per_param: float, train_flop_per_sample: float,
                p: BaechiParams, name: str = "") -> nx.DiGraph:
    """Training-step graph of a model for one batch of ``p.batch_samples``.

    A built-in model (``name`` in :data:`netsim.opgraph.zoo.MODEL_LAYERS`, with the built-in's
    parameter count) gets its own layer list; any other model ``n_layers`` equal layers of
    ``params / n_layers`` parameters and a third of the training FLOP (backward is twice the
    forward), each passing ``activation_bytes_per_sample`` per sample on.
    """
    layers = model_layers(name, p.batch_samples, bytes_per_param)
    if layers is not None and sum(layer.params for layer in layers) == params:
        return add_backward(graph_from_layers(layers, name=name))
    per = params / p.n_layers
    flop = train_flop_per_sample * p.batch_samples / 3.0 / p.n_layers
    act = p.activation_bytes_per_sample * p.batch_samples
    layers = [LayerSpec(f"layer{i}", flop, per, act, bytes_per_param) for i in range(p.n_layers)]
    return add_backward(graph_from_layers(layers, name="model"))


@register("baechi", "Model-parallel replica placed by Baechi (m-TOPO/m-ETF/m-SCT), shortest simulated step", BaechiParams)
class BaechiPolicy:
    def __init__(self, params: BaechiParams) -> None:
        self.name, self.params = "baechi", params
        self.best: Candidate | None = None
        self.candidates: list[Candidate] = []
        self.devices: list[str] = []
        self.capacity: list[float] = []
        self._reported = False
        self._scenario: Any = None
        self._topology: Any = None
        self._graph: nx.DiGraph | None = None
        self._placed: dict[tuple[str, ...], tuple[Candidate, list[Candidate]]] = {}

    def reset(self, scenario, rng: np.random.Generator) -> None:
        from netsim.devices import scenario_topology

        self._scenario = scenario
        self._topology = scenario_topology(scenario)  # the engine's: links and shared media
        self._graph = scenario_graph(scenario, self.params)
        self._placed = {}
        self._use(fastest_trainers(scenario.devices, self.params.max_devices))

    def _use(self, devs: list) -> None:
        """Place the graph on ``devs`` (once per device set) and make it the current placement."""
        pdevs = [PlacementDevice(d.id, d.memory_bytes, d.flop_per_s, d.power_busy_w, d.power_idle_w) for d in devs]
        key = tuple(d.id for d in pdevs)
        if key not in self._placed:
            assert self._graph is not None
            self._placed[key] = best_placement(self._graph, pdevs, "heterogeneous", self._topology)
        self.best, self.candidates = self._placed[key]
        self.devices = list(key)
        self.capacity = [float(d.memory_bytes) for d in pdevs]
        self._reported = False

    def decide(self, obs: Observation) -> Decision:
        best = self.best
        if best is not None and best.step is not None:
            placed = [self.devices[i] for i, b in enumerate(best.step.busy_s) if b > 0]
            if not all(obs.available[obs.devices.index[d]] for d in placed):
                # a changing world: a placed device is away; place again on who is here
                self._use(fastest_trainers(self._scenario.devices, self.params.max_devices,
                                           obs.available))
                best = self.best
        if best is None or best.step is None:
            reason = best.result.reason if best is not None else "reset was not called"
            return Decision(stop=True, reason=f"baechi: no feasible placement: {reason}")
        step = best.step
        used = [i for i, b in enumerate(step.busy_s) if b > 0]
        members = tuple(self.devices[i] for i in used)
        busy = np.array([step.busy_s[i] for i in used])
        share = tuple(float(x) for x in busy / busy.sum())
        idx = obs.devices.index
        held = int(sum(obs.devices.samples[idx[d]] for d in members))
        info: dict[str, Any] = {"algorithm": best.result.algorithm,
                                "step_time_s": step.step_time_s}
        if not self._reported:
            self._reported = True
            info.update(placement_info(best, self.candidates, self.devices, self.capacity))
        if held < 1:
            return Decision(stop=True, reason="baechi: the chosen devices hold no samples", info=info)
        act = step.bytes_moved / self.params.batch_samples
        cluster = ClusterDecision(members, held, share, act)
        return Decision(clusters=(cluster,), variant=0, info=info)


def fastest_trainers(devices: Any, k: int, available: np.ndarray | None = None) -> list:
    """The ``k`` fastest devices holding samples (all devices when none holds any), among the
    ``available`` ones when given; ties in the devices' order. Reads a generated fleet's arrays
    (never a spec per device: a million-device fleet takes milliseconds)."""
    fleet = getattr(devices, "fleet", None)
    if fleet is not None:
        flop, samples = np.asarray(fleet.flop_per_s), np.asarray(fleet.samples)
    else:
        flop = np.array([float(d.flop_per_s) for d in devices])
        samples = np.array([int(d.samples) for d in devices])
    here = np.ones(len(flop), dtype=bool) if available is None else np.asarray(available, dtype=bool)
    rows = np.flatnonzero((samples > 0) & here)
    if rows.size == 0:
        rows = np.flatnonzero(here)
    order = rows[np.argsort(-flop[rows], kind="stable")][:k]
    return [devices[int(i)] for i in order]


def placement_info(best: Candidate, candidates: list[Candidate], devices: list[str],
                   capacity: list[float]) -> dict[str, Any]:
    """What the policy placed, as plain JSON-able data (see the module docstring); a
    candidate that does not fit has a null step time."""
    def seconds(c: Candidate) -> float | None:
        return None if math.isinf(c.step_time_s) else float(c.step_time_s)

    def status(c: Candidate) -> str:
        return c.result.status if c.step is None else c.step.status

    peak = best.step.peak_memory_bytes if best.step is not None else []
    return {
        "placement_algorithm": best.result.algorithm,
        "placement_step_s": {c.result.algorithm: seconds(c) for c in candidates},
        "placement_s": {c.result.algorithm: float(c.result.placement_time_s) for c in candidates},
        "placement_status": {c.result.algorithm: status(c) for c in candidates},
        "placement_devices": list(devices),
        "placement_memory_bytes": [float(m) for m in capacity],
        "placement_peak_memory_bytes": [float(b) for b in peak],
    }
