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
    """The ServerApp's own evaluate_fn (centralized evaluation on the held-out digits) is the
    run's loss by default (loss_source auto), its value before the first round the initial
    loss; loss_source=clients takes the clients' aggregated evaluate loss instead."""
    params = {"server_app": "experiments.flower.server_app:app",
              "client_app": "experiments.flower.client_app:app",
              "run_config": {"num-server-rounds": 2}}
    scenario = _short(HERE / "churn.yaml", 10)
    r = netsim.simulate(scenario, policy="flower", seed=0, params=params, raise_errors=True)
    assert len(r.epochs) == 2
    assert r.runs["loss_source"].iloc[0] == "Flower evaluate_fn metric 'loss'"
    from experiments.flower import server_app, task

    initial = float(server_app.evaluate(0, task.initial_arrays())["loss"])
    assert r.runs["initial_loss"].iloc[0] == pytest.approx(initial, rel=1e-12)
    assert np.isfinite(r.epochs["loss"]).all() and r.epochs["loss"].iloc[-1] < initial
    c = netsim.simulate(scenario, policy="flower", seed=0, raise_errors=True,
                        params={**params, "loss_source": "clients"})
    assert c.runs["loss_source"].iloc[0].startswith("Flower clients' aggregated")
    assert np.isnan(c.runs["initial_loss"].iloc[0])
    assert list(c.epochs["end_s"]) == list(r.epochs["end_s"])  # (the same run otherwise)
    assert not np.allclose(c.epochs["loss"], r.epochs["loss"])


def test_the_scale_world_validates():
    assert load_scenario(HERE / "scale.yaml").generate.n_devices == 100_000


def test_calibrate_fits_the_app_and_the_fit_runs_the_model_in_surrogate_mode(tmp_path, capsys):
    """netsim calibrate --client-app: the app's real runs over a grid of participants, the
    fit written with its provenance, a held-back fraction predicted (R² on the log-loss),
    and the written constants run the model in surrogate mode."""
    import pandas as pd

    from netsim.cli import main
    from netsim.yamlio import read_text, safe_load

    out = tmp_path / "app.parquet"
    code = main(["calibrate", "--quick", "--client-app", "experiments.flower.client_app:app",
                 "--initial-arrays", "experiments.flower.task:initial_arrays",
                 "--evaluate-fn", "experiments.flower.server_app:evaluate",
                 "--scenario", str(HERE / "churn.yaml"), "--entry", "digits-app",
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    curves = pd.read_parquet(out)
    assert set(curves["config"]) == {"fraction-0.25", "fraction-0.5", "fraction-1",
                                     "fraction-0.75"}
    r2 = float(printed.split("R² on the log-loss ")[1].split(",")[0])
    assert r2 > 0.9
    entry = safe_load(read_text(str(tmp_path / "loss_params.yaml")))["digits-app"]
    assert "netsim calibrate --client-app experiments.flower.client_app:app" in entry["source"]
    sc = load_scenario(HERE / "churn.yaml")
    model = {"name": "digits-app", "params": 4810, "train_flop_per_sample": 28860,
             "loss": entry}
    r = netsim.simulate({**sc.model_dump(mode="json", exclude_none=True), "model": model,
                         "training": {**sc.training.model_dump(mode="json", exclude_none=True),
                                      "max_epochs": 5}},
                        policy="random-k", seed=0)
    assert r.runs["loss_source"].iloc[0].startswith("fitted by `netsim calibrate --client-app")
    assert r.epochs["loss"].iloc[-1] < entry["initial_loss"]


def test_calibrate_names_what_an_app_run_is_missing(capsys):
    from netsim.cli import main

    code = main(["calibrate", "--client-app", "experiments.flower.client_app:app",
                 "--fractions", "0.5,2", "--out", "/tmp/never.parquet"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--fractions" in err and "--evaluate-fn" in err
