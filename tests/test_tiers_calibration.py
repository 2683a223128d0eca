"""The progress model's edge-round term, fitted from real hierarchical runs (issue 46, item 4;
netsim.training.calibrate_tiers, ``netsim calibrate --hierarchical``)."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pandas as pd
import pytest

from netsim.cli import main
from netsim.commands.calibrate import packaged_entry
from netsim.scenario.schema import TrainingSpec
from netsim.training import calibrate_tiers as ct
from netsim.training.loss import edge_round_weight
from netsim.training.models import resolve_model

SHIPPED = str(resources.files("netsim").joinpath("data").joinpath("calibration")
              .joinpath("tier_curves.parquet"))


def test_the_shipped_runs_refit_to_the_shipped_constants_and_predict_held_back_settings():
    entry = packaged_entry()
    fit = ct.fit_tiers(pd.read_parquet(SHIPPED), entry)
    assert fit.efficiency == pytest.approx(entry.edge_round_efficiency, rel=1e-3)
    assert fit.heterogeneity == pytest.approx(entry.edge_heterogeneity, rel=1e-3)
    assert fit.held_back_within(0.25) == (4, 4)
    held = fit.report[fit.report.held_back]
    assert (held.r2 > 0.95).all()
    # the real runs say edge rounds are worth less under skew: rho falls with alpha
    model = resolve_model("mlp-digits")
    rho = [edge_round_weight(model, TrainingSpec(target_loss=0.1, deadline_s=1,
                                                 dirichlet_alpha=a)) for a in (1.0, 0.3, 0.1)]
    assert rho == sorted(rho, reverse=True) and rho[-1] < 0.8 < rho[0]


def test_edges_group_devices_with_alike_data():
    labels = np.array([0] * 10 + [1] * 10 + [2] * 10)
    shards = [np.arange(k, k + 5) for k in (0, 20, 5, 25, 10, 15)]
    groups = ct.edge_groups(shards, labels, 3)
    assert groups == [[0, 2], [4, 5], [1, 3]]


def test_the_command_reports_the_fit(capsys):
    assert main(["calibrate", "--hierarchical", "--from-curves", SHIPPED, "--no-params"]) == 0
    out = capsys.readouterr().out
    assert "held-back settings with cloud rounds to loss 0.6 predicted within 25 %: 4 of 4" \
        in out
