"""netsim.training.tracking: the tracked state is the truth's, and the posterior of the run's
noise draw is calibrated against the surrogate's own draws."""

import numpy as np

from netsim.scenario.schema import TrainingSpec
from netsim.training.loss import LossPredictor, SurrogateLoss
from netsim.training.models import builtin_models
from netsim.training.tracking import RunTracker

TRAIN = TrainingSpec(target_loss=0.1, deadline_s=100)


def test_the_posterior_of_the_run_draw_covers_the_truths_draw_as_often_as_it_says():
    base = builtin_models()["small-cnn"]
    model = base.model_copy(update={"loss": base.loss.model_copy(
        update={"noise_run_sigma": 0.05, "noise_epoch_sigma": 0.03,
                "noise_level_exponent": 0.4})})
    pred = LossPredictor(model, TRAIN)
    inside, errors = 0, []
    for seed in range(400):
        truth = SurrogateLoss(model, TRAIN, np.random.default_rng(seed))
        tracker = RunTracker(pred)
        for _ in range(10):
            tracker.executed(0, 3000, 2)
            tracker.observe(truth.advance({"a": 1500, "b": 1500}, 0).loss)
        assert tracker.state == truth.state  # the tracked state is the truth's, exactly
        m, v = tracker.draw_posterior()
        inside += abs(truth._z_run - m) <= 1.96 * np.sqrt(v)
        errors.append(truth._z_run - m)
    assert abs(inside / 400 - 0.95) <= 0.04
    assert abs(float(np.mean(errors))) <= 0.1


def test_without_epoch_noise_the_latest_residual_gives_the_draw_exactly():
    base = builtin_models()["small-cnn"]
    model = base.model_copy(update={"loss": base.loss.model_copy(
        update={"noise_run_sigma": 0.05, "noise_epoch_sigma": 0.0})})
    pred = LossPredictor(model, TRAIN)
    truth = SurrogateLoss(model, TRAIN, np.random.default_rng(3))
    tracker = RunTracker(pred)
    tracker.observe(2.0)  # nothing executed yet: no residual
    assert tracker.residuals == []
    tracker.executed(0, 1000, 1)
    tracker.observe(truth.advance({"a": 1000}, 0).loss)
    m, v = tracker.draw_posterior()
    assert v == 0.0 and np.isclose(m, truth._z_run)
