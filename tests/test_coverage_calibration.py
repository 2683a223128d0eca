"""netsim calibrate --coverage: the coverage terms' fits recover known constants, and the
command writes them into a model's entry."""

from __future__ import annotations

import functools
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from netsim.scenario.schema import LossParams
from netsim.training import calibrate_coverage as cc
from netsim.training.labels import label_histograms
from netsim.training.models import builtin_models


def test_fit_floor_recovers_a_power_law():
    sizes = np.array([60, 120, 240, 480, 960])
    runs = pd.DataFrame({"samples": sizes, "seed": 0, "lowest_loss": 3.0 * sizes ** -0.7,
                         "last_loss": 0.0, "epochs": 10, "reference": 1438})
    fit = cc.fit_floor(runs)
    assert fit.data_exponent == pytest.approx(0.7, rel=1e-9)
    assert fit.data_floor == pytest.approx(3.0 * 1438 ** -0.7, rel=1e-9)
    assert fit.rms_log_error < 1e-9


def test_fit_interference_recovers_the_constants_that_made_the_losses():
    """Runs whose 'real' lowest losses are the surrogate's own with kappa 1.5, gamma 2 (on
    drawn label histograms): the grid search finds exactly those, at zero error."""
    model = builtin_models()["mlp-digits"]
    runs = []
    for seed, (alpha, k) in enumerate([(0.1, 2), (0.1, 8), (1.0, 4), (0.1, 16)]):
        rng = np.random.default_rng(seed)
        hist = label_histograms(np.full(40, 35.0), 10, alpha, None, rng)
        runs.append({"skew": {"dirichlet_alpha": alpha}, "k": k, "seed": seed,
                     "histograms": hist, "chosen": rng.choice(40, size=k, replace=False),
                     "epochs": 30, "lowest_loss": 0.0})
    cache: dict = {}
    for r in runs:
        r["lowest_loss"] = cc._surrogate_lowest(model, r, 1.5, 2.0, cache)
    fit = cc.fit_interference(model, runs)
    assert (fit.class_interference, fit.interference_exponent) == (1.5, 2.0)
    assert fit.rms_log_error < 1e-12


def test_the_command_writes_the_four_constants(tmp_path):
    params = tmp_path / "loss_params.yaml"
    done = subprocess.run([sys.executable, "-m", "netsim.cli", "calibrate", "--coverage", "--quick",
                           "--params", str(params)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    entry = yaml.safe_load(params.read_text())["mlp-digits"]
    assert entry["reference_samples"] == 1438
    assert 0.0 < entry["data_floor"] < 0.5 and 0.3 < entry["data_exponent"] < 2.0
    assert entry["class_interference"] in cc.KAPPAS
    assert "netsim calibrate --coverage --model mlp-digits" in entry["coverage_source"]
    assert entry["samples_half"] == builtin_models()["mlp-digits"].loss.samples_half  # kept


def test_the_numpy_backend_trains_only_the_digits_mlp():
    done = subprocess.run([sys.executable, "-m", "netsim.cli", "calibrate", "--coverage",
                           "--model", "small-cnn", "--backend", "real", "--no-params"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--backend real trains only mlp-digits" in done.stderr


def _mean(loss, participants: int, alpha: float | None, epochs: int = 40):
    from netsim.training import calibrate as cal

    schedule = pd.DataFrame({"samples": 60_000, "variant_fraction": 1.0,
                             "dirichlet_alpha": math.nan if alpha is None else alpha,
                             "n_nodes": participants}, index=pd.RangeIndex(1, epochs + 1))
    return cal.surrogate_mean(schedule, loss.initial_loss,
                              {1.0: (loss.floor_full, loss.samples_half, loss.exponent)},
                              loss.prune_progress_loss, loss.heterogeneity,
                              loss.participant_exponent)


@functools.cache
def _recorded_cnn_mnist() -> LossParams:
    """cnn-mnist's entry as the recorded runs' fit gives it, before the torch backend's terms
    were anchored on it (its samples_half, participant exponent and heterogeneity 0)."""
    from netsim.training import recorded as rec

    fresh = rec.fit_recorded(rec.load("mnist")).entry()
    return builtin_models()["cnn-mnist"].loss.model_copy(update={
        "samples_half": fresh.samples_half, "participant_exponent": 0.0, "heterogeneity": 0.0})


def test_terms_anchored_on_a_recorded_curve_keep_it_in_the_recorded_setting():
    """cnn-mnist's curve is the recorded runs' (100 clients, 2 shards each): the measured
    participant exponent and heterogeneity, anchored, leave that setting's curve exactly as
    it was, make fewer participants and IID data faster, and refer the data floor's learning
    curve to the recorded 60,000 samples (the same rise c (U^-g - N^-g) at every U)."""
    recorded = cc.RECORDED_BASES["cnn-mnist"]
    old = _recorded_cnn_mnist()
    floor = cc.FloorFit(data_floor=0.1, data_exponent=0.5, reference_samples=4000,
                        rms_log_error=0.0, table=pd.DataFrame())
    terms = cc.anchored_terms(old, recorded, 0.8, 0.05, floor)
    # the grid's minibatch steps fall as 1 / participants: its exponent holds the steps' term
    assert terms["participant_exponent"] == pytest.approx(0.8 - old.local_step_exponent)
    new = old.model_copy(update=terms)
    shards = recorded.shards_per_device / old.classes  # the equivalent concentration, 0.2
    np.testing.assert_allclose(_mean(new, 100, shards), _mean(old, 100, shards), rtol=1e-12)
    assert (_mean(new, 10, shards)[5:] < _mean(old, 10, shards)[5:]).all()
    assert (_mean(new, 100, None)[5:] < _mean(new, 100, shards)[5:]).all()
    c = 0.1 * 4000 ** 0.5
    for u in (60.0, 960.0, 4000.0):
        rise = new.data_floor * ((60_000 / u) ** 0.5 - 1)
        assert rise == pytest.approx(c * (u ** -0.5 - 60_000 ** -0.5), rel=1e-12)
    assert new.reference_samples == 60_000


def test_the_base_fit_reports_a_held_back_setting():
    """fit_report scores a configuration the fit never saw (the participant exponent
    extrapolated from 5-20 nodes to 40)."""
    from netsim.training import calibrate as cal

    curves = {1.0: (0.1, 3000.0, 1.5)}
    rows = []
    for config, nodes in (("base", 10), ("nodes-5", 5), ("nodes-20", 20), ("nodes-40", 40)):
        schedule = pd.DataFrame({"samples": 1400, "variant_fraction": 1.0,
                                 "dirichlet_alpha": math.nan, "n_nodes": nodes},
                                index=pd.RangeIndex(1, 21))
        mean = cal.surrogate_mean(schedule, 2.5, curves, 1.0, 0.0, 0.6)
        for seed, wobble in ((0, 1.01), (1, 1 / 1.01)):
            rows.append(dict(config=config, seed=seed, epoch=0, loss=2.5, samples=0,
                             variant_fraction=1.0, dirichlet_alpha=math.nan, n_nodes=nodes))
            rows += [dict(config=config, seed=seed, epoch=k, loss=v * wobble ** (k % 3),
                          samples=1400, variant_fraction=1.0, dirichlet_alpha=math.nan,
                          n_nodes=nodes) for k, v in enumerate(mean, start=1)]
    table = pd.DataFrame(rows)
    fit = cal.fit_surrogate(table[table["config"] != "nodes-40"], fit_seeds=2,
                            fit_participant_exponent=True)
    assert fit.participant_exponent == pytest.approx(0.6, abs=0.02)
    report = cal.fit_report(table, fit.initial_loss, {1.0: fit.variants["full"]},
                            fit.prune_progress_loss, fit.heterogeneity,
                            fit.participant_exponent, 2)
    held = report.set_index("config").loc["nodes-40"]
    assert held["r2_fit"] > 0.99  # predicted, never fitted


def test_the_stored_cnn_mnist_fit_keeps_the_recorded_curve_in_the_recorded_setting():
    """netsim/data/calibration/cnn_mnist_torch.yaml: the measured terms anchored on the
    recorded fit, so 100 clients on 2 shards each follow the recorded curve; it is the package
    entry (netsim/data/loss_params.yaml) field for field."""
    from pathlib import Path

    path = Path(cc.__file__).resolve().parents[1] / "data" / "calibration" / "cnn_mnist_torch.yaml"
    stored = LossParams.model_validate(yaml.safe_load(path.read_text())["cnn-mnist"])
    assert stored == builtin_models()["cnn-mnist"].loss
    recorded = _recorded_cnn_mnist()
    assert stored.participant_exponent > 0 and stored.heterogeneity > 0
    assert stored.reference_samples == 60_000 and stored.class_interference > 0
    np.testing.assert_allclose(_mean(stored, 100, 0.2), _mean(recorded, 100, 0.2), rtol=2e-3)


def test_the_package_small_cnn_entry_is_the_stored_torch_fit():
    """small-cnn's entry (netsim/data/loss_params.yaml) holds every value of its torch fit
    (netsim/data/calibration/small_cnn_torch.yaml), and says where its base curve came from."""
    from pathlib import Path

    path = Path(cc.__file__).resolve().parents[1] / "data" / "calibration" / "small_cnn_torch.yaml"
    stored = yaml.safe_load(path.read_text())["small-cnn"]
    entry = builtin_models()["small-cnn"].loss
    for key, value in stored.items():
        if key != "source":
            assert getattr(entry, key) == value, key
    assert entry.source.startswith("fitted by `netsim calibrate --coverage --base-curve "
                                   "--model small-cnn` (base curve, participation and skew; "
                                   "torch backend")
    assert entry.participant_exponent > 0.5 and entry.data_floor > 0
