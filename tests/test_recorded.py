"""The progress model fitted to recorded federated runs (issue 37; netsim.training.recorded,
``netsim calibrate --recorded``, docs/curves.md): the fit recovers constants from curves the
model made, the accuracy maps and the held-back targets on the real runs, the package's
entries, the two models and the two scenarios."""

from __future__ import annotations

import argparse
import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from netsim.scenario.schema import AccuracyMap, LossParams
from netsim.training import calibrate_coverage as cc
from netsim.training import recorded as rec
from netsim.training.loss import LossPredictor
from netsim.training.models import builtin_models


@pytest.fixture(scope="module")
def mnist() -> rec.RecordedFit:
    return rec.fit_recorded(rec.load("mnist"))


@pytest.fixture(scope="module")
def cifar() -> rec.RecordedFit:
    return rec.fit_recorded(rec.load("cifar"))


# --- the fit runs the progress model and recovers what it made --------------------------------

TRUE = rec.Constants(initial_loss=2.3, floor=0.03, samples_half=2.0e6, exponent=1.8,
                     local_step_exponent=0.45, local_epoch_exponent=-0.2)
TRUE_MAP = AccuracyMap(chance=0.1, top=0.99, loss_mid=1.5, exponent=1.4, cutoff_exponent=15.0)


def synthetic(constants: rec.Constants, noise: float = 0.0, seeds: int = 1) -> rec.Recorded:
    """A MNIST-like table the progress model itself made (B in 10, 50, inf; E in 1, 5)."""
    predictor = constants.predictor()
    rng = np.random.default_rng(3)
    rows, settings = [], {}
    for b in (10, 50, None):
        for e in (1, 5):
            label = rec.mnist_label(b, e)
            settings[label] = rec.Setting(label, 100, 600.0, b, (e,))
            r = np.arange(0, 301)
            for seed in range(seeds):
                mean = rec.mean_curve(predictor, settings[label], r)
                loss = mean * np.exp(noise * rng.standard_normal(len(r)))
                acc = [TRUE_MAP.accuracy(float(v)) for v in loss]
                rows.append(pd.DataFrame({"setting": label, "seed": seed, "round": r,
                                          "loss": loss, "accuracy": acc}))
    base = rec.load("mnist")
    return dataclasses.replace(base, table=pd.concat(rows, ignore_index=True),
                               settings=settings, hold_out=("B50-E1",))


def test_the_fit_recovers_the_constants_of_curves_the_model_made():
    fit = rec.fit_recorded(synthetic(TRUE))
    got = fit.constants
    assert got.initial_loss == pytest.approx(TRUE.initial_loss, rel=1e-6)
    for name in ("floor", "samples_half", "exponent"):
        assert getattr(got, name) == pytest.approx(getattr(TRUE, name), rel=0.02), name
    assert got.local_step_exponent == pytest.approx(TRUE.local_step_exponent, abs=0.01)
    assert got.local_epoch_exponent == pytest.approx(TRUE.local_epoch_exponent, abs=0.01)
    assert fit.accuracy.top == pytest.approx(TRUE_MAP.top, abs=1e-3)
    assert fit.accuracy.loss_mid == pytest.approx(TRUE_MAP.loss_mid, rel=0.01)
    assert fit.accuracy.exponent == pytest.approx(TRUE_MAP.exponent, rel=0.01)
    assert fit.accuracy.cutoff_exponent == pytest.approx(TRUE_MAP.cutoff_exponent, rel=0.02)
    # and predicts the held-back setting it never saw
    table = rec.report(fit)
    held = table[table["role"] == "held back"].iloc[0]
    assert abs(held["rel_error"]) <= 0.05


def test_the_fit_recovers_the_curve_through_noise():
    fit = rec.fit_recorded(synthetic(TRUE, noise=0.03, seeds=3))
    got = fit.constants
    assert got.local_step_exponent == pytest.approx(TRUE.local_step_exponent, abs=0.05)
    assert got.local_epoch_exponent == pytest.approx(TRUE.local_epoch_exponent, abs=0.05)
    assert got.samples_half == pytest.approx(TRUE.samples_half, rel=0.2)
    # the per-epoch noise is found from the jitter (no run-level noise was drawn)
    assert fit.spread.noise_epoch_sigma == pytest.approx(0.03, rel=0.15)
    assert fit.spread.noise_run_sigma < 0.03


def test_the_vectorised_curve_is_the_models_replay():
    for b, e in ((10, 1), (50, 5), (None, 20)):
        setting = rec.Setting("x", 100, 600.0, b, (e,))
        assert rec.check_replay(TRUE, setting, 200) < 1e-9
    # a variable-E round adds the mean gain of its E values
    predictor = TRUE.predictor()
    var = rec.Setting("v", 16, 3125.0, 32, (2, 3, 4, 5))
    gains = [predictor.gain(var.samples, 16, local) for local in var.locals()]
    assert rec.round_gain(predictor, var) == pytest.approx(np.mean(gains))


# --- the recorded runs --------------------------------------------------------------------------

def test_the_recorded_tables_load_with_their_settings():
    m, c = rec.load("mnist"), rec.load("cifar")
    assert list(m.settings) == ["B10-E1", "B10-E5", "B50-E1", "B50-E5", "Binf-E1", "Binf-E5",
                                "Binf-E20"]
    assert m.table.groupby("setting")["round"].max().eq(1000).all()
    assert m.settings["Binf-E20"].batch_size is None and m.settings["B10-E5"].local_epochs == (5,)
    assert len(c.settings) == 14 and c.settings["fedavg-vanilla-var"].local_epochs == (2, 3, 4, 5)
    assert c.modelled == ["fedavg-proximal-fixed", "fedavg-proximal-var",
                          "fedavg-proximal-var-mu0.001", "fedavg-vanilla-fixed",
                          "fedavg-vanilla-var"]
    assert c.table["seed"].nunique() == 6


def test_diverged_runs_are_reported_and_left_out_of_the_fit(mnist, cifar):
    found = {(i.setting, i.seed): i for i in rec.incidents(mnist.data)}
    assert found[("Binf-E20", 0)].kind == "diverged" and found[("Binf-E20", 0)].round == 818
    assert found[("Binf-E1", 0)].kind == "blew up"  # recovered: kept
    assert "Binf-E20" not in mnist.fit_settings and "Binf-E1" in mnist.fit_settings
    diverged = [i for i in rec.incidents(cifar.data) if i.kind == "diverged"]
    assert len(diverged) == 10 and all(i.accuracy_after < 0.11 for i in diverged)
    clean = rec.clean_runs(cifar.data)
    assert not any(((clean["setting"] == i.setting) & (clean["seed"] == i.seed)).any()
                   for i in diverged)


def test_the_accuracy_maps_on_the_recorded_pairs(mnist, cifar):
    """Target: within 0.02 accuracy on the recorded pairs. VGG-11: RMS under 0.02 on the
    FedAvg plain-SGD pairs. MNIST CNN: 96 % of the pairs within 0.02 and a mean error of 0.005,
    but an RMS of 0.033 (early rounds: the relation is not one curve there; docs/curves.md)."""
    c = rec.map_error(cifar.accuracy, rec.clean_runs(cifar.data)[
        lambda t: t["setting"].isin(cifar.data.modelled)])
    assert c.rms <= 0.02 and c.mean_abs <= 0.015
    m = rec.map_error(mnist.accuracy, rec.clean_runs(mnist.data))
    assert m.mean_abs <= 0.01 and m.within >= 0.95
    # the map puts 97 % where the runs crossed it (their losses there: 0.093-0.103)
    assert 0.085 <= mnist.accuracy.loss_for(0.97) <= 0.105


def test_held_back_mnist_rounds_to_97_percent_within_35_percent(mnist):
    table = rec.report(mnist)
    held = table[table["role"] == "held back"].set_index("setting")
    assert set(held.index) == {"B50-E1", "B10-E5"}
    assert held.loc["B50-E1", "real"] == 74 and held.loc["B10-E5", "real"] == 20
    assert (held["rel_error"].abs() <= 0.35).all(), held
    assert (held["within"] == "yes").all()


def test_held_back_cifar_accuracy_inside_the_seeds_range_and_band_coverage(cifar):
    table = rec.report(cifar)
    held = table[table["role"] == "held back"]
    assert list(held["round"]) == [25, 50, 100] and (held["seeds"] == 6).all()
    inside = (held["predicted"] >= held["real_min"] - 0.03) & (
        held["predicted"] <= held["real_max"] + 0.03)
    assert inside.all(), held
    covered, seeds = rec.coverage(table, ["held back"])
    assert seeds == 18 and covered >= 0.8 * seeds
    covered, seeds = rec.coverage(table, ["held back", "fit"])
    assert covered >= 0.8 * seeds


def test_another_hold_out_and_a_bad_one():
    fit = rec.fit_recorded(rec.load("mnist"), ["B10-E1", "B10-E5"])
    assert "B10-E1" not in fit.fit_settings and "B50-E1" in fit.fit_settings
    with pytest.raises(ValueError, match="unknown setting"):
        rec.fit_recorded(rec.load("mnist"), ["B7-E1"])
    with pytest.raises(ValueError, match="nothing to fit"):
        rec.fit_recorded(rec.load("cifar"), rec.load("cifar").modelled)


# --- the package's entries, models and scenarios ----------------------------------------------

@pytest.mark.parametrize("name", ["mnist", "cifar"])
def test_the_package_entry_is_the_fit(name, mnist, cifar):
    fit = {"mnist": mnist, "cifar": cifar}[name]
    model = builtin_models()[fit.data.model]
    entry = model.loss
    assert entry is not None and entry.source.startswith(
        f"fitted by `netsim calibrate --recorded {name}` to netsim/data/curves/")
    fresh = fit.entry()
    for key in ("initial_loss", "floor_full", "exponent", "local_step_exponent",
                "local_epoch_exponent", "noise_run_sigma", "noise_epoch_sigma",
                "noise_level_exponent", "accuracy"):
        assert getattr(entry, key) == getattr(fresh, key), key
    base = cc.RECORDED_BASES.get(fit.data.model)
    if base is None:  # nothing measured scales this curve: the fit as it came
        assert entry.samples_half == fresh.samples_half and not entry.scale_source
        assert entry.heterogeneity == 0.0 and entry.participant_exponent == 0.0
        return
    # the terms a real backend measured, anchored on the recorded setting: the recorded fit's
    # samples_half times the recorded setting's efficiency and participation factor
    assert entry.scale_source.startswith("participant_exponent and heterogeneity measured by")
    assert entry.heterogeneity > 0 and entry.participant_exponent > 0
    scale = cc.recorded_scale(base, entry.classes, entry.heterogeneity,
                              entry.participant_exponent)
    assert entry.samples_half == pytest.approx(fresh.samples_half * scale, rel=2e-4)


def test_the_models_come_from_their_layer_tables():
    models = builtin_models()
    cnn, vgg = models["cnn-mnist"], models["vgg11-cifar10"]

    def conv(k, c_in, c_out, h):  # (multiply-adds, parameters)
        return h * h * c_out * c_in * k * k, c_out * c_in * k * k + c_out

    layers = [conv(5, 1, 32, 26), conv(5, 32, 64, 12), (3136 * 512, 3136 * 512 + 512),
              (512 * 10, 512 * 10 + 10)]
    assert cnn.params == sum(p for _, p in layers) == 1663370
    assert cnn.train_flop_per_sample == pytest.approx(3 * 2 * sum(m for m, _ in layers), rel=1e-3)
    layers, h, c_in = [], 32, 3
    for v in (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"):
        if v == "M":
            h //= 2
            continue
        layers.append(conv(3, c_in, v, h))
        c_in = v
    layers += [(512 * 512, 512 * 512 + 512)] * 2 + [(5120, 5130)]
    assert vgg.params == sum(p for _, p in layers) == 9750922
    assert vgg.train_flop_per_sample == pytest.approx(3 * 2 * sum(m for m, _ in layers), rel=1e-3)
    assert cnn.bytes_per_param == vgg.bytes_per_param == 4


def test_the_scenarios_are_the_recorded_settings_and_run():
    import netsim
    from netsim.scenario.loading import resolve_network, scenario_data, validate_scenario

    for name, devices, samples in (("fedavg-mnist", 100, 600), ("fednova-cifar", 16, 3125)):
        result = validate_scenario(name)
        assert not result.problems, result.problems
        net = resolve_network(result.scenario, 0)
        trainers = [d for d in net.devices if d.samples > 0]
        assert len(trainers) == devices and {d.samples for d in trainers} == {samples}
        data = scenario_data(name)
        data["training"]["max_epochs"] = 3
        run = netsim.simulate(data, policy="fedavg-all", seed=0).runs.iloc[0]
        assert run["status"] != "failed", run["error"]
        assert run["epochs"] == 3
    mnist = validate_scenario("fedavg-mnist").scenario
    amap = builtin_models()["cnn-mnist"].loss.accuracy
    assert mnist.training.target_loss == pytest.approx(amap.loss_for(0.97), rel=1e-3)
    assert (mnist.training.batch_size, mnist.training.local_epochs) == (10, 1)
    cifar = validate_scenario("fednova-cifar").scenario
    assert (cifar.training.batch_size, cifar.training.local_epochs) == (32, 2)
    assert cifar.training.dirichlet_alpha == 0.1


def test_fedavg_mnist_reaches_97_percent_near_the_recorded_27_rounds():
    """B = 10, E = 1: the recorded run reached 97 % at round 27; the scenario's mean curve
    there too, a seeded run within its spread."""
    import netsim
    from netsim.scenario.loading import validate_scenario

    scenario = validate_scenario("fedavg-mnist").scenario
    model = builtin_models()["cnn-mnist"]
    predictor = LossPredictor(model, scenario.training)
    setting = rec.Setting("B10-E1", 100, 600.0, 10, (1,))
    mean = rec.mean_curve(predictor, setting, np.arange(1, 200))
    first = int(np.argmax(mean <= scenario.training.target_loss)) + 1
    assert abs(first - 27) <= 0.35 * 27
    run = netsim.simulate("fedavg-mnist", policy="fedavg-all", seed=0).runs.iloc[0]
    assert run["target_reached"] and abs(run["epochs"] - 27) <= 0.35 * 27


# --- the command -------------------------------------------------------------------------------

def _args(**kw) -> argparse.Namespace:
    base = {"recorded": "mnist", "hold_out": None, "params": None, "no_params": True,
            "out": "netsim-calibration/curves.parquet"}
    return argparse.Namespace(**{**base, **kw})


def test_the_command_prints_the_held_back_table_and_writes_the_entry(tmp_path, capsys):
    from netsim.commands import calibrate_recorded
    from netsim.yamlio import safe_load

    assert calibrate_recorded.main(_args()) == 0
    out = capsys.readouterr().out
    assert "B50-E1" in out and "held back" in out and "target (held back" in out
    params = tmp_path / "loss_params.yaml"
    params.write_text("generic: {initial_loss: 2.3, floor_full: 0.05, samples_half: 2.0e4, "
                      "exponent: 0.7}\n", encoding="utf-8")
    assert calibrate_recorded.main(_args(recorded="cifar", no_params=False,
                                         params=str(params))) == 0
    data = safe_load(params.read_text(encoding="utf-8"))
    assert set(data) == {"generic", "vgg11-cifar10"}
    entry = LossParams.model_validate(data["vgg11-cifar10"])
    assert entry.accuracy is not None and "fedavg-vanilla-fixed round 100" in entry.source
    assert math.isclose(entry.local_epoch_exponent, 0.0)
    # again: the entry is replaced, not appended
    assert calibrate_recorded.main(_args(recorded="cifar", no_params=False,
                                         params=str(params))) == 0
    assert params.read_text(encoding="utf-8").count("vgg11-cifar10:") == 1


def test_the_command_refuses_an_unknown_setting(capsys):
    from netsim.commands import calibrate_recorded

    assert calibrate_recorded.main(_args(hold_out=["B7-E1"])) == 2
    assert "--hold-out" in capsys.readouterr().err


def test_the_cli_dispatches_recorded(capsys):
    from netsim.cli import main

    assert main(["calibrate", "--recorded", "mnist", "--hold-out", "B50-E1,B10-E5",
                 "--no-params"]) == 0
    assert "rounds to 97 % test accuracy" in capsys.readouterr().out
