"""The task of the Flower app: a 64-64-10 MLP (ReLU, softmax) in numpy on scikit-learn's bundled
8x8 digits (``sklearn.datasets.load_digits``: 1,797 images, nothing downloaded).

The network has netsim's ``mlp-digits`` shape (4,810 float32 parameters, 19,240 bytes), so
the messages Flower sends move the bytes netsim's model spec says.

- Data: pixels scaled to [0, 1]; a fixed-seed permutation holds out 20 % (359 images) as the
  server's test split (:func:`load_test`); the other 1,438 are split IID into
  ``num_partitions`` near-equal shards (:func:`load_partition`), each shard 80 % for training
  and 20 % for the client's own evaluation. Deterministic: the same partition id gives the
  same shard in every run and process.
- :func:`train`: minibatch SGD on the cross-entropy, optionally with FedProx's proximal term
  ``mu / 2 * ||w - w_global||^2``; :func:`evaluate`: mean cross-entropy (nats) and accuracy.
- :func:`initial_arrays`: the initial model (He-initialised weights, zero biases, seed 0)
  as a Flower ArrayRecord.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from flwr.app import ArrayRecord

SPLIT_SEED = 2024
INIT_SEED = 0
TEST_FRACTION = 0.2
VAL_FRACTION = 0.2
LAYERS = (64, 64, 10)

Arrays = list[np.ndarray]


@lru_cache(maxsize=1)
def _data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): the fixed train/test split of the digits."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (np.asarray(digits.data, dtype=np.float32) / 16.0)
    y = np.asarray(digits.target, dtype=np.int64)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    n_test = int(round(TEST_FRACTION * len(y)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def load_test() -> tuple[np.ndarray, np.ndarray]:
    """The server's held-out test split (359 images)."""
    _, _, x, y = _data()
    return x, y


def load_partition(partition_id: int, num_partitions: int) -> tuple[np.ndarray, np.ndarray,
                                                                      np.ndarray, np.ndarray]:
    """Shard ``partition_id`` of ``num_partitions`` of the training split (IID, near-equal
    sizes): (x_train, y_train, x_val, y_val), the shard's first 80 % for training."""
    if not 0 <= partition_id < num_partitions:
        raise ValueError(f"partition-id {partition_id} not in 0..{num_partitions - 1}")
    x, y, _, _ = _data()
    idx = np.array_split(np.arange(len(y)), num_partitions)[partition_id]
    n_val = int(round(VAL_FRACTION * len(idx))) if len(idx) > 1 else 0
    fit, val = idx[: len(idx) - n_val], idx[len(idx) - n_val:]
    return x[fit], y[fit], x[val], y[val]


def init_arrays(seed: int = INIT_SEED) -> Arrays:
    """[W1, b1, W2, b2] of the MLP: He-initialised weights, zero biases (float32)."""
    rng = np.random.default_rng(seed)
    out: Arrays = []
    for n_in, n_out in zip(LAYERS[:-1], LAYERS[1:], strict=True):
        out.append((rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32))
        out.append(np.zeros(n_out, dtype=np.float32))
    return out


def initial_arrays() -> ArrayRecord:
    """The initial model as Flower's ArrayRecord (what ``strategy.start`` takes)."""
    return ArrayRecord(init_arrays())


def _forward(arrays: Sequence[np.ndarray], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hidden activations, class probabilities)."""
    w1, b1, w2, b2 = arrays
    h = np.maximum(x @ w1 + b1, 0.0)
    z = h @ w2 + b2
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return h, p / p.sum(axis=1, keepdims=True)


def _cross_entropy(p: np.ndarray, y: np.ndarray) -> float:
    return float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y], 1e-12, None))))


def train(arrays: Sequence[np.ndarray], x: np.ndarray, y: np.ndarray, epochs: int = 2,
          lr: float = 0.1, batch_size: int = 16, proximal_mu: float = 0.0,
          seed: int = 0) -> tuple[Arrays, float]:
    """``epochs`` passes of minibatch SGD from ``arrays`` (not changed) on (x, y), with the
    proximal term ``proximal_mu / 2 * ||w - arrays||^2`` when > 0 (FedProx); the trained
    arrays and the mean minibatch loss of the last pass. ``seed`` orders the minibatches."""
    start = [np.asarray(a, dtype=np.float32) for a in arrays]
    w = [a.copy() for a in start]
    rng = np.random.default_rng(seed)
    last = float("nan")
    for _ in range(epochs):
        losses = []
        for batch in np.array_split(rng.permutation(len(y)), max(1, -(-len(y) // batch_size))):
            xb, yb = x[batch], y[batch]
            h, p = _forward(w, xb)
            losses.append(_cross_entropy(p, yb))
            dz = p
            dz[np.arange(len(yb)), yb] -= 1.0
            dz /= len(yb)
            dh = (dz @ w[2].T) * (h > 0)
            grads = [xb.T @ dh, dh.sum(axis=0), h.T @ dz, dz.sum(axis=0)]
            for k, g in enumerate(grads):
                if proximal_mu > 0.0:
                    g = g + proximal_mu * (w[k] - start[k])
                w[k] -= (lr * g).astype(np.float32)
        last = float(np.mean(losses)) if losses else last
    return w, last


def evaluate(arrays: Sequence[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(mean cross-entropy in nats, accuracy) of the model ``arrays`` on (x, y)."""
    if not len(y):
        return float("nan"), float("nan")
    _, p = _forward([np.asarray(a) for a in arrays], x)
    return _cross_entropy(p, y), float(np.mean(p.argmax(axis=1) == y))
