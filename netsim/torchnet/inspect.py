"""Your own PyTorch model's workload, measured from the model (``netsim models inspect``).

Given an ``nn.Module`` factory and one sample's input shape (without the batch),
:func:`inspect_model` measures what a netsim model entry needs (netsim/data/models.yaml):

- ``params``: parameters (each shared parameter once); ``upload_bytes``: the full model's
  upload, its parameters' bytes in their own dtypes (``params x 4`` for float32);
  ``param_memory_bytes``: the same bytes, held in memory; ``prunable_params``: the weights
  a magnitude mask covers (every parameter of two or more dimensions);
- ``forward_flop_per_sample``: ``torch.utils.flop_counter.FlopCounterMode``'s forward count on
  the meta device (a multiply-add is 2 FLOP; element-wise operations, pooling, batch norm and
  bias adds count 0, as FlopCounterMode counts them);
- ``train_flop_per_sample``: forward + backward, the backward counted per operator by formula
  (:func:`netsim.torchnet.graph.backward_flop`, never FlopCounterMode's backward): a
  convolution, linear layer or matmul 2x its forward (gradient w.r.t. the input and w.r.t. the
  weights), a grouped or depthwise convolution 2x its own grouped forward, the first layer 1x
  (its input, the data, needs no gradient: its input gradient is not counted, as autograd does
  not compute it), element-wise operations, pooling and batch norm 0. So a chain of layers
  trains in 3x its forward less its first layer's forward, not the usual 3x;
- ``activation_bytes_per_sample``: bytes of every operator's output for one sample, the input
  itself not included (views such as flatten and in-place results counted as tensors of their
  own: an upper bound on what autograd keeps);
- ``variants``: what the model can be made into, each with ``params_fraction``,
  ``flop_fraction`` (of the training FLOP) and ``upload_bytes``:

  * ``full``;
  * ``pruned-50``, ``pruned-75``, ``pruned-90`` (kind ``unstructured``): per-tensor L1
    magnitude pruning of every weight with two or more dimensions
    (``torch.nn.utils.prune.l1_unstructured``); ``params_fraction`` from the masks (kept
    weights plus the unpruned biases and norms, over all parameters); ``flop_fraction`` 1.0,
    because unstructured sparsity saves no FLOP on a CPU's dense kernels; the upload counted
    from the pruned model's own tensors under the encoding ``sparse_upload`` names
    (:func:`upload_bytes`): ``bitmap`` (default) the kept values' bytes plus one bit per
    prunable weight, ``nnz * 4 + ceil(prunable_params / 8)`` for float32; ``values`` the kept
    values' bytes; ``dense`` the whole model's;
  * ``channels-50`` (kind ``structured``), where the model is a chain of convolutions and
    linear layers (one path from input to output, nothing with weights but Conv, Linear and
    BatchNorm): every layer but the last keeps the half of its output channels with the
    largest L1 norm, the next layer the matching inputs, giving a smaller dense model whose
    params, FLOP and upload (its own tensors' bytes, whatever the encoding) are measured
    from that model itself.

This module imports torch; only ``netsim models inspect|graph`` import it.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import fx, nn
from torch.nn.utils import prune

from netsim.scenario.trust import module_in
from netsim.torchnet import require_torch
from netsim.torchnet.graph import ModelError, Operator, build_on_meta, trace_operators

#: Bytes per parameter of a float32 upload (the measured figures use each tensor's own).
UPLOAD_BYTES_PER_PARAM = 4
#: How an upload encodes an unstructured variant (``model.sparse_upload``; the default first).
SPARSE_UPLOADS = ("bitmap", "values", "dense")
#: Unstructured pruning amounts of the variants (fraction of each weight tensor removed).
PRUNE_AMOUNTS = (0.5, 0.75, 0.9)
#: Fraction of each inner layer's output channels the structured variant removes.
CHANNEL_FRACTION = 0.5


@dataclass(frozen=True)
class Variant:
    """One version of the model (fractions of the full model's params and training FLOP)."""

    name: str
    kind: str
    params_fraction: float
    flop_fraction: float
    upload_bytes: float


@dataclass
class Measurement:
    """What one model's trace gives (per sample)."""

    params: int
    param_memory_bytes: float
    forward_flop_per_sample: float
    train_flop_per_sample: float
    activation_bytes_per_sample: float
    operators: list[Operator] = field(repr=False)


@dataclass
class Inspection:
    """The measured workload of a model (see the module docstring); ``notes`` say which
    variants could not be made and why."""

    model: str
    input_shape: tuple[int, ...]
    params: int
    upload_bytes: float
    forward_flop_per_sample: float
    train_flop_per_sample: float
    activation_bytes_per_sample: float
    param_memory_bytes: float
    variants: list[Variant]
    notes: list[str] = field(default_factory=list)
    prunable_params: int = 0
    """Parameters a magnitude mask covers (every parameter of two or more dimensions)."""
    sparse_upload: str = "bitmap"
    """The encoding the unstructured variants' ``upload_bytes`` are counted in."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (what ``netsim models inspect --json`` prints)."""
        out = asdict(self)
        out["input_shape"] = list(self.input_shape)
        return out


# -- the model from its name ------------------------------------------------------------------

def load_factory(spec: str) -> Callable[[], Any]:
    """The model factory ``spec`` names: a built-in torch network (``small-cnn``, ``cnn-mnist``,
    ``mlp-digits``: :mod:`netsim.torchnet.zoo`), ``pkg.mod:factory`` (imported) or
    ``path/to/file.py:factory`` (the file run as a module). ``factory`` may be dotted
    (``mod:Class.build``); it is called with no arguments, or is an ``nn.Module`` itself
    (then copied).

    Importing runs the module's code: netsim does it for a name the user typed (the command
    line's rule, netsim.scenario.trust), and from Python for any name you pass.

    Raises
    ------
    ModelError
        Naming what is wrong with ``spec`` or why its module did not import.
    """
    require_torch()
    from netsim.torchnet.zoo import TORCH_MODELS

    if spec in TORCH_MODELS:
        return TORCH_MODELS[spec]
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise ModelError(f"MODEL: expected a built-in network ({', '.join(TORCH_MODELS)}), "
                         f"pkg.mod:factory or file.py:factory, got {spec!r}")
    try:
        if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
            module = _import_file(Path(module_name))
        else:
            module = importlib.import_module(module_name)
    except ModelError:
        raise
    except Exception as exc:  # the module's own code may raise anything
        hint = ""
        top = module_name.split(".")[0]
        if isinstance(exc, ModuleNotFoundError) and (exc.name or top).split(".")[0] == top \
                and module_in(top, Path.cwd()):
            hint = (f"; {top!r} is in the current folder, which is not on the Python path: "
                    "set PYTHONPATH=. or give the file (path/to/module.py:factory)")
        raise ModelError(f"MODEL: cannot import {module_name!r}: {type(exc).__name__}: "
                         f"{exc}{hint}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ModelError(f"MODEL: {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    if isinstance(obj, nn.Module):
        instance = obj
        return lambda: copy.deepcopy(instance)
    if not callable(obj):
        raise ModelError(f"MODEL: {spec!r} is {type(obj).__name__}, not a factory "
                         "(a callable returning a torch.nn.Module)")
    return obj


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise ModelError(f"MODEL: no file {str(path)!r}")
    name = f"netsim_user_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"MODEL: cannot import {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses and pickling look their module up there)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # the file's own imports of its neighbours
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def make_model(factory: Callable[[], Any], label: str, meta: bool = False) -> nn.Module:
    """Call ``factory`` (on the meta device when ``meta``: no memory for weights, no init).

    Raises
    ------
    ModelError
        ``the factory raised ...`` or ``... returned X, not a torch.nn.Module``.
    """
    try:
        model = build_on_meta(factory) if meta else factory()
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(f"MODEL: {label!r}: the factory raised {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())}") from None
    if not isinstance(model, nn.Module):
        raise ModelError(f"MODEL: {label!r}: the factory returned {type(model).__name__}, "
                         "not a torch.nn.Module")
    return model


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,28,28"`` -> ``(1, 28, 28)``.

    Raises
    ------
    ModelError
        Unless ``text`` is positive integers separated by commas.
    """
    try:
        shape = tuple(int(p) for p in text.replace("x", ",").split(","))
        if not shape or any(d < 1 for d in shape):
            raise ValueError
    except ValueError:
        raise ModelError(f"--input-shape: expected positive integers separated by commas, one "
                         f"sample's shape without the batch (e.g. 1,28,28), got {text!r}") from None
    return shape


# -- measuring ---------------------------------------------------------------------------------

def measure(model: nn.Module, input_shape: Sequence[int]) -> Measurement:
    """Params, FLOP and activation bytes of ``model`` per sample (traced on the meta device).

    Raises
    ------
    ModelError
        As :func:`netsim.torchnet.graph.trace_operators`.
    """
    operators, _ = trace_operators(model, input_shape, batch=1)
    params = list({id(p): p for p in model.parameters()}.values())
    forward = sum(op.flop for op in operators)
    return Measurement(
        params=sum(p.numel() for p in params),
        param_memory_bytes=float(sum(p.numel() * p.element_size() for p in params)),
        forward_flop_per_sample=forward,
        train_flop_per_sample=forward + sum(op.backward_flop for op in operators),
        activation_bytes_per_sample=sum(op.output_bytes for op in operators if op.op != "input"),
        operators=operators)


def inspect_model(factory: Callable[[], Any], input_shape: Sequence[int],
                  label: str = "model", sparse_upload: str = "bitmap") -> Inspection:
    """Measure the model ``factory`` makes on inputs of ``input_shape`` (module docstring);
    the unstructured variants' upload bytes in the encoding ``sparse_upload`` names.

    Raises
    ------
    ModelError
        The factory raised or returned no module, the model cannot be traced, or the input
        shape does not fit it; an unknown ``sparse_upload``.
    """
    require_torch()
    if sparse_upload not in SPARSE_UPLOADS:
        raise ModelError(f"--sparse-upload: expected one of {', '.join(SPARSE_UPLOADS)}, got "
                         f"{sparse_upload!r}")
    shape = tuple(int(d) for d in input_shape)
    full = measure(make_model(factory, label, meta=True), shape)
    model = make_model(factory, label)  # real weights: pruning needs their magnitudes
    model.eval()
    dense = unstructured_counts(model, 0.0)
    upload = dense.dense_bytes
    variants = [Variant("full", "full", 1.0, 1.0, upload)]
    for amount in PRUNE_AMOUNTS:
        counts = unstructured_counts(model, amount)
        variants.append(Variant(f"pruned-{round(amount * 100)}", "unstructured",
                                counts.kept / full.params if full.params else 1.0, 1.0,
                                upload_bytes(counts, sparse_upload)))
    notes = []
    smaller, why = channel_pruned(model, shape, CHANNEL_FRACTION)
    if smaller is None:
        notes.append(f"channels-{round(CHANNEL_FRACTION * 100)}: not made: {why}")
    else:
        small = measure(smaller, shape)
        variants.append(Variant(
            f"channels-{round(CHANNEL_FRACTION * 100)}", "structured",
            small.params / full.params,
            small.train_flop_per_sample / full.train_flop_per_sample
            if full.train_flop_per_sample else 1.0,
            small.param_memory_bytes))
    return Inspection(label, shape, full.params, upload, full.forward_flop_per_sample,
                      full.train_flop_per_sample, full.activation_bytes_per_sample,
                      full.param_memory_bytes, variants, notes, dense.prunable, sparse_upload)


# -- variants ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SparseCounts:
    """What an unstructured variant's upload holds, counted from the pruned model's own
    tensors (:func:`unstructured_counts`)."""

    kept: int
    """Values sent: the weights the masks keep plus every parameter not pruned."""
    prunable: int
    """Weights under a mask (every parameter of two or more dimensions): one bitmap bit each."""
    kept_bytes: float
    """Bytes of the kept values in their tensors' dtypes (B)."""
    dense_bytes: float
    """Bytes of every parameter in its dtype (B): the dense upload."""


def unstructured_counts(model: nn.Module, amount: float) -> SparseCounts:
    """L1 magnitude pruning of ``amount`` of every weight with two or more dimensions
    (``torch.nn.utils.prune.l1_unstructured`` on a copy of ``model``), counted from the
    masks and the tensors (each shared parameter once). ``amount`` 0 prunes nothing."""
    pruned = copy.deepcopy(model)
    kept = prunable = 0
    kept_bytes = dense_bytes = 0.0
    seen: set[int] = set()
    for module in pruned.modules():
        for name, param in list(module.named_parameters(recurse=False)):
            if id(param) in seen:
                continue
            seen.add(id(param))
            size = param.element_size()
            dense_bytes += param.numel() * size
            if param.dim() >= 2:
                prunable += param.numel()
                prune.l1_unstructured(module, name, amount=amount)
                n = int(getattr(module, f"{name}_mask").sum().item())
            else:
                n = param.numel()
            kept += n
            kept_bytes += n * size
    return SparseCounts(kept, prunable, kept_bytes, dense_bytes)


def upload_bytes(counts: SparseCounts, encoding: str) -> float:
    """Bytes (B) of an unstructured variant's upload in ``encoding`` (``model.sparse_upload``):
    ``bitmap``: the kept values plus ``ceil(prunable / 8)``; ``values``: the kept values;
    ``dense``: every parameter (zeros included). :meth:`ModelSpec.model_bytes
    <netsim.scenario.schema.ModelSpec.model_bytes>` is the same formula on the measured
    figures."""
    if encoding == "dense":
        return counts.dense_bytes
    if encoding == "values":
        return counts.kept_bytes
    return counts.kept_bytes + math.ceil(counts.prunable / 8)


def unstructured_nnz(model: nn.Module, amount: float) -> int:
    """Parameters left non-zero after L1 magnitude pruning of ``amount`` of every weight with
    two or more dimensions (:func:`unstructured_counts`' ``kept``)."""
    return unstructured_counts(model, amount).kept


_CONV = nn.modules.conv._ConvNd


def channel_fraction_of(name: str) -> float | None:
    """The fraction of each inner layer's output channels a structured variant named
    ``channels-NN`` removes (``NN / 100``, 0 < NN < 100), or None for another name."""
    head, sep, tail = name.partition("-")
    if head != "channels" or not sep or not tail.isdigit() or not 0 < int(tail) < 100:
        return None
    return int(tail) / 100.0


#: Which entries of the full model's tensors a structured variant keeps: per module (its
#: qualified name), per dimension (0: outputs, 1: inputs), the kept indices, ascending.
ChannelPlan = dict[str, dict[int, torch.Tensor]]


def channel_pruned(model: nn.Module, input_shape: Sequence[int],
                   fraction: float = CHANNEL_FRACTION,
                   plan: ChannelPlan | None = None) -> tuple[nn.Module | None, str]:
    """A smaller dense copy of ``model`` with ``fraction`` of each inner layer's output
    channels removed (the lowest L1 norms), or ``(None, why)`` where the model is not a chain
    of Conv/Linear layers (module docstring). The copy is checked to run on a real input; its
    parameters and buffers have the full model's names. ``plan``, when given, is filled with
    the entries kept (:data:`ChannelPlan`: what :func:`channels_of` and :func:`lift_channels`
    read)."""
    record: ChannelPlan = {}
    try:
        gm = fx.symbolic_trace(copy.deepcopy(model))
    except Exception as exc:
        return None, f"torch.fx cannot trace it ({type(exc).__name__})"
    example = torch.zeros((1, *input_shape))
    from torch.fx.passes.shape_prop import ShapeProp

    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(example)
    except Exception as exc:
        return None, f"it does not run on a zero input ({type(exc).__name__})"
    chain, why = _chain(gm)
    if chain is None:
        return None, why
    layers = [n for n in chain if n.op == "call_module"
              and isinstance(gm.get_submodule(str(n.target)), (_CONV, nn.Linear))]
    if len(layers) < 2:
        return None, "it has fewer than two Conv/Linear layers (no inner channels to prune)"
    with torch.no_grad():
        for i, node in enumerate(layers[:-1]):
            layer: Any = gm.get_submodule(str(node.target))
            weight = layer.weight
            n_out = weight.shape[0]
            k = max(1, math.ceil(n_out * (1.0 - fraction)))
            norms = weight.detach().abs().reshape(n_out, -1).sum(dim=1)
            keep = torch.sort(torch.topk(norms, k).indices).values
            _set(gm, str(node.target), _keep_outputs(layer, keep))
            record.setdefault(str(node.target), {})[0] = keep
            nxt = layers[i + 1]
            for between in chain[chain.index(node) + 1: chain.index(nxt)]:
                if between.op == "call_module":
                    sub = gm.get_submodule(str(between.target))
                    if isinstance(sub, nn.modules.batchnorm._BatchNorm):
                        _set(gm, str(between.target), _keep_norm(sub, keep))
                        record[str(between.target)] = {0: keep}
            nxt_layer: Any = gm.get_submodule(str(nxt.target))
            if nxt_layer.weight.shape[1] % n_out:
                return None, f"operator {nxt.name!r} does not read whole channels of " \
                             f"{node.name!r}"
            new_next, read = _keep_inputs(nxt_layer, keep, n_out)
            _set(gm, str(nxt.target), new_next)
            record.setdefault(str(nxt.target), {})[1] = read
    for node in chain:  # x.view(-1, 400): a constant size; flatten keeps the batch instead
        if node.op == "call_method" and node.target in ("view", "reshape") \
                and len(node.meta["tensor_meta"].shape) == 2:
            node.target, node.args, node.kwargs = "flatten", (node.args[0], 1), {}
        elif node.op == "call_function" and node.target in (torch.reshape,) \
                and len(node.meta["tensor_meta"].shape) == 2:
            node.target, node.args, node.kwargs = torch.flatten, (node.args[0], 1), {}
    gm.recompile()
    try:
        with torch.no_grad():
            out = gm(example)
            ref = model(example)
        if out.shape != ref.shape:
            raise ValueError(f"output {tuple(out.shape)} instead of {tuple(ref.shape)}")
    except Exception as exc:
        return None, f"the pruned copy does not run ({type(exc).__name__}: {exc})"
    if plan is not None:
        plan.clear()
        plan.update(record)
    return gm, ""


def _index(plan: ChannelPlan, name: str, ndim: int) -> tuple[Any, ...] | None:
    """The index that picks a structured variant's tensor ``name`` (``module.weight``) out of
    the full model's, or None for a tensor kept whole."""
    dims = plan.get(name.rpartition(".")[0], {})
    rows, cols = dims.get(0), dims.get(1) if ndim >= 2 else None
    if rows is not None and cols is not None:
        return rows[:, None], cols[None, :]
    if rows is not None:
        return (rows,)
    if cols is not None:
        return slice(None), cols
    return None


def channels_of(full: Mapping[str, torch.Tensor], plan: ChannelPlan,
                names: Sequence[str]) -> list[torch.Tensor]:
    """The structured variant's tensors ``names`` cut out of the full model's (``full``: by
    name): new tensors."""
    out = []
    for name in names:
        t = full[name]
        index = _index(plan, name, t.dim())
        out.append(t.clone() if index is None else t[index].clone())
    return out


def lift_channels(base: Mapping[str, torch.Tensor], small: Mapping[str, torch.Tensor],
                  plan: ChannelPlan, names: Sequence[str]) -> list[torch.Tensor]:
    """The full model's tensors ``names``: ``base``'s with the structured variant's values
    (``small``, by name) written into the entries it kept (new tensors)."""
    out = []
    for name in names:
        t = base[name].clone()
        if name in small:
            index = _index(plan, name, t.dim())
            if index is None:
                t.copy_(small[name])
            else:
                t[index] = small[name]
        out.append(t)
    return out


def _chain(gm: fx.GraphModule) -> tuple[list[fx.Node] | None, str]:
    """The nodes of ``gm`` from input to output if they form one path whose only modules
    with weights are Conv (ungrouped), Linear and BatchNorm; else ``(None, why)``."""
    def tensor(n: fx.Node) -> bool:  # (x.size(0) and the like are no operators of the chain)
        return "tensor_meta" in n.meta

    nodes = [n for n in gm.graph.nodes if n.op != "output"]
    if any(n.op == "get_attr" for n in nodes):
        return None, "it reads a parameter outside a module"
    inputs = [n for n in nodes if n.op == "placeholder"]
    if len(inputs) != 1:
        return None, f"it takes {len(inputs)} inputs"
    chain = [n for n in nodes if n.op != "placeholder" and tensor(n)]
    prev = inputs[0]
    for node in chain:
        feeds = [a for a in node.all_input_nodes if tensor(a)]
        if feeds != [prev]:
            return None, (f"operator {node.name!r} joins branches (not a chain of layers)"
                          if len(feeds) > 1 else
                          f"operator {node.name!r} does not follow {prev.name!r}")
        if len([u for u in prev.users if tensor(u) or u.op == "output"]) != 1:
            return None, f"operator {prev.name!r} feeds several operators (not a chain)"
        if node.op == "call_module":
            sub = gm.get_submodule(str(node.target))
            if isinstance(sub, _CONV) and (sub.groups != 1 or sub.transposed):
                return None, f"operator {node.name!r} is a grouped or transposed convolution"
            plain = isinstance(sub, (_CONV, nn.Linear, nn.modules.batchnorm._BatchNorm))
            if not plain and any(True for _ in sub.parameters()):
                return None, f"operator {node.name!r} ({type(sub).__name__}) has weights " \
                             "netsim does not prune by channel"
        prev = node
    return chain, ""


def _set(gm: fx.GraphModule, target: str, module: nn.Module) -> None:
    parent_name, _, name = target.rpartition(".")
    parent = gm.get_submodule(parent_name) if parent_name else gm
    setattr(parent, name, module)


def _keep_outputs(layer: Any, keep: torch.Tensor) -> nn.Module:
    new: Any = copy.deepcopy(layer)
    new.weight = nn.Parameter(layer.weight[keep].clone())
    if getattr(layer, "bias", None) is not None:
        new.bias = nn.Parameter(layer.bias[keep].clone())
    if isinstance(new, _CONV):
        new.out_channels = len(keep)
    else:
        new.out_features = len(keep)
    return new


def _keep_inputs(layer: Any, keep: torch.Tensor,
                 n_in_channels: int) -> tuple[nn.Module, torch.Tensor]:
    """``layer`` reading only channels ``keep`` of its ``n_in_channels`` (a Linear after a
    flattened convolution reads each channel's whole feature map), and the input indices it
    keeps."""
    new: Any = copy.deepcopy(layer)
    if isinstance(new, _CONV):
        new.weight = nn.Parameter(layer.weight[:, keep].clone())
        new.in_channels = len(keep)
        return new, keep
    per = layer.weight.shape[1] // n_in_channels
    index = (keep[:, None] * per + torch.arange(per)[None, :]).reshape(-1)
    new.weight = nn.Parameter(layer.weight[:, index].clone())
    new.in_features = len(index)
    return new, index


def _keep_norm(norm: Any, keep: torch.Tensor) -> nn.Module:
    new: Any = copy.deepcopy(norm)
    if norm.affine:
        new.weight = nn.Parameter(norm.weight[keep].clone())
        new.bias = nn.Parameter(norm.bias[keep].clone())
    if norm.running_mean is not None:
        new.running_mean = norm.running_mean[keep].clone()
        new.running_var = norm.running_var[keep].clone()
    new.num_features = len(keep)
    return new
