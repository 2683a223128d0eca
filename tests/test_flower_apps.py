"""Flower's own example apps (tests/data/flower-apps: quickstart-numpy, quickstart-sklearn,
quickstart-pandas) run unchanged from their folders, as ``flwr run`` runs them: per-round
epochs, per-reply bytes, counts of what Flower aggregated, statuses, failures that are loud,
and each run's aggregate equal to an in-process loop's over the same node order (1e-12).
"""

from __future__ import annotations

import copy
import importlib
import json
import logging
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

flwr = pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict  # noqa: E402

import netsim  # noqa: E402
from netsim.cli import main  # noqa: E402
from policies.flower.loading import fresh_app, read_app  # noqa: E402
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


def _module(folder: Path, name: str) -> Any:
    """Module ``name`` of the app in ``folder``, imported anew (as a run imports it: the
    folder on the Python path meanwhile, the app's modules forgotten before and after)."""
    with fresh_app(read_app(folder)):
        sys.path.insert(0, str(folder.resolve()))
        return importlib.import_module(name)


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
    client_app = _module(NUMPY, "quickstart_numpy.client_app").app
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
    load_data = _module(SKLEARN, "sklearnexample.task").load_data
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
    # (the run's own count, a warning: what a sweep's runs show too)
    assert f"{3 * len(bad)} of {3 * 2 * len(DEVICES)} ClientApp calls failed in run " \
        f"{runs['run_id'].iloc[0]}" in printed.err
    # the run's counts in the runs table: every round's train and evaluate calls, the failed
    # ones, each the sum over the epochs' phases
    every = [p for text in epochs["phases"] for p in json.loads(text)]
    assert runs["client_calls"].iloc[0] == 3 * 2 * len(DEVICES) == sum(
        len(p["nodes"]) - len(p["unavailable"]) for p in every)
    assert runs["client_calls_failed"].iloc[0] == 3 * len(bad) == sum(
        len(p["failed"]) for p in every) == epochs["failed"].sum()


def test_a_sweep_summary_counts_the_runs_whose_client_calls_failed(scenario_file, capsys):
    """A sweep of quickstart-sklearn (small partitions fail in scikit-learn) beside random-k:
    the flower runs' failed calls are in their runs rows, and the summary says how many runs
    had failed client calls, of how many calls, naming them; netsim's own policy calls no
    client (0 and 0)."""
    sweep = scenario_file.parent / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"base": scenario_file.name, "seeds": [0, 1],
                                     "policies": ["flower", {"name": "random-k",
                                                             "params": {"k": 2}}]}))
    code = main(["sweep", str(sweep), "--out", "swept", "--workers", "1", "--no-progress",
                 "--app", str(SKLEARN), "--run-config", "num-server-rounds=2", "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    runs = netsim.load_results(Path("swept")).runs.set_index(["policy", "seed"]).sort_index()
    flower_runs = runs.loc["flower"]
    assert list(flower_runs["status"]) == ["completed", "completed"]
    assert list(flower_runs["client_calls"]) == [2 * 2 * len(DEVICES)] * 2
    failed = flower_runs["client_calls_failed"]
    assert (failed > 0).all() and (failed < len(DEVICES) * 2).all()
    assert list(runs.loc["random-k", "client_calls"]) == [0, 0]
    assert list(runs.loc["random-k", "client_calls_failed"]) == [0, 0]
    assert f"2 of 2 driven run(s) had failed client calls ({failed.sum()} of " \
        f"{4 * 2 * len(DEVICES)} calls; runs.client_calls_failed): " in printed.out
    for run_id in flower_runs["run_id"]:
        assert run_id in printed.out


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

    client_app = _module(SKLEARN, "sklearnexample.client_app").app
    task = _module(SKLEARN, "sklearnexample.task")
    create_log_reg_and_instantiate_parameters = task.create_log_reg_and_instantiate_parameters
    get_model_params = task.get_model_params
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
    assert runs["client_calls"].iloc[0] == runs["client_calls_failed"].iloc[0] == 8
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
        scenario_file, caplog):
    """A query-only ServerApp: each of its rounds (its messages' group_id) is an epoch of one
    query phase; each reply is charged its metrics (two 9-bin histograms and four numbers);
    the aggregated histograms equal those of the same ClientApp calls made in-process; no
    loss warning (federated analytics has no loss), the loss NaN."""
    caplog.set_level(logging.WARNING, logger="netsim.flower")
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
    assert epochs["loss"].isna().all()
    assert not [rec for rec in caplog.records if rec.name == "netsim.flower"]
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
    client_app = _module(PANDAS, "pandas_example.client_app").app
    aggregate_partial_histograms = _module(
        PANDAS, "pandas_example.server_app").aggregate_partial_histograms

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


# -- centralized-digits: the ServerApp's own evaluate_fn, and a module-level data cache -----
CENTRAL = APPS / "centralized-digits"


def test_the_same_run_twice_in_one_process_gives_the_same_result(scenario_file, tmp_path):
    """Each run imports the app anew: its module-level data cache (built with NumPy's global
    generator, as Flower's examples cache their FederatedDataset) does not carry over, so the
    same run id gives the same losses twice in one process, a 4-device run is the same after
    an 8-device one as alone, and afterwards the app's modules are gone and sys.path is what
    it was."""
    path_before = list(sys.path)
    policy = FlowerPolicy(app=str(CENTRAL), quiet=True)
    first, second = (netsim.simulate(str(scenario_file), policy=policy, seed=0)
                     for _ in range(2))
    assert first.runs["run_id"].iloc[0] == second.runs["run_id"].iloc[0]
    assert first.runs["status"].iloc[0] == "completed", first.runs["error"].iloc[0]
    assert np.isfinite(first.runs["final_loss"].iloc[0])
    assert first.runs["final_loss"].iloc[0] == second.runs["final_loss"].iloc[0]
    assert list(first.epochs["loss"]) == list(second.epochs["loss"])
    assert sys.path == path_before
    assert not [m for m in sys.modules if m.split(".")[0] == "centraldigits"]
    small = _star()
    small["devices"], small["links"] = small["devices"][:5], small["links"][:4]
    four = tmp_path / "star4.yaml"
    four.write_text(yaml.safe_dump(small))
    alone = netsim.simulate(str(four), policy=FlowerPolicy(app=str(CENTRAL), quiet=True),
                            seed=0)
    assert list(alone.epochs["loss"]) != list(first.epochs["loss"])  # (another fleet)
    netsim.simulate(str(scenario_file), policy=policy, seed=0)
    after = netsim.simulate(str(four), policy=policy, seed=0)
    assert list(after.epochs["loss"]) == list(alone.epochs["loss"])


def test_the_server_apps_evaluate_fn_is_the_runs_loss(scenario_file, capsys):
    """quickstart-pytorch's shape: the ServerApp gives FedAvg a centralized evaluate_fn
    (``loss``), its clients report ``eval_loss``. By default (loss_source auto) the
    evaluate_fn's loss is the run's: its value before round 1 the initial loss, each round's
    the epoch's, the last the evaluation of the final model the app saves; no loss warning.
    loss_source=clients reads the clients' replies (NaN here: they carry eval_loss, and the
    warning says what was looked at); with loss_metric=eval_loss, their weighted mean."""
    code = main(["run", str(scenario_file), "--app", str(CENTRAL), "--out", "auto",
                 "--no-figure", "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    runs, epochs, _ = _tables(Path("auto"))
    assert runs["loss_source"].iloc[0] == "Flower evaluate_fn metric 'loss'"
    assert runs["initial_loss"].iloc[0] == pytest.approx(np.log(10.0), rel=1e-9)
    assert len(epochs) == 3 and np.isfinite(epochs["loss"]).all()
    assert list(epochs["loss"]) == sorted(epochs["loss"], reverse=True)
    task = _module(CENTRAL, "centraldigits.task")
    saved = np.load("final_model.npz")
    want, accuracy = task.test([saved["arr_0"], saved["arr_1"]],
                               *task.load_centralized_dataset())
    assert runs["final_loss"].iloc[0] == want
    assert epochs["accuracy"].iloc[-1] == accuracy
    assert "loss is NaN" not in printed.err

    code = main(["run", str(scenario_file), "--app", str(CENTRAL), "--out", "clients",
                 "--param", "flower.loss_source=clients", "--no-figure", "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    runs, clients, _ = _tables(Path("clients"))
    assert runs["loss_source"].iloc[0].startswith("Flower clients' aggregated")
    assert clients["loss"].isna().all()
    assert "loss_source clients; looked at the clients' evaluate replies (metrics: " \
        "eval_acc, eval_loss, num-examples)" in printed.err
    assert list(clients["end_s"]) == list(epochs["end_s"])  # (the same run otherwise)

    code = main(["run", str(scenario_file), "--app", str(CENTRAL), "--out", "eval_loss",
                 "--param", "flower.loss_source=clients", "--param",
                 "flower.loss_metric=eval_loss", "--no-figure", "--quiet"])
    assert code == 0
    _, named, _ = _tables(Path("eval_loss"))
    assert np.isfinite(named["loss"]).all()
    assert not np.allclose(named["loss"], epochs["loss"])


def test_loss_source_server_without_an_evaluate_fn_says_so_and_a_bad_one_is_refused(
        scenario_file, capsys):
    code = main(["run", str(scenario_file), "--app", str(NUMPY), "--run-config",
                 "num-server-rounds=1", "--param", "flower.loss_source=server", "--out",
                 "res", "--no-figure", "--quiet"])
    err = capsys.readouterr().err
    assert code == 0
    assert "an evaluate_fn, but none was given to Flower's start()" in err
    assert "evaluate replies" not in err  # (server: the clients' were not looked at)
    code = main(["run", str(scenario_file), "--app", str(CENTRAL), "--param",
                 "flower.loss_source=central", "--out", "bad"])
    err = capsys.readouterr().err
    assert code == 2
    assert "policies.flower.loss_source: Input should be 'auto', 'server', 'clients' or 'train'" in err


# -- clear messages -------------------------------------------------------------------------
def _numpy_copy(tmp_path: Path, component: str = "quickstart_numpy.client_app:app",
                extra_import: str = "") -> Path:
    """quickstart-numpy copied to ``tmp_path``, its clientapp entry ``component``, its
    client_app.py importing ``extra_import`` first."""
    import shutil

    folder = tmp_path / "numpy-copy"
    shutil.copytree(NUMPY, folder)
    toml = folder / "pyproject.toml"
    toml.write_text(toml.read_text().replace('"quickstart_numpy.client_app:app"',
                                             repr(component).replace("'", '"')))
    if extra_import:
        client = folder / "quickstart_numpy" / "client_app.py"
        client.write_text(extra_import + "\n" + client.read_text())
    return folder


@pytest.mark.parametrize(("component", "said"), [
    ("quickstart_numpy.client_ap:app", "there is no module 'quickstart_numpy.client_ap' "
     "(package 'quickstart_numpy', {pkg}, holds client_app, server_app, task): is the name "
     "misspelt?"),
    ("quickstart_numpy.client_app:ap", "quickstart_numpy.client_app has no attribute 'ap' "
     "(its names: ")])
def test_a_misspelt_component_names_its_pyproject_entry(scenario_file, tmp_path, capsys,
                                                        component, said):
    folder = _numpy_copy(tmp_path, component)
    code = main(["run", str(scenario_file), "--app", str(folder), "--out", "res"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"policies.flower.app: {folder / 'pyproject.toml'}'s [tool.flwr.app.components] " \
        f"clientapp = {component!r}: " + said.format(pkg=folder / "quickstart_numpy") in err
    assert "PYTHONPATH" not in err  # (the folder is on the path: that is not the cure)


def test_a_module_gone_from_the_installed_flwr_names_its_version(scenario_file, tmp_path,
                                                                 capsys):
    """flwr.client.typing, gone in flwr 1.42: 'not installed' would be wrong (flwr is)."""
    import importlib.metadata

    folder = _numpy_copy(tmp_path, extra_import="from flwr.client.typing import ClientFn")
    code = main(["run", str(scenario_file), "--app", str(folder), "--out", "res"])
    err = capsys.readouterr().err
    assert code == 2
    assert "importing 'quickstart_numpy.client_app' needs 'flwr.client.typing', which the " \
        f"installed flwr {importlib.metadata.version('flwr')} does not have" in err
    assert "not installed" not in err
    folder = _numpy_copy(tmp_path / "2", extra_import="import netsim_no_such_package")
    code = main(["run", str(scenario_file), "--app", str(folder), "--out", "res"])
    err = capsys.readouterr().err
    assert code == 2 and "'netsim_no_such_package', which is not installed" in err
