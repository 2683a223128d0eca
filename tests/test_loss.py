"""Surrogate loss model and the policies' predictor."""

import math

import numpy as np
import pytest

from netsim.scenario.schema import TrainingSpec
from netsim.training.loss import LossPredictor, LossState, SurrogateLoss
from netsim.training.models import builtin_models, resolve_model

TRAIN = TrainingSpec(target_loss=0.3, deadline_s=100)


def test_mean_falls_with_samples_and_pruned_floor_is_higher():
    pred = LossPredictor(builtin_models()["small-cnn"], TRAIN)
    n = np.array([0, 1e3, 1e4, 1e5, 1e6])
    full = pred.curves[0].mean(n)
    pruned = pred.curves[3].mean(n)
    assert np.all(np.diff(full) < 0) and np.all(np.diff(pruned) < 0)
    assert full[0] == pytest.approx(pred.initial_loss)
    assert pred.curves[3].floor > pred.curves[0].floor and pruned[-1] > full[-1]
    for loss in (1.5, 0.8, 0.3):
        assert pred.curves[0].mean(pred.curves[0].samples_for(loss)) == pytest.approx(loss)


def test_pruning_mid_training_makes_the_loss_jump():
    pred = LossPredictor(builtin_models()["small-cnn"], TRAIN)
    s = LossState()
    for _ in range(10):
        s = pred.step(s, 5000, 0, participants=1)
    before = pred.mean(s)
    after = pred.mean(pred.switch(s, 2))
    assert after > before + 0.05
    assert pred.mean(pred.switch(s, 0)) == before


def test_non_iid_data_slows_progress():
    model = builtin_models()["small-cnn"]
    iid = LossPredictor(model, TRAIN)
    skew = LossPredictor(model, TRAIN.model_copy(update={"dirichlet_alpha": 0.1}))
    s_iid = iid.step(LossState(), 1e4, 0, participants=1)
    s_skew = skew.step(LossState(), 1e4, 0, participants=1)
    assert skew.mean(s_skew) > iid.mean(s_iid)


def test_ground_truth_noise_is_seeded_and_its_quantiles_match_the_predictor():
    model = builtin_models()["small-cnn"]
    finals = []
    for seed in range(2000):
        truth = SurrogateLoss(model, TRAIN, np.random.default_rng(seed))
        for _ in range(5):
            out = truth.advance({"a": 2000}, 0)
        finals.append(out.loss)
    pred = LossPredictor(model, TRAIN)
    state = LossState()
    for _ in range(5):
        state = pred.step(state, 2000, 0, participants=1)
    for q in (0.1, 0.5, 0.9):
        assert np.quantile(finals, q) == pytest.approx(pred.quantile(state, q), rel=0.02)
    a = SurrogateLoss(model, TRAIN, np.random.default_rng(1)).advance({"a": 10}, 0).loss
    b = SurrogateLoss(model, TRAIN, np.random.default_rng(1)).advance({"a": 10}, 0).loss
    assert a == b


def test_truth_can_be_worse_than_the_predictor():
    model = builtin_models()["small-cnn"]
    slow = TRAIN.model_copy(update={"truth_sample_efficiency": 0.5})
    truth = SurrogateLoss(model.model_copy(update={"loss": model.loss.model_copy(
        update={"noise_run_sigma": 0.0, "noise_epoch_sigma": 0.0})}), slow, np.random.default_rng(0))
    pred = LossPredictor(model, slow)
    got = truth.advance({"a": 4000}, 0).loss
    assert got == pytest.approx(pred.mean(pred.step(LossState(), 2000, 0, participants=1)))
    assert got > pred.mean(pred.step(LossState(), 4000, 0, participants=1))


def test_builtin_models_have_sources_and_consistent_sizes():
    for name, m in builtin_models().items():
        assert m.source and m.loss is not None, name
        assert m.variants[0].params_fraction == 1.0
        assert m.model_bytes(1) < m.model_bytes(0)
    lenet = builtin_models()["small-cnn"]
    assert lenet.params == 61706
    # LeNet-5 forward multiply-adds from its layer shapes; training = 3 x forward, 2 FLOP/MAC.
    macs = 28 * 28 * 6 * 25 + 10 * 10 * 16 * 150 + 400 * 120 + 120 * 84 + 84 * 10
    assert lenet.train_flop_per_sample == pytest.approx(3 * 2 * macs, rel=1e-3)
    assert math.isclose(builtin_models()["resnet18"].params, 11173962)
    assert resolve_model(lenet) is lenet


def test_the_runs_table_records_where_the_training_curve_comes_from(star):
    import netsim

    fitted = netsim.simulate("default", "fedavg-all", seed=0).runs.iloc[0]
    assert fitted["loss_source"].startswith("fitted")  # the built-in default uses a fitted curve
    star["training"]["max_epochs"] = 1
    star["model"] = "resnet18"
    assert netsim.simulate(star, "fedavg-all", seed=0).runs.iloc[0]["loss_source"].startswith(
        "illustrative")
    star["model"] = "small-cnn"  # its base curve fitted on the torch backend
    assert netsim.simulate(star, "fedavg-all", seed=0).runs.iloc[0]["loss_source"].startswith(
        "fitted by `netsim calibrate --coverage --base-curve --model small-cnn`")


def test_the_run_spread_follows_the_loss_level_and_pruning_as_fitted():
    """With noise_level_exponent and noise_prune the truth's run-to-run spread at a state is
    the predictor's: quantiles over seeds match at two levels and on a pruned variant, and a
    lower loss spreads more (the level term)."""
    base = builtin_models()["small-cnn"]
    # (a run spread of 0.05: small-cnn's fitted 0.0016 would leave only the epoch noise)
    loss = base.loss.model_copy(update={"noise_level_exponent": 0.5, "noise_prune": 0.4,
                                        "noise_epoch_sigma": 0.01, "noise_run_sigma": 0.05})
    model = base.model_copy(update={"loss": loss})
    pred = LossPredictor(model, TRAIN)
    spreads = []
    for variant, epochs in ((0, 2), (0, 12), (2, 12)):
        finals = []
        for seed in range(1500):
            truth = SurrogateLoss(model, TRAIN, np.random.default_rng(seed))
            for _ in range(epochs):
                out = truth.advance({"a": 300}, variant)
            finals.append(out.loss)
        state = LossState()
        for _ in range(epochs):
            state = pred.step(state, 300, variant, participants=1)
        for q in (0.1, 0.9):
            assert np.quantile(finals, q) == pytest.approx(pred.quantile(state, q), rel=0.02)
        spreads.append(float(np.std(np.log(finals))))
    assert spreads[1] > 1.2 * spreads[0]   # further along, lower loss: wider spread
    assert pred.run_sigma_at(0.5, 2) == pytest.approx(pred.run_sigma_at(0.5, 0) * (1 + 0.4 * 0.75))
