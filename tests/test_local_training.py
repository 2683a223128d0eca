"""Local epochs E and batch size B (issue 37, docs/curves.md): compute follows E x samples,
progress the local training's factor; the accuracy map; bad input named."""

from __future__ import annotations

import math

import numpy as np
import pytest

import netsim
from netsim.policy import Decision
from netsim.scenario.errors import ScenarioError
from netsim.scenario.schema import AccuracyMap, LossParams, TrainingSpec
from netsim.training.loss import CurveParams, LossPredictor
from netsim.workload import LocalTraining


def test_batch_size_inf_is_the_whole_local_data_and_bad_values_are_named(star):
    assert TrainingSpec(target_loss=0.1, deadline_s=1, batch_size="inf").batch_size is None
    assert TrainingSpec(target_loss=0.1, deadline_s=1, batch_size=10).batch_size == 10
    star["training"].update(local_epochs=0, batch_size=-3)
    with pytest.raises(ScenarioError) as err:
        netsim.simulate(star, "fedavg-all")
    text = str(err.value)
    assert "training.local_epochs" in text and "training.batch_size" in text


def test_e_local_epochs_cost_e_times_the_compute(star):
    """Compute energy and busy time scale with E exactly (the transfers do not)."""
    star["training"]["max_epochs"] = 1
    one = netsim.simulate(star, "fedavg-all", seed=0)
    star["training"]["local_epochs"] = 5
    five = netsim.simulate(star, "fedavg-all", seed=0)
    busy1 = one.devices.set_index("device")["busy_s"]
    busy5 = five.devices.set_index("device")["busy_s"]
    for d in ("d1", "d2", "d3"):
        assert busy5[d] == pytest.approx(5 * busy1[d], rel=1e-12)
    assert five.devices["bytes_sent"].sum() == one.devices["bytes_sent"].sum()


def test_the_local_factor_is_steps_and_epochs_to_their_exponents():
    curve = CurveParams(2.3, 0.05, 1000.0, 1.0)
    pred = LossPredictor.from_curves([curve], [1.0], 1.0, 0.0, 0.0,
                                     local_step_exponent=0.4, local_epoch_exponent=-0.1)
    # 600 samples per participant, B 10, E 5: 300 steps
    want = 300 ** 0.4 * 5 ** -0.1
    assert pred.local_factor(600, LocalTraining(5, 10)) == pytest.approx(want)
    assert pred.gain(6000, 10, LocalTraining(5, 10)) == pytest.approx(6000 * want)
    # B = the whole data, E = 1: one step, factor 1 (the default: nothing changes)
    assert pred.local_factor(600, LocalTraining(1, None)) == 1.0
    flat = LossPredictor.from_curves([curve], [1.0], 1.0, 0.0, 0.0)
    assert flat.gain(6000, 10, LocalTraining(5, 10)) == 6000.0


def test_a_decision_sets_its_own_local_training(star):
    """Decision.local: E scales the compute of that epoch only."""
    star["training"]["max_epochs"] = 2

    class TwoEpochs:
        name = "two-epochs"

        def reset(self, scenario, rng):
            pass

        def decide(self, obs):
            local = LocalTraining(3, None) if obs.epoch == 1 else None
            return Decision(participants={"d1": 500}, local=local)

    r = netsim.simulate(star, TwoEpochs(), seed=0)
    one_pass_s = 500 * 6.0e6 / 2.0e9  # d1's 500 samples at 6 MFLOP each, 2 GFLOP/s
    busy = r.devices.set_index("device").loc["d1", "busy_s"]
    assert busy == pytest.approx(one_pass_s * (1 + 3), rel=1e-12)


def test_the_accuracy_map_and_its_inverse():
    m = AccuracyMap(chance=0.1, top=0.99, loss_mid=0.5, exponent=2.0)
    for acc in (0.2, 0.5, 0.9, 0.97):
        assert m.accuracy(m.loss_for(acc)) == pytest.approx(acc)
    assert m.loss_for(0.1) == math.inf and m.loss_for(0.995) == 0.0
    assert np.isclose(m.accuracy(1e9), 0.1, atol=1e-6)
    # with a cutoff: chance at the loss of a uniform guess, -ln(0.1), and beyond; the inverse
    # (bisection) and the vectorised forms agree with the scalar ones
    c = AccuracyMap(chance=0.1, top=0.99, loss_mid=0.5, exponent=2.0, cutoff_exponent=15.0)
    assert c.chance_loss == pytest.approx(math.log(10.0))
    assert c.accuracy(math.log(10.0)) == pytest.approx(0.1) and c.accuracy(3.0) == 0.1
    lv = c.loss_for(np.array([0.2, 0.5, 0.9, 0.97, 0.05, 0.995]))
    for acc, loss in zip((0.2, 0.5, 0.9, 0.97), lv[:4], strict=True):
        assert c.accuracy(loss) == pytest.approx(acc, rel=1e-12)
        assert c.loss_for(acc) == loss and loss < m.loss_for(acc)  # (it only lowers the map)
    assert lv[4] == math.inf and lv[5] == 0.0
    np.testing.assert_allclose(c.accuracy(lv[:4]), [0.2, 0.5, 0.9, 0.97], rtol=1e-12)
    with pytest.raises(ValueError, match="cutoff_exponent needs 0 < chance < 1"):
        AccuracyMap(chance=0.0, top=0.99, loss_mid=0.5, exponent=2.0, cutoff_exponent=15.0)


def test_the_surrogate_reports_accuracy_when_the_model_has_a_map(star):
    loss = LossParams(initial_loss=2.3, floor_full=0.05, samples_half=500, exponent=1.0,
                      accuracy={"chance": 0.1, "top": 0.99, "loss_mid": 0.5, "exponent": 2.0})
    star["model"]["loss"] = loss.model_dump()
    star["training"]["max_epochs"] = 3
    r = netsim.simulate(star, "fedavg-all", seed=0)
    m = loss.accuracy
    assert m is not None
    np.testing.assert_allclose(r.epochs["accuracy"], [m.accuracy(x) for x in r.epochs["loss"]])


def _with_map(star) -> dict:
    star["model"]["loss"] = LossParams(
        initial_loss=2.3, floor_full=0.05, samples_half=500, exponent=1.0,
        accuracy={"chance": 0.1, "top": 0.99, "loss_mid": 0.5, "exponent": 2.0}).model_dump()
    return star


def test_a_target_accuracy_is_its_equivalent_loss_for_the_run_and_the_planners(star):
    star = _with_map(star)
    del star["training"]["target_loss"]
    star["training"]["target_accuracy"] = 0.9
    r = netsim.simulate(star, "fedavg-all", seed=0)
    want = AccuracyMap(chance=0.1, top=0.99, loss_mid=0.5, exponent=2.0).loss_for(0.9)
    assert r.runs["target_loss"].iloc[0] == pytest.approx(want)
    assert r.runs["target_accuracy"].iloc[0] == 0.9
    assert r.runs["status"].iloc[0] == "ok"
    assert r.epochs["accuracy"].iloc[-1] >= 0.9 > r.epochs["accuracy"].iloc[-2]


@pytest.mark.parametrize(("change", "text"), [
    ({"target_accuracy": 0.9}, "not both"),
    ({"target_accuracy": 0.995, "drop_loss": True}, "outside (0.1, 0.99)"),
    ({"target_accuracy": 0.9, "drop_loss": True, "no_map": True}, "has no accuracy map"),
])
def test_a_target_accuracy_that_cannot_hold_is_named(star, change, text):
    star = _with_map(star)
    if change.pop("no_map", False):
        star["model"]["loss"].pop("accuracy")
    if change.pop("drop_loss", False):
        del star["training"]["target_loss"]
    star["training"].update(change)
    with pytest.raises(ScenarioError) as err:
        netsim.simulate(star, "fedavg-all")
    assert "training.target_accuracy" in str(err.value) and text in str(err.value)
