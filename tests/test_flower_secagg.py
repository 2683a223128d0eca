"""Flower's workflows through netsim's Grid (issue 52): Flower's own flower-secure-aggregation
(LegacyContext, DefaultWorkflow, SecAggPlusWorkflow) and fl-dp-sa (central DP with client-side
fixed clipping over SecAgg+) examples, their data loaders swapped for scikit-learn's digits
(tests/data/flower-apps/README.md), run unchanged by ``netsim run --app``: every SecAgg+ stage a
phase of its round, its bytes on the network and its masks' compute on the device, no
protocol reply taken for a ClientApp failure; and the availability guard, which tells a
strategy waiting for nodes from a ClientManager reading them several times a round."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("flwr")
pytest.importorskip("torch")
pytest.importorskip("sklearn")

import netsim  # noqa: E402
from netsim.cli import main  # noqa: E402
from netsim.engine import resolve_scenario  # noqa: E402
from policies.flower.grid import SECAGG_MASK_FLOP_PER_ELEMENT  # noqa: E402

APPS = Path(__file__).resolve().parent / "data" / "flower-apps"
SECAGG, DPSA = APPS / "flower-secure-aggregation", APPS / "fl-dp-sa"
STAGES = ["secaggplus:setup", "secaggplus:share_keys", "secaggplus:collect_masked_vectors",
          "secaggplus:unmask"]
#: The examples' CNNs: secaggexample's (3 x 32 x 32 input) and fl_dp_sa's (1 x 28 x 28).
SECAGG_PARAMS, DPSA_PARAMS = 62_006, 61_610


def _star(n: int) -> dict:
    """A server and n phones on private links: a static world."""
    devices = [{"id": "server", "flop_per_s": 1e12, "memory_bytes": 6.4e10,
                "power_busy_w": 200.0, "power_idle_w": 50.0}]
    links = []
    for k in range(n):
        devices.append({"id": f"d{k}", "flop_per_s": (1 + k % 4) * 1e9, "memory_bytes": 4e9,
                        "power_busy_w": 5.0, "power_idle_w": 1.0, "samples": 100})
        links.append({"a": "server", "b": f"d{k}", "bandwidth_bps": 1e7, "latency_s": 0.01,
                      "energy_j_per_bit": 1e-7})
    return {"name": f"star{n}", "seed": 0, "devices": devices, "links": links,
            "aggregator": "server", "model": "mlp-digits",
            "training": {"target_loss": 0.01, "deadline_s": 3600, "max_epochs": 50}}


@pytest.fixture
def star(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def make(n: int) -> Path:
        path = tmp_path / f"star{n}.yaml"
        path.write_text(yaml.safe_dump(_star(n)))
        return path
    return make


def test_secure_aggregation_runs_with_every_stage_charged(star, capsys):
    """SecAgg+ over 8 nodes, one round: its four stages and the evaluation are the phases
    of the round's epoch; no reply is a failure; a device uploads its masked vector (int64:
    more than twice the float32 model it downloaded) and the protocol's keys and shares, so
    more bytes than plain FedAvg's update; its compute is its training (the examples its
    fit reported) plus share_num masks over the model's elements."""
    scenario = star(8)
    code = main(["run", str(scenario), "--app", str(SECAGG), "--run-config",
                 "is-demo=false num-server-rounds=1", "--out", "res", "--no-figure", "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    results = netsim.load_results(Path("res"))
    runs, epochs = results.runs, results.epochs
    devices = results.devices.set_index("device")
    assert list(runs["status"]) == ["completed"], runs["error"].iloc[0]
    assert "ClientApp failed" not in printed.err and "ClientApp calls failed" not in printed.err
    (row,) = epochs.to_dict("records")
    phases = json.loads(row["phases"])
    assert [p.get("stage") for p in phases] == [*STAGES, None]
    assert [p["type"] for p in phases] == ["train"] * 4 + ["evaluate"]
    assert row["failed"] == 0 and row["updates_aggregated"] == 8
    collect = phases[2]
    assert row["samples"] == sum(collect["examples"].values()) > 0
    assert np.isfinite(row["loss"])  # (the clients' legacy evaluate replies' loss)
    fps = resolve_scenario(netsim.load_scenario(str(scenario)), 0).model.flop_per_sample(0)
    evaluate = phases[4]
    for k in range(8):
        dev = f"d{k}"
        model_down = collect["bytes_down"][dev]
        assert model_down > 4 * SECAGG_PARAMS  # (the float32 model, serialized)
        assert collect["bytes_up"][dev] > 1.9 * model_down  # (the masked int64 vector)
        sent = sum(p["bytes_up"].get(dev, 0) for p in phases)
        assert sent == devices.loc[dev, "bytes_sent"] > collect["bytes_up"][dev]
        flop = collect["examples"][dev] * fps + 3 * SECAGG_PARAMS * SECAGG_MASK_FLOP_PER_ELEMENT
        flop += evaluate["examples"].get(dev, 0) * fps / 3
        assert devices.loc[dev, "energy_compute_j"] == pytest.approx(
            5.0 * flop / ((1 + k % 4) * 1e9), rel=1e-9)


def test_central_dp_over_secure_aggregation_runs(star, capsys):
    """fl-dp-sa unchanged: FedAvg (fraction_fit 0.2 of num-sampled-clients 20: 4 nodes a
    round) wrapped in DifferentialPrivacyClientSideFixedClipping, fixedclipping_mod and
    secaggplus_mod on the clients, over DefaultWorkflow(SecAggPlusWorkflow), its three
    rounds each an epoch of the four SecAgg+ stages; no evaluation (fraction_evaluate 0),
    so no loss, and the warning says what was looked at."""
    code = main(["run", str(star(8)), "--app", str(DPSA), "--out", "res", "--no-figure",
                 "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    results = netsim.load_results(Path("res"))
    assert list(results.runs["status"]) == ["completed"], results.runs["error"].iloc[0]
    epochs = results.epochs
    assert len(epochs) == 3 and list(epochs["failed"]) == [0, 0, 0]
    assert list(epochs["updates_aggregated"]) == [4, 4, 4]
    for text in epochs["phases"]:
        phases = json.loads(text)
        assert [p.get("stage") for p in phases] == STAGES
        collect = phases[2]
        assert all(up > 1.9 * 4 * DPSA_PARAMS for up in collect["bytes_up"].values())
    assert "loss is NaN" in printed.err and "evaluate replies (metrics: none)" in printed.err


def test_a_legacy_strategy_short_of_nodes_fails_at_once(star):
    """The secure-aggregation ServerApp asks for min_fit_clients 5 of a fleet of 4: Flower's
    ClientManager would wait a day of wall time; netsim ends the run at once, saying why."""
    r = netsim.simulate(str(star(4)), policy="flower", seed=0, params={
        "app": str(SECAGG), "run_config": {"is-demo": False, "num-server-rounds": 1},
        "quiet": True})
    assert r.runs["status"].iloc[0] == "failed"
    assert "needs 5 nodes but 4 are available" in r.runs["error"].iloc[0]
    assert r.runs["wall_s"].iloc[0] < 10.0


def test_a_message_api_strategy_waiting_for_nodes_is_told_apart_from_repeated_reads(star):
    """A strategy that asks for nodes again after sleeping (Flower's sample_nodes) waits for
    nodes: an error after its first sleep; reading them many times in a row is not."""
    from flwr.serverapp.strategy import FedAvg
    from flwr.serverapp.strategy.strategy_utils import sample_nodes

    from policies.flower.policy import FlowerPolicy

    class Greedy(FedAvg):
        def configure_train(self, server_round, arrays, config, grid):
            for _ in range(50):  # (a ClientManager's reads within one round)
                grid.get_node_ids()
            sample_nodes(grid, 6, 6)  # (more than the 4 there are: it sleeps, asks again)
            return super().configure_train(server_round, arrays, config, grid)

    r = netsim.simulate(str(star(4)), policy=FlowerPolicy(strategy=Greedy(
        fraction_evaluate=0.0)), seed=0)
    assert r.runs["status"].iloc[0] == "failed"
    assert "keeps asking for nodes (52 calls without a message, the last after a wait; " \
        "4 available now)" in r.runs["error"].iloc[0]


def test_central_dp_loss_from_the_clients_training_replies(star):
    """fl-dp-sa evaluates nothing; with ``loss_source: train`` (and ``loss_metric:
    val_loss``) the run's loss is its clients' aggregated training metric, what Flower logs
    as its aggregated fit metrics: the example-weighted mean of the val_loss each client's
    legacy FitRes reports (a ConfigRecord ``fitres.metrics``), finite every round, and
    ``runs.loss_source`` says so; no NaN warning."""
    r = netsim.simulate(str(star(8)), policy="flower", seed=0, params={
        "app": str(DPSA), "quiet": True, "loss_source": "train", "loss_metric": "val_loss"})
    runs, epochs = r.runs.iloc[0], r.epochs
    assert runs["status"] == "completed", runs["error"]
    assert runs["loss_source"] == "Flower clients' aggregated training metric 'val_loss'"
    assert len(epochs) == 3 and np.isfinite(epochs["loss"]).all()
    assert (epochs["loss"] > 0.5).all() and (epochs["loss"] < 5.0).all()  # (a 10-class loss)
    assert runs["final_loss"] == epochs["loss"].iloc[-1]


def test_the_secagg_cost_benchmark_core_runs_and_secagg_moves_more_bytes(tmp_path,
                                                                         monkeypatch):
    """benchmarks/secagg_cost.py's core (its measure and its FedAvg copy of the app) over 5
    Wi-Fi clients, one round (the example's ServerApp needs min_fit_clients 5, so not
    fewer): both complete; SecAgg+ uploads its masked int64 vector (about twice the float32
    update FedAvg uploads) and the protocol's keys and shares, downloads the model and the
    others' shares, so it moves more bytes both ways and takes longer than FedAvg."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "secagg_cost.py"
    spec = importlib.util.spec_from_file_location("secagg_cost", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "secagg_cost", bench)  # (its dataclasses look it up)
    spec.loader.exec_module(bench)
    plain = bench.fedavg_app(tmp_path)
    secagg = bench.measure("wifi", 5, bench.SECAGG_APP, "secagg+", rounds=1)
    fedavg = bench.measure("wifi", 5, plain, "fedavg", rounds=1)
    assert secagg.status == fedavg.status == "completed", (secagg.error, fedavg.error)
    assert secagg.rounds == fedavg.rounds == 1
    assert fedavg.bytes_up > 5 * 4 * SECAGG_PARAMS  # (5 float32 updates)
    assert secagg.bytes_up > 1.9 * fedavg.bytes_up
    assert secagg.bytes_down > fedavg.bytes_down
    assert secagg.round_s > fedavg.round_s and secagg.energy_j > fedavg.energy_j
    assert "overhead SecAgg+ / FedAvg per round: wifi 5 clients: bytes x" in bench.overhead(
        [secagg, fedavg])


def test_a_legacy_strategys_centralized_evaluation_is_the_runs_loss():
    """Item 3 for LegacyContext apps: DefaultWorkflow calls the legacy strategy's evaluate
    (its evaluate_fn) before the first round and after each; those losses are the run's."""
    from flwr.client import ClientApp, NumPyClient
    from flwr.common import Context, ndarrays_to_parameters
    from flwr.server import LegacyContext, ServerApp, ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.server.workflow import DefaultWorkflow

    from policies.flower.policy import FlowerPolicy

    class Client(NumPyClient):
        def fit(self, parameters, config):
            return [p + 1.0 for p in parameters], 10, {}

        def evaluate(self, parameters, config):
            return 9.0, 10, {}  # (the clients' loss: not the run's when the server has one)

    client_app = ClientApp(client_fn=lambda context: Client().to_client())

    def evaluate_fn(server_round, parameters, config):
        return 1.0 / (server_round + 1), {}  # rounds 0, 1, 2: 1, 1/2, 1/3

    server_app = ServerApp()

    @server_app.main()
    def main_fn(grid, context: Context) -> None:
        strategy = FedAvg(fraction_fit=1.0, fraction_evaluate=1.0, min_fit_clients=2,
                          min_evaluate_clients=2, min_available_clients=2,
                          evaluate_fn=evaluate_fn,
                          initial_parameters=ndarrays_to_parameters([np.zeros(3)]))
        DefaultWorkflow()(grid, LegacyContext(context=context, config=ServerConfig(
            num_rounds=2), strategy=strategy))

    data = _star(3)
    r = netsim.simulate(data, policy=FlowerPolicy(server_app=server_app,
                                                  client_app=client_app), seed=0,
                        raise_errors=True)
    assert r.runs["initial_loss"].iloc[0] == pytest.approx(1.0)
    assert r.epochs["loss"].tolist() == pytest.approx([1 / 2, 1 / 3])
    assert r.runs["loss_source"].iloc[0] == "Flower evaluate_fn metric 'loss'"
