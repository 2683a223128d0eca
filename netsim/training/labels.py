"""Which labels each device holds: the surrogate's label histograms (IID, Dirichlet, shards).

The real backends split a real data set's indices (:func:`netsim.training.shards.partition`);
the surrogate has no data set, so it draws each device's *label histogram* from the same
distributions, for the per-class state of :mod:`netsim.training.coverage`:

* IID: every device holds the population's class mix (no draw: the histograms are exact
  proportions, so the per-class state collapses to one class, docs/curves.md).
* ``dirichlet_alpha = a``: as :func:`~netsim.training.shards.partition` splits each class over
  the devices with proportions ``Dirichlet(a * N * w)`` (``w`` the devices' normalised sample
  counts), the surrogate draws the same matrix and normalises each device's row to its own
  samples (a device holds what the scenario declares; the classes' totals then match the
  population's only in expectation).
* ``shards_per_device = s``: McMahan et al. (AISTATS 2017)'s pathological split: the data
  sorted by label is cut into ``s x N`` equal shards, dealt at random, ``s`` to a device; a
  device's histogram is the classes of its shards (each shard's class by its position in the
  sorted order), scaled to its own samples.

Every histogram row sums to the device's samples (float counts); the population's class mix
is uniform over the model's ``classes`` (the built-in data sets' are within 1 % of it).
"""

from __future__ import annotations

import numpy as np


def label_histograms(samples: np.ndarray, classes: int, dirichlet_alpha: float | None,
                     shards_per_device: int | None,
                     rng: np.random.Generator) -> np.ndarray | None:
    """Each device's label histogram, an (N, classes) float array whose rows sum to
    ``samples`` (None for IID data: every row is ``samples / classes``).

    Parameters
    ----------
    samples: each device's samples (>= 0); a device with none gets a zero row.
    classes: classes of the task (>= 1).
    dirichlet_alpha, shards_per_device: the skew (at most one given; both None: IID).
    rng: the source of every draw.
    """
    d = np.asarray(samples, dtype=float)
    if dirichlet_alpha is None and shards_per_device is None:
        return None
    active = d > 0
    n_active = int(active.sum())
    out = np.zeros((len(d), classes))
    if n_active == 0:
        return out
    if dirichlet_alpha is not None:
        w = d[active] / d[active].sum()
        # one Dirichlet over the devices per class, as netsim.training.shards.partition draws
        share = np.stack([rng.dirichlet(dirichlet_alpha * n_active * w) for _ in range(classes)],
                         axis=1)
    else:
        assert shards_per_device is not None
        n_shards = shards_per_device * n_active
        # shard j of the label-sorted data holds class floor(j * classes / n_shards)
        dealt = rng.permutation(n_shards).reshape(n_active, shards_per_device)
        share = np.zeros((n_active, classes))
        np.add.at(share, (np.repeat(np.arange(n_active), shards_per_device),
                          (dealt.ravel() * classes) // n_shards), 1.0)
    rows = share.sum(axis=1, keepdims=True)
    # a device whose draw left it no mass holds the population's mix (never a zero row)
    share = np.where(rows > 0, share / np.where(rows > 0, rows, 1.0), 1.0 / classes)
    out[active] = share * d[active, None]
    return out


def histogram_of(labels: np.ndarray, classes: int) -> np.ndarray:
    """The label histogram (counts per class, length ``classes``) of a shard's labels."""
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=classes)[:classes]
