"""Flower's own example apps (tests/data/flower-apps: quickstart-numpy, quickstart-sklearn,
quickstart-pandas) run unchanged from their folders, as ``flwr run`` runs them: per-round
epochs, per-reply bytes, counts of what Flower aggregated, statuses, failures that are loud,
and each run's aggregate equal to an in-process loop's over the same node order (1e-12).
"""

from __future__ import annotations

import copy
import json
import logging
import random
from pathlib import Path

import numpy as np
import pytest
import yaml

flwr = pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict  # noqa: E402

import netsim  # noqa: E402
from netsim.cli import main  # noqa: E402
from policies.flower.policy import FlowerPolicy, _task_identity  # noqa: E402
from policies.flower.records import message_bytes, node_id  # noqa: E402

APPS = Path(__file__).resolve().parent / "data" / "flower-apps"
NUMPY, SKLEARN, PANDAS = (APPS / name for name in ("quickstart-numpy", "quickstart-sklearn",
                                                    "quickstart-pandas"))
DEVICES = [f"d{k}" for k in range(8)]


def _star() -> dict:
    """A server and eight phones on private links (no shared medium): a static world, every
    node available each round, replies arriving in full."""
    devices = [{"id": "server", "flop_per_s": 1e12, "memory_bytes": 6.4e10,
                "power_busy_w": 200.0, "power_idle_w": 50.0}]
    links = []
    for k, dev in enumerate(DEVICES):
        devices.append({"id": dev, "flop_per_s": (1 + k % 4) * 1e9, "memory_bytes": 4e9,
                        "power_busy_w": 5.0, "power_idle_w": 1.0, "samples": 100})
        links.append({"a": "server", "b": dev, "bandwidth_bps": (1 + k % 3) * 1e7,
                      "latency_s": 0.01 * (1 + k % 2), "energy_j_per_bit": 1e-7})
    return {"name": "star8", "seed": 0, "devices": devices, "links": links,
            "aggregator": "server", "model": "mlp-digits",
            "training": {"target_loss": 0.01, "deadline_s": 3600, "max_epochs": 50}}


@pytest.fixture
def scenario_file(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)  # (the apps save their final model in the current folder)
    path = tmp_path / "star8.yaml"
    path.write_text(yaml.safe_dump(_star()))
    return path


def _tables(out: Path):
    results = netsim.load_results(out)
    return results.runs, results.epochs.sort_values("epoch").reset_index(drop=True), \
        results.devices.set_index("device")


def _contexts(run_config: dict) -> list[Context]:
    return [Context(run_id=1, node_id=node_id(dev), state=RecordDict(),
                    node_config={"partition-id": k, "num-partitions": len(DEVICES),
                                 "device-id": dev}, run_config=dict(run_config))
            for k, dev in enumerate(DEVICES)]


def _in_process_fedavg(client_app, arrays: list[np.ndarray], rounds: int, run_config: dict,
                       seed: int) -> list[np.ndarray]:
    """Flower's FedAvg(fraction_train=1, fraction_evaluate=1) by hand, with the global
    generators seeded as netsim seeds them: each round every node in device order trains
    (a call that raises is left out), the num-examples-weighted mean of the replies, then
    every node evaluates in device order."""
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 (the one the apps draw from)
    contexts = _contexts(run_config)
    with _task_identity(1):
        for rnd in range(1, rounds + 1):
            replies = []
            for dev, ctx in zip(DEVICES, contexts, strict=True):
                msg = Message(RecordDict({"arrays": ArrayRecord([a.copy() for a in arrays]),
                                          "config": ConfigRecord({"server-round": rnd})}),
                              dst_node_id=node_id(dev), message_type="train")
                try:
                    replies.append(client_app(message=msg, context=ctx))
                except Exception:
                    continue
            weights = [float(r.content["metrics"]["num-examples"]) for r in replies]
            updates = [r.content["arrays"].to_numpy_ndarrays() for r in replies]
            arrays = [sum(w * u[i] for w, u in zip(weights, updates, strict=True)) / sum(weights)
                      for i in range(len(arrays))]
            for dev, ctx in zip(DEVICES, contexts, strict=True):
                msg = Message(RecordDict({"arrays": ArrayRecord([a.copy() for a in arrays]),
                                          "config": ConfigRecord({"server-round": rnd})}),
                              dst_node_id=node_id(dev), message_type="evaluate")
                try:
                    client_app(message=msg, context=ctx)
                except Exception:
                    continue
    return arrays


# -- quickstart-numpy: a trainer ------------------------------------------------------------
def test_quickstart_numpy_runs_from_its_folder_on_the_command_line(scenario_file, capsys):
    """``netsim run SCENARIO --app FOLDER --run-config ...``: the app's pyproject names its
    ServerApp and ClientApp; each of its rounds is an epoch with a train and an evaluate
    phase; each message and reply is charged its records' bytes; the run completed its
    configured rounds; a loss metric nobody reports is a warning naming those present."""
    code = main(["run", str(scenario_file), "--app", str(NUMPY), "--run-config",
                 "num-server-rounds=2", "--out", "res", "--no-figure", "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    runs, epochs, devices = _tables(Path("res"))
    assert list(runs["status"]) == ["completed"] and list(runs["error"]) == [""]
    assert "completed" in printed.out
    assert len(epochs) == 2
    for rnd, row in epochs.iterrows():
        phases = json.loads(row["phases"])
        assert [p["type"] for p in phases] == ["train", "evaluate"]
        assert {p["round"] for p in phases} == {f"server-round {rnd + 1}"}
        train, evaluate = phases
        assert sorted(train["replied"]) == DEVICES == sorted(evaluate["nodes"])
        # down: the 1x1 float64 array (8 B) and FedAvg's config, server-round (8 B)
        assert set(train["bytes_down"].values()) == set(evaluate["bytes_down"].values()) == {16}
        # up: the array and two metrics (num-examples, random_metric) / a list of 3 floats
        # and num-examples
        assert set(train["bytes_up"].values()) == {8 + 16}
        assert set(evaluate["bytes_up"].values()) == {3 * 8 + 8}
        assert row["updates_aggregated"] == 8 and row["samples"] == 8 and row["failed"] == 0
    for dev in DEVICES:
        assert devices.loc[dev, "bytes_received"] == 2 * (16 + 16)
        assert devices.loc[dev, "bytes_sent"] == 2 * (24 + 32)
    assert "loss metric 'loss'" in printed.err and "random_metric" in printed.err
    assert "INFO" not in printed.err  # (--quiet: Flower's log lines hidden)
    assert Path("final_model.npz").is_file()  # (the ServerApp's own code ran to its end)


def test_a_sweep_runs_the_app_folder_as_run_does(scenario_file, capsys):
    """``netsim sweep FILE --app FOLDER --run-config ...``: every flower entry of the sweep
    runs the app (its modules allowed, nothing else from the file), with the tables ``netsim
    run --app`` gives for the same seed; the other policies run as they are."""
    sweep = scenario_file.parent / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"base": scenario_file.name, "seeds": [0, 1],
                                     "policies": ["flower", {"name": "random-k",
                                                             "params": {"k": 2}}]}))
    code = main(["sweep", str(sweep), "--out", "swept", "--workers", "1", "--no-progress",
                 "--app", str(NUMPY), "--run-config", "num-server-rounds=2"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    swept = netsim.load_results(Path("swept"))
    runs = swept.runs.set_index(["policy", "seed"]).sort_index()
    assert runs.loc[("flower", 0), "status"] == runs.loc[("flower", 1), "status"] == "completed"
    assert runs.loc[("flower", 0), "epochs"] == 2
    assert set(runs.loc["random-k", "status"]) <= {"ok", "target_missed"}
    assert main(["run", str(scenario_file), "--app", str(NUMPY), "--run-config",
                 "num-server-rounds=2", "--out", "single", "--no-figure", "--quiet"]) == 0
    _, single, _ = _tables(Path("single"))
    mine = swept.epochs[swept.epochs["run_id"] == runs.loc[("flower", 0), "run_id"]]
    mine = mine.sort_values("epoch").reset_index(drop=True)
    for column in ("start_s", "end_s", "energy_comm_j", "energy_compute_j", "phases"):
        assert list(mine[column]) == list(single[column]), column


def test_a_sweep_given_an_app_without_a_policy_that_takes_one_is_refused(scenario_file,
                                                                          capsys):
    sweep = scenario_file.parent / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"base": scenario_file.name, "seeds": 1,
                                     "policies": ["random-k"]}))
    code = main(["sweep", str(sweep), "--out", "swept", "--workers", "1", "--app", str(NUMPY)])
    assert code == 2
    err = capsys.readouterr().err
    assert "--app" in err and "flower" in err
    assert not Path("swept", "runs").exists()


def test_quickstart_numpy_aggregate_is_an_in_process_loops(scenario_file):
    """The final model the unchanged ServerApp saves equals FedAvg by hand over the same
    ClientApp calls in the same node order, the global generators seeded as netsim seeds
    them (its np.random noise included), to 1e-12."""
    policy = FlowerPolicy(app=str(NUMPY), run_config={"num-server-rounds": 3})
    r = netsim.simulate(str(scenario_file), policy=policy, seed=4)
    assert r.runs["status"].iloc[0] == "completed", r.runs["error"].iloc[0]
    saved = np.load("final_model.npz")
    from quickstart_numpy.client_app import app as client_app

    want = _in_process_fedavg(client_app, [np.ones((1, 1))], 3, {}, policy.seed)
    np.testing.assert_allclose(saved["arr_0"], want[0], rtol=1e-12, atol=1e-12)
    assert np.all(saved["arr_0"] > 1.0)  # (the noise moved it: the comparison can fail)


# -- quickstart-sklearn: clients that fail --------------------------------------------------
def test_quickstart_sklearn_clients_that_fail_are_counted_and_charged(scenario_file, capsys):
    """Small partitions make scikit-learn raise in their ClientApp calls: each round counts
    them (failed), Flower aggregates the others (updates_aggregated, samples: their
    num-examples); the first traceback of each distinct error goes to stderr; the summary
    counts the failed calls; a failed client downloads its message, computes nothing and
    uploads its error reply."""
    code = main(["run", str(scenario_file), "--app", str(SKLEARN), "--run-config",
                 "num-server-rounds=3", "--param", "flower.loss_metric=test_logloss",
                 "--out", "res", "--no-figure", "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    runs, epochs, devices = _tables(Path("res"))
    assert list(runs["status"]) == ["completed"]
    assert np.isfinite(epochs["loss"]).all()  # (the clients' test_logloss, weighted)
    from sklearnexample.task import load_data

    shards = [load_data(k, len(DEVICES)) for k in range(len(DEVICES))]
    fits = [len(set(y)) == 3 for _, y, _, _ in shards]  # (all 3 classes: fit succeeds)
    ok = [dev for dev, fit in zip(DEVICES, fits, strict=True) if fit]
    bad = [dev for dev, fit in zip(DEVICES, fits, strict=True) if not fit]
    assert 2 <= len(ok) and 2 <= len(bad)
    assert list(epochs["failed"]) == [len(bad)] * 3
    assert list(epochs["updates_aggregated"]) == [len(ok)] * 3
    assert list(epochs["samples"]) == [sum(len(shards[DEVICES.index(d)][1]) for d in ok)] * 3
    phases = json.loads(epochs["phases"].iloc[0])
    assert sorted(phases[0]["failed"]) == bad and sorted(phases[0]["replied"]) == ok
    assert phases[1]["failed"] == []  # (evaluating the global model works on every shard)
    # bytes: coef (3 x 4) and intercept (3) float64, plus server-round / three metrics
    assert set(phases[0]["bytes_down"].values()) == {120 + 8}
    assert {phases[0]["bytes_up"][d] for d in ok} == {120 + 24}
    info = json.loads(epochs["info"].iloc[0])["flower_errors"]
    for dev in bad:
        assert phases[0]["bytes_up"][dev] == 8 + len(info[dev].encode())  # (code, reason)
    # a failed client computed nothing in training: its compute is its evaluations' only
    # (num-examples x the model's FLOP per sample / 3, at its FLOP/s, busy power 5 W)
    from netsim.engine import resolve_scenario

    fps = resolve_scenario(netsim.load_scenario(str(scenario_file)), 0).model \
        .flop_per_sample(0) / 3
    flops = {d["id"]: d["flop_per_s"] for d in _star()["devices"]}
    for dev in bad:
        evaluated = 3 * len(shards[DEVICES.index(dev)][3]) * fps / flops[dev]
        assert devices.loc[dev, "energy_compute_j"] == pytest.approx(5.0 * evaluated,
                                                                     rel=1e-9)
    assert printed.err.count("Traceback") == len({str(r) for r in _raise_sites(bad, shards)})
    assert f"{3 * len(bad)} of {3 * 2 * len(DEVICES)} client calls failed" in printed.out


def _raise_sites(bad: list[str], shards: list) -> set[str]:
    """The distinct errors scikit-learn raises on the failing shards (the message's kind)."""
    kinds = set()
    for dev in bad:
        _, y, _, _ = shards[DEVICES.index(dev)]
        kinds.add("empty" if len(y) == 0 else "one class" if len(set(y)) == 1 else "two")
    return kinds


def test_quickstart_sklearn_aggregate_is_an_in_process_loops(scenario_file):
    policy = FlowerPolicy(app=str(SKLEARN), run_config="num-server-rounds=3")
    r = netsim.simulate(str(scenario_file), policy=policy, seed=1)
    assert r.runs["status"].iloc[0] == "completed", r.runs["error"].iloc[0]
    import joblib
    from sklearnexample.client_app import app as client_app
    from sklearnexample.task import create_log_reg_and_instantiate_parameters, get_model_params

    saved = joblib.load("logreg_model.pkl")
    initial = [np.array(a) for a in get_model_params(
        create_log_reg_and_instantiate_parameters("l2"))]
    want = _in_process_fedavg(client_app, initial, 3, {"penalty": "l2"}, policy.seed)
    np.testing.assert_allclose(saved.coef_, want[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(saved.intercept_, want[1], rtol=1e-12, atol=1e-12)
    assert np.abs(saved.coef_).max() > 0.01  # (it trained)


def test_a_round_whose_every_call_fails_ends_the_run_naming_the_error(scenario_file, capsys):
    """An invalid run config reaches every ClientApp: the first round fails whole, the run
    ends as failed naming the exception, the command exits 1."""
    code = main(["run", str(scenario_file), "--app", str(SKLEARN), "--run-config",
                 'penalty="none-such"', "--out", "res", "--no-figure", "--quiet"])
    printed = capsys.readouterr()
    assert code == 1
    runs, epochs, _ = _tables(Path("res"))
    assert list(runs["status"]) == ["failed"]
    error = runs["error"].iloc[0]
    assert "every ClientApp call of server-round 1's train messages failed (8 of 8" in error
    assert "InvalidParameterError" in error and "none-such" in error
    assert len(epochs) == 1 and epochs["failed"].iloc[0] == 8
    assert printed.err.count("Traceback") == 1  # (one distinct error: its first traceback)


def test_a_run_config_key_the_app_does_not_declare_is_refused(scenario_file, capsys):
    code = main(["run", str(scenario_file), "--app", str(SKLEARN), "--run-config",
                 "learning-rate=0.1", "--out", "res"])
    err = capsys.readouterr().err
    assert code == 2
    assert "policies.flower: run_config: 'learning-rate': not in" in err
    assert "penalty" in err  # (the keys the app declares)


def test_every_traceback_with_debug(scenario_file, capsys):
    main(["--debug", "run", str(scenario_file), "--app", str(SKLEARN), "--run-config",
          "num-server-rounds=1", "--out", "res", "--no-figure", "--quiet"])
    err = capsys.readouterr().err
    assert err.count("Traceback") == 4  # (one per failed call)


# -- quickstart-pandas: federated analytics, query messages only ----------------------------
def test_quickstart_pandas_query_rounds_are_epochs_and_its_histogram_an_in_process_loops(
        scenario_file):
    """A query-only ServerApp: each of its rounds (its messages' group_id) is an epoch of one
    query phase; each reply is charged its metrics (two 9-bin histograms and four numbers);
    the aggregated histograms equal those of the same ClientApp calls made in-process."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    flower_log = logging.getLogger("flwr")
    flower_log.addHandler(handler)
    try:
        policy = FlowerPolicy(app=str(PANDAS))
        r = netsim.simulate(str(scenario_file), policy=policy, seed=2)
    finally:
        flower_log.removeHandler(handler)
    assert r.runs["status"].iloc[0] == "completed", r.runs["error"].iloc[0]
    epochs = r.epochs
    assert len(epochs) == 3
    per_reply = 2 * (9 * 8 + 8 + 8)
    for rnd, row in epochs.iterrows():
        (phase,) = json.loads(row["phases"])
        assert phase["type"] == "query" and phase["round"] == f"group {rnd}"
        assert sorted(phase["replied"]) == DEVICES
        assert set(phase["bytes_down"].values()) == {0} and set(
            phase["bytes_up"].values()) == {per_reply}
        assert row["updates_aggregated"] == 8 and row["samples"] == 0
    dev = r.devices.set_index("device")
    assert all(dev.loc[d, "bytes_sent"] == 3 * per_reply for d in DEVICES)
    # (a lone mapping argument is the record's args itself, as logging keeps it)
    got = [rec.args for rec in records if rec.msg == "Aggregated histogram: %s"]
    assert len(got) == 3
    from pandas_example.client_app import app as client_app
    from pandas_example.server_app import aggregate_partial_histograms

    with _task_identity(1):
        replies = [client_app(message=Message(RecordDict(), dst_node_id=node_id(d),
                                               message_type="query"), context=ctx)
                   for d, ctx in zip(DEVICES, _contexts({}), strict=True)]
    want = aggregate_partial_histograms(replies)
    for hist in got:
        assert set(hist) == set(want)
        for name in want:
            np.testing.assert_array_equal(hist[name], want[name])
    assert int(sum(h.sum() for h in want.values())) == 2 * 150


def test_the_same_seed_gives_the_same_tables_by_default_and_measured_compute_is_opt_in(
        scenario_file):
    """The default compute (num-examples x the model's FLOP per sample) is deterministic;
    client_compute=measured charges each call its seconds on this host x the host's FLOP/s
    (recorded), so its tables vary with the host."""
    sc = str(scenario_file)
    params = {"app": str(SKLEARN), "run_config": {"num-server-rounds": 2}}
    a, b = (netsim.simulate(sc, policy="flower", seed=3, params=params) for _ in range(2))
    cols = ["end_s", "energy_compute_j", "energy_comm_j", "loss", "samples", "phases"]
    assert a.epochs[cols].equals(b.epochs[cols])
    m = netsim.simulate(sc, policy="flower", seed=3,
                        params={**params, "client_compute": "measured"})
    info = json.loads(m.epochs["info"].iloc[0])
    host = info["host_flop_per_s"]
    assert host > 1e6
    train = json.loads(m.epochs["phases"].iloc[0])[0]
    flops = {d["id"]: d["flop_per_s"] for d in _star()["devices"]}
    assert set(train["host_s"]) == set(DEVICES) and all(s > 0 for s in train["host_s"].values())
    # each device computed its calls' host seconds x the host's FLOP/s at its own FLOP/s
    # (busy at 5 W), in every phase; the samples are the replies' num-examples either way
    for dev in DEVICES:
        host_s = sum(phase["host_s"][dev] for text in m.epochs["phases"]
                     for phase in json.loads(text))
        assert m.devices.set_index("device").loc[dev, "energy_compute_j"] == pytest.approx(
            5.0 * host_s * host / flops[dev], rel=1e-9)
    assert list(m.epochs["samples"]) == list(a.epochs["samples"])


def test_bytes_of_a_message_are_its_records_values():
    content = RecordDict({"arrays": ArrayRecord([np.zeros((3, 4)), np.zeros(3, np.float32)]),
                          "config": ConfigRecord({"server-round": 1, "name": "ab",
                                                  "flag": True, "xs": [1.0, 2.0]})})
    assert message_bytes(content) == 3 * 4 * 8 + 3 * 4 + 8 + 2 + 1 + 16
    metrics = copy.deepcopy(RecordDict({"m": flwr.app.MetricRecord({"a": 1, "b": [1, 2, 3]})}))
    assert message_bytes(metrics) == 8 + 24
