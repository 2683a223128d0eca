"""Partition a labelled training split among devices: IID, Dirichlet label skew, or shards.

Shard mapping (netsim's convention)
-----------------------------------
The training split is partitioned among the scenario's devices in proportion to each
device's ``samples`` (the number of local samples the scenario declares; a device with 0
samples gets an empty shard).

* IID (``dirichlet_alpha=None``): one random permutation of the split is cut into
  consecutive pieces whose sizes are proportional to the weights (largest remainder).
* Non-IID (``dirichlet_alpha=a``): for each class c the class's samples are split over the
  devices with proportions ``p_c ~ Dirichlet(a * N * w)``, where ``w`` are the devices'
  normalised weights and ``N`` the number of devices with weight > 0. The mean share of
  device i is ``w_i`` for every class, and for equal weights this is the usual
  ``Dirichlet(a)`` label skew (a=0.1 strongly skewed, a=100 close to IID). Shard sizes are
  then proportional to the weights only in expectation.

* Label bias (``label_bias``, Async-HFL's split; netsim's formalization): shard sizes are
  proportional to the weights (largest remainder), each device's class counts its size times
  its class fractions (:func:`netsim.training.labels.bias_fractions`, the draw the surrogate
  makes too; largest remainder per device), taken from each class's samples in a random
  order; a class asked for more samples than it has starts again from a fresh random order
  (the paper's loader reuses data likewise), so only then do shards share samples, and a
  class asked for fewer leaves some unused.

Every device with weight > 0 receives at least one sample (moved from the largest shard
when a draw leaves it empty). Each shard's order is shuffled once and then fixed for the
run: a device that uses a fraction of its data in an epoch trains on a prefix of its shard
(see :func:`prefix_length`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from netsim.training.labels import bias_fractions


def _proportional_counts(total: int, weights: np.ndarray) -> np.ndarray:
    """Integer counts summing to ``total``, proportional to ``weights`` (largest remainder)."""
    share = total * weights / weights.sum()
    counts = np.floor(share).astype(int)
    remainder = total - int(counts.sum())
    if remainder > 0:
        order = np.argsort(-(share - counts), kind="stable")
        counts[order[:remainder]] += 1
    return counts


def partition(
    labels: np.ndarray,
    weights: Sequence[float],
    dirichlet_alpha: float | None,
    rng: np.random.Generator,
    shards_per_device: int | None = None,
    label_bias: Any = None,
) -> list[np.ndarray]:
    """Split the indices ``0..len(labels)-1`` into one shard per device.

    Parameters
    ----------
    labels:
        Integer class label of each training sample.
    weights:
        Per device, a non-negative weight (its declared sample count); shards are
        proportional to these. At least one must be > 0.
    dirichlet_alpha:
        None for IID shards, else the Dirichlet concentration (> 0) of the label skew.
    rng:
        Source of every random draw.
    shards_per_device:
        McMahan et al.'s pathological split instead (``dirichlet_alpha`` None): the indices
        sorted by label are cut into ``shards_per_device`` shards per device with weight > 0,
        of sizes proportional to the devices' weights, and dealt at random, that many to a
        device (so a device holds about ``shards_per_device`` classes).
    label_bias:
        Async-HFL's preference-bias split instead (a ``training.label_bias`` block; the
        other two None; module docstring).

    Returns
    -------
    One index array per device, in device order; disjoint, covering every sample (under
    ``label_bias``: see the module docstring).

    Raises
    ------
    ValueError
        If weights are negative or all zero, or ``dirichlet_alpha <= 0``.
    """
    w = np.asarray(weights, dtype=float)
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError("device sample weights must be >= 0 with at least one > 0")
    if dirichlet_alpha is not None and dirichlet_alpha <= 0:
        raise ValueError(f"dirichlet_alpha must be > 0 or None, got {dirichlet_alpha}")
    if sum(x is not None for x in (dirichlet_alpha, shards_per_device, label_bias)) > 1:
        raise ValueError("give one of dirichlet_alpha, shards_per_device and label_bias")
    if shards_per_device is not None and shards_per_device < 1:
        raise ValueError(f"shards_per_device must be >= 1, got {shards_per_device}")
    n = len(labels)
    active = np.flatnonzero(w > 0)
    if label_bias is not None:
        shards = _biased(labels, w, active, label_bias, rng)
    elif shards_per_device is not None:
        shards = _pathological(labels, w, active, shards_per_device, rng)
    elif dirichlet_alpha is None:
        perm = rng.permutation(n)
        counts = _proportional_counts(n, w)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        shards = [perm[bounds[i] : bounds[i + 1]] for i in range(len(w))]
    else:
        w_active = w[active] / w[active].sum()
        concentration = dirichlet_alpha * len(active) * w_active
        pieces: list[list[np.ndarray]] = [[] for _ in range(len(w))]
        for c in np.unique(labels):
            members = rng.permutation(np.flatnonzero(labels == c))
            p = rng.dirichlet(concentration)
            counts = _proportional_counts(len(members), p)
            bounds = np.concatenate([[0], np.cumsum(counts)])
            for j, dev in enumerate(active):
                pieces[dev].append(members[bounds[j] : bounds[j + 1]])
        shards = [
            np.concatenate(p) if p else np.empty(0, dtype=int) for p in pieces
        ]
    shards = _ensure_nonempty(shards, active)
    return [rng.permutation(s) for s in shards]


def _pathological(labels: np.ndarray, w: np.ndarray, active: np.ndarray, per_device: int,
                  rng: np.random.Generator) -> list[np.ndarray]:
    """McMahan et al.'s shards: the label-sorted indices cut into ``per_device`` pieces per
    active device (piece sizes follow the device's weight), dealt at random."""
    order = np.argsort(labels, kind="stable")
    # each active device's share of the data, cut into per_device equal pieces, in a
    # random order along the sorted indices (so a device's pieces land on random classes)
    piece_w = np.repeat(w[active] / per_device, per_device)
    owner = np.repeat(active, per_device)
    deal = rng.permutation(len(piece_w))
    counts = _proportional_counts(len(labels), piece_w[deal])
    bounds = np.concatenate([[0], np.cumsum(counts)])
    pieces: list[list[np.ndarray]] = [[] for _ in range(len(w))]
    for j, dev in enumerate(owner[deal]):
        pieces[dev].append(order[bounds[j]: bounds[j + 1]])
    return [np.concatenate(p) if p else np.empty(0, dtype=int) for p in pieces]


def _biased(labels: np.ndarray, w: np.ndarray, active: np.ndarray, label_bias: Any,
            rng: np.random.Generator) -> list[np.ndarray]:
    """Async-HFL's preference-bias shards (module docstring)."""
    labels = np.asarray(labels, dtype=np.int64)
    classes = int(labels.max()) + 1 if len(labels) else 1
    sizes = _proportional_counts(len(labels), w)
    mix = bias_fractions(len(active), classes, label_bias, rng)
    counts = np.stack([_proportional_counts(int(sizes[dev]), mix[j])
                       if sizes[dev] > 0 else np.zeros(classes, dtype=int)
                       for j, dev in enumerate(active.tolist())]) \
        if len(active) else np.zeros((0, classes), dtype=int)
    pieces: list[list[np.ndarray]] = [[] for _ in range(len(w))]
    for c in range(classes):
        members = np.flatnonzero(labels == c)
        want = counts[:, c]
        if len(members) == 0 or want.sum() == 0:
            continue
        rounds = -(-int(want.sum()) // len(members))  # (fresh random orders, one after another)
        order = np.concatenate([rng.permutation(members) for _ in range(rounds)])
        bounds = np.concatenate([[0], np.cumsum(want)])
        for j, dev in enumerate(active.tolist()):
            pieces[dev].append(order[bounds[j]: bounds[j + 1]])
    return [np.concatenate(p) if p else np.empty(0, dtype=int) for p in pieces]


def _ensure_nonempty(shards: list[np.ndarray], active: np.ndarray) -> list[np.ndarray]:
    """Give every active device at least one sample, taken from the largest shard."""
    shards = [np.asarray(s, dtype=int) for s in shards]
    for dev in active:
        if len(shards[dev]) == 0:
            donor = int(np.argmax([len(s) for s in shards]))
            if len(shards[donor]) < 2:
                raise ValueError("more devices with samples than training samples")
            shards[dev] = shards[donor][-1:]
            shards[donor] = shards[donor][:-1]
    return shards


def prefix_length(samples_used: int, samples_declared: int, shard_size: int) -> int:
    """How many shard samples a device trains on when it uses ``samples_used`` of its
    ``samples_declared``: ``max(1, round(samples_used / samples_declared * shard_size))``,
    capped at the shard size; 0 when ``samples_used`` is 0.
    """
    if samples_used <= 0 or shard_size == 0:
        return 0
    if samples_declared <= 0:
        raise ValueError("a device with 0 declared samples cannot train")
    return min(shard_size, max(1, int(round(samples_used / samples_declared * shard_size))))
