"""netsim calibrate --coverage: the coverage terms' fits recover known constants, and the
command writes them into a model's entry."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

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
