"""PyTorch training backend (``training.backend: torch``): federated averaging of a built-in
torch network on a shipped data set.

:class:`TorchBackend` has :class:`netsim.training.real.RealBackend`'s interface and
semantics, with the epochs' averaging shared (:mod:`netsim.training.averaging`); only the
network, the data and the arithmetic (torch, float32) differ:

* Network and data: the scenario's ``model.name`` picks a network of
  :mod:`netsim.torchnet.zoo` and its data set (:mod:`netsim.torchnet.data`: MNIST for the
  CNNs, scikit-learn's digits for the MLP). A stratified held-out test split of
  ``training.real.test_fraction`` is drawn per run
  (:func:`netsim.training.real.stratified_split`); the rest is partitioned among the
  devices in proportion to their declared samples, IID or label-skewed as ``training``
  says (``dirichlet_alpha``, ``shards_per_device`` or ``label_bias``:
  :func:`netsim.training.shards.partition`).
* Local training: ``training.real.local_epochs`` passes of plain minibatch SGD (step
  ``learning_rate``, ``batch_size`` samples, mean cross-entropy) on the first
  ``max(1, round(d_i / D_i * |shard_i|))`` samples of the device's shard; pruned weights are
  set back to exactly 0.0 after every step.
* Variants, by their ``kind`` (docs/torch.md "Variants"):

  - without a kind (the zoo's hand-typed variants): unstructured magnitude pruning of each
    weight tensor to the variant's ``params_fraction`` (:func:`netsim.training.mlp.prune_masks`,
    ranked in float64; biases are never pruned), masks applied again after every SGD step
    and every aggregation;
  - ``unstructured`` (measured, ``pruned-NN``): the same masks, each weight tensor keeping
    ``size - round(NN / 100 * size)`` entries, the count ``torch.nn.utils.prune`` keeps, so
    the model holds exactly the non-zero values :mod:`netsim.torchnet.inspect` measured and
    the bytes it counted (another name: ``params_fraction`` of each tensor, as above);
  - ``structured`` (``channels-NN``): the smaller dense model
    :func:`netsim.torchnet.inspect.channel_pruned` builds, trained and averaged as a model of
    its own (its parameters only). Switching to it (netsim's formalization): its channels
    are those of the global full model with the largest L1 norms, as
    :mod:`netsim.torchnet.inspect` ranks them, and it starts from their values; switching
    back: the full model as the structured variant found it (its masks as they were) with
    the smaller model's values written into the channels it kept, then the masks the new
    variant asks for. The versions kept for stale asynchronous updates are mapped the same
    way, so an update's change is always taken in the model in force.
* Loss: test cross-entropy in nats (summed in float64), accuracy on the test split.
* Your own model (``model: {torch: ...}``, docs/byo-model.md; the model spec's ``torch``
  source): the factory's network, initialised by the factory with torch's generator seeded
  from the run's (the caller's generator restored), on the source's data (a shipped set, or
  an ``.npz``: :func:`netsim.scenario.torch_model.load_npz`). Its state is its trainable
  parameters then its floating-point buffers (batch norm's statistics), all averaged; it
  trains in ``train()`` mode (dropout drawn from a fifth stream of the run's generator) and
  is tested in ``eval()`` mode; variants prune every parameter of two or more dimensions.
* Randomness: the run's generator is split (``rng.spawn``) into the test split, the shards,
  the initial weights (a ``torch.Generator`` seeded from it) and the minibatch order (numpy
  permutations), so the same seed gives the same curve, bit for bit on the CPU with one
  thread (:func:`netsim.torchnet.require_torch` sets one).

Speed: one network per backend, reloaded in place (``copy_``) for each participant; the
shards are float32 tensors built once; the averaging runs on detached tensors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.nn import functional

from netsim.scenario.torch_model import input_shape_of
from netsim.torchnet import TORCH_INPUT_SHAPES, require_torch, zoo
from netsim.torchnet.data import load
from netsim.training import mlp
from netsim.training.averaging import FederatedAveraging, Params
from netsim.training.real import MAX_VERSIONS, _get, real_config, stratified_split
from netsim.training.shards import partition

#: Bytes of global model versions kept for stale asynchronous updates: at most
#: :data:`~netsim.training.real.MAX_VERSIONS` versions and at most this much (512 MiB: 80
#: versions of cnn-mnist, 1,024 of small-cnn); an older base is refused (ValueError).
MAX_VERSION_BYTES = 512 * 2**20
#: Test samples evaluated per forward pass (bounds the activations' memory).
EVAL_CHUNK = 1024


class TorchBackend(FederatedAveraging):
    """Trains a built-in torch network with federated averaging; one :meth:`advance` per
    epoch (the module docstring says what a run does).

    Parameters
    ----------
    model:
        A ModelSpec-like object with ``name`` (a key of
        :data:`netsim.torchnet.zoo.TORCH_MODELS`) and ``variants`` (objects or dicts with
        ``params_fraction``, and optionally ``name`` and ``kind``: module docstring; index 0
        the full model).

    Raises
    ------
    ValueError
        ``model.variants[i]...``: a structured variant the backend cannot build as the model
        its figures describe (a name not ``channels-NN``, a model that is not a chain of
        layers, another ``params_fraction`` than the built model's).
    device_ids, device_samples:
        The scenario's devices and each one's declared local samples (>= 0).
    training:
        A TrainingSpec-like object or dict: ``dirichlet_alpha`` or ``shards_per_device``
        (both None = IID) and the optional ``real`` sub-object (:class:`netsim.training.real.RealTrainingConfig`;
        ``hidden_units`` is not read: the torch networks are models.yaml's).
    rng:
        The run's generator; every random draw of the backend comes from it.
    """

    label = "torch"

    def __init__(
        self,
        model: Any,
        device_ids: Sequence[str],
        device_samples: Sequence[int],
        training: Any,
        rng: np.random.Generator,
    ) -> None:
        require_torch()
        name = _get(model, "name")
        source = _get(model, "torch")  # a PyTorch model of the user's (model: {torch: ...})
        if source is None and name not in zoo.TORCH_MODELS:
            raise ValueError(
                f"model.name: the torch backend trains {sorted(zoo.TORCH_MODELS)}, got {name!r}"
            )
        if len(device_ids) != len(device_samples):
            raise ValueError("device_ids and device_samples differ in length")
        self.model_name: str = name
        variants = list(_get(model, "variants"))
        self.fractions = [float(_get(v, "params_fraction")) for v in variants]
        #: each variant's kind (None, "unstructured" or "structured") and name
        self.kinds: list[str | None] = [_get(v, "kind") for v in variants]
        self.variant_names = [str(_get(v, "name", f"variant-{i}")) for i, v in enumerate(variants)]
        self.config = real_config(training)
        self.dirichlet_alpha: float | None = _get(training, "dirichlet_alpha")
        self.device_ids = list(device_ids)
        self.device_samples = [int(s) for s in device_samples]
        split_rng, shard_rng, init_rng, self._train_rng = rng.spawn(4)

        x, y = load(zoo.DATASETS[name]) if source is None else _user_data(source)
        train_idx, test_idx = stratified_split(y, self.config.test_fraction, split_rng)
        if len(test_idx) == 0:
            raise ValueError(f"model.torch.data: {len(y)} samples leave no test split at "
                             f"training.real.test_fraction {self.config.test_fraction:g}")
        self._y_train = y[train_idx]
        self.shards = partition(labels=self._y_train, weights=self.device_samples,
                                dirichlet_alpha=self.dirichlet_alpha, rng=shard_rng,
                                shards_per_device=_get(training, "shards_per_device"),
                                label_bias=_get(training, "label_bias"))
        x_train = x[train_idx]
        self._shard_x = [torch.from_numpy(x_train[s]) for s in self.shards]
        self._shard_y = [torch.from_numpy(self._y_train[s]) for s in self.shards]
        self._x_test = torch.from_numpy(x[test_idx])
        self._y_test = torch.from_numpy(y[test_idx])

        seed = int(init_rng.integers(2**63 - 1))
        self._dropout_seed: np.random.Generator | None = None
        if source is None:
            self.module = zoo.build(name, torch.Generator().manual_seed(seed))
        else:  # the factory's own initialisation, drawn from the run's seed
            self.module = _build_user(source, seed)
            self._dropout_seed = rng.spawn(1)[0]  # (a fifth stream: the first four as before)
        # the model's state: its trainable parameters, then its floating-point buffers (batch
        # norm's running statistics), all averaged; only the parameters get gradients
        self._trainable = [w for w in self.module.parameters() if w.requires_grad]
        self._weights = self._trainable + [b for b in self.module.buffers()
                                           if b.is_floating_point()]
        self.params = [w.detach().clone() for w in self._weights]
        #: positions of the weights pruned by a variant (every parameter with two or more
        #: dimensions; the built-in networks' even positions)
        self._prunable = [k for k, w in enumerate(self._trainable) if w.dim() >= 2]
        self.masks = [np.ones(tuple(self.params[k].shape), dtype=bool) for k in self._prunable]
        self._pruned_mag = [np.zeros(tuple(self.params[k].shape)) for k in self._prunable]
        # (parameter index, float32 mask) of each weight tensor with pruned entries
        self._live: list[tuple[int, torch.Tensor]] = []
        self.params_fraction = 1.0
        self.epoch = 0
        # the full model (kept while a structured variant trains) and its tensors' names
        self._full_module = self.module
        self._full_names = _state_names(self.module)
        self._full_trainable, self._full_weights = self._trainable, self._weights
        self._full_state: Params = self.params
        self._mask_key: tuple[str, float] = ("fraction", 1.0)
        #: the structured variant in force (its index; None: the full model), its tensors'
        #: names and the entries of the full model it keeps
        self._structure: int | None = None
        self._small_names: list[str] = []
        self._plan: Any = {}
        self._shape = input_shape_of(source) if source is not None \
            else TORCH_INPUT_SHAPES[name]
        for i, kind in enumerate(self.kinds):
            if kind == "structured":
                self._check_structured(i)
        nbytes = sum(p.numel() * p.element_size() for p in self.params)
        # the global model after each of the last aggregations, the current one last (a stale
        # update's base is ``staleness`` from the end)
        self._versions = deque([self.params], maxlen=max(
            2, min(MAX_VERSIONS, MAX_VERSION_BYTES // nbytes)))

    # -- variants ---------------------------------------------------------------------------------
    def _check_structured(self, i: int) -> None:
        """Refuse a structured variant the backend cannot build as the smaller dense model the
        scenario's figures describe (ValueError naming ``model.variants[i]``)."""
        from netsim.torchnet.inspect import channel_fraction_of, channel_pruned

        where = f"model.variants[{i}]"
        fraction = channel_fraction_of(self.variant_names[i])
        if fraction is None:
            raise ValueError(f"{where}.name: the torch backend trains a structured variant "
                             "named channels-NN (NN % of each inner layer's output channels "
                             f"removed), got {self.variant_names[i]!r}")
        self._full_module.eval()
        small, why = channel_pruned(self._full_module, self._shape, fraction)
        if small is None:
            raise ValueError(f"{where}: the model has no structured variant: {why}")
        full_n = sum(p.numel() for p in self._full_module.parameters())
        small_n = sum(p.numel() for p in small.parameters())
        if abs(small_n / full_n - self.fractions[i]) > 1e-9:
            raise ValueError(f"{where}.params_fraction: {self.fractions[i]:g}, but the "
                             f"channel-pruned model keeps {small_n} of {full_n} parameters "
                             f"({small_n / full_n:.6g})")

    def set_variant(self, variant_index: int) -> None:
        """Make the global model the variant's (module docstring): the smaller dense model of
        a structured variant, else the full model pruned (or regrown) by masks."""
        if not 0 <= variant_index < len(self.fractions):
            raise ValueError(
                f"variant index {variant_index} out of range 0..{len(self.fractions) - 1}")
        structure = variant_index if self.kinds[variant_index] == "structured" else None
        if structure != self._structure:
            if self._structure is not None:
                self._to_full()
            if structure is not None:
                self._to_structured(structure)
        if structure is None:
            key = self._mask_key_of(variant_index)
            if key != self._mask_key:
                self._prune_to(key)
        self.params_fraction = self.fractions[variant_index]

    def _mask_key_of(self, i: int) -> tuple[str, float]:
        """How variant ``i``'s masks count what each weight tensor keeps: ``("amount", a)``
        (a measured ``pruned-NN``: ``size - round(a * size)``) or ``("fraction", f)``."""
        name = self.variant_names[i]
        if self.kinds[i] == "unstructured" and name.startswith("pruned-") \
                and name[7:].isdigit() and 0 < int(name[7:]) < 100:
            return "amount", int(name[7:]) / 100.0
        return "fraction", self.fractions[i]

    def _prune_to(self, key: tuple[str, float]) -> None:
        """Magnitude pruning (or regrowth) of each weight tensor as ``key`` says."""
        rule, value = key
        if rule == "fraction":
            self._prune(value)
        else:
            sizes = [self.params[k].numel() for k in self._prunable]
            self._prune(1.0, keep=[size - round(value * size) for size in sizes])
        self._mask_key = key

    def _use(self, module: torch.nn.Module, trainable: list[Any], weights: list[Any]) -> None:
        """Train and measure ``module``, its state ``weights`` (``trainable`` first)."""
        self.module, self._trainable, self._weights = module, trainable, weights

    def _map_versions(self, convert: Any) -> None:
        """Every kept global version through ``convert`` (the model in force changed)."""
        self._versions = deque((convert(v) for v in self._versions),
                               maxlen=self._versions.maxlen)

    def _to_structured(self, i: int) -> None:
        """The full global model (as it is) becomes structured variant ``i``'s smaller dense
        model: channels ranked by their L1 norm now, their values kept."""
        from netsim.torchnet.inspect import channel_fraction_of, channel_pruned, channels_of

        self._full_state = self.params
        self._load(self.params)  # (the full module: channels ranked by the global weights)
        self._full_module.eval()
        plan: dict[str, Any] = {}
        fraction = channel_fraction_of(self.variant_names[i])
        assert fraction is not None  # (checked when built)
        small, why = channel_pruned(self._full_module, self._shape, fraction, plan)
        if small is None:
            raise ValueError(f"model.variants[{i}]: the model has no structured variant: {why}")
        small = small.to("cpu").float()
        trainable = [w for w in small.parameters() if w.requires_grad]
        self._use(small, trainable, trainable + [b for b in small.buffers()
                                                 if b.is_floating_point()])
        self._small_names, self._plan, self._structure = _state_names(small), plan, i
        names, full_names = self._small_names, self._full_names
        self._live = []  # (the smaller model is dense)
        self.params = channels_of(dict(zip(full_names, self.params, strict=True)), plan, names)
        self._map_versions(lambda v: channels_of(dict(zip(full_names, v, strict=True)),
                                                 plan, names))

    def _to_full(self) -> None:
        """The structured variant's model written back into the full model it came from
        (the removed channels as they were, the full model's masks applied again)."""
        from netsim.torchnet.inspect import lift_channels

        base = dict(zip(self._full_names, self._full_state, strict=True))
        plan, small, full = self._plan, self._small_names, self._full_names

        def lift(v: Params) -> Params:
            return self._masked(lift_channels(base, dict(zip(small, v, strict=True)), plan,
                                              full))

        self._use(self._full_module, self._full_trainable, self._full_weights)
        self._live = [(k, torch.from_numpy(m.astype(np.float32)))
                      for k, m in zip(self._prunable, self.masks, strict=True) if not m.all()]
        self.params = lift(self.params)
        self._map_versions(lift)
        self._structure, self._plan, self._small_names = None, {}, []

    def _load(self, params: Params) -> None:
        """Copy ``params`` into the network's parameters (in place)."""
        with torch.no_grad():
            for w, p in zip(self._weights, params, strict=True):
                w.copy_(p)

    def _train(self, i: int, n: int, base: Params) -> Params:
        """Device ``i``'s model after ``local_epochs`` passes of masked minibatch SGD on the
        first ``n`` samples of its shard from ``base`` (new tensors; the run's minibatch
        stream)."""
        if self._dropout_seed is None:
            return self._steps(i, n, base)
        # a user's model may draw (dropout) from torch's global generator: from the run's
        # stream here, the caller's generator left as it was
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self._dropout_seed.integers(2**63 - 1)))
            return self._steps(i, n, base)

    def _steps(self, i: int, n: int, base: Params) -> Params:
        cfg, weights, module = self.config, self._trainable, self.module
        lr, size = cfg.learning_rate, cfg.batch_size
        x, y = self._shard_x[i], self._shard_y[i]
        self._load(base)
        module.train()
        for _ in range(cfg.local_epochs):
            order = torch.from_numpy(self._train_rng.permutation(n))
            for start in range(0, n, size):
                idx = order[start:start + size]
                loss = functional.cross_entropy(module(x[idx]), y[idx])
                grads = torch.autograd.grad(loss, weights)
                with torch.no_grad():
                    for w, g in zip(weights, grads, strict=True):
                        w.sub_(g, alpha=lr)
                    for k, mask in self._live:
                        weights[k].mul_(mask)
        return [w.detach().clone() for w in self._weights]

    def _masked(self, params: Params) -> Params:
        """``params`` (a fresh list) with the pruned weights at exactly 0.0, in place."""
        with torch.no_grad():
            for k, mask in self._live:
                params[k].mul_(mask)
        return params

    def _prune(self, fraction: float, keep: Sequence[int] | None = None) -> None:
        """Magnitude pruning (or regrowth) of each weight tensor to ``fraction`` (``keep[k]``
        entries of prunable tensor ``k`` when given)."""
        # (prune_masks ranks the even positions of its list: the prunable weights there)
        ranked: list[Any] = [a for k in self._prunable
                             for a in (self.params[k].double().numpy(), None)]
        self.masks, self._pruned_mag = mlp.prune_masks(
            ranked, self.masks, self._pruned_mag, fraction, keep)
        self._live = [(k, torch.from_numpy(m.astype(np.float32)))
                      for k, m in zip(self._prunable, self.masks, strict=True) if not m.all()]
        self.params = self._masked([p.clone() for p in self.params])

    def _measure(self, params: Params) -> tuple[float, float]:
        """Test cross-entropy (nats, summed in float64) and accuracy of ``params``."""
        self._load(params)
        x, y = self._x_test, self._y_test
        total, correct = 0.0, 0
        self.module.eval()  # (a user's dropout and batch norm; the built-ins have neither)
        with torch.no_grad():
            for start in range(0, len(y), EVAL_CHUNK):
                logits = self.module(x[start:start + EVAL_CHUNK])
                target = y[start:start + EVAL_CHUNK]
                total += float(functional.cross_entropy(logits.double(), target,
                                                        reduction="sum"))
                correct += int((logits.argmax(dim=1) == target).sum())
        return total / len(y), correct / len(y)


def _state_names(module: torch.nn.Module) -> list[str]:
    """The names of a model's state as the backend holds it: its trainable parameters, then
    its floating-point buffers."""
    return [n for n, w in module.named_parameters() if w.requires_grad] + \
        [n for n, b in module.named_buffers() if b.is_floating_point()]


def _user_data(source: Any) -> tuple[np.ndarray, np.ndarray]:
    """The samples (float32) and labels (int64) a user's model trains on: a shipped set or
    the ``.npz`` (:func:`netsim.torchnet.scenario.load_npz`).

    Raises
    ------
    ValueError
        ``model.torch.data...: ...`` when they do not fit the model's input shape.
    """
    from netsim.scenario.torch_model import load_npz
    from netsim.torchnet import DATA_SHAPES

    shape = input_shape_of(source)
    data = source.data if source.data is not None else zoo.DATASETS.get(source.factory)
    if data is None:
        raise ValueError("model.torch.data: the torch backend trains your model on data you "
                         "give (data: {npz: PATH}, or mnist or digits)")
    if isinstance(data, str):
        if DATA_SHAPES[data] != shape:
            raise ValueError(f"model.torch.data: the {data} data set's samples are "
                             f"{list(DATA_SHAPES[data])}, but input_shape is {list(shape)}")
        return load(data)
    try:
        return load_npz(data.npz, shape)
    except ValueError as exc:
        raise ValueError(f"model.torch.data.npz: {exc}") from None


def _build_user(source: Any, seed: int) -> torch.nn.Module:
    """The user's model from its factory (imported under the gate in force), initialised as
    the factory initialises it with torch's global generator seeded with ``seed`` (the
    caller's generator left as it was), in float32 on the CPU."""
    from netsim.scenario.errors import ScenarioError
    from netsim.torchnet.inspect import make_model
    from netsim.torchnet.scenario import load_source

    try:
        factory = load_source(source)
    except ScenarioError as exc:
        raise ValueError("; ".join(str(p) for p in exc.problems)) from None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = make_model(factory, source.factory)
    return module.to("cpu").float()
