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
