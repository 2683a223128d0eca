"""The flower policy (policies/flower, docs/flower.md): Flower strategies on netsim's Grid.

Fidelity: Flower's FedAvg over every node in surrogate mode gives fedavg-all's tables, and over
netsim's digits MLP as a ClientApp the real backend's losses; every built-in Message-API
strategy runs in both modes; a round's aggregate is the num-examples-weighted mean; the bytes
on the wire are the messages'. Determinism, isolation and bad input.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

flwr = pytest.importorskip("flwr")

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402

import netsim  # noqa: E402
from netsim.dynamics.world import run_streams  # noqa: E402
from netsim.engine import resolve_scenario  # noqa: E402
from netsim.policy import make_policy  # noqa: E402
from netsim.scenario.errors import ScenarioError  # noqa: E402
from netsim.scenario.loading import load_scenario  # noqa: E402
from netsim.training.real import RealBackend  # noqa: E402
from policies.flower.digits import digits_app  # noqa: E402
from policies.flower.loading import BUILTIN_STRATEGIES  # noqa: E402
from policies.flower.policy import FlowerPolicy  # noqa: E402
from policies.flower.records import message_bytes, node_id  # noqa: E402

CHURN = Path(__file__).resolve().parents[1] / "experiments" / "dynamics" / "churn.yaml"
COLUMNS = ["start_s", "end_s", "energy_compute_j", "energy_comm_j", "energy_idle_j", "loss",
           "samples", "participants", "energy_sleep_j", "dropped", "late"]


def _fedavg_all(**kwargs) -> FedAvg:
    return FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_available_nodes=1,
                  min_train_nodes=1, **kwargs)


def _same_tables(a: netsim.SimulationResult, b: netsim.SimulationResult,
                 rtol: float = 1e-9, atol: float = 1e-9) -> None:
    assert len(a.epochs) == len(b.epochs) > 0
    for col in COLUMNS:
        np.testing.assert_allclose(a.epochs[col].to_numpy(float), b.epochs[col].to_numpy(float),
                                   rtol=rtol, atol=atol, err_msg=col)
    assert list(a.epochs["participant_ids"].map(sorted)) == \
        list(b.epochs["participant_ids"].map(sorted))
    for col in ["energy_j", "time_s", "final_loss", "epochs"]:
        assert a.runs[col].iloc[0] == pytest.approx(b.runs[col].iloc[0], rel=rtol, abs=atol)
    assert a.runs["status"].iloc[0] == b.runs["status"].iloc[0]
    dev_a = a.devices.set_index("device")
    dev_b = b.devices.set_index("device")
    for col in ["energy_compute_j", "energy_comm_j", "energy_idle_j", "bytes_sent",
                "bytes_received", "airtime_s"]:
        np.testing.assert_allclose(dev_a[col].to_numpy(float), dev_b[col].to_numpy(float),
                                   rtol=rtol, atol=atol, err_msg=col)


#: What Flower's records add to fedavg-all's messages (records.message_bytes): FedAvg's train
#: config carries server-round (8 B); a surrogate reply num-examples and train_loss (16 B).
CONFIG_BYTES, METRIC_BYTES = 8, 16


@pytest.mark.parametrize("scenario", ["default", str(CHURN)])
def test_surrogate_fedavg_over_every_node_is_fedavg_all_plus_its_records(scenario):
    """(a) FedAvg(fraction_train=1) gives fedavg-all's tables, each message carrying what
    Flower's records add (8 B down, 16 B up): participants, samples and losses exactly,
    every device's bytes exactly those plus the records', times and energy within what the
    extra bytes take (2e-3 relative, 1 mJ); the built-in default (Wi-Fi, LTE and 5G cells sharing
    air time) and a changing world (churn, stragglers) on media."""
    sc = load_scenario(scenario)
    if scenario != "default":
        sc = sc.model_copy(update={"training": sc.training.model_copy(
            update={"max_epochs": 25})})
    flower = netsim.simulate(sc, policy=FlowerPolicy(strategy=_fedavg_all()), seed=1,
                             raise_errors=True)
    fedavg = netsim.simulate(sc, policy="fedavg-all", seed=1)
    _same_tables(flower, fedavg, rtol=2e-3, atol=1e-3)  # (1 mJ: a sleeping device's)
    for runs in (flower.runs, fedavg.runs):  # (no ClientApp: netsim answers for the clients)
        assert list(runs[["client_calls", "client_calls_failed"]].iloc[0]) == [0, 0]
    a, b = flower.epochs, fedavg.epochs
    for col in ["loss", "samples", "participants", "dropped", "late"]:
        assert list(a[col]) == list(b[col]), col
    assert list(a["updates_aggregated"]) == list(a["participants"] - a["dropped"] - a["late"])
    rounds = a["participant_ids"].explode().value_counts()
    dev_a, dev_b = flower.devices.set_index("device"), fedavg.devices.set_index("device")
    lost = set(a["dropped_ids"].explode().dropna())  # (moved part of a message, or none)
    checked = [dev for dev in rounds.index if dev not in lost]
    assert len(checked) >= len(rounds) // 2
    for dev in checked:
        assert dev_a.loc[dev, "bytes_received"] == dev_b.loc[dev, "bytes_received"] \
            + rounds[dev] * CONFIG_BYTES
        assert dev_a.loc[dev, "bytes_sent"] == dev_b.loc[dev, "bytes_sent"] \
            + rounds[dev] * METRIC_BYTES
    assert flower.epochs["airtime_by_medium_s"].map(json.loads).map(
        lambda d: sum(d.values())).sum() > 0.0  # (the cells' air time was shared)


def _real_backend(sc, seed: int) -> RealBackend:
    res = resolve_scenario(sc, seed)
    return RealBackend(res.model, [d.id for d in res.devices], [d.samples for d in res.devices],
                       res.training, np.random.default_rng(run_streams(seed)[1]))


def _real_default(max_epochs: int = 6):
    sc = load_scenario("default")
    return sc.model_copy(update={"training": sc.training.model_copy(
        update={"backend": "real", "max_epochs": max_epochs})})


def test_real_digits_client_app_gives_the_real_backend_losses():
    """(b) netsim's digits MLP as a ClientApp under Flower's FedAvg: the real backend's
    fedavg-all losses and accuracies (same shards, same minibatch stream, same test split)."""
    sc, seed = _real_default(), 3
    app, evaluate_fn, arrays = digits_app(_real_backend(sc, seed))
    flower = netsim.simulate(sc, policy=FlowerPolicy(
        strategy=_fedavg_all(), client_app=app, evaluate_fn=evaluate_fn,
        initial_arrays=arrays), seed=seed, raise_errors=True)
    real = netsim.simulate(sc, policy="fedavg-all", seed=seed)
    np.testing.assert_allclose(flower.epochs["loss"], real.epochs["loss"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(flower.epochs["accuracy"], real.epochs["accuracy"], atol=1e-12)
    assert flower.runs["initial_loss"].iloc[0] == pytest.approx(real.runs["initial_loss"].iloc[0])
    assert flower.runs["loss_source"].iloc[0] == "Flower evaluate_fn metric 'loss'"
    # the messages carry the app's float64 arrays (8 bytes a parameter) and FedAvg's config
    # (server-round, 8 bytes); the replies the arrays, num-examples and train_loss (16 bytes)
    per_device = flower.devices.set_index("device")
    rounds = flower.epochs["participant_ids"].explode().value_counts()
    params = sum(int(np.prod(a.shape)) for a in arrays.values())
    for dev, n in rounds.items():
        assert per_device.loc[dev, "bytes_received"] == n * (8 * params + 8)
        assert per_device.loc[dev, "bytes_sent"] == n * (8 * params + 16)


def _strategy(name: str):
    from flwr.serverapp import strategy as flower_strategies

    # a quarter of the 20 devices a round: some strategies convert every reply's arrays with
    # flwr's to_numpy_ndarrays(keep_input=False), which runs a full gc.collect() each time
    args = {"fraction_train": 0.25, "fraction_evaluate": 0.0, "min_available_nodes": 2,
            "min_train_nodes": 2}
    if name in {"Krum", "MultiKrum"}:
        args["num_malicious_nodes"] = 1
    if name == "Bulyan":
        args["num_malicious_nodes"] = 0
    if name == "FedProx":
        args["proximal_mu"] = 0.1
    if name == "QFedAvg":
        args["client_learning_rate"] = 0.05
    return getattr(flower_strategies, name)(**args)


@pytest.mark.parametrize("name", BUILTIN_STRATEGIES)
def test_every_builtin_strategy_runs_three_rounds_in_both_modes(name):
    """(c) Each built-in Message-API strategy of flwr runs three rounds, surrogate and real."""
    sc = _real_default(max_epochs=3)
    surrogate = netsim.simulate(sc.model_copy(update={"training": sc.training.model_copy(
        update={"backend": "surrogate"})}), policy=FlowerPolicy(strategy=_strategy(name)),
        seed=0, raise_errors=True)
    app, evaluate_fn, arrays = digits_app(_real_backend(sc, 0))
    real = netsim.simulate(sc, policy=FlowerPolicy(
        strategy=_strategy(name), client_app=app, evaluate_fn=evaluate_fn,
        initial_arrays=arrays), seed=0, raise_errors=True)
    for r in (surrogate, real):  # (3 rounds, max_epochs 3: netsim's stop rule ends it)
        assert r.runs["status"].iloc[0] == "target_missed", r.runs["error"].iloc[0]
        assert len(r.epochs) == 3
        assert (r.epochs["energy_compute_j"] > 0).all()
        assert np.isfinite(r.epochs["loss"]).all()
    assert real.epochs["loss"].iloc[-1] < real.runs["initial_loss"].iloc[0]


def _constant_app(value_of: dict[str, float], examples_of: dict[str, int]) -> ClientApp:
    """A ClientApp whose update is a constant array per device, with its example count."""
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        dev = str(context.node_config["device-id"])
        shape = msg.content["arrays"]["0"].shape
        arrays = ArrayRecord([np.full(shape, value_of[dev], dtype=np.float32)])
        return Message(RecordDict({"arrays": arrays, "metrics": MetricRecord(
            {"num-examples": examples_of[dev]})}), reply_to=msg)

    return app


def test_a_rounds_aggregate_is_the_examples_weighted_mean(star):
    """(d) FedAvg's aggregate of one round equals the num-examples-weighted mean of what the
    clients returned; (e) each device received and sent the messages' bytes."""
    star["training"]["max_epochs"] = 1
    value_of = {"d1": 1.0, "d2": 2.0, "d3": 4.0}
    examples_of = {"d1": 10, "d2": 30, "d3": 60}
    arrays = ArrayRecord([np.zeros(250, dtype=np.float32)])
    policy = FlowerPolicy(strategy=_fedavg_all(), client_app=_constant_app(value_of, examples_of),
                          initial_arrays=arrays)
    r = netsim.simulate(star, policy=policy, seed=0, raise_errors=True)
    want = sum(value_of[d] * examples_of[d] for d in value_of) / sum(examples_of.values())
    got = policy.result.arrays["0"].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    dev = r.devices.set_index("device")
    assert message_bytes(RecordDict({"arrays": arrays})) == 1000
    down = 1000 + 8  # (the arrays, FedAvg's config: server-round)
    up = 1000 + 8  # (the arrays, the metrics: num-examples)
    for d in value_of:
        assert dev.loc[d, "bytes_received"] == down
        assert dev.loc[d, "bytes_sent"] == up
    assert dev.loc["server", "bytes_sent"] == 3 * down
    row = r.epochs.iloc[0]
    assert row["updates_aggregated"] == 3 and row["samples"] == 100 and row["failed"] == 0


def test_an_evaluate_round_costs_its_transfers_and_compute(star):
    """Evaluate messages are a later phase of the same epoch: it ends later and costs more
    (downloads, forward passes), while its training is the same."""
    star["training"]["max_epochs"] = 2
    plain = netsim.simulate(star, policy=FlowerPolicy(strategy=_fedavg_all()), seed=0,
                            raise_errors=True)
    evaluated = netsim.simulate(star, policy=FlowerPolicy(strategy=FedAvg(
        fraction_train=1.0, fraction_evaluate=1.0, min_available_nodes=1, min_train_nodes=1,
        min_evaluate_nodes=1)), seed=0, raise_errors=True)
    assert len(evaluated.epochs) == len(plain.epochs) == 2
    a, b = plain.epochs.iloc[0], evaluated.epochs.iloc[0]
    assert b["end_s"] > a["end_s"]
    assert b["energy_compute_j"] > a["energy_compute_j"]
    assert b["energy_comm_j"] > a["energy_comm_j"]
    assert b["loss"] == a["loss"]
    dev = evaluated.devices.set_index("device")
    # train and evaluate messages: the arrays and the config (server-round, 8 B) each
    assert dev.loc["d1", "bytes_received"] == 2 * 2 * (4.0e6 + 8)
    # train replies: the arrays, num-examples and train_loss; evaluate replies: num-examples
    # and the loss (16 B)
    assert dev.loc["d1", "bytes_sent"] == 2 * (4.0e6 + 16 + 16)
    phases = json.loads(evaluated.epochs["phases"].iloc[0])
    assert [p["type"] for p in phases] == ["train", "evaluate"]
    assert [p["round"] for p in phases] == ["server-round 1"] * 2
    assert all(sorted(p["replied"]) == ["d1", "d2", "d3"] for p in phases)
    assert phases[1]["bytes_up"] == {"d1": 16.0, "d2": 16.0, "d3": 16.0}


def _runs_with(seed: int, star: dict) -> pd.DataFrame:
    star = copy.deepcopy(star)
    star["training"]["max_epochs"] = 6
    policy = FlowerPolicy(strategy=FedAvg(fraction_train=0.5, fraction_evaluate=0.0,
                                          min_available_nodes=1, min_train_nodes=1))
    return netsim.simulate(star, policy=policy, seed=seed).epochs


def test_the_same_seed_gives_the_same_participants_and_global_random_is_untouched(star):
    """Flower samples with Python's global random: seeded per run, its state put back."""
    random.seed(1234)
    before = random.getstate()
    a = _runs_with(0, star)
    assert random.getstate() == before
    other = _runs_with(1, star)
    b = _runs_with(0, star)
    pd.testing.assert_frame_equal(a, b)
    assert list(a["participant_ids"]) != list(other["participant_ids"])


def test_two_simulations_in_one_process_do_not_interact(star):
    """A strategy instance is copied per run: FedAdam's moments start afresh each run."""
    from flwr.serverapp.strategy import FedAdam

    star["training"]["max_epochs"] = 3
    strategy = FedAdam(fraction_evaluate=0.0, min_available_nodes=1, min_train_nodes=1)
    app = _constant_app({"d1": 1.0, "d2": 2.0, "d3": 3.0}, {"d1": 1, "d2": 1, "d3": 1})
    arrays = ArrayRecord([np.zeros(10, dtype=np.float32)])
    first = FlowerPolicy(strategy=strategy, client_app=app, initial_arrays=arrays)
    netsim.simulate(star, policy=first, seed=0)
    second = FlowerPolicy(strategy=strategy, client_app=app, initial_arrays=arrays)
    netsim.simulate(star, policy=second, seed=0)
    np.testing.assert_array_equal(first.result.arrays["0"].numpy(),
                                  second.result.arrays["0"].numpy())
    assert not hasattr(strategy, "m_t") or strategy.m_t is None


def test_node_ids_are_stable_and_distinct(star):
    ids = [d["id"] for d in star["devices"]]
    assert len({node_id(d) for d in ids}) == len(ids)
    assert node_id("d1") == node_id("d1") > 1


def test_a_client_app_that_raises_is_a_failed_client_not_a_failed_run(star):
    star["training"]["max_epochs"] = 2
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        if context.node_config["device-id"] == "d2":
            raise RuntimeError("out of memory on the phone")
        return Message(RecordDict({"arrays": msg.content["arrays"], "metrics": MetricRecord(
            {"num-examples": 5})}), reply_to=msg)

    r = netsim.simulate(star, policy=FlowerPolicy(
        strategy=_fedavg_all(), client_app=app,
        initial_arrays=ArrayRecord([np.zeros(4, dtype=np.float32)])), seed=0)
    assert r.runs["status"].iloc[0] == "target_missed"
    assert r.runs["error"].iloc[0] == ""
    info = json.loads(r.epochs["info"].iloc[0])
    assert info["flower_errors"] == {"d2": "RuntimeError: out of memory on the phone"}
    assert list(r.epochs["failed"]) == [1, 1]
    assert list(r.epochs["updates_aggregated"]) == [2, 2]
    assert list(r.epochs["samples"]) == [10, 10]
    # the run's counts (runs table): 2 rounds of 3 train calls, d2's two failed
    assert r.runs["client_calls"].iloc[0] == 6 and r.runs["client_calls_failed"].iloc[0] == 2


def test_a_reply_without_num_examples_is_that_clients_error(star):
    star["training"]["max_epochs"] = 1
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return Message(RecordDict({"arrays": msg.content["arrays"], "metrics": MetricRecord(
            {"examples": 5})}), reply_to=msg)

    r = netsim.simulate(star, policy=FlowerPolicy(
        strategy=_fedavg_all(), client_app=app,
        initial_arrays=ArrayRecord([np.zeros(4, dtype=np.float32)])), seed=0)
    info = json.loads(r.epochs["info"].iloc[0])
    assert set(info["flower_errors"]) == {"d1", "d2", "d3"}
    assert "'num-examples'" in info["flower_errors"]["d1"]
    # every call of the round failed: the run fails, naming why
    assert r.runs["status"].iloc[0] == "failed"
    assert "every ClientApp call of server-round 1's train messages failed (3 of 3" \
        in r.runs["error"].iloc[0]
    assert "'num-examples'" in r.runs["error"].iloc[0]
    assert r.epochs["failed"].iloc[0] == 3 and r.epochs["updates_aggregated"].iloc[0] == 0


def test_a_strategy_that_wants_more_nodes_than_are_online_fails_at_once(star):
    r = netsim.simulate(star, policy=FlowerPolicy(strategy=FedAvg(
        fraction_evaluate=0.0, min_available_nodes=5)), seed=0)
    assert r.runs["status"].iloc[0] == "failed"
    assert "needs 5 nodes" in r.runs["error"].iloc[0]
    assert "3 are available" in r.runs["error"].iloc[0]
    assert r.runs["wall_s"].iloc[0] < 1.0  # nothing slept in real time


def test_a_timeout_is_a_simulated_deadline_on_replies(star):
    """Replies later than the timeout (simulated seconds) reach the strategy as errors."""
    star["training"]["max_epochs"] = 1
    r = netsim.simulate(star, policy=FlowerPolicy(strategy=_fedavg_all(), timeout_s=5.0),
                        seed=0, raise_errors=True)
    row = r.epochs.iloc[0]
    assert row["end_s"] == pytest.approx(5.0, abs=0.5)
    assert row["late"] >= 1
    assert row["late"] + row["participants"] - row["late"] == 3


@pytest.mark.parametrize(("params", "field", "text"), [
    ({"strategy": "nosuchmodule:Strategy"}, "strategy", "does not resolve"),
    ({"strategy": "FedAvgg"}, "strategy", "no built-in Flower strategy"),
    ({"strategy": "numpy:pi"}, "strategy", "is not a flwr.serverapp.strategy.Strategy"),
    ({"strategy": "FedAvg", "strategy_args": {"nope": 1}}, "strategy",
     "FedAvg(**strategy_args) failed"),
    ({"client_app": "numpy:pi", "initial_arrays": "numpy:zeros"}, "client_app",
     "is not a flwr.clientapp.ClientApp"),
    ({"client_app": "policies.flower.digits:digits_app", "initial_arrays": "numpy:zeros"},
     "client_app", "digits_app() failed"),
    ({"client_app": "nosuchpackage.client_app:app", "initial_arrays": "numpy:zeros"},
     "client_app", "put the folder that holds 'nosuchpackage' on the Python path: --app"),
    ({"client_app": "myapp"}, "client_app", "is not 'module:attr'"),
    ({"app": "/no/such/folder"}, "app", "is no folder"),
    ({"run_config": "lr=="}, "run_config", "invalid format"),
    ({"client_app": "tests.test_flower:EXAMPLE_APP"}, "initial_arrays", "needed in real mode"),
])
def test_bad_parameters_are_named(params, field, text):
    with pytest.raises(ScenarioError) as err:
        make_policy("flower", params)
    message = str(err.value)
    assert f"policies.flower.{field}" in message or (
        "policies.flower:" in message and f"{field}:" in message)
    assert text in message


EXAMPLE_APP = ClientApp()


def test_a_message_to_a_node_that_is_no_device_fails_the_run_clearly(star):
    from flwr.serverapp import ServerApp

    server = ServerApp()

    @server.main()
    def main(grid, context) -> None:
        msg = Message(RecordDict({"arrays": ArrayRecord([np.zeros(3)])}), dst_node_id=12345,
                      message_type="train")
        grid.send_and_receive([msg])

    r = netsim.simulate(star, policy=FlowerPolicy(server_app=server), seed=0)
    assert r.runs["status"].iloc[0] == "failed"
    assert "node 12345, which is no device of this scenario" in r.runs["error"].iloc[0]


def _fedavg_server(rounds: int, **strategy_args):
    """A user's ServerApp whose main runs FedAvg for ``rounds`` rounds on the grid it gets."""
    from flwr.serverapp import ServerApp

    server = ServerApp()

    @server.main()
    def main(grid, context) -> None:
        FedAvg(min_available_nodes=1, min_train_nodes=1, **strategy_args).start(
            grid=grid, initial_arrays=ArrayRecord([np.zeros(4, dtype=np.float32)]),
            num_rounds=rounds)

    return server


def test_a_server_app_runs_with_netsims_grid(star):
    """A user's ServerApp main receives netsim's grid: its rounds are netsim's epochs."""

    star["training"]["max_epochs"] = 10
    server = _fedavg_server(4, fraction_evaluate=0.0)
    r = netsim.simulate(star, policy=FlowerPolicy(server_app=server), seed=0,
                        raise_errors=True)
    assert len(r.epochs) == 4
    # it ran its configured rounds before netsim's stop rules: completed, no error
    assert r.runs["status"].iloc[0] == "completed"
    assert r.runs["error"].iloc[0] == ""


def test_cli_runs_a_flower_scenario_and_rejects_a_bad_path(tmp_path, star):
    from netsim.cli import main

    star["training"]["max_epochs"] = 2
    star["policies"] = {"flower": {"strategy": "FedAvg", "strategy_args": {
        "fraction_evaluate": 0.0, "min_available_nodes": 1, "min_train_nodes": 1}}}
    path = tmp_path / "flower.yaml"
    path.write_text(yaml.safe_dump(star))
    assert main(["run", str(path), "--policy", "flower", "--out", str(tmp_path / "out")]) == 0
    star["policies"]["flower"]["strategy"] = "mymodule:Nope"
    path.write_text(yaml.safe_dump(star))
    assert main(["run", str(path), "--policy", "flower", "--out", str(tmp_path / "o2")]) == 2


def _evaluating_app() -> ClientApp:
    """Trains nothing; evaluates to loss 1/round-ish and accuracy per device."""
    app = ClientApp()
    loss_of = {"d1": 1.0, "d2": 2.0, "d3": 4.0}

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return Message(RecordDict({"arrays": msg.content["arrays"], "metrics": MetricRecord(
            {"num-examples": 1})}), reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        dev = str(context.node_config["device-id"])
        return Message(RecordDict({"metrics": MetricRecord({
            "loss": loss_of[dev], "accuracy": 1.0 / loss_of[dev],
            "num-examples": {"d1": 1, "d2": 1, "d3": 2}[dev]})}), reply_to=msg)

    return app


def test_without_evaluate_fn_the_loss_and_accuracy_are_the_clients_weighted_means(star):
    """Real mode with a ServerApp (or no evaluate_fn): each round's loss and accuracy are the
    clients' num-examples-weighted evaluate metrics, and the run says so."""

    star["training"]["max_epochs"] = 5
    server = _fedavg_server(2, min_evaluate_nodes=1)
    r = netsim.simulate(star, policy=FlowerPolicy(server_app=server,
                                                  client_app=_evaluating_app()),
                        seed=0, raise_errors=True)
    want_loss = (1.0 + 2.0 + 2 * 4.0) / 4
    want_accuracy = (1.0 + 0.5 + 2 * 0.25) / 4
    np.testing.assert_allclose(r.epochs["loss"], want_loss)
    np.testing.assert_allclose(r.epochs["accuracy"], want_accuracy)
    assert r.runs["loss_source"].iloc[0] == "Flower clients' aggregated evaluate metric 'loss'"
    assert np.isnan(r.runs["initial_loss"].iloc[0])


def test_what_a_server_app_decides_is_refused_beside_it():
    with pytest.raises(ScenarioError, match="evaluate_fn: given with server_app"):
        make_policy("flower", {"server_app": "tests.test_flower:SERVER_APP",
                               "evaluate_fn": "numpy:mean"})


SERVER_APP = flwr.serverapp.ServerApp()


@SERVER_APP.main()
def _server_main(grid, context) -> None:  # (a ServerApp for the refusal test)
    return None


@pytest.mark.parametrize("strategy", ["FedAvg", "FedMedian"])
def test_surrogate_replies_are_the_same_through_flowers_constructors(monkeypatch, strategy):
    """Surrogate replies fill their copied records' storage directly and copy their phase's
    first reply's metadata where this Flower lays its records and messages out as 1.x does
    (grid.RECORD_STORAGE, grid.MESSAGE_LAYOUT: true on the Flower the project pins); Flower's
    public constructors and ``__setitem__`` give the same tables bit for bit, and each reply
    its own records (FedMedian pops the arrays it aggregates, FedAvg evaluates too)."""
    from flwr.serverapp import strategy as strategies

    from policies.flower import grid

    assert grid.RECORD_STORAGE and grid.MESSAGE_LAYOUT
    sc = {"name": "replies", "seed": 0, "model": "mlp-digits",
          "generate": {"n_devices": 200, "devices_per_cell": 32, "seed": 1},
          "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": 4}}
    tables = []
    for direct in (True, False):
        monkeypatch.setattr(grid, "RECORD_STORAGE", direct)
        monkeypatch.setattr(grid, "MESSAGE_LAYOUT", direct)
        policy = FlowerPolicy(strategy=getattr(strategies, strategy)(
            fraction_train=0.1, fraction_evaluate=0.05, min_available_nodes=2))
        r = netsim.simulate(sc, policy=policy, seed=3, raise_errors=True)
        tables.append((r.runs.drop(columns=["wall_s"]), r.epochs, r.devices,
                       {k: a.numpy() for k, a in policy.result.arrays.items()}))
    (runs_a, epochs_a, devices_a, arrays_a), (runs_b, epochs_b, devices_b, arrays_b) = tables
    pd.testing.assert_frame_equal(runs_a, runs_b)
    pd.testing.assert_frame_equal(epochs_a, epochs_b)
    pd.testing.assert_frame_equal(devices_a, devices_b)
    assert arrays_a.keys() == arrays_b.keys()
    for k in arrays_a:
        np.testing.assert_array_equal(arrays_a[k], arrays_b[k])
    assert all(json.loads(p)[0]["replied"] for p in epochs_a["phases"])


def test_a_surrogate_replys_records_are_its_own_and_what_the_public_path_builds():
    """A reply's content (grid._ReplyForm) holds the records Flower's constructors build:
    the same arrays, the example count and loss, its own RecordDict, ArrayRecord and
    MetricRecord; with and without filling the records directly."""
    from policies.flower import grid

    sent = RecordDict({"arrays": ArrayRecord([np.arange(6, dtype=np.float32)])})
    for direct in (True, False):
        old, grid.RECORD_STORAGE = grid.RECORD_STORAGE, direct
        try:
            form = grid._ReplyForm(sent, "num-examples", "train_loss", 0.25)
            a, b = form.content(7), form.content(9)
        finally:
            grid.RECORD_STORAGE = old
        assert list(a.keys()) == ["arrays", "metrics"]
        assert dict(a.metric_records["metrics"]) == {"num-examples": 7, "train_loss": 0.25}
        assert dict(b.metric_records["metrics"]) == {"num-examples": 9, "train_loss": 0.25}
        assert a["arrays"] is not b["arrays"] and a["metrics"] is not b["metrics"]
        np.testing.assert_array_equal(a["arrays"]["0"].numpy(), np.arange(6))
        a["arrays"].pop("0")
        assert "0" in b["arrays"] and "0" in form.form["arrays"]
        same_key = grid._ReplyForm(None, "loss", "loss", 0.5)  # (the loss wins)
        assert dict(same_key.content(3)["metrics"]) == {"loss": 0.5}


def test_a_surrogate_phase_hands_the_workload_a_walk_over_its_replies_gives(monkeypatch):
    """A phase whose replies netsim built for one content hands one Workload read from the
    replies' form (grid._uniform); walking every reply's figures instead (as for a
    ClientApp's replies) gives the same tables bit for bit, with and without evaluate rounds
    and in a world whose devices come and go (those that drop out mid-round get error
    replies)."""
    from policies.flower import grid

    walks: list[int] = []
    surrogate = grid.NetsimGrid._surrogate_replies

    def walked(self, *args, **kwargs):
        out = surrogate(self, *args, **kwargs)
        walks.append(self._uniform is not None)
        self._uniform = None  # (the walk over the replies: _workload's general path)
        return out

    sc = {"name": "uniform", "seed": 0, "model": "mlp-digits",
          "generate": {"n_devices": 200, "devices_per_cell": 32, "seed": 1},
          "dynamics": {"availability": {"model": "markov", "mean_online_s": 1,
                                        "mean_offline_s": 1}},
          "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": 4}}
    tables = []
    for walk in (False, True):
        if walk:
            monkeypatch.setattr(grid.NetsimGrid, "_surrogate_replies", walked)
        policy = FlowerPolicy(strategy=FedAvg(fraction_train=0.2, fraction_evaluate=0.1,
                                              min_available_nodes=2))
        r = netsim.simulate(sc, policy=policy, seed=5, raise_errors=True)
        tables.append((r.runs.drop(columns=["wall_s"]), r.epochs, r.devices))
    assert walks and all(walks)  # (every phase took the form's figures, until the walk)
    for a, b in zip(*tables, strict=True):
        pd.testing.assert_frame_equal(a, b)
    phases = [p for cell in tables[0][1]["phases"] for p in json.loads(cell)]
    assert {p["type"] for p in phases} == {"train", "evaluate"}
    assert any(p["dropped"] for p in phases)


def test_records_copied_in_one_pass_are_what_flowers_copy_makes():
    """grid._copied (on the Flower the project pins: RECORD_STORAGE) makes what each record's
    own ``copy`` makes: its class, the same fields in the same order, the same check
    functions, its entries in a dict of its own."""
    from policies.flower import grid

    assert grid.RECORD_STORAGE
    records = [RecordDict({"a": ArrayRecord([np.ones(3, dtype=np.float32)]),
                           "m": MetricRecord({"n": 4})}),
               ArrayRecord([np.ones(3, dtype=np.float32)]), MetricRecord({"n": 4, "x": 0.5})]
    for record in records:
        cls, state, entries = grid._shell(record)
        made, flowers = grid._copied(cls, state, entries.copy()), record.copy()
        assert type(made) is type(flowers) is type(record)
        assert list(made.__dict__) == list(flowers.__dict__) == list(grid.RECORD_FIELDS)
        for f in grid.RECORD_FIELDS[:2]:
            assert made.__dict__[f] is flowers.__dict__[f]
        assert dict(made) == dict(flowers) == dict(record)
        assert made.__dict__["_data"] is not record.__dict__["_data"]


def test_a_phases_replies_copied_from_its_first_are_flowers_replies():
    """grid._Replies: each reply's metadata is what Flower's ``Message(content,
    reply_to=msg)`` makes (node ids swapped, the id replied to, run, group, type, tasks), all
    stamped at the first reply's time, its TTL what its message has left then; a message of
    another group gets Flower's constructor."""
    import time

    from flwr.app import Metadata

    from policies.flower import grid

    def sent(i: int, group: str = "g") -> Message:
        return Message(content=RecordDict(), metadata=Metadata(
            run_id=7, message_id=f"m{i}", src_node_id=1, dst_node_id=100 + i,
            reply_to_message_id="", group_id=group, created_at=time.time() - i,
            ttl=3600.0 - i, message_type="train"))

    assert grid.MESSAGE_LAYOUT
    replies = grid._Replies()
    msgs = [sent(i) for i in range(4)] + [sent(4, group="other")]
    made = [replies(RecordDict(), m) for m in msgs]
    assert replies._copies
    now = made[0].metadata.created_at
    for m, r in zip(msgs, made, strict=True):
        flowers = Message(RecordDict(), reply_to=m)
        for field in ("run_id", "message_id", "src_node_id", "dst_node_id", "src_task_id",
                      "dst_task_id", "reply_to_message_id", "group_id", "message_type",
                      "delivered_at"):
            assert getattr(r.metadata, field) == getattr(flowers.metadata, field), field
        assert r.metadata.src_node_id == m.metadata.dst_node_id
        assert r.metadata.reply_to_message_id == m.metadata.message_id
        assert not r.has_error() and isinstance(r.content, RecordDict)
        if m.metadata.group_id == "g":
            assert r.metadata.created_at == now
            assert r.metadata.ttl == m.metadata.created_at + m.metadata.ttl - now
