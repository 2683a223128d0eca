"""``netsim place GRAPH``: place an operator graph with Baechi's algorithms and simulate a step.

Prints the step time, the peak memory per device and the placement time (``--json``: one
object with step_time_s, placement_time_s, peak_memory_bytes (list per device), status).
``--memory`` <= 1.0 is a fraction of the graph's total operator memory per device, otherwise
bytes (a number or a string with a unit, e.g. ``"4 GiB"``). Heterogeneous mode from the command
line uses identical reference devices on a star of 10 Gbit/s, 50 us links (netsim's extension;
scenarios give real devices and links through the engine).

GRAPH may be a scenario file (``.yaml``) whose model is a PyTorch model (``model: {torch:
...}``, docs/byo-model.md): its training graph is placed (:mod:`netsim.torchnet.graph`, a batch
of ``--batch`` samples), on the identical devices as any graph; the factory is imported only
with ``--allow-imports`` (a scenario file is data), else exit 2 naming ``model.torch.factory``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass

MAX_DEVICES = 64
STAR_BANDWIDTH_BPS = 10e9
STAR_LATENCY_S = 50e-6
STAR_ENERGY_J_PER_BIT = 1e-9


@dataclass
class _Link:
    a: str
    b: str
    bandwidth_bps: float = STAR_BANDWIDTH_BPS
    latency_s: float = STAR_LATENCY_S
    energy_j_per_bit: float = STAR_ENERGY_J_PER_BIT


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``place`` command."""
    p = sub.add_parser("place", help="place an operator graph (m-topo, m-etf, m-sct) and simulate one step")
    p.add_argument("graph", help="profile JSON file, built-in name (gnmt, gnmt-train, chain-N, layered-N, inception-N, transformer-N), "
                                 "or a scenario file (.yaml) whose model is a PyTorch model (model: {torch: ...}): its training graph")
    p.add_argument("--devices", default="4", help="number of identical devices, 1..64 (default 4)")
    p.add_argument("--memory", default="1.0", help="memory per device: bytes, or a fraction <= 1.0 of the graph's total operator memory")
    p.add_argument("--algorithm", default="m-etf",
                   help="m-topo, m-etf, m-sct, m-sct-urgent (with Baechi's urgent clause), single, best (the shortest step of those four, as the baechi policy) "
                        "or optimum (default m-etf)")
    p.add_argument("--mode", default="faithful", help="faithful (Baechi's cost model) or heterogeneous (netsim's extension)")
    p.add_argument("--forward-only", action="store_true", help="place the forward graph only (default: forward + backward + update)")
    p.add_argument("--no-group", action="store_true", help="skip co-placement grouping and fusion")
    p.add_argument("--seed", type=int, default=0, help="seed of synthetic graphs")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--gantt", metavar="FILE.png", help="write a Gantt chart and memory plot of the step")
    p.add_argument("--batch", type=int, default=None, metavar="N",
                   help="a scenario's PyTorch model: samples per training step (default: the scenario's baechi.batch_samples, else 32)")
    p.add_argument("--allow-imports", action="store_true",
                   help="import the model factory a scenario file names (a file is data: without this flag netsim refuses to run its code)")
    p.set_defaults(func=run)


def _invalid(message: str) -> int:
    print(f"netsim place: {message}", file=sys.stderr)
    return 2


def _memory(text: str, total_bytes: float) -> float:
    try:
        value = float(text)
    except ValueError:
        from netsim.units import registry

        value = float(registry().Quantity(text).to("byte").magnitude)
    if not value > 0 or math.isinf(value):
        raise ValueError
    return value * total_bytes if value <= 1.0 else value


def run(args: argparse.Namespace) -> int:
    """Run the command; returns the exit code (2 on invalid input)."""
    from netsim.opgraph import add_backward, identical_devices, load_graph, total_memory_bytes
    from policies.baechi.place import ALGORITHMS

    try:
        n_dev = int(args.devices)
        if not 1 <= n_dev <= MAX_DEVICES:
            raise ValueError
    except ValueError:
        return _invalid(f"--devices: must be an integer in [1, {MAX_DEVICES}], got {args.devices!r}")
    algorithms = [*ALGORITHMS, "best", "optimum"]
    if args.algorithm not in algorithms:
        return _invalid(f"--algorithm: must be one of {', '.join(algorithms)}, got {args.algorithm!r}")
    if args.mode not in ("faithful", "heterogeneous"):
        return _invalid(f"--mode: must be faithful or heterogeneous, got {args.mode!r}")
    if args.batch is not None and not 1 <= args.batch <= 1_000_000:
        return _invalid(f"--batch: must be an integer in [1, 1000000], got {args.batch}")
    if args.graph.endswith((".yaml", ".yml")):
        try:
            graph = scenario_graph(args.graph, args.batch, bool(args.allow_imports))
        except ValueError as exc:  # (a ScenarioError: each problem on a line)
            problems = getattr(exc, "problems", None)
            return _invalid("; ".join(str(p) for p in problems) if problems else str(exc))
    else:
        if args.batch is not None:
            return _invalid("--batch: only a scenario's PyTorch model takes it (a graph file has its batch)")
        try:
            graph = load_graph(args.graph, seed=args.seed)
        except (ValueError, OSError) as exc:
            return _invalid(f"GRAPH: {exc}")
    trained = args.graph.endswith("-train") or args.graph.startswith("transformer-") \
        or str(graph.graph.get("name", "")).endswith("-train")  # a file of a training graph
    if not args.forward_only and not trained:
        graph = add_backward(graph)
    total = total_memory_bytes(graph)
    try:
        memory = _memory(args.memory, total)
    except Exception:  # pint raises several types on garbage
        return _invalid(f"--memory: must be bytes > 0 (number or e.g. '4 GiB') or a fraction in (0, 1.0], got {args.memory!r}")
    devices = identical_devices(n_dev, memory)
    topology = None
    if args.mode == "heterogeneous":
        from netsim.network import Topology

        topology = Topology([d.id for d in devices] + ["switch"], [_Link(d.id, "switch") for d in devices])
    if args.algorithm == "optimum":
        return _optimum(graph, devices, args, topology)
    return _place(graph, devices, args, topology)


def scenario_graph(path: str, batch: int | None, allow_imports: bool):
    """The training-step graph of the PyTorch model scenario file ``path`` names (its factory
    imported only with ``allow_imports``: netsim.scenario.trust), for a batch of ``batch``
    (default: the scenario's ``policies.baechi.batch_samples``, else 32).

    Raises
    ------
    ScenarioError
        The scenario is invalid, its model is no PyTorch model, the import is refused, or the
        model cannot be traced (each naming its field).
    """
    from netsim.scenario.errors import Problem, ScenarioError
    from netsim.scenario.loading import validate_scenario
    from netsim.scenario.torch_model import default_name, model_imports, source_of
    from netsim.scenario.trust import ImportGate, import_gate, refusals
    from netsim.torchnet.scenario import training_graph_of
    from policies.baechi.policy import BaechiParams

    scenario = validate_scenario(path).raise_for()
    source = source_of(scenario.model)
    if source is None:
        raise ScenarioError([Problem("model", "GRAPH: this scenario's model is not a PyTorch model "
                                              "(model: {torch: {factory: ..., input_shape: ...}}); "
                                              "give a graph file or a built-in graph")])
    refused = refusals(model_imports(scenario.model), ImportGate(allow_all=allow_imports))
    if refused:
        raise ScenarioError(refused)
    if batch is None:
        block = scenario.policies.get("baechi", {})
        batch = BaechiParams.model_validate(block).batch_samples if block else 32
    name = getattr(scenario.model, "name", None) or default_name(source.factory)
    with import_gate(allow_all=allow_imports):
        return training_graph_of(source, batch, name)


def _place(graph, devices, args, topology) -> int:
    from policies.baechi.place import place, simulate

    res = place(graph, devices, args.algorithm, args.mode, topology, group=not args.no_group)
    step = simulate(res, devices, topology) if res.ok else None
    status = res.status if step is None else step.status
    out = {
        "graph": args.graph,
        "algorithm": args.algorithm,
        "chosen": res.algorithm,
        "mode": args.mode,
        "operators": graph.number_of_nodes(),
        "placed_operators": res.graph.number_of_nodes() if res.graph is not None else 0,
        "devices": len(devices),
        "memory_per_device_bytes": devices[0].memory_bytes,
        "status": status,
        "reason": res.reason or (step.reason if step else ""),
        "step_time_s": step.step_time_s if step and step.status == "ok" else None,
        "placement_time_s": res.placement_time_s,
        "peak_memory_bytes": step.peak_memory_bytes if step else [],
        "bytes_moved": step.bytes_moved if step else 0.0,
        "energy_j": step.energy_j if step else 0.0,
    }
    if args.gantt and step is not None:
        from plots.baechi import gantt_figure

        gantt_figure({**step_record(step, devices), "graph": args.graph,
                      "algorithm": args.algorithm, "chosen": res.algorithm,
                      "mode": args.mode}, args.gantt)
    _print(out, args.json)
    return 0 if status == "ok" else 1


def step_record(step, devices) -> dict:
    """A step's operators, transfers and memory traces as plain JSON-able data (for plots)."""
    return {
        "devices": [d.id for d in devices],
        "memory_bytes": [d.memory_bytes for d in devices],
        "step_time_s": step.step_time_s,
        "ops": [[str(n), d, s, e] for n, d, s, e in step.ops],
        "transfers": [[str(n), a, b, nb, s, e] for n, a, b, nb, s, e in step.transfers],
        "memory_trace": step.memory_trace,
    }


def _optimum(graph, devices, args, topology) -> int:
    from policies.baechi.optimum import placement_optimum

    try:
        opt = placement_optimum(graph, devices, args.mode, topology)
    except ValueError as exc:
        return _invalid(f"--algorithm optimum: {exc}")
    out = {"graph": args.graph, "algorithm": "optimum", "status": opt.status,
           "step_time_s": opt.step_time_s, "lower_bound_s": opt.lower_bound_s,
           "placement_time_s": None, "peak_memory_bytes": []}
    _print(out, args.json)
    return 0 if opt.status == "optimal" else 1


def _print(out: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(out))
        return
    if out["status"] != "ok" and out.get("reason"):
        print(f"status: {out['status']}: {out['reason']}")
    else:
        print(f"status: {out['status']}")
    if out.get("step_time_s") is not None:
        chosen = f" ({out['chosen']})" if out.get("algorithm") == "best" else ""
        print(f"step time: {out['step_time_s'] * 1e3:.3f} ms{chosen}")
    if out.get("placement_time_s") is not None:
        print(f"placement time: {out['placement_time_s'] * 1e3:.1f} ms "
              f"({out.get('operators')} operators, {out.get('placed_operators')} after grouping)")
    for d, peak in enumerate(out.get("peak_memory_bytes", [])):
        print(f"  device {d}: peak memory {peak / 2**20:.1f} MiB")
