"""``netsim models inspect|graph MODEL``: your own PyTorch model's workload and operator graph.

``MODEL`` is a built-in torch network (``small-cnn``, ``cnn-mnist``, ``mlp-digits``: their
input shapes are known), ``pkg.mod:factory`` or ``path/to/file.py:factory``. Importing a module
runs its code; netsim's rule (netsim.scenario.trust, docs/cli.md "Imports") is that a name typed
on the command line is the user's word, so the MODEL you type is imported as it is (and
``--allow-imports``, accepted as ``netsim run`` accepts it, changes nothing here: this command
reads no file that names code).

Every invalid input is one line on stderr naming what is wrong, exit 2, nothing written: a
factory that raises, an input shape that does not fit the model, a model that cannot be
traced, torch missing. torch is imported only here (never by ``import netsim``).
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.util import find_spec

MISSING_TORCH = 'torch is not installed: pip install -e ".[torch]"'


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``netsim models`` beyond the plain list."""
    p.add_argument("action", nargs="?", choices=["list", "inspect", "graph"], default="list",
                   help="list (default): the built-in models; inspect: measure your PyTorch "
                        "model's workload; graph: write its training operator graph for "
                        "`netsim place`")
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="small-cnn, cnn-mnist, mlp-digits, pkg.mod:factory or "
                        "file.py:factory (a callable returning a torch.nn.Module)")
    p.add_argument("--input-shape", metavar="C,H,W",
                   help="one sample's input shape without the batch, e.g. 1,28,28 (default "
                        "for the built-in networks: theirs)")
    p.add_argument("--json", action="store_true", help="inspect: print one JSON object")
    p.add_argument("--sparse-upload", choices=["bitmap", "values", "dense"], default=None,
                   metavar="ENCODING",
                   help="inspect: how an unstructured variant's upload is counted (a "
                        "scenario's model.sparse_upload): bitmap (default: the kept values "
                        "plus one bit per prunable weight), values (the kept values only) or "
                        "dense (the whole model)")
    p.add_argument("--out", metavar="GRAPH.json", help="graph: the file to write")
    p.add_argument("--batch", type=int, default=None, metavar="N",
                   help="graph: samples per training step (default 32)")
    p.add_argument("--profile", action="store_true",
                   help="graph: time every operator (forward, backward, update) with "
                        "torch.profiler on this CPU, one thread, and write those times as "
                        "compute_us (default: FLOP at the reference speed)")
    p.add_argument("--allow-imports", action="store_true",
                   help="accepted as `netsim run` accepts it; the MODEL you type is imported "
                        "without it (a name typed on the command line is your word)")


def _fail(action: str, message: str) -> int:
    print(f"netsim models {action}: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """``netsim models inspect|graph``; returns the exit code (2 on invalid input)."""
    action = args.action
    if not args.model:
        return _fail(action, "MODEL: give a built-in network (small-cnn, cnn-mnist, "
                             "mlp-digits), pkg.mod:factory or file.py:factory")
    if action == "graph" and not args.out:
        return _fail(action, "--out: give the file to write (e.g. --out graph.json)")
    profiled = bool(getattr(args, "profile", False))
    if action == "inspect" and profiled:
        return _fail(action, "--profile: only netsim models graph takes it")
    if action == "graph" and getattr(args, "sparse_upload", None) is not None:
        return _fail(action, "--sparse-upload: only netsim models inspect takes it")
    if action == "inspect" and (args.out or args.batch is not None):
        return _fail(action, f"{'--out' if args.out else '--batch'}: only netsim models graph "
                             "takes it")
    if args.batch is not None and not 1 <= args.batch <= 1_000_000:
        return _fail(action, f"--batch: must be an integer in [1, 1000000], got {args.batch}")
    if find_spec("torch") is None:
        return _fail(action, MISSING_TORCH)
    try:
        from netsim.torchnet.graph import DEFAULT_BATCH, ModelError, training_graph, write_graph
        from netsim.torchnet.inspect import inspect_model, load_factory, make_model
    except ImportError as exc:  # a broken torch install
        return _fail(action, f"{MISSING_TORCH} ({exc})")
    try:
        factory = load_factory(args.model)
        shape = _shape(args)
        if action == "inspect":
            report = inspect_model(factory, shape, args.model,
                                   getattr(args, "sparse_upload", None) or "bitmap")
            _print(report.to_dict(), args.json)
            return 0
        graph = training_graph(make_model(factory, args.model, meta=True), shape,
                               args.batch or DEFAULT_BATCH, _graph_name(args.model))
        if profiled:  # the real model, on the CPU: timed
            from netsim.torchnet.graph import profile_times, with_times

            with_times(graph, profile_times(make_model(factory, args.model), shape,
                                            args.batch or DEFAULT_BATCH))
        write_graph(graph, args.out)
    except ModelError as exc:
        return _fail(action, str(exc))
    except OSError as exc:
        return _fail(action, f"--out: cannot write {args.out!r}: {exc.strerror or exc}")
    print(f"wrote {args.out}: {graph.number_of_nodes()} operators, {graph.number_of_edges()} "
          f"edges ({graph.graph['name']}: forward, backward and update for a batch of "
          f"{args.batch or DEFAULT_BATCH}{'; times profiled on this CPU' if profiled else ''}); "
          f"place it with `netsim place {args.out}`")
    return 0


def _shape(args: argparse.Namespace) -> tuple[int, ...]:
    from netsim.torchnet.inspect import parse_shape

    if args.input_shape:
        return parse_shape(args.input_shape)
    from netsim.torchnet.graph import ModelError
    from netsim.torchnet.zoo import INPUT_SHAPES

    if args.model in INPUT_SHAPES:
        return INPUT_SHAPES[args.model]
    raise ModelError("--input-shape: required for a model that is not built in (one "
                     "sample's shape without the batch, e.g. 1,28,28)")


def _graph_name(model: str) -> str:
    name = model.rpartition(":")[2] or model
    return name.replace("/", "-")


def _print(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report))
        return
    shape = ",".join(str(d) for d in report["input_shape"])
    print(f"{report['model']} on inputs of {shape}:")
    print(f"  params               {report['params']:>16,}")
    print(f"  upload               {report['upload_bytes']:>16,.0f} bytes (dense)")
    print(f"  forward              {report['forward_flop_per_sample']:>16.4g} FLOP/sample")
    print(f"  training             {report['train_flop_per_sample']:>16.4g} FLOP/sample "
          f"({report['train_flop_per_sample'] / max(report['forward_flop_per_sample'], 1):.3f}"
          " x forward)")
    print(f"  activations          {report['activation_bytes_per_sample']:>16,.0f} bytes/sample")
    print(f"  parameter memory     {report['param_memory_bytes']:>16,.0f} bytes")
    print(f"  prunable             {report['prunable_params']:>16,} params (weights of 2+ "
          "dimensions)")
    print("  variants (name, kind, params_fraction, flop_fraction, upload bytes; "
          f"unstructured: {report['sparse_upload']}):")
    for v in report["variants"]:
        print(f"    {v['name']:<12} {v['kind']:<13} {v['params_fraction']:>7.4f} "
              f"{v['flop_fraction']:>7.4f} {v['upload_bytes']:>14,.0f}")
    for note in report["notes"]:
        print(f"  note: {note}")
