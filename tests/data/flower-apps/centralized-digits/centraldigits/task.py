# ruff: noqa
"""centraldigits: the model (softmax regression, NumPy), the data (scikit-learn's bundled
digits: nothing is downloaded) and training, in quickstart-pytorch's task.py layout.

Like Flower's examples (`fds = None  # Cache FederatedDataset`), the partitioned data are
cached in a module global the first time a node loads its partition, and the partitioning
shuffles with NumPy's global generator: a process that reuses the module from an earlier run
skips that draw and trains on other minibatches, and keeps the first run's partition count.
"""

import numpy as np
from sklearn.datasets import load_digits

N_FEATURES, N_CLASSES = 64, 10
#: The last TEST_ROWS digits are the centralized test set (the ServerApp's evaluate_fn).
TEST_ROWS = 297

fds = None  # Cache the partitioned data (as Flower's FederatedDataset is cached)


def _digits():
    x, y = load_digits(return_X_y=True)
    return x.astype(np.float64) / 16.0, y.astype(np.int64)


def initial_arrays():
    """Zero weights (64 x 10) and biases (10), float64."""
    return [np.zeros((N_FEATURES, N_CLASSES)), np.zeros(N_CLASSES)]


def load_data(partition_id: int, num_partitions: int):
    """The partition's (x_train, y_train, x_val, y_val): an IID share of the training rows,
    80 % train and 20 % validation."""
    global fds
    if fds is None:
        x, y = _digits()
        order = np.random.permutation(len(y) - TEST_ROWS)
        fds = (x, y, np.array_split(order, num_partitions))
    x, y, parts = fds
    rows = parts[partition_id]
    cut = int(0.8 * len(rows))
    return x[rows[:cut]], y[rows[:cut]], x[rows[cut:]], y[rows[cut:]]


def load_centralized_dataset():
    """The held-out test rows (x, y)."""
    x, y = _digits()
    return x[-TEST_ROWS:], y[-TEST_ROWS:]


def _probabilities(arrays, x):
    logits = x @ arrays[0] + arrays[1]
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def test(arrays, x, y):
    """(mean cross-entropy in nats, accuracy) of the model on (x, y)."""
    p = _probabilities(arrays, x)
    loss = float(-np.mean(np.log(p[np.arange(len(y)), y] + 1e-12)))
    return loss, float(np.mean(p.argmax(axis=1) == y))


def train(arrays, x, y, epochs: int, lr: float, batch_size: int):
    """Minibatch SGD on the cross-entropy (minibatches shuffled with NumPy's global
    generator); returns the new arrays and the mean training loss before each step."""
    w, b = arrays[0].copy(), arrays[1].copy()
    losses = []
    for _ in range(epochs):
        order = np.random.permutation(len(y))
        for start in range(0, len(y), batch_size):
            rows = order[start:start + batch_size]
            p = _probabilities([w, b], x[rows])
            losses.append(float(-np.mean(np.log(p[np.arange(len(rows)), y[rows]] + 1e-12))))
            p[np.arange(len(rows)), y[rows]] -= 1.0
            w -= lr * x[rows].T @ p / len(rows)
            b -= lr * p.mean(axis=0)
    return [w, b], float(np.mean(losses)) if losses else 0.0
