"""Real-training backend: federated averaging of a small numpy MLP on sklearn's digits.

``training.backend: real`` makes the engine call :class:`RealBackend` in place of the
surrogate loss model. Device time and energy still come from the simulated devices; this
module only produces the loss.

What one run does
-----------------
* Data: ``sklearn.datasets.load_digits`` (1797 samples of 8x8 pixels scaled to [0, 1],
  10 classes; shipped with scikit-learn, nothing is downloaded). A stratified held-out
  test split of ``test_fraction`` is drawn per run; the rest is the training split.
* Shards: the training split is partitioned among the devices in proportion to their
  declared ``samples``, IID or with Dirichlet label skew (see :mod:`netsim.training.shards`).
* Each epoch (:meth:`RealBackend.advance`): the global model is pruned/regrown to the
  chosen variant's ``params_fraction`` (magnitude pruning per weight matrix, masks kept:
  see :func:`netsim.training.mlp.prune_masks`); each participant i that uses d_i of its D_i
  declared samples runs ``local_epochs`` passes of minibatch SGD on the first
  ``max(1, round(d_i / D_i * |shard_i|))`` samples of its shard; the server averages the
  participants' models weighted by the samples each trained on and re-applies the mask;
  test cross-entropy (nats) and accuracy are measured on the test split.
* Randomness: the run's generator is split (``rng.spawn``) into independent streams for the
  test split, the shards, the initial weights and the minibatch order, so the same seed
  gives identical curves.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

import numpy as np

from netsim.training import mlp
from netsim.training.progress import EpochProgress
from netsim.training.shards import partition, prefix_length

#: Built-in networks the real backend can train: name -> (inputs, outputs); the hidden
#: width comes from ``training.real.hidden_units`` (64 for the built-in ``mlp-digits``).
REAL_MODELS: dict[str, tuple[int, int]] = {"mlp-digits": (64, 10)}
#: Global model versions kept for stale asynchronous updates (an update may be at most this
#: many aggregations stale; 1,024 versions of mlp-digits hold about 40 MB).
MAX_VERSIONS = 1024


@dataclass(frozen=True)
class RealTrainingConfig:
    """Hyper-parameters of real training (scenario ``training.real``).

    Attributes
    ----------
    learning_rate:
        SGD step size (dimensionless), > 0.
    batch_size:
        Minibatch size in samples, >= 1.
    local_epochs:
        Passes over its data each participant makes per global epoch, >= 1.
    test_fraction:
        Fraction of the dataset held out for the test loss, in (0, 1).
    hidden_units:
        Width of the hidden layer (64 matches the built-in ``mlp-digits`` spec).
    """

    learning_rate: float = 0.05
    batch_size: int = 16
    local_epochs: int = 2
    test_fraction: float = 0.2
    hidden_units: int = 64

    def __post_init__(self) -> None:
        if not self.learning_rate > 0:
            raise ValueError(f"training.real.learning_rate must be > 0, got {self.learning_rate}")
        if self.batch_size < 1:
            raise ValueError(f"training.real.batch_size must be >= 1, got {self.batch_size}")
        if self.local_epochs < 1:
            raise ValueError(f"training.real.local_epochs must be >= 1, got {self.local_epochs}")
        if self.hidden_units < 1:
            raise ValueError(f"training.real.hidden_units must be >= 1, got {self.hidden_units}")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError(
                f"training.real.test_fraction must be in (0, 1), got {self.test_fraction}"
            )


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """Attribute or mapping key ``name`` of ``obj`` (None-safe)."""
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def real_config(training: Any) -> RealTrainingConfig:
    """The :class:`RealTrainingConfig` of a training spec (object or dict), defaults filled."""
    sub = _get(training, "real")
    if isinstance(sub, RealTrainingConfig):
        return sub
    values = {f.name: _get(sub, f.name) for f in fields(RealTrainingConfig)}
    return RealTrainingConfig(**{k: v for k, v in values.items() if v is not None})


@lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    data = load_digits()
    x = np.asarray(data.data, dtype=np.float64) / 16.0
    y = np.asarray(data.target, dtype=np.int64)
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y


def stratified_split(
    labels: np.ndarray, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Train and test index arrays; each class contributes round(test_fraction * count)."""
    train, test = [], []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        k = int(round(test_fraction * len(members)))
        test.append(members[:k])
        train.append(members[k:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


class RealBackend:
    """Trains ``mlp-digits`` with federated averaging; one :meth:`advance` per epoch.

    Parameters
    ----------
    model:
        A ModelSpec-like object with ``name`` (must be a key of :data:`REAL_MODELS`) and
        ``variants`` (objects or dicts with ``params_fraction``; index 0 the full model).
    device_ids, device_samples:
        The scenario's devices and each one's declared local samples (>= 0).
    training:
        A TrainingSpec-like object or dict: ``dirichlet_alpha`` (None = IID) and the
        optional ``real`` sub-object (:class:`RealTrainingConfig` fields).
    rng:
        The run's generator; every random draw of the backend comes from it.
    """

    def __init__(
        self,
        model: Any,
        device_ids: Sequence[str],
        device_samples: Sequence[int],
        training: Any,
        rng: np.random.Generator,
    ) -> None:
        name = _get(model, "name")
        if name not in REAL_MODELS:
            raise ValueError(
                f"model.name: the real backend trains {sorted(REAL_MODELS)}, got {name!r}"
            )
        if len(device_ids) != len(device_samples):
            raise ValueError("device_ids and device_samples differ in length")
        self.fractions = [float(_get(v, "params_fraction")) for v in _get(model, "variants")]
        self.config = real_config(training)
        n_in, n_out = REAL_MODELS[name]
        self.layer_sizes = (n_in, self.config.hidden_units, n_out)
        self.dirichlet_alpha: float | None = _get(training, "dirichlet_alpha")
        self.device_ids = list(device_ids)
        self.device_samples = [int(s) for s in device_samples]
        split_rng, shard_rng, init_rng, self._train_rng = rng.spawn(4)

        x, y = _digits()
        train_idx, test_idx = stratified_split(y, self.config.test_fraction, split_rng)
        self._x_train, self._y_train = x[train_idx], y[train_idx]
        self._x_test, self._y_test = x[test_idx], y[test_idx]
        self.shards = partition(
            self._y_train, self.device_samples, self.dirichlet_alpha, shard_rng
        )
        self.params = mlp.init_params(self.layer_sizes, init_rng)
        self.masks = mlp.full_masks(self.params)
        self._pruned_mag = [np.zeros(w.shape) for w in self.params[0::2]]
        self.params_fraction = 1.0
        self.epoch = 0
        # the global model after each of the last aggregations, the current one last (a stale
        # update's base is ``staleness`` from the end)
        self._versions: deque[mlp.Params] = deque([self.params], maxlen=MAX_VERSIONS)

    def initial_loss(self) -> float:
        """Test cross-entropy (nats) of the initial global model."""
        return mlp.evaluate(self.params, self._x_test, self._y_test)[0]

    def set_variant(self, variant_index: int) -> None:
        """Prune (or regrow) the global model to the variant's ``params_fraction``."""
        if not 0 <= variant_index < len(self.fractions):
            raise ValueError(
                f"variant index {variant_index} out of range 0..{len(self.fractions) - 1}"
            )
        fraction = self.fractions[variant_index]
        if fraction == self.params_fraction:
            return
        self.masks, self._pruned_mag = mlp.prune_masks(
            self.params, self.masks, self._pruned_mag, fraction
        )
        self.params = mlp.apply_masks(self.params, self.masks)
        self.params_fraction = fraction

    def advance(self, samples_by_device: Mapping[str, int], variant_index: int,
                local: Any = None) -> EpochProgress:
        """Run one federated epoch and return the test loss (nats) and accuracy after it.
        ``local`` (a decision's LocalTraining) is not read: real training's passes and
        minibatches are ``training.real``'s (:class:`RealTrainingConfig`).

        ``samples_by_device`` maps participant id -> samples it uses this epoch (its
        declared samples at most); absent devices and 0 samples sit the epoch out. With no
        participant the model is unchanged.
        """
        unknown = set(samples_by_device) - set(self.device_ids)
        if unknown:
            raise ValueError(f"unknown device ids: {sorted(unknown)}")
        self.set_variant(variant_index)
        total_w = 0.0
        acc: mlp.Params | None = None
        for i, dev in enumerate(self.device_ids):
            local, n = self._local(i, int(samples_by_device.get(dev, 0)), self.params)
            if n == 0:
                continue
            if acc is None:
                acc = [n * p for p in local]
            else:
                for a, p in zip(acc, local, strict=True):
                    a += n * p
            total_w += n
        if acc is not None:
            self.params = mlp.apply_masks([a / total_w for a in acc], self.masks)
        self.epoch += 1
        # a synchronous epoch runs only when no asynchronous job is in flight (the engine's
        # rule), so no later update can be staler than this model: only it is kept
        self._versions.clear()
        self._versions.append(self.params)
        loss, accuracy = mlp.evaluate(self.params, self._x_test, self._y_test)
        return EpochProgress(loss=loss, accuracy=accuracy)

    def advance_tiers(self, edge_updates: Sequence[Any], variant_index: int) -> EpochProgress:
        """One synchronous hierarchical cloud round (docs/hierarchical.md): every edge starts
        from the global model; in each edge round its devices train from the edge's model and
        the edge averages their models weighted by the samples each trained on; the cloud then
        averages the edges' models weighted by the samples of their last round. Devices train
        in the scenario's order within a round (the minibatch stream as :meth:`advance` draws
        it), so one edge round with every device is :meth:`advance`'s federated averaging
        (an average of sample-weighted averages), equal to rounding. Asynchronous tiers (a
        staleness above 0) are not trained for real: ValueError."""
        if any(e.staleness or any(np.any(r.staleness) for r in e.rounds)
               for e in edge_updates):
            raise ValueError("the real backend trains synchronous hierarchical rounds only "
                             "(an update with staleness > 0: asynchronous tiers)")
        self.set_variant(variant_index)
        index = {d: i for i, d in enumerate(self.device_ids)}
        models: list[mlp.Params] = [self.params] * len(edge_updates)
        weight = [0.0] * len(edge_updates)
        for j in range(max((len(e.rounds) for e in edge_updates), default=0)):
            todo = sorted((index[d], k, s)
                          for k, e in enumerate(edge_updates) if j < len(e.rounds)
                          for d, s in zip(e.rounds[j].devices, e.rounds[j].samples.tolist(),
                                          strict=True))
            acc: dict[int, mlp.Params] = {}
            total: dict[int, float] = {}
            for i, k, used in todo:
                local, n = self._local(i, used, models[k])
                if n == 0:
                    continue
                if k not in acc:
                    acc[k], total[k] = [n * p for p in local], 0.0
                else:
                    for a, p in zip(acc[k], local, strict=True):
                        a += n * p
                total[k] += n
            for k, summed in acc.items():
                models[k] = mlp.apply_masks([a / total[k] for a in summed], self.masks)
                weight[k] = total[k]
        if sum(weight) > 0:
            cloud = [w * p for p in models[0]] if (w := weight[0]) else None
            for k in range(1, len(models)):
                if weight[k] == 0:
                    continue
                if cloud is None:
                    cloud = [weight[k] * p for p in models[k]]
                else:
                    for a, p in zip(cloud, models[k], strict=True):
                        a += weight[k] * p
            assert cloud is not None
            self.params = mlp.apply_masks([a / sum(weight) for a in cloud], self.masks)
        self.epoch += 1
        self._versions.clear()
        self._versions.append(self.params)
        loss, accuracy = mlp.evaluate(self.params, self._x_test, self._y_test)
        return EpochProgress(loss=loss, accuracy=accuracy)

    def local_update(self, device_id: str, used: int,
                     base: mlp.Params) -> tuple[mlp.Params, int]:
        """Device ``device_id``'s model after training ``used`` of its declared samples from
        ``base`` (what :meth:`advance` runs for each participant, drawing from the same
        minibatch stream), and the shard samples it trained on: the per-client step for a
        driver that calls clients itself (netsim's digits MLP as a Flower ClientApp)."""
        return self._local(self.device_ids.index(device_id), int(used), base)

    def evaluate(self, params: mlp.Params) -> EpochProgress:
        """Test cross-entropy (nats) and accuracy of ``params`` on the run's test split."""
        loss, accuracy = mlp.evaluate(params, self._x_test, self._y_test)
        return EpochProgress(loss=loss, accuracy=accuracy)

    def _local(self, i: int, used: int, base: mlp.Params) -> tuple[mlp.Params, int]:
        """Device ``i``'s model after training ``used`` of its declared samples from ``base``,
        and the shard samples it trained on (0: none, ``base`` returned)."""
        if used > self.device_samples[i]:
            raise ValueError(
                f"device {self.device_ids[i]!r} uses {used} samples but holds "
                f"{self.device_samples[i]}")
        n = prefix_length(used, self.device_samples[i], len(self.shards[i]))
        if n == 0:
            return base, 0
        idx = self.shards[i][:n]
        cfg = self.config
        return mlp.sgd_train(base, self.masks, self._x_train[idx], self._y_train[idx],
                             learning_rate=cfg.learning_rate, batch_size=cfg.batch_size,
                             passes=cfg.local_epochs, rng=self._train_rng), n

    def advance_updates(self, updates: Sequence[Any], variant_index: int) -> EpochProgress:
        """One asynchronous aggregation (FedBuff's server step with a server learning rate of
        1, netsim's formalization, docs/async.md): each update (``device``, ``samples``,
        ``staleness``) is trained from the global model of ``staleness`` aggregations ago (the
        version its job downloaded); the server adds the sample-weighted mean of the updates'
        changes to the current model. With every staleness 0 this is :meth:`advance`'s
        federated averaging. Returns the test loss and accuracy after it."""
        self.set_variant(variant_index)
        self._versions[-1] = self.params  # (a variant change applies to the current model)
        index = {d: i for i, d in enumerate(self.device_ids)}
        kept = len(self._versions)
        total_w = 0.0
        acc: list[np.ndarray] | None = None
        for u in updates:
            if u.device not in index:
                raise ValueError(f"unknown device id: {u.device!r}")
            if not 0 <= u.staleness < kept:
                raise ValueError(f"update of {u.device!r}: staleness {u.staleness} outside "
                                 f"0..{kept - 1} (the versions kept)")
            base = self._versions[-1 - u.staleness]
            local, n = self._local(index[u.device], int(u.samples), base)
            if n == 0:
                continue
            delta = [n * (a - b) for a, b in zip(local, base, strict=True)]
            if acc is None:
                acc = delta
            else:
                for a, d in zip(acc, delta, strict=True):
                    a += d
            total_w += n
        if acc is not None:
            self.params = mlp.apply_masks(
                [p + a / total_w for p, a in zip(self.params, acc, strict=True)], self.masks)
        self.epoch += 1
        self._versions.append(self.params)  # (the oldest drops out past MAX_VERSIONS)
        loss, accuracy = mlp.evaluate(self.params, self._x_test, self._y_test)
        return EpochProgress(loss=loss, accuracy=accuracy)
