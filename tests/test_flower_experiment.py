"""experiments/flower: its Flower app (quickstart-shaped ClientApp, ServerApp, task) runs
unchanged under the flower policy on its churn world, by the strategy and the ServerApp."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

import netsim  # noqa: E402
from netsim.scenario.loading import load_scenario  # noqa: E402

HERE = Path(__file__).resolve().parents[1] / "experiments" / "flower"


def _short(path: Path, epochs: int):
    sc = load_scenario(path)
    return sc.model_copy(update={"training": sc.training.model_copy(
        update={"max_epochs": epochs})})


def test_the_app_trains_under_fedprox_on_the_churn_world():
    r = netsim.simulate(_short(HERE / "churn.yaml", 4), policy="flower", seed=0, params={
        "strategy": "FedProx", "strategy_args": {"proximal_mu": 0.1, "fraction_train": 0.5,
                                                 "fraction_evaluate": 0.0},
        "client_app": "experiments.flower.client_app:app",
        "initial_arrays": "experiments.flower.task:initial_arrays",
        "evaluate_fn": "experiments.flower.server_app:evaluate"}, raise_errors=True)
    loss = r.epochs["loss"].to_numpy()
    assert len(loss) == 4 and loss[-1] < r.runs["initial_loss"].iloc[0]
    assert np.isfinite(r.epochs["accuracy"]).all()
    assert r.runs["loss_source"].iloc[0] == "Flower evaluate_fn metric 'loss'"


def test_the_server_app_runs_on_netsims_grid():
    r = netsim.simulate(_short(HERE / "churn.yaml", 10), policy="flower", seed=0, params={
        "server_app": "experiments.flower.server_app:app",
        "client_app": "experiments.flower.client_app:app",
        "run_config": {"num-server-rounds": 2}}, raise_errors=True)
    assert len(r.epochs) == 2
    assert r.runs["loss_source"].iloc[0].startswith("Flower clients' aggregated")


def test_the_scale_world_validates():
    assert load_scenario(HERE / "scale.yaml").generate.n_devices == 100_000
