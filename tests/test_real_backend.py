"""Tests for the real-training backend (netsim/training/real.py, mlp.py, shards.py)."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.training import mlp
from netsim.training.progress import EpochProgress
from netsim.training.real import RealBackend, RealTrainingConfig, real_config
from netsim.training.shards import partition, prefix_length

MODEL = {
    "name": "mlp-digits",
    "variants": [
        {"name": "full", "params_fraction": 1.0, "flop_fraction": 1.0},
        {"name": "pruned-50", "params_fraction": 0.5, "flop_fraction": 0.5},
        {"name": "pruned-25", "params_fraction": 0.25, "flop_fraction": 0.25},
    ],
}


def make_backend(
    n_devices: int = 10, seed: int = 0, alpha: float | None = None, samples: int = 100
) -> RealBackend:
    ids = [f"d{i}" for i in range(n_devices)]
    training = {"dirichlet_alpha": alpha}
    return RealBackend(MODEL, ids, [samples] * n_devices, training, np.random.default_rng(seed))


def curve(backend: RealBackend, epochs: int, variant: int = 0, fraction: float = 1.0) -> list:
    plan = {d: int(s * fraction) for d, s in zip(backend.device_ids, backend.device_samples, strict=True)}
    return [backend.initial_loss()] + [backend.advance(plan, variant).loss for _ in range(epochs)]


# --- the network --------------------------------------------------------------------------


def test_param_count_and_flop_convention() -> None:
    sizes = (64, 64, 10)
    assert mlp.param_count(sizes) == 64 * 64 + 64 + 64 * 10 + 10 == 4810
    assert mlp.forward_flop_per_sample(sizes) == 2 * (64 * 64 + 64 * 10)
    assert mlp.train_flop_per_sample(sizes) == 3 * 2 * (64 * 64 + 64 * 10)


def test_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(1)
    params = mlp.init_params((5, 4, 3), rng)
    x = rng.normal(size=(7, 5))
    y = rng.integers(0, 3, size=7)
    grads = mlp.gradients(params, x, y)
    eps = 1e-6
    for p, g in zip(params, grads, strict=True):
        for flat in range(0, p.size, max(1, p.size // 5)):
            idx = np.unravel_index(flat, p.shape)
            old = p[idx]
            p[idx] = old + eps
            up = mlp.evaluate(params, x, y)[0]
            p[idx] = old - eps
            down = mlp.evaluate(params, x, y)[0]
            p[idx] = old
            assert g[idx] == pytest.approx((up - down) / (2 * eps), abs=1e-6)


# --- shards --------------------------------------------------------------------------------


def test_iid_shards_are_disjoint_complete_and_proportional() -> None:
    labels = np.repeat(np.arange(10), 50)
    shards = partition(labels, [100, 300, 0, 100], None, np.random.default_rng(0))
    allidx = np.concatenate(shards)
    assert sorted(allidx.tolist()) == list(range(500))
    assert [len(s) for s in shards] == [100, 300, 0, 100]


def _max_class_share(labels: np.ndarray, shards: list[np.ndarray]) -> float:
    shares = [np.bincount(labels[s], minlength=10).max() / len(s) for s in shards]
    return float(np.mean(shares))


def test_dirichlet_shards_are_label_skewed() -> None:
    labels = np.repeat(np.arange(10), 100)
    iid = partition(labels, [1] * 10, None, np.random.default_rng(0))
    skewed = partition(labels, [1] * 10, 0.1, np.random.default_rng(0))
    assert sorted(np.concatenate(skewed).tolist()) == list(range(1000))
    assert all(len(s) >= 1 for s in skewed)
    assert _max_class_share(labels, iid) < 0.25
    assert _max_class_share(labels, skewed) > 0.5


def test_prefix_length_rule() -> None:
    assert prefix_length(50, 100, 72) == 36
    assert prefix_length(1, 1000, 72) == 1  # at least one sample
    assert prefix_length(0, 100, 72) == 0
    assert prefix_length(100, 100, 72) == 72


# --- the backend ---------------------------------------------------------------------------


def test_loss_falls_on_iid_and_more_slowly_on_non_iid() -> None:
    iid = np.mean([curve(make_backend(seed=s), 15) for s in range(3)], axis=0)
    skew = np.mean([curve(make_backend(seed=s, alpha=0.1), 15) for s in range(3)], axis=0)
    assert iid[-1] < 0.5 * iid[0]
    assert np.all(np.diff(iid) < 0)  # the mean IID curve falls every epoch
    assert skew[-1] < skew[0]
    assert skew[-1] > iid[-1] + 0.05  # strong label skew slows training


def test_advance_returns_loss_and_accuracy() -> None:
    backend = make_backend()
    progress = backend.advance({d: 100 for d in backend.device_ids}, 0)
    assert isinstance(progress, EpochProgress)
    assert progress.loss > 0
    assert progress.accuracy is not None and 0.0 <= progress.accuracy <= 1.0


def _nonzero_per_layer(backend: RealBackend) -> list[int]:
    return [int(np.count_nonzero(w)) for w in backend.params[0::2]]


def test_pruning_to_25_percent_keeps_25_percent_nonzero_through_training() -> None:
    backend = make_backend()
    curve(backend, 2, variant=0)
    backend.advance({d: 100 for d in backend.device_ids}, 2)
    sizes = [w.size for w in backend.params[0::2]]
    expected = [round(0.25 * s) for s in sizes]
    assert _nonzero_per_layer(backend) == expected
    pruned = [~m for m in backend.masks]
    curve(backend, 4, variant=2)
    for w, off in zip(backend.params[0::2], pruned, strict=True):
        assert np.all(w[off] == 0.0)
    assert _nonzero_per_layer(backend) == expected


def test_pruning_further_shrinks_mask_and_less_pruned_variant_regrows() -> None:
    backend = make_backend()
    plan = {d: 100 for d in backend.device_ids}
    backend.advance(plan, 1)
    half = [m.copy() for m in backend.masks]
    backend.advance(plan, 2)
    quarter = [m.copy() for m in backend.masks]
    for h, q in zip(half, quarter, strict=True):
        assert np.all(h[q])  # masks only shrink when pruning further
        assert q.sum() == round(0.25 * q.size)
    backend.advance(plan, 1)
    for q, h2 in zip(quarter, backend.masks, strict=True):
        assert np.all(h2[q]) and h2.sum() == round(0.5 * h2.size)


def test_pruning_mid_training_makes_the_loss_jump() -> None:
    backend = make_backend()
    losses = curve(backend, 10, variant=0)
    before = losses[-1]
    backend.set_variant(2)
    after = backend.initial_loss()  # test loss of the current global model
    assert after > before


def test_same_seed_identical_and_different_seed_different() -> None:
    a = curve(make_backend(seed=7, alpha=0.5), 5, fraction=0.5)
    b = curve(make_backend(seed=7, alpha=0.5), 5, fraction=0.5)
    c = curve(make_backend(seed=8, alpha=0.5), 5, fraction=0.5)
    assert a == b
    assert a != c


def test_using_less_data_trains_less() -> None:
    full = np.mean([curve(make_backend(seed=s), 8) for s in range(2)], axis=0)
    part = np.mean([curve(make_backend(seed=s), 8, fraction=0.2) for s in range(2)], axis=0)
    assert part[-1] > full[-1]


def test_no_participant_leaves_the_model_unchanged() -> None:
    backend = make_backend()
    start = backend.initial_loss()
    assert backend.advance({}, 0).loss == start


def test_invalid_inputs_raise() -> None:
    backend = make_backend()
    with pytest.raises(ValueError, match="unknown device"):
        backend.advance({"nope": 1}, 0)
    with pytest.raises(ValueError, match="holds 100"):
        backend.advance({"d0": 101}, 0)
    with pytest.raises(ValueError, match="variant index"):
        backend.advance({"d0": 1}, 3)
    with pytest.raises(ValueError, match="model.name"):
        RealBackend({"name": "resnet", "variants": []}, ["a"], [1], {}, np.random.default_rng(0))


def test_real_config_reads_dicts_objects_and_defaults() -> None:
    assert real_config({}) == RealTrainingConfig()
    assert real_config({"real": {"batch_size": 8}}).batch_size == 8
    with pytest.raises(ValueError, match="learning_rate"):
        real_config({"real": {"learning_rate": -1.0}})
