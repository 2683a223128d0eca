"""The operator graph of your own PyTorch model, in the format ``netsim place`` reads.

:func:`trace_operators` traces an ``nn.Module`` with ``torch.fx.symbolic_trace`` (falling back
to ``torch.export`` where fx cannot trace it) and propagates shapes on the meta device
(``torch.fx.passes.shape_prop.ShapeProp`` on meta tensors: no real compute, no memory for
activations). Each traced node is one operator (:class:`Operator`): its forward FLOP as
``torch.utils.flop_counter.FlopCounterMode`` counts them, with its formulas (a multiply-add is
2 FLOP; element-wise operations, pooling, normalisation and bias adds count 0, as
FlopCounterMode counts them; :class:`_FlopCount`), its
backward FLOP by :func:`backward_flop`, its output bytes, and the parameters it holds.

:func:`forward_graph` turns them into netsim's operator graph (:mod:`netsim.opgraph.graph`):
node attributes ``flop``, ``backward_flop``, ``memory_bytes`` (the operator's weights),
``temporary_bytes`` (0), ``output_bytes``; edge ``bytes`` (the producer's output tensor).
:func:`training_graph` adds the backward operators and weight updates with netsim's own
:func:`netsim.opgraph.add_backward` (one construction, one place: it takes each operator's
``backward_flop``, adds gradient buffers and momentum-SGD state, so an operator's persistent
memory over the step is weights + gradients + optimizer state), and :func:`write_graph` writes
it with :func:`netsim.opgraph.save_profile`, the profile JSON ``netsim place`` loads (its
schema: docs/baechi.md, "From your own model to a graph").

:func:`profile_times` measures each of those operators' CPU time in real training steps
(torch.profiler; each backward function matched to the forward operator that made it) and
:func:`with_times` puts them in the graph (``netsim models graph --profile``).

This module imports torch; only ``netsim models inspect|graph`` (and :mod:`netsim.torchnet.
inspect`) import it, so ``import netsim`` never does.
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import torch
from torch import fx, nn
from torch.fx.node import map_aggregate
from torch.fx.passes.shape_prop import ShapeProp, _extract_tensor_metadata
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from netsim.torchnet import require_torch

#: Batch of the graphs built here unless told (samples; as netsim's built-in graphs).
DEFAULT_BATCH = 32
#: The one-line advice of every error about a model that cannot be traced.
TRACE_ADVICE = ("make forward traceable (no Python control flow on tensor values), or export it "
                "yourself with torch.export or to ONNX and build the graph from that")


class ModelError(ValueError):
    """A model that cannot be measured: the message names what is wrong (one line)."""


@dataclass
class Operator:
    """One traced operator (figures for the batch traced).

    Attributes
    ----------
    name: the fx node's name (unique), the graph's node id.
    op: what it runs: the module's class (``Conv2d``), the function's or method's name.
    inputs: the operators whose outputs it reads.
    flop: forward FLOP (FlopCounterMode's count).
    backward_flop: backward FLOP (:func:`backward_flop`).
    params: parameters it holds (each parameter counted at its first user only).
    param_bytes: their bytes.
    output_bytes: bytes of its output tensors.
    needs_grad: whether its output needs a gradient (it depends on a trainable parameter).
    trainable: whether it uses a trainable parameter (its own, even one counted elsewhere).
    """

    name: str
    op: str
    inputs: list[str]
    flop: float
    backward_flop: float
    params: int
    param_bytes: float
    output_bytes: float
    needs_grad: bool
    trainable: bool


def backward_flop(forward_flop: float, trainable: bool, grad_inputs: int) -> float:
    """Backward FLOP of one operator, by formula (never FlopCounterMode's backward count: its
    per-module breakdown counts a branching model's shared inputs twice, and its whole-model
    count takes a depthwise convolution's backward for a dense one's).

    The rule: every FLOP FlopCounterMode counts in an operator's forward is a product (matmul,
    convolution, attention), and its backward repeats that product once per operand that needs
    a gradient: once for the gradient w.r.t. the weights (``trainable``), once for the gradient
    w.r.t. each input activation that needs one (``grad_inputs``), at most twice in all. So a
    convolution, a linear layer or a matmul costs 2x its forward; a grouped or depthwise
    convolution 2x its own grouped forward; the first layer, whose input (the data) needs no
    gradient, 1x (convention: the first layer's input gradient is *not* counted, as autograd
    does not compute it); element-wise operations, pooling and batch norm 0, as their forward
    (FlopCounterMode counts them 0 too).
    """
    return float(forward_flop) * min(2, int(trainable) + int(grad_inputs))


def tensor_bytes(value: Any) -> float:
    """Bytes of the tensors in ``value`` (a tensor, or a tuple/list/dict of them)."""
    if isinstance(value, torch.Tensor):
        return float(value.numel() * value.element_size())
    if isinstance(value, (tuple, list)):
        return sum(tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    return 0.0


def _where(exc: BaseException) -> str:
    """``file:line: code`` of the innermost frame of ``exc``'s traceback outside torch (the
    user's line), or '' when there is none."""
    frames = traceback.extract_tb(exc.__traceback__)
    torch_dir = str(Path(torch.__file__).parent)
    for frame in reversed(frames):
        if not frame.filename.startswith(torch_dir) and "<eval_with_key>" not in frame.filename \
                and not frame.filename.endswith("netsim/torchnet/graph.py"):
            return f"{frame.filename}:{frame.lineno}: {(frame.line or '').strip()}"
    return ""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Within the block, nothing torch prints or logs reaches the terminal (a failing
    torch.export dumps its graph and warnings: the caller reports the failure in one line)."""
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logging.disable(before)


def trace_module(model: nn.Module, example: torch.Tensor) -> fx.GraphModule:
    """``model`` as an fx graph: ``torch.fx.symbolic_trace``, else ``torch.export``.

    Raises
    ------
    ModelError
        When neither can trace it: both errors, the user's line where fx stopped, and the
        advice (:data:`TRACE_ADVICE`).
    """
    try:
        return fx.symbolic_trace(model)
    except Exception as fx_exc:  # fx raises TraceError, TypeError, NotImplementedError, ...
        where = _where(fx_exc)
        try:
            with _quiet():
                return torch.export.export(model, (example,), strict=False).module()
        except Exception as export_exc:
            at = f" at {where}" if where else ""
            raise ModelError(f"cannot trace the model: torch.fx: {_one_line(fx_exc)}{at}; "
                             f"torch.export: {_one_line(export_exc)}; {TRACE_ADVICE}") from None


def _kind(node: fx.Node, gm: nn.Module) -> str:
    if node.op == "placeholder":
        return "input"
    if node.op == "call_module":
        return type(gm.get_submodule(str(node.target))).__name__
    if node.op == "call_method":
        return str(node.target)
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    return str(name).split(".")[-1]


class _Measure(ShapeProp):
    """ShapeProp on meta tensors (no fake mode) that also counts each node's forward FLOP
    (:class:`_FlopCount`) and, where a node fails, names the operator in one line (ShapeProp's
    own ``run_node`` prints the traceback: this one runs the node itself and stores the same
    ``tensor_meta``)."""

    def run_node(self, n: fx.Node) -> Any:
        try:
            with _FlopCount() as counter:
                result = fx.Interpreter.run_node(self, n)
        except Exception as exc:
            where = str(n.target) if n.op == "call_module" else n.name
            message = str(exc).split("\n\nWhile executing")[0]  # (fx appends the node)
            raise _NodeFailed(f"operator {where!r} ({_kind(n, self.module)}): "
                              f"{type(exc).__name__}: {' '.join(message.split())[:300]}") from None
        found = False

        def extract(obj: Any) -> Any:
            nonlocal found
            if isinstance(obj, torch.Tensor):
                found = True
                return _extract_tensor_metadata(obj)
            return obj

        meta = map_aggregate(result, extract)
        if found:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        n.meta["netsim_flop"] = float(counter.flop)
        n.meta["netsim_output_bytes"] = tensor_bytes(result)
        return result


class _NodeFailed(Exception):
    pass


#: Substrings of the names of operators that FlopCounterMode has no formula for but whose
#: decomposition may hold products it counts (attention on the CPU, ...): these are decomposed
#: as FlopCounterMode does; every other operator without a formula runs as it is (FLOP 0).
_MAY_HOLD_PRODUCTS = ("mm", "mv", "conv", "linear", "attention", "matmul", "einsum", "dot",
                      "bilinear", "lstm", "gru", "rnn", "tensordot")


class _FlopCount(TorchDispatchMode):
    """FlopCounterMode's count (its formulas, ``torch.utils.flop_counter.flop_registry``) of
    the operators run in the block, in ``flop``.

    Two differences, both for speed, neither in the figure: it decomposes only operators that
    may hold a product (:data:`_MAY_HOLD_PRODUCTS`; FlopCounterMode decomposes every operator
    without a formula, batch norm included, which imports torch._dynamo, about a second), and
    its dispatch is not wrapped in torch's dynamo guard (that wrapper imports torch._dynamo on
    first use too; nothing here is compiled)."""

    def __init__(self) -> None:
        super().__init__()
        self.flop = 0


def _flop_dispatch(self: _FlopCount, func: Any, types: Any, args: Any = (),
                   kwargs: Any = None) -> Any:
    kwargs = kwargs or {}
    packet = func._overloadpacket
    formula = flop_registry.get(packet)
    if formula is None and any(k in packet.__name__ for k in _MAY_HOLD_PRODUCTS):
        with self:
            out = func.decompose(*args, **kwargs)
        if out is not NotImplemented:
            return out
    out = func(*args, **kwargs)
    if formula is not None:
        self.flop += formula(*args, **kwargs, out_val=out)
    return out


# (set after the class exists: TorchDispatchMode wraps a __torch_dispatch__ defined in the
# class body in torch._disable_dynamo, whose first call imports torch._dynamo)
_FlopCount.__torch_dispatch__ = _flop_dispatch  # type: ignore[method-assign,assignment]


def build_on_meta(factory: Callable[[], nn.Module]) -> nn.Module:
    """The model ``factory`` makes, with its parameters on the meta device (built there when
    the factory allows it, else built on the CPU and moved)."""
    try:
        with torch.device("meta"):
            model = factory()
    except Exception:
        model = factory()
    model = _as_module(model)
    if any(p.device.type != "meta" for p in model.parameters()) \
            or any(b.device.type != "meta" for b in model.buffers()):
        model = copy.deepcopy(model).to("meta")
    return model


def _as_module(model: Any) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise ModelError(f"the factory returned {type(model).__name__}, not a torch.nn.Module")
    return model


def trace_operators(model: nn.Module, input_shape: Sequence[int], batch: int = 1,
                    ) -> tuple[list[Operator], fx.GraphModule]:
    """The operators of ``model`` for a batch of ``batch`` inputs of ``input_shape`` (without
    the batch), measured on the meta device (the model's parameters may be anywhere: a meta
    copy is measured). The model is measured in eval mode (the FLOP counted are the same).

    Raises
    ------
    ModelError
        If the model cannot be traced, or the input shape does not fit it (naming the
        operator that rejects it).
    """
    require_torch()
    if any(p.device.type != "meta" for p in model.parameters()) \
            or any(b.device.type != "meta" for b in model.buffers()):
        model = copy.deepcopy(model).to("meta")
    training = model.training
    model.eval()
    try:
        example = torch.empty((batch, *[int(d) for d in input_shape]), device="meta")
        gm = trace_module(model, example)
        shape = ",".join(str(int(d)) for d in input_shape)
        try:
            _Measure(gm).propagate(example)
        except _NodeFailed as exc:  # (fx's Interpreter appends the node to the message)
            message = str(exc).split("\n")[0]
            raise ModelError(f"--input-shape {shape} does not fit the model: {message}") from None
    finally:
        model.train(training)
    return _operators(gm), gm


def _operators(gm: fx.GraphModule) -> list[Operator]:
    """The measured nodes of ``gm`` as operators (get_attr parameters folded into their users,
    the output node left out)."""
    ops: dict[str, Operator] = {}
    seen: set[int] = set()
    for node in gm.graph.nodes:
        if node.op in ("output", "get_attr"):
            continue
        tensors: list[torch.Tensor] = []
        if node.op == "call_module":
            tensors += list(gm.get_submodule(str(node.target)).parameters())
        for arg in node.all_input_nodes:
            if arg.op == "get_attr":
                value = _attr(gm, str(arg.target))
                if isinstance(value, nn.Parameter):
                    tensors.append(value)
        trainable = any(t.requires_grad for t in tensors)
        params, pbytes = 0, 0.0
        for t in tensors:
            if id(t) not in seen:
                seen.add(id(t))
                params += t.numel()
                pbytes += float(t.numel() * t.element_size())
        inputs = [a.name for a in node.all_input_nodes if a.name in ops]
        grad_inputs = sum(1 for a in inputs if ops[a].needs_grad)
        flop = float(node.meta.get("netsim_flop", 0.0))
        ops[node.name] = Operator(
            name=node.name, op=_kind(node, gm), inputs=inputs, flop=flop,
            backward_flop=backward_flop(flop, trainable, grad_inputs), params=params,
            param_bytes=pbytes, output_bytes=float(node.meta.get("netsim_output_bytes", 0.0)),
            needs_grad=trainable or grad_inputs > 0, trainable=trainable)
    return list(ops.values())


def _attr(gm: fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def forward_graph(operators: Sequence[Operator], name: str = "model") -> nx.DiGraph:
    """netsim's forward operator graph of ``operators`` (attributes in the module docstring;
    ``op`` and ``name`` kept for reading)."""
    g = nx.DiGraph(name=name, source="netsim.torchnet.graph")
    out = {op.name: op.output_bytes for op in operators}
    for op in operators:
        g.add_node(op.name, name=op.name, op=op.op, flop=op.flop, backward_flop=op.backward_flop,
                   memory_bytes=op.param_bytes, temporary_bytes=0.0, output_bytes=op.output_bytes)
        for src in op.inputs:
            g.add_edge(src, op.name, bytes=out[src])
    return g


def training_graph(model: nn.Module, input_shape: Sequence[int], batch: int = DEFAULT_BATCH,
                   name: str = "model") -> nx.DiGraph:
    """The training-step graph (forward, backward, update) of ``model`` for one batch of
    ``batch`` samples of ``input_shape``; its name is ``NAME-train`` (what ``netsim place``
    reads as a graph that already has its backward).

    Raises
    ------
    ModelError
        As :func:`trace_operators`.
    """
    from netsim.opgraph.backward import add_backward

    operators, _ = trace_operators(model, input_shape, batch)
    return add_backward(forward_graph(operators, name))


def write_graph(graph: nx.DiGraph, path: str | Path) -> None:
    """Write ``graph`` as profile JSON (:func:`netsim.opgraph.save_profile`), atomically: a
    file that fails to write leaves nothing behind."""
    from netsim.opgraph.profile import save_profile

    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        save_profile(graph, tmp)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


#: Training steps :func:`profile_times` profiles (after its warm-up) unless told.
PROFILE_STEPS = 5
#: Prefix of the ``record_function`` ranges :func:`profile_times` opens.
_RANGE = "netsim::"
#: Prefix of the autograd engine's event for one backward function.
_BACKWARD_EVENT = "autograd::engine::evaluate_function:"
#: Momentum of the SGD step profiled (the graph's update operators are momentum SGD).
PROFILE_MOMENTUM = 0.9


@contextlib.contextmanager
def _quiet_fd2() -> Iterator[None]:
    """Within the block, what C++ writes to file descriptor 2 is dropped (torch's profiler
    library prints a line to stderr each time it starts and stops tracing)."""
    import os
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _outer_ops(event: Any) -> Iterator[Any]:
    """The outermost ``aten::`` events below ``event`` (through ranges such as torch's
    ``Optimizer.step#SGD.step``)."""
    for child in event.cpu_children:
        if child.name.startswith("aten::"):
            yield child
        else:
            yield from _outer_ops(child)


class _TimedInterpreter(fx.Interpreter):
    """Runs each operator node's call (its module's, function's or method's, after the
    Interpreter has fetched its arguments) in a ``record_function`` range named after it."""

    _node = ""

    def run_node(self, n: fx.Node) -> Any:
        self._node = n.name
        return super().run_node(n)

    def _timed(self) -> Any:
        return torch.profiler.record_function(f"{_RANGE}op:{self._node}")

    def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
        module = self.fetch_attr(str(target))
        with self._timed():
            return module(*args, **kwargs)

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        with self._timed():
            return target(*args, **kwargs)

    def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
        self_obj, *rest = args
        method = getattr(self_obj, str(target))
        with self._timed():
            return method(*rest, **kwargs)


def profile_times(model: nn.Module, input_shape: Sequence[int], batch: int = DEFAULT_BATCH,
                  steps: int = PROFILE_STEPS, seed: int = 0) -> dict[str, float]:
    """Measured seconds of each operator of ``model``'s training step on this CPU (one
    thread), keyed as :func:`training_graph` names its nodes (``NAME``, ``grad:NAME``,
    ``update:NAME``).

    A copy of ``model`` (its parameters on the CPU, in train mode) is traced as
    :func:`trace_operators` traces it (the same node names) and trained on random inputs of
    ``batch`` x ``input_shape`` under ``torch.profiler`` for ``steps`` steps, after two
    unprofiled steps and one profiled warm-up. A step: the forward by an fx Interpreter that
    runs each operator in a ``record_function`` range of its own; a loss (cross entropy on
    random labels where the output is one (batch, classes) tensor, else the mean square of the
    outputs); ``backward()``; ``torch.optim.SGD`` with momentum 0.9, then
    ``zero_grad(set_to_none=True)``. Each operator gets, per step:

    - ``NAME``: its range (the call of its module, function or method; the Interpreter fetches
      the arguments outside it);
    - ``grad:NAME``: each ``autograd::engine::evaluate_function`` event whose sequence number
      one of its forward operations recorded (so each backward function is matched to the
      forward operator that made it), and each ``AccumulateGrad`` that directly follows one of
      those (its weights' gradients: the CPU engine runs those first once ready);
    - ``update:NAME``: the optimizer's operations on its parameters (torch's single-tensor SGD
      runs three in place per parameter, in parameter order; where the count differs, the
      step's operations are shared in proportion to the parameters' sizes), plus, per
      parameter, an even share of the optimizer's time outside its operations (its Python,
      ``zero_grad`` included);
    - the loss's forward is added to the operator that produces the output, its backward to
      that operator's ``grad:``.

    Left out: the forward's time outside the operators' ranges (the Interpreter's own, which
    the model run plainly does not spend) and the backward's between its functions (the
    autograd engine's own and, mostly, the profiler's: with it LeNet-5's backward measured
    11-28 % over the plain one, without it within a few per cent). The input and the backward of an operator none of
    whose inputs needs a gradient run nothing and are absent. Each figure is the median over
    the profiled steps (s); the profiler's own overhead is in them. One intra-op thread
    (:func:`require_torch`).

    Raises
    ------
    ModelError
        If the model's parameters are on the meta device, it has no trainable parameter, a
        training step fails, or it cannot be traced (as :func:`trace_operators`).
    """
    import statistics
    from collections import defaultdict

    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    require_torch()
    if any(t.device.type == "meta" for t in [*model.parameters(), *model.buffers()]):
        raise ModelError("--profile: the model's parameters are on the meta device: build it "
                         "on the CPU to time it")
    net = copy.deepcopy(model).to("cpu").train()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((batch, *[int(d) for d in input_shape]), generator=gen)
    gm = trace_module(net, x)
    gm.train()
    owners: list[tuple[str, nn.Parameter]] = []  # (node, parameter), each at its first user
    seen: set[int] = set()
    for node in gm.graph.nodes:
        found = list(gm.get_submodule(str(node.target)).parameters()) \
            if node.op == "call_module" else []
        found += [v for a in node.all_input_nodes if a.op == "get_attr"
                  for v in [_attr(gm, str(a.target))] if isinstance(v, nn.Parameter)]
        for p in found:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                owners.append((node.name, p))
    if not owners:
        raise ModelError("--profile: the model has no trainable parameter to train")
    output = next(n for n in gm.graph.nodes if n.op == "output")
    last = output.all_input_nodes[0].name if output.all_input_nodes else None
    opt = torch.optim.SGD([p for _, p in owners], lr=1e-3, momentum=PROFILE_MOMENTUM)
    interp = _TimedInterpreter(gm)
    labels: list[torch.Tensor] = []

    def loss_of(out: Any) -> torch.Tensor:
        if isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[0] == batch:
            if not labels:
                labels.append(torch.randint(int(out.shape[1]), (batch,), generator=gen))
            return nn.functional.cross_entropy(out, labels[0])
        flat: list[torch.Tensor] = []
        map_aggregate(out, lambda v: flat.append(v) if isinstance(v, torch.Tensor) else None)
        return sum((t.float().square().mean() for t in flat if t.requires_grad),
                   torch.zeros(()))

    def step() -> None:
        with record_function(f"{_RANGE}step"):
            with record_function(f"{_RANGE}forward"):
                out = interp.run(x)
            with record_function(f"{_RANGE}loss"):
                loss = loss_of(out)
            with record_function(f"{_RANGE}backward"):
                loss.backward()
            with record_function(f"{_RANGE}update"):
                opt.step()
                opt.zero_grad(set_to_none=True)

    try:
        for _ in range(2):
            step()
    except RuntimeError as exc:
        raise ModelError(f"--profile: a training step fails: {_one_line(exc)}") from None
    with _quiet_fd2(), profile(activities=[ProfilerActivity.CPU], acc_events=True,
                               schedule=schedule(wait=0, warmup=1, active=steps)) as prof:
        for _ in range(steps + 1):
            step()
            prof.step()

    def below(ev: Any) -> Iterator[Any]:
        for child in ev.cpu_children:
            yield child
            yield from below(child)

    def us(ev: Any) -> float:
        return float(ev.time_range.elapsed_us())

    sizes = [float(p.numel()) for _, p in owners]
    per_step: list[dict[str, float]] = []
    for top in prof.events():
        if top.name != f"{_RANGE}step":
            continue
        times: dict[str, float] = defaultdict(float)
        made_by: dict[int, str] = {}  # sequence number -> forward operator
        for part in sorted(top.cpu_children, key=lambda e: e.time_range.start):
            kind = part.name[len(_RANGE):]
            if kind == "forward":
                for ev in part.cpu_children:
                    if ev.name.startswith(f"{_RANGE}op:"):
                        name = ev.name[len(f"{_RANGE}op:"):]
                        times[name] += us(ev)
                        made_by.update((d.sequence_nr, name) for d in below(ev)
                                       if d.sequence_nr >= 0)
            elif kind == "loss" and last is not None:
                times[last] += us(part)
                made_by.update((d.sequence_nr, last) for d in below(part) if d.sequence_nr >= 0)
            elif kind == "backward":
                owner: str | None = None
                functions = [d for d in below(part) if d.name.startswith(_BACKWARD_EVENT)
                             and not (d.cpu_parent
                                      and d.cpu_parent.name.startswith(_BACKWARD_EVENT))]
                for ev in sorted(functions, key=lambda e: e.time_range.start):
                    if ev.sequence_nr >= 0:
                        owner = made_by.get(ev.sequence_nr)
                    if owner is not None:
                        times[f"grad:{owner}"] += us(ev)
            elif kind == "update":
                ops = sorted(_outer_ops(part), key=lambda e: e.time_range.start)
                # the optimizer's own time (its Python: the range less its operations), a
                # share per parameter
                share = max(0.0, us(part) - sum(us(ev) for ev in ops)) / len(owners)
                if len(ops) == 3 * len(owners):
                    for k, (name, _) in enumerate(owners):
                        mine = ops[3 * k:3 * k + 3]
                        times[f"update:{name}"] += share + sum(us(ev) for ev in mine)
                else:
                    total = sum(us(ev) for ev in ops)
                    for (name, _), size in zip(owners, sizes, strict=True):
                        times[f"update:{name}"] += share + total * size / sum(sizes)
        per_step.append(times)
    names = sorted(set().union(*per_step))
    return {n: statistics.median(s.get(n, 0.0) for s in per_step) * 1e-6 for n in names}


def with_times(graph: nx.DiGraph, times: dict[str, float]) -> nx.DiGraph:
    """``graph`` (a :func:`training_graph`) with each node's ``time_s`` from ``times``
    (:func:`profile_times`; 0 for a node it did not time: the input, the backward of an
    operator none of whose inputs needs a gradient), in place; returned. ``flop`` and
    ``backward_flop`` are dropped: the graph is then the one its profile JSON holds
    (``compute_us``, what ``netsim place`` reads), and every consumer takes the measured times
    (co-placement fusion sums ``flop`` where every member has it; the heterogeneous mode scales
    ``time_s`` from the reference device).

    Raises
    ------
    ModelError
        If a forward operator (other than an input) has no time: the times are not this
        graph's.
    """
    missing = [n for n, a in graph.nodes(data=True) if ":" not in str(n)
               and a.get("op") != "input" and n not in times]
    if missing:
        raise ModelError(f"--profile: operators not timed: {', '.join(map(str, missing[:5]))}"
                         f"{' ...' if len(missing) > 5 else ''} (the times are not this graph's)")
    for n, a in graph.nodes(data=True):
        a["time_s"] = float(times.get(str(n), 0.0))
        a.pop("flop", None)
        a.pop("backward_flop", None)
    return graph
