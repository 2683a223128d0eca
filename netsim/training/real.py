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

from netsim.scenario.schema import RealTrainingSpec
from netsim.training import mlp
from netsim.training.averaging import FederatedAveraging
from netsim.training.shards import partition

#: Built-in networks the real backend can train: name -> (inputs, outputs); the hidden
#: width comes from ``training.real.hidden_units`` (64 for the built-in ``mlp-digits``).
REAL_MODELS: dict[str, tuple[int, int]] = {"mlp-digits": (64, 10)}
#: Global model versions kept for stale asynchronous updates (an update may be at most this
#: many aggregations stale; 1,024 versions of mlp-digits hold about 40 MB).
MAX_VERSIONS = 1024


#: The scenario's ``training.real`` defaults, read from their one place (the schema)
_SPEC_DEFAULTS = RealTrainingSpec()


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

    learning_rate: float = _SPEC_DEFAULTS.learning_rate
    batch_size: int = _SPEC_DEFAULTS.batch_size
    local_epochs: int = _SPEC_DEFAULTS.local_epochs
    test_fraction: float = _SPEC_DEFAULTS.test_fraction
    hidden_units: int = _SPEC_DEFAULTS.hidden_units

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


class RealBackend(FederatedAveraging):
    """Trains ``mlp-digits`` with federated averaging; one :meth:`advance` per epoch (the
    epochs' averaging: :class:`netsim.training.averaging.FederatedAveraging`).

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
            self._y_train, self.device_samples, self.dirichlet_alpha, shard_rng,
            shards_per_device=_get(training, "shards_per_device"),
            label_bias=_get(training, "label_bias"),
        )
        self.params = mlp.init_params(self.layer_sizes, init_rng)
        self.masks = mlp.full_masks(self.params)
        self._pruned_mag = [np.zeros(w.shape) for w in self.params[0::2]]
        self.params_fraction = 1.0
        self.epoch = 0
        # the global model after each of the last aggregations, the current one last (a stale
        # update's base is ``staleness`` from the end)
        self._versions = deque([self.params], maxlen=MAX_VERSIONS)

    def _train(self, i: int, n: int, base: mlp.Params) -> mlp.Params:
        """Device ``i``'s model after ``local_epochs`` passes of masked minibatch SGD on the
        first ``n`` samples of its shard from ``base`` (the run's minibatch stream)."""
        idx = self.shards[i][:n]
        cfg = self.config
        return mlp.sgd_train(base, self.masks, self._x_train[idx], self._y_train[idx],
                             learning_rate=cfg.learning_rate, batch_size=cfg.batch_size,
                             passes=cfg.local_epochs, rng=self._train_rng)

    def _masked(self, params: mlp.Params) -> mlp.Params:
        """``params`` with the pruned weights at exactly 0.0 (a new list)."""
        return mlp.apply_masks(params, self.masks)

    def _prune(self, fraction: float) -> None:
        """Magnitude pruning (or regrowth) of each weight matrix to ``fraction``."""
        self.masks, self._pruned_mag = mlp.prune_masks(
            self.params, self.masks, self._pruned_mag, fraction
        )
        self.params = mlp.apply_masks(self.params, self.masks)

    def _measure(self, params: mlp.Params) -> tuple[float, float]:
        """Test cross-entropy (nats) and accuracy of ``params`` on the run's test split."""
        return mlp.evaluate(params, self._x_test, self._y_test)
