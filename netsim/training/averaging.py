"""Federated averaging, one formula for every real-training backend.

Both real backends (the numpy MLP of :mod:`netsim.training.real` and the PyTorch networks
of :mod:`netsim.torchnet`) hold a model as a list of parameter arrays (numpy arrays or
torch tensors: anything with ``*``, ``-``, ``+=`` and ``/``) and aggregate it the same way:

* a synchronous epoch (:meth:`FederatedAveraging.advance`): each participant trains from the
  global model; the server takes the participants' models' mean weighted by the shard
  samples each trained on;
* a hierarchical cloud round (:meth:`FederatedAveraging.advance_tiers`): the same mean per
  edge and edge round, then the edges' models' mean weighted by the samples of their last
  round;
* an asynchronous aggregation (:meth:`FederatedAveraging.advance_updates`): each update is
  trained from the global model of ``staleness`` aggregations ago; the server adds the
  sample-weighted mean of the updates' changes to the current model.

After every aggregation the variant's pruning masks are applied again. The sums run in the
participants' order with the operations of :class:`WeightedMean` (``w * p`` then ``+=``,
divided by the total weight at the end), so the numpy backend's results are the same bit for
bit as they were before this module held them. A backend supplies the training, the masking,
the pruning and the measurement (:class:`FederatedAveraging`'s hooks).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netsim.training.labels import histogram_of
from netsim.training.progress import EpochProgress
from netsim.training.shards import prefix_length

#: A model: its parameter arrays (numpy arrays or torch tensors) in a fixed order.
Params = list[Any]


class WeightedMean:
    """Running weighted sum of models; :meth:`mean` divides it by the total weight.

    ``add(params, w)`` adds ``w * p`` to the sum of each parameter (the first call allocates
    the sums); weights are sample counts (>= 1). Works on numpy arrays and torch tensors
    alike (torch: call it under ``torch.no_grad()``).
    """

    def __init__(self) -> None:
        self.total = 0.0
        """The weights added so far (samples)."""
        self._sum: Params | None = None

    def add(self, params: Sequence[Any], weight: float) -> None:
        """Add ``weight`` (samples) times the model ``params`` to the sum."""
        if self._sum is None:
            self._sum = [weight * p for p in params]
        else:
            for a, p in zip(self._sum, params, strict=True):
                a += weight * p
        self.total += weight

    def mean(self) -> Params | None:
        """The weighted mean (new arrays), or None when nothing was added."""
        if self._sum is None:
            return None
        return [a / self.total for a in self._sum]


class FederatedAveraging:
    """The epochs of a real-training backend (federated averaging, see the module docstring).

    A subclass sets, in its ``__init__``: ``label`` (its name in messages), ``device_ids``,
    ``device_samples`` (declared samples), ``shards`` (one index array per device),
    ``fractions`` (each variant's ``params_fraction``), ``params`` (the global model, never
    modified in place once built: versions share it), ``params_fraction`` (1.0), ``epoch``
    (0) and ``_versions`` (a deque holding ``params``); and implements :meth:`_train`,
    :meth:`_masked`, :meth:`_prune` and :meth:`_measure`.
    """

    label = "real"
    device_ids: list[str]
    device_samples: list[int]
    shards: list[np.ndarray]
    _y_train: np.ndarray
    """The training split's labels (what :meth:`label_counts` counts)."""
    fractions: list[float]
    params: Params
    params_fraction: float
    epoch: int
    _versions: deque[Params]

    # -- the hooks ----------------------------------------------------------------------------
    def _train(self, i: int, n: int, base: Params) -> Params:
        """Device ``i``'s model after local training on the first ``n`` (>= 1) samples of its
        shard from ``base`` (new arrays; ``base`` unchanged)."""
        raise NotImplementedError

    def _masked(self, params: Params) -> Params:
        """``params`` with the pruned weights at exactly 0.0 (``params`` is a fresh list
        that nothing else holds: it may be changed in place)."""
        raise NotImplementedError

    def _prune(self, fraction: float) -> None:
        """Prune (or regrow) the masks to ``fraction`` and set ``params`` to the masked model
        (new arrays)."""
        raise NotImplementedError

    def _measure(self, params: Params) -> tuple[float, float]:
        """Test cross-entropy (nats) and accuracy in [0, 1] of ``params``."""
        raise NotImplementedError

    # -- the interface --------------------------------------------------------------------------
    @property
    def training_size(self) -> int:
        """Samples in the training split the devices' shards are drawn from."""
        return len(self._y_train)

    def label_counts(self) -> np.ndarray:
        """Each device's label histogram: an (N, classes) int array of its shard's labels
        (the subclass's ``_y_train``: the training split's labels)."""
        labels = np.asarray(self._y_train)
        classes = int(labels.max()) + 1 if len(labels) else 0
        return np.stack([histogram_of(labels[s], classes) for s in self.shards]) \
            if self.shards else np.zeros((0, classes), dtype=np.int64)

    def initial_loss(self) -> float:
        """Test cross-entropy (nats) of the initial global model."""
        return self._measure(self.params)[0]

    def set_variant(self, variant_index: int) -> None:
        """Prune (or regrow) the global model to the variant's ``params_fraction``."""
        if not 0 <= variant_index < len(self.fractions):
            raise ValueError(
                f"variant index {variant_index} out of range 0..{len(self.fractions) - 1}"
            )
        fraction = self.fractions[variant_index]
        if fraction == self.params_fraction:
            return
        self._prune(fraction)
        self.params_fraction = fraction

    def evaluate(self, params: Params) -> EpochProgress:
        """Test cross-entropy (nats) and accuracy of ``params`` on the run's test split."""
        loss, accuracy = self._measure(params)
        return EpochProgress(loss=loss, accuracy=accuracy)

    def local_update(self, device_id: str, used: int, base: Params) -> tuple[Params, int]:
        """Device ``device_id``'s model after training ``used`` of its declared samples from
        ``base`` (what :meth:`advance` runs for each participant, drawing from the same
        minibatch stream), and the shard samples it trained on: the per-client step for a
        driver that calls clients itself (netsim's digits MLP as a Flower ClientApp)."""
        return self._local(self.device_ids.index(device_id), int(used), base)

    def _local(self, i: int, used: int, base: Params) -> tuple[Params, int]:
        """Device ``i``'s model after training ``used`` of its declared samples from ``base``,
        and the shard samples it trained on (0: none, ``base`` returned)."""
        if used > self.device_samples[i]:
            raise ValueError(
                f"device {self.device_ids[i]!r} uses {used} samples but holds "
                f"{self.device_samples[i]}")
        n = prefix_length(used, self.device_samples[i], len(self.shards[i]))
        if n == 0:
            return base, 0
        return self._train(i, n, base), n

    def _progress(self) -> EpochProgress:
        loss, accuracy = self._measure(self.params)
        return EpochProgress(loss=loss, accuracy=accuracy)

    def advance(self, samples_by_device: Mapping[str, int], variant_index: int,
                local: Any = None) -> EpochProgress:
        """Run one federated epoch and return the test loss (nats) and accuracy after it.
        ``local`` (a decision's LocalTraining) is not read: real training's passes and
        minibatches are ``training.real``'s (:class:`~netsim.training.real.RealTrainingConfig`).

        ``samples_by_device`` maps participant id -> samples it uses this epoch (its
        declared samples at most); absent devices and 0 samples sit the epoch out. With no
        participant the model is unchanged.
        """
        unknown = set(samples_by_device) - set(self.device_ids)
        if unknown:
            raise ValueError(f"unknown device ids: {sorted(unknown)}")
        self.set_variant(variant_index)
        server = WeightedMean()
        for i, dev in enumerate(self.device_ids):
            trained, n = self._local(i, int(samples_by_device.get(dev, 0)), self.params)
            if n:
                server.add(trained, n)
        return self._synchronous_end(server.mean())

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
            raise ValueError(f"the {self.label} backend trains synchronous hierarchical rounds "
                             "only (an update with staleness > 0: asynchronous tiers)")
        self.set_variant(variant_index)
        index = {d: i for i, d in enumerate(self.device_ids)}
        models: list[Params] = [self.params] * len(edge_updates)
        weight = [0.0] * len(edge_updates)
        for j in range(max((len(e.rounds) for e in edge_updates), default=0)):
            todo = sorted((index[d], k, s)
                          for k, e in enumerate(edge_updates) if j < len(e.rounds)
                          for d, s in zip(e.rounds[j].devices, e.rounds[j].samples.tolist(),
                                          strict=True))
            edges: dict[int, WeightedMean] = {}
            for i, k, used in todo:
                trained, n = self._local(i, used, models[k])
                if n:
                    edges.setdefault(k, WeightedMean()).add(trained, n)
            for k, edge in edges.items():
                mean = edge.mean()
                assert mean is not None
                models[k] = self._masked(mean)
                weight[k] = edge.total
        cloud = WeightedMean()
        for k, model in enumerate(models):
            if weight[k]:
                cloud.add(model, weight[k])
        return self._synchronous_end(cloud.mean())

    def _synchronous_end(self, mean: Params | None) -> EpochProgress:
        """Close a synchronous epoch: the global model becomes the masked ``mean`` (unchanged
        when nobody trained), and it is the only version kept: a synchronous epoch runs only
        when no asynchronous job is in flight (the engine's rule), so no later update can be
        staler than it. Returns the test loss and accuracy."""
        if mean is not None:
            self.params = self._masked(mean)
        self.epoch += 1
        self._versions.clear()
        self._versions.append(self.params)
        return self._progress()

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
        server = WeightedMean()
        for u in updates:
            if u.device not in index:
                raise ValueError(f"unknown device id: {u.device!r}")
            if not 0 <= u.staleness < kept:
                raise ValueError(f"update of {u.device!r}: staleness {u.staleness} outside "
                                 f"0..{kept - 1} (the versions kept)")
            base = self._versions[-1 - u.staleness]
            trained, n = self._local(index[u.device], int(u.samples), base)
            if n:
                server.add([a - b for a, b in zip(trained, base, strict=True)], n)
        change = server.mean()
        if change is not None:
            self.params = self._masked(
                [p + c for p, c in zip(self.params, change, strict=True)])
        self.epoch += 1
        self._versions.append(self.params)  # (the oldest drops out past the versions kept)
        return self._progress()
