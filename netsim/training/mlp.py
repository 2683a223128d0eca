"""A small multilayer perceptron in pure numpy: forward, backward, masked SGD, pruning.

The network is a stack of dense layers with ReLU between them and a softmax
cross-entropy head. Parameters are a flat list ``[W1, b1, W2, b2, ...]`` with ``W_k`` of
shape (fan_in, fan_out). Pruning masks cover the weight matrices only (biases are never
pruned); a mask is a boolean array of the weight's shape, and a pruned weight is held at
exactly 0.0 through training by multiplying with the mask after every step.

Cost convention (used for ``train_flop_per_sample``): a dense layer's forward pass costs
2 FLOP per multiply-accumulate (bias adds and activations are neglected); training one
sample costs 3x the forward pass (forward + backward of about twice the forward).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Params = list[np.ndarray]
Masks = list[np.ndarray]

#: Training FLOP per sample as a multiple of the forward FLOP (forward + ~2x backward).
TRAIN_TO_FORWARD_FLOP = 3.0


def param_count(layer_sizes: Sequence[int]) -> int:
    """Number of parameters (weights and biases) of a dense stack, e.g. (64, 64, 10) -> 4810."""
    return int(sum(a * b + b for a, b in zip(layer_sizes[:-1], layer_sizes[1:], strict=False)))


def forward_flop_per_sample(layer_sizes: Sequence[int]) -> float:
    """Forward FLOP per sample: 2 x multiply-accumulates of the weight matrices."""
    macs = sum(a * b for a, b in zip(layer_sizes[:-1], layer_sizes[1:], strict=False))
    return 2.0 * float(macs)


def train_flop_per_sample(layer_sizes: Sequence[int]) -> float:
    """Training FLOP per sample (forward + backward) = 3 x forward FLOP."""
    return TRAIN_TO_FORWARD_FLOP * forward_flop_per_sample(layer_sizes)


def init_params(layer_sizes: Sequence[int], rng: np.random.Generator) -> Params:
    """He-normal weights, zero biases, float64."""
    params: Params = []
    for fan_in, fan_out in zip(layer_sizes[:-1], layer_sizes[1:], strict=False):
        params.append(rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(fan_in, fan_out)))
        params.append(np.zeros(fan_out))
    return params


def full_masks(params: Params) -> Masks:
    """All-true masks, one per weight matrix."""
    return [np.ones(w.shape, dtype=bool) for w in params[0::2]]


def logits(params: Params, x: np.ndarray) -> np.ndarray:
    """Pre-softmax outputs for a batch ``x`` of shape (n, fan_in)."""
    h = x
    n_layers = len(params) // 2
    for k in range(n_layers):
        h = h @ params[2 * k] + params[2 * k + 1]
        if k < n_layers - 1:
            np.maximum(h, 0.0, out=h)
    return h


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def evaluate(params: Params, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Mean cross-entropy (nats) and accuracy in [0, 1] on (x, y)."""
    logp = _log_softmax(logits(params, x))
    loss = -float(logp[np.arange(len(y)), y].mean())
    accuracy = float((logp.argmax(axis=1) == y).mean())
    return loss, accuracy


def gradients(params: Params, x: np.ndarray, y: np.ndarray) -> Params:
    """Gradients of the mean cross-entropy on a batch, same layout as ``params``."""
    n_layers = len(params) // 2
    acts = [x]
    h = x
    for k in range(n_layers):
        h = h @ params[2 * k] + params[2 * k + 1]
        if k < n_layers - 1:
            h = np.maximum(h, 0.0)
        acts.append(h)
    z = acts[-1]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    delta = p / len(y)
    grads: Params = [np.empty(0)] * len(params)
    for k in range(n_layers - 1, -1, -1):
        grads[2 * k] = acts[k].T @ delta
        grads[2 * k + 1] = delta.sum(axis=0)
        if k > 0:
            delta = (delta @ params[2 * k].T) * (acts[k] > 0.0)
    return grads


def sgd_train(
    params: Params,
    masks: Masks,
    x: np.ndarray,
    y: np.ndarray,
    *,
    learning_rate: float,
    batch_size: int,
    passes: int,
    rng: np.random.Generator,
) -> Params:
    """Minibatch SGD on (x, y) for ``passes`` shuffled passes; returns new parameters.

    The input ``params`` are not modified. Masked weights stay exactly zero.
    """
    params = [p.copy() for p in params]
    n = len(y)
    for _ in range(passes):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            grads = gradients(params, x[idx], y[idx])
            for k, (p, g) in enumerate(zip(params, grads, strict=True)):
                p -= learning_rate * g
                if k % 2 == 0:
                    p *= masks[k // 2]
    return params


def prune_masks(
    params: Params,
    masks: Masks,
    pruned_magnitude: list[np.ndarray],
    params_fraction: float,
    keep: Sequence[int] | None = None,
) -> tuple[Masks, list[np.ndarray]]:
    """Magnitude pruning of each weight matrix to ``params_fraction`` of its entries.

    Each layer keeps ``max(1, round(params_fraction * size))`` weights (``keep[k]`` of weight
    matrix ``k`` when ``keep`` is given: the torch backend's measured variants). Weights alive now
    rank above pruned ones, by |w|, so pruning further removes the smallest live weights
    (masks only shrink). A less-pruned fraction regrows weights: previously pruned ones
    are re-admitted in order of their magnitude at the time they were pruned (they restart
    at 0.0 and are trained from there). Ties break by flat index (deterministic).

    Parameters
    ----------
    params, masks:
        Current parameters and masks (one per weight matrix).
    pruned_magnitude:
        Per weight matrix, |w| recorded when each entry was pruned (0 for live entries).
    params_fraction:
        Fraction of each weight matrix to keep, in (0, 1].

    Returns
    -------
    The new masks and the updated pruned magnitudes. ``params`` must then be multiplied
    by the masks (see :func:`apply_masks`).
    """
    if not 0.0 < params_fraction <= 1.0:
        raise ValueError(f"params_fraction must be in (0, 1], got {params_fraction}")
    new_masks: Masks = []
    new_mags: list[np.ndarray] = []
    counts = keep if keep is not None else [None] * len(masks)
    for w, mask, mag, count in zip(params[0::2], masks, pruned_magnitude, counts, strict=True):
        size = w.size
        kept = max(1, int(round(params_fraction * size))) if count is None \
            else min(size, max(1, int(count)))
        live_top = float(np.abs(w).max()) + float(mag.max()) + 1.0
        score = np.where(mask, np.abs(w) + live_top, mag).ravel()
        order = np.argsort(-score, kind="stable")
        flat = np.zeros(size, dtype=bool)
        flat[order[:kept]] = True
        new_mask = flat.reshape(w.shape)
        newly_pruned = mask & ~new_mask
        new_mag = np.where(new_mask, 0.0, np.where(newly_pruned, np.abs(w), mag))
        new_masks.append(new_mask)
        new_mags.append(new_mag)
    return new_masks, new_mags


def apply_masks(params: Params, masks: Masks) -> Params:
    """Parameters with masked weights set to exactly 0.0 (a new list)."""
    out = [p.copy() for p in params]
    for k, mask in enumerate(masks):
        out[2 * k] *= mask
    return out
