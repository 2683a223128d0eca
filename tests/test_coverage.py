"""The surrogate's per-class state (netsim.training.coverage): its reductions to the scalar
progress model, its properties under skew, and the label draws and shards behind it."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

import netsim
from netsim.scenario import builtin_scenarios, load_scenario
from netsim.scenario.errors import ScenarioError
from netsim.scenario.schema import LossParams, ModelSpec, TrainingSpec
from netsim.training.coverage import CoverageState, coverage_loss
from netsim.training.labels import label_histograms
from netsim.training.loss import LossPredictor, LossState
from netsim.training.shards import partition

LOSS = LossParams(initial_loss=2.5, floor_full=0.12, samples_half=1400.0, exponent=1.9,
                  participant_exponent=0.9, reference_samples=1438.0, data_floor=0.055,
                  data_exponent=0.72, class_interference=0.4)
MODEL = ModelSpec(name="m", params=4810, train_flop_per_sample=3e4, loss=LOSS)


def _predictor() -> LossPredictor:
    return LossPredictor(MODEL, TrainingSpec(target_loss=0.3, deadline_s=100.0))


def _state(samples, hist, reference=1438.0) -> CoverageState:
    ids = {f"d{i}": i for i in range(len(samples))}
    return CoverageState(ids, np.asarray(samples, dtype=float), hist, reference)


def _train(pred: LossPredictor, cov: CoverageState, epochs: list[dict[str, float]],
           variant: int = 0) -> tuple[float, LossState]:
    state = LossState()
    for used in epochs:
        gain = pred.gain(sum(used.values()), len(used))
        cov.add(gain, cov.trained_mix(used))
        state = pred.step_gain(state, gain, variant)
    return pred.coverage_mean(variant, cov), state


def test_iid_with_enough_data_is_todays_curve():
    """IID data (one class) whose trained devices hold at least the reference data: the
    scalar model's mean, to 1e-12, over epochs of changing participants."""
    pred, rng = _predictor(), np.random.default_rng(1)
    cov = _state([400] * 10, None)
    epochs = [{f"d{i}": 400.0 for i in rng.choice(10, size=rng.integers(4, 10), replace=False)}
              for _ in range(25)]
    epochs[0] = {f"d{i}": 400.0 for i in range(10)}  # (4,000 distinct from the first epoch)
    loss, state = _train(pred, cov, epochs)
    assert loss == pytest.approx(pred.mean(state), rel=1e-12, abs=0.0)


def test_skewed_data_every_device_every_epoch_is_todays_curve():
    """Under label skew, every device training all its data every epoch: every class gets
    the epoch's whole gain, so the loss is the scalar model's (to 1e-12)."""
    pred = _predictor()
    hist = label_histograms(np.full(12, 200.0), 10, 0.1, None, np.random.default_rng(2))
    cov = _state([200] * 12, hist)
    full = {f"d{i}": 200.0 for i in range(12)}
    loss, state = _train(pred, cov, [full] * 30)
    assert loss == pytest.approx(pred.mean(state), rel=1e-12, abs=0.0)


@pytest.mark.parametrize("seed", range(8))
def test_under_skew_leaving_devices_out_never_helps(seed):
    """The same effective samples trained by a subset of the devices never gives a lower
    loss than by all of them (Jensen on each class's convex curve, interference >= 0)."""
    rng = np.random.default_rng(seed)
    hist = label_histograms(np.full(20, 100.0), 10, float(rng.choice([0.1, 0.5, 2.0])), None,
                            rng)
    pred = _predictor()
    for k in (1, 3, 10):
        subset = rng.choice(20, size=k, replace=False)
        everyone, some = _state([100] * 20, hist), _state([100] * 20, hist)
        for _ in range(20):
            everyone.add(300.0, everyone.trained_mix({f"d{i}": 100.0 for i in range(20)}))
            some.add(300.0, some.trained_mix({f"d{i}": 100.0 for i in subset}))
        assert pred.coverage_mean(0, some) >= pred.coverage_mean(0, everyone) - 1e-12


def test_a_set_covering_every_class_in_proportion_reaches_what_fedavg_all_reaches():
    """Devices whose labels together follow the population's mix (here: every device IID
    within the skewed fleet's mix is not needed: half the devices of a 2-class shard fleet
    that pairs up to every class) train every class as fedavg-all does."""
    pred = _predictor()
    hist = np.zeros((10, 10))
    for i in range(10):
        hist[i, i] = 300.0  # device i holds class i only
    both = [{f"d{i}": 300.0 for i in range(10)}] * 40
    loss_all, _ = _train(pred, _state([300] * 10, hist), both)
    # a covering set: every class, each device as often (the same mix, every epoch)
    loss_cover, _ = _train(pred, _state([300] * 10, hist), both)
    assert loss_cover == pytest.approx(loss_all, rel=1e-12)
    # a set that leaves two classes out is worse, by at least their share of the loss
    eight = [{f"d{i}": 300.0 for i in range(8)}] * 40
    loss_eight, _ = _train(pred, _state([300] * 10, hist), eight)
    assert loss_eight > loss_all + 0.2 * (LOSS.initial_loss - 1.0)


def test_one_small_device_stops_at_its_data_floor():
    """One device of 30 samples trained 500 times: its loss stops at the data floor
    (netsim's learning curve in the data covered), far above the fitted floor."""
    pred = _predictor()
    cov = _state([30, 5000], None)
    loss, state = _train(pred, cov, [{"d0": 30.0}] * 500)
    expected = LOSS.floor_full + LOSS.data_floor * ((1438.0 / 30.0) ** 0.72 - 1.0)
    assert pred.mean(state) < 0.2  # (what counting samples alone says)
    assert loss == pytest.approx(expected, rel=1e-12)


def test_no_data_floor_without_reference_samples():
    pred = _predictor()
    cov = _state([30, 5000], None, reference=None)
    loss, state = _train(pred, cov, [{"d0": 30.0}] * 50)
    assert loss == pytest.approx(pred.mean(state), rel=1e-12)


def test_coverage_loss_one_class_is_the_curve():
    c = _predictor().curves[0]
    for n in (0.0, 10.0, 1e3, 1e6):
        got = coverage_loss(np.array([n]), None, np.ones(1), floor=c.floor, half=c.samples_half,
                            exponent=c.exponent, initial=2.5, reference_samples=None,
                            data_floor=0.0, data_exponent=0.5, interference=0.4)
        assert got == pytest.approx(float(c.mean(n)), rel=1e-14)


@pytest.mark.parametrize("alpha, shards", [(0.1, None), (1.0, None), (None, 2), (None, 1)])
def test_label_histograms_rows_sum_to_samples(alpha, shards):
    samples = np.array([10.0, 0.0, 55.0, 300.0, 7.0] * 8)
    h = label_histograms(samples, 10, alpha, shards, np.random.default_rng(3))
    assert h is not None and h.shape == (40, 10)
    np.testing.assert_allclose(h.sum(axis=1), samples, rtol=1e-12)
    assert (h >= 0).all()
    if shards is not None:  # a device holds at most as many classes as shards
        assert ((h > 0).sum(axis=1) <= shards).all()


def test_label_histograms_iid_draw_nothing():
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert label_histograms(np.ones(5), 10, None, None, rng) is None
    assert rng.bit_generator.state == state


def test_shards_partition_gives_each_device_few_classes():
    labels = np.repeat(np.arange(10), 143)
    shards = partition(labels, [1.0] * 20, None, np.random.default_rng(4), shards_per_device=2)
    everything = np.concatenate(shards)
    assert np.array_equal(np.sort(everything), np.arange(len(labels)))  # disjoint, covering
    # (each of the 40 shards straddles at most two classes)
    assert max(len(set(labels[s])) for s in shards) <= 4
    assert np.mean([len(set(labels[s])) for s in shards]) <= 3.0


def _two_phones(**training) -> dict:
    data = yaml.safe_load(builtin_scenarios()["two-phones"].read_text())
    data["training"].update(training)
    return data


def test_shards_above_the_models_classes_are_refused():
    from netsim.scenario.checks import model_problems

    data = _two_phones(shards_per_device=11)
    data["model"] = "mlp-digits"
    problems = model_problems(data)
    assert any(p.path == "training.shards_per_device" and "at most 10" in p.message
               for p in problems)


@pytest.mark.parametrize("training, field", [
    ({"shards_per_device": 2, "dirichlet_alpha": 0.1}, "training"),
    ({"dirichlet_alpha": 0.0}, "training.dirichlet_alpha"),
    ({"shards_per_device": 0}, "training.shards_per_device"),
])
def test_bad_skew_is_refused_naming_the_field(training, field):
    with pytest.raises(ScenarioError) as err:
        load_scenario(_two_phones(**training))
    assert field in str(err.value)


def test_under_skew_training_one_phone_misses_what_both_reach():
    """Each phone holding one class (shards_per_device 1): fastest-k (k 1, the same phone
    every round) never reaches the loss fedavg-all reaches, while with IID data it does; the
    same seed twice gives the same table."""
    skewed = _two_phones(shards_per_device=1, target_loss=0.9)
    skewed["policies"] = {"fastest-k": {"k": 1}}
    iid = _two_phones(target_loss=0.9)
    iid["policies"] = {"fastest-k": {"k": 1}}
    assert bool(netsim.simulate(iid, policy="fastest-k", seed=1).runs.target_reached[0])
    one = netsim.simulate(skewed, policy="fastest-k", seed=1)
    assert not bool(one.runs.target_reached[0])
    assert float(one.runs.final_loss[0]) > 1.0
    both = netsim.simulate(skewed, policy="fedavg-all", seed=1)
    assert bool(both.runs.target_reached[0])
    again = netsim.simulate(skewed, policy="fedavg-all", seed=1)
    np.testing.assert_array_equal(both.epochs["loss"].to_numpy(), again.epochs["loss"].to_numpy())


def _small_digits(backend: str, **training) -> dict:
    return {"name": "small", "seed": 0,
            "generate": {"n_devices": 6, "samples_mean": 100, "samples_spread": 0.0, "seed": 1},
            "model": "mlp-digits",
            "training": {"backend": backend, "target_loss": 0.3, "deadline_s": 3600,
                         "max_epochs": 2, **training}}


def test_devices_table_records_each_devices_labels():
    """The devices table's label_counts: a real backend's shards (2-class shards: a row
    sums to the shard, a few classes held), the surrogate's drawn histograms under skew (a
    row sums to the device's samples), and no column for the surrogate's IID data."""
    real = netsim.simulate(_small_digits("real", shards_per_device=2), policy="fedavg-all",
                           seed=0).devices
    rows = [r for r, node in zip(real.label_counts, real.network_node, strict=True) if not node]
    held = [np.asarray(r) for r in rows if sum(r) > 0]
    assert len(held) == 6 and all(len(r) == 10 for r in held)
    assert all((r > 0).sum() <= 4 for r in held)
    sur = netsim.simulate(_small_digits("surrogate", dirichlet_alpha=0.5), policy="fedavg-all",
                          seed=0).devices
    sums = [sum(r) for r, node in zip(sur.label_counts, sur.network_node, strict=True)
            if not node and sum(r) > 0]
    assert len(sums) == 6 and all(abs(s - 100) <= 5 for s in sums)  # (rounded counts)
    iid = netsim.simulate(_small_digits("surrogate"), policy="fedavg-all", seed=0).devices
    assert "label_counts" not in iid.columns


def test_real_backend_on_more_samples_than_the_data_set_says_how_they_are_shared():
    from netsim.scenario.loading import scenario_data, validate_scenario

    data = scenario_data("default")
    assert validate_scenario(data).warnings == []  # (the surrogate counts what is declared)
    data["training"]["backend"] = "real"
    (warning,) = validate_scenario(data).warnings
    assert warning.path == "generate.samples_mean"
    assert "12,000" in warning.message and "1,438" in warning.message
    assert "about 72 a device" in warning.message
    fits = _small_digits("real")  # 6 x 100 of 1,438: nothing to say
    assert validate_scenario(fits).warnings == []
