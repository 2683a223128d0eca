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
* ``label_bias = {primary: p, secondary: s}``: Async-HFL's preference bias (its
  ``load_data.py`` ``BiasLoader``; the rule as written here is ours): a device holds ``p`` of
  its samples from its primary label, ``s`` from one other label drawn uniformly, and the
  rest ``1 - p - s`` evenly over every label but the primary (``p + s = 1``: the paper's
  split with a secondary label; ``s = 0``: its split without one); primary labels drawn per
  device, uniformly or by the paper's ``normal`` label weights (:func:`bias_fractions`, the
  one draw both real backends' :func:`~netsim.training.shards.partition` and the surrogate
  use).
* ``shards_per_device = s``: McMahan et al. (AISTATS 2017)'s pathological split: the data
  sorted by label is cut into ``s x N`` equal shards, dealt at random, ``s`` to a device; a
  device's histogram is the classes of its shards (each shard's class by its position in the
  sorted order), scaled to its own samples.

Every histogram row sums to the device's samples (float counts); the population's class mix
is uniform over the model's ``classes`` (the built-in data sets' are within 1 % of it), but
under ``label_bias`` with ``normal`` primary labels the fleet's own mix is what the
per-class state weighs (netsim.training.coverage: the fleet's data, not the test set's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def bias_terms(label_bias: Any) -> tuple[float, float, str]:
    """``(primary, secondary, primary_labels)`` of a ``training.label_bias`` block (a
    :class:`~netsim.scenario.schema.LabelBiasSpec` or a mapping of the same fields)."""
    if isinstance(label_bias, Mapping):
        return (float(label_bias["primary"]), float(label_bias.get("secondary", 0.0)),
                str(label_bias.get("primary_labels", "uniform")))
    return (float(label_bias.primary), float(label_bias.secondary),
            str(label_bias.primary_labels))


def normal_label_weights(classes: int) -> np.ndarray:
    """Async-HFL's ``normal`` label weights (``utils/dists.py``): label i of ``classes``
    weighs the logistic density at ``x = i - (classes - 1) / 2``, ``e^-x / (1 + e^-x)^2``,
    normalised (for 10 labels 0.24 at the middle, 0.011 at the ends); the paper shuffles which
    label gets which weight, :func:`bias_fractions` does too."""
    x = np.arange(classes) - (classes - 1) / 2.0
    w = np.exp(-x) / (1.0 + np.exp(-x)) ** 2
    return w / w.sum()


def bias_fractions(n: int, classes: int, label_bias: Any,
                   rng: np.random.Generator) -> np.ndarray:
    """Each of ``n`` devices' class fractions under ``label_bias`` (module docstring), an
    (n, classes) array whose rows sum to 1: primary labels drawn i.i.d. (uniform weights, or
    :func:`normal_label_weights` in a random label order), each device's secondary label
    uniform over the other ``classes - 1``. Draws, in order: the label order (``normal``
    only), the primary labels, the secondary labels."""
    primary, secondary, how = bias_terms(label_bias)
    if classes <= 1:
        return np.ones((n, max(classes, 1)))
    if how == "normal":
        weights = normal_label_weights(classes)[rng.permutation(classes)]
    else:
        weights = np.full(classes, 1.0 / classes)
    first = rng.choice(classes, size=n, p=weights)
    second = (first + 1 + rng.integers(0, classes - 1, size=n)) % classes
    out = np.full((n, classes), max(0.0, 1.0 - primary - secondary) / (classes - 1))
    rows = np.arange(n)
    out[rows, first] = primary
    out[rows, second] += secondary
    return out


def label_histograms(samples: np.ndarray, classes: int, dirichlet_alpha: float | None,
                     shards_per_device: int | None,
                     rng: np.random.Generator, label_bias: Any = None) -> np.ndarray | None:
    """Each device's label histogram, an (N, classes) float array whose rows sum to
    ``samples`` (None for IID data: every row is ``samples / classes``).

    Parameters
    ----------
    samples: each device's samples (>= 0); a device with none gets a zero row.
    classes: classes of the task (>= 1).
    dirichlet_alpha, shards_per_device, label_bias: the skew (at most one given; all None:
        IID).
    rng: the source of every draw.
    """
    d = np.asarray(samples, dtype=float)
    if dirichlet_alpha is None and shards_per_device is None and label_bias is None:
        return None
    active = d > 0
    n_active = int(active.sum())
    out = np.zeros((len(d), classes))
    if n_active == 0:
        return out
    if label_bias is not None:
        share = bias_fractions(n_active, classes, label_bias, rng)
    elif dirichlet_alpha is not None:
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
