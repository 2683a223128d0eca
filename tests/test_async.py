"""Asynchronous (buffered) aggregation: FedBuff and FedAsync (docs/async.md).

What must hold: synchronous runs keep their tables (and their new columns say so); FedBuff
with K = concurrency in a static world is the synchronous run; every asynchronous epoch's loss
is the progress model stepped with the recorded updates and their staleness; the buffer's
semantics on a case worked out by hand; the real backend's asynchronous step; bad decisions
and parameters named.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import netsim
from netsim.dynamics.buffered import Update
from netsim.policy import Decision, InvalidDecision
from netsim.scenario.errors import ScenarioError
from netsim.scenario.loading import scenario_data
from netsim.training.loss import LossPredictor, LossState

LOSS = {"initial_loss": 2.3, "floor_full": 0.05, "samples_half": 3000.0, "exponent": 0.9,
        "participant_exponent": 0.5, "staleness_exponent": 0.7, "noise_run_sigma": 0.0,
        "noise_epoch_sigma": 0.0}


def fleet(dynamics: dict | None = None, n: int = 30) -> dict:
    """A generated fleet training a compute-heavy model (compute is a real part of a round,
    so stragglers matter), noise off."""
    sc = {"name": "async", "seed": 0,
          "generate": {"n_devices": n, "mix": {"phone": 0.6, "sbc": 0.2, "laptop": 0.2},
                       "access": {"wifi": 0.6, "lte": 0.4}, "aggregator_class": "edge-server",
                       "devices_per_cell": 8, "samples_mean": 300, "seed": 3},
          "model": {"params": 5e5, "bytes_per_param": 4, "train_flop_per_sample": 5e8,
                    "loss": LOSS},
          "training": {"target_loss": 0.5, "deadline_s": 1e6, "max_epochs": 400}}
    if dynamics:
        sc["dynamics"] = dynamics
    return sc


STRAGGLERS = {"compute": {"spread": 0.3, "straggler_probability": 0.2, "straggler_slowdown": 10}}
CHURN = {**STRAGGLERS, "availability": {"model": "markov", "mean_online_s": "60 s",
                                        "mean_offline_s": "60 s"}}


def replay_losses(epochs: pd.DataFrame, scenario: dict) -> np.ndarray:
    """The progress model stepped with each epoch's recorded updates and their staleness:
    staleness discounts the samples once, the local steps follow the samples trained."""
    resolved = netsim.engine.resolve_scenario(netsim.Scenario.model_validate(scenario), 0)
    pred = LossPredictor(resolved.model, resolved.training)
    state, out = LossState(), []
    for _, row in epochs.iterrows():
        n, s = list(row["updates_samples"]), list(row["updates_staleness"])
        if n:
            samples = float(np.sum(pred.stale_samples(np.array(n, float), np.array(s, float))))
            state = pred.step(state, samples, int(row["variant"]), participants=len(n),
                              samples_per_participant=float(np.mean(n)))
        out.append(pred.mean(state))
    return np.array(out)


@pytest.mark.parametrize("dynamics", [None, STRAGGLERS, CHURN], ids=["static", "stragglers", "churn"])
@pytest.mark.parametrize("policy,params", [("fedbuff", {"concurrency": 10, "buffer_updates": 3}),
                                           ("fedasync", {"concurrency": 6}),
                                           ("fedbuff", {"concurrency": 12, "buffer_updates": 4,
                                                        "max_staleness": 2})])
def test_epochs_replay_the_progress_model_with_the_recorded_staleness(dynamics, policy, params):
    sc = fleet(dynamics)
    res = netsim.simulate(sc, policy, seed=1, params=params, raise_errors=True)
    run, ep = res.runs.iloc[0], res.epochs
    assert run["status"] == "ok", run["error"]
    np.testing.assert_allclose(ep["loss"].to_numpy(), replay_losses(ep, sc), rtol=1e-9, atol=0)
    assert (ep["staleness_max"] > 0).any()  # asynchrony did happen
    k = params.get("buffer_updates", 1)
    assert (ep["updates_aggregated"] <= k).all()
    assert ((ep["in_flight"] + ep["updates_aggregated"]) <= params["concurrency"] + k).all()
    assert (ep["started"] + ep["in_flight"].shift(1, fill_value=0)
            <= params["concurrency"]).all()  # never more jobs than the concurrency
    if "max_staleness" in params:
        assert (ep["staleness_max"] <= params["max_staleness"]).all()
    lists = ep["updates_staleness"].map(len)
    assert (lists == ep["updates_aggregated"]).all()
    assert ep["samples"].tolist() == [sum(x) for x in ep["updates_samples"]]
    # energy: categories sum to the total (the cut jobs' energy included), nothing negative
    cats = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "energy_sleep_j"]
    assert math.isclose(res.devices[cats].to_numpy().sum(), run["energy_j"], rel_tol=1e-9)
    assert (res.devices[cats].to_numpy() >= -1e-9).all()
    # every epoch is charged what it drew (transfers and radio periods outlive epochs, never
    # making an epoch's energy negative), and the epochs sum to the run
    assert (ep[cats].to_numpy() >= -1e-9).all()
    assert math.isclose(ep[cats].to_numpy().sum(), run["energy_j"], rel_tol=1e-9)
    assert ep["end_s"].iloc[-1] == run["time_s"]


def test_the_same_seed_gives_the_same_asynchronous_run():
    sc = fleet(CHURN)
    a = netsim.simulate(sc, "fedbuff", seed=4, params={"concurrency": 8, "buffer_updates": 2})
    b = netsim.simulate(sc, "fedbuff", seed=4, params={"concurrency": 8, "buffer_updates": 2})
    for t in ("runs", "epochs", "devices"):
        x, y = getattr(a, t).drop(columns=["wall_s"], errors="ignore"), \
            getattr(b, t).drop(columns=["wall_s"], errors="ignore")
        pd.testing.assert_frame_equal(x, y)


NUMERIC_EPOCH = ["start_s", "end_s", "energy_compute_j", "energy_comm_j", "energy_idle_j",
                 "loss", "participants", "samples"]
NUMERIC_DEVICE = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "busy_s", "bytes_sent",
                  "bytes_received", "energy_radio_j", "airtime_s"]


@pytest.mark.parametrize("media", [True, False], ids=["cells", "private-links"])
def test_fedbuff_with_k_equal_to_concurrency_in_a_static_world_is_the_synchronous_run(media):
    sc = scenario_data("default")
    sc["generate"]["shared_media"] = media
    sync = netsim.simulate(sc, "random-k", seed=2, params={"k": 6}, raise_errors=True)
    buff = netsim.simulate(sc, "fedbuff", seed=2, params={"concurrency": 6, "buffer_updates": 6},
                           raise_errors=True)
    for col in ("status", "epochs"):
        assert sync.runs[col].iloc[0] == buff.runs[col].iloc[0]
    for col in ("time_s", "energy_j", "final_loss"):
        assert math.isclose(sync.runs[col].iloc[0], buff.runs[col].iloc[0], rel_tol=1e-9)
    for col in NUMERIC_EPOCH:
        np.testing.assert_allclose(buff.epochs[col], sync.epochs[col], rtol=1e-9, atol=1e-12)
    assert buff.epochs["participant_ids"].map(list).tolist() == \
        sync.epochs["participant_ids"].map(list).tolist()
    for col in NUMERIC_DEVICE:
        np.testing.assert_allclose(buff.devices[col], sync.devices[col], rtol=1e-9, atol=1e-9)
    assert (buff.epochs["staleness_max"] == 0).all() and (buff.epochs["in_flight"] == 0).all()


@pytest.mark.parametrize("case", ["default", "churn"])
def test_synchronous_epochs_fill_the_asynchronous_columns_with_their_participants(case):
    sc = scenario_data("default") if case == "default" else \
        scenario_data("experiments/dynamics/churn.yaml")
    ep = netsim.simulate(sc, "random-k", seed=0, params={"k": 5}).epochs
    assert (ep["updates_aggregated"] == ep["participants"]).all()
    assert (ep["started"] == ep["participants"]).all()
    assert (ep["staleness_mean"] == 0).all() and (ep["staleness_max"] == 0).all()
    assert (ep["in_flight"] == 0).all()
    assert ep["updates_staleness"].map(len).sum() == 0


def two_devices() -> dict:
    """Two devices whose rounds are compute only (a tiny model on fast links): device "fast"
    trains 1 s, device "slow" 2.5 s; the aggregator averages in about no time."""
    devices = [{"id": "agg", "flop_per_s": 1e15, "memory_bytes": 1e11, "power_busy_w": 10.0,
                "power_idle_w": 1.0},
               {"id": "fast", "flop_per_s": 1e9, "memory_bytes": 4e9, "power_busy_w": 4.0,
                "power_idle_w": 1.0, "samples": 100},
               {"id": "slow", "flop_per_s": 4e8, "memory_bytes": 4e9, "power_busy_w": 3.0,
                "power_idle_w": 0.5, "samples": 100}]
    links = [{"a": "agg", "b": d, "bandwidth_bps": 1e12, "latency_s": 0.0,
              "energy_j_per_bit": 0.0} for d in ("fast", "slow")]
    return {"name": "two", "seed": 0, "devices": devices, "links": links, "aggregator": "agg",
            "model": {"params": 1.0, "bytes_per_param": 1, "train_flop_per_sample": 1e7,
                      "loss": LOSS},
            "training": {"target_loss": 1e-3, "deadline_s": 5.2, "max_epochs": 50}}


def test_buffer_semantics_on_a_case_worked_out_by_hand():
    """FedAsync with both devices: "fast" arrives at 1, 2, 3, 4, 5 (restarted each time), "slow"
    at 2.5 and 5 (restarted at 2.5). Aggregations at 1 (v1), 2 (v2), 2.5 (slow, started at v0:
    staleness 2), 3 (fast, started at 2 from v2: staleness 1), 4 (staleness 0)."""
    res = netsim.simulate(two_devices(), "fedasync", seed=0, params={"concurrency": 2},
                          raise_errors=True)
    ep = res.epochs
    np.testing.assert_allclose(ep["end_s"].to_numpy()[:5], [1.0, 2.0, 2.5, 3.0, 4.0], atol=1e-6)
    assert [list(x) for x in ep["updates_ids"]][:5] == [["fast"], ["fast"], ["slow"], ["fast"],
                                                        ["fast"]]
    assert [list(x) for x in ep["updates_staleness"]][:5] == [[0], [0], [2], [1], [0]]
    assert ep["started"].tolist()[:4] == [2, 1, 1, 1]
    assert ep["in_flight"].tolist()[:4] == [1, 1, 1, 1]
    assert res.runs["status"].iloc[0] == "deadline"
    # the run stops at the deadline; the jobs in flight are cut there and their energy counts:
    # every device drew busy power exactly while training and idle power otherwise
    end = res.runs["time_s"].iloc[0]
    dev = res.devices.set_index("device")
    assert dev.loc["fast", "busy_s"] <= end + 1e-9
    assert math.isclose(dev.loc["fast", "energy_compute_j"], 4.0 * dev.loc["fast", "busy_s"])
    assert math.isclose(dev.loc["slow", "energy_idle_j"], 0.5 * (end - dev.loc["slow", "busy_s"]),
                        rel_tol=1e-9)


def test_an_update_staler_than_max_staleness_is_discarded_and_its_energy_wasted():
    res = netsim.simulate(two_devices(), "fedasync", seed=0,
                          params={"concurrency": 2, "max_staleness": 1}, raise_errors=True)
    ep = res.epochs
    assert "slow" not in {d for ids in ep["updates_ids"] for d in ids}
    assert ep["late"].sum() >= 1 and (ep["energy_wasted_j"] > 0).any()
    wasted = ep.loc[ep["late"] > 0].iloc[0]
    assert list(wasted["late_ids"]) == ["slow"]
    # what the device drew from its job's start to the end of the epoch that discarded it
    # (netsim's rule, as for a synchronous epoch's late updates): trained 0 -> 2.5 s at 3 W,
    # then idle at 0.5 W until the epoch ended at 3 s (the fast device's next arrival)
    assert wasted["end_s"] == pytest.approx(3.0, abs=1e-6)
    assert wasted["energy_wasted_j"] == pytest.approx(2.5 * 3.0 + 0.5 * 0.5, rel=1e-6)


class _Scripted:
    """A policy returning the decisions of a script, one per epoch."""

    name = "scripted"

    def __init__(self, script):
        self.script = list(script)

    def reset(self, scenario, rng):
        pass

    def decide(self, obs):
        return self.script[min(obs.epoch, len(self.script) - 1)](obs)


def _fails_with(decisions, *fragments):
    with pytest.raises(InvalidDecision) as err:
        netsim.simulate(two_devices(), _Scripted(decisions), seed=0, raise_errors=True)
    for text in ("'scripted'", *fragments):
        assert text in str(err.value)


def test_bad_asynchronous_decisions_are_named():
    both = {"fast": 100, "slow": 100}
    _fails_with([lambda o: Decision(participants=both, buffer_updates=3)],
                "buffer_updates: 3 outside 1..2")
    _fails_with([lambda o: Decision(participants=both, buffer_updates=1, max_staleness=-1)],
                "max_staleness: -1")
    _fails_with([lambda o: Decision(participants=both, buffer_updates=1),
                 lambda o: Decision(participants=both, buffer_updates=1)],
                "participants['slow']: device is busy")
    _fails_with([lambda o: Decision(participants=both, buffer_updates=1),
                 lambda o: Decision(participants={"fast": 100})],
                "buffer_updates: None (synchronous) while 1 devices still train")
    _fails_with([lambda o: Decision(participants=both, buffer_updates=1, keep_updates=1)],
                "not with keep_updates")
    _fails_with([lambda o: Decision(participants=both, max_staleness=2)],
                "max_staleness: given without buffer_updates")


def test_the_observation_shows_who_is_busy_and_what_is_buffered_read_only():
    seen = []

    def look(obs):
        seen.append((bool(obs.busy[obs.devices.index["slow"]]), int(obs.busy.sum()),
                     obs.buffered))
        with pytest.raises(ValueError):
            obs.busy[0] = True
        free = [d for d in ("fast", "slow") if not obs.busy[obs.devices.index[d]]]
        return Decision(participants={d: 100 for d in free}, buffer_updates=1)

    netsim.simulate(two_devices(), _Scripted([look]), seed=0, raise_errors=True)
    assert seen[0] == (False, 0, 0)
    assert seen[1] == (True, 1, 0)  # at 1 s the slow device still trains (until 2.5 s)
    assert seen[3] == (False, 1, 0)  # at 2.5 s it has arrived; the fast one trains since 2 s
    assert seen[4] == (True, 1, 0)  # restarted at 2.5 s


@pytest.mark.parametrize("params,field", [
    ({"concurrency": 4, "buffer_updates": 5}, "buffer_updates"),
    ({"concurrency": 4, "buffer_updates": 2, "max_staleness": -1}, "max_staleness"),
    ({"concurrency": 0}, "concurrency")])
def test_bad_fedbuff_parameters_name_the_policy_and_the_field(params, field):
    with pytest.raises(ScenarioError) as err:
        netsim.simulate(two_devices(), "fedbuff", seed=0, params=params)
    assert field in str(err.value) and "fedbuff" in str(err.value)


def test_the_cli_exits_2_on_bad_fedbuff_parameters(tmp_path):
    import yaml

    from netsim.cli import main

    sc = copy.deepcopy(two_devices())
    sc["policies"] = {"fedbuff": {"concurrency": 2, "buffer_updates": 3}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2


def test_local_training_runs_replay_with_staleness_discounted_once():
    """With local exponents (cnn-mnist has them) a stale update's gain is its fresh gain times
    (1 + s) ** -a: the local steps count the samples the device trained, not the discounted
    ones (they once did, and stale updates were discounted twice)."""
    loss = {**LOSS, "local_step_exponent": 0.5, "local_epoch_exponent": -0.15}
    sc = fleet(STRAGGLERS)
    sc["model"]["loss"] = loss
    sc["training"].update({"batch_size": 10, "local_epochs": 2})
    resolved = netsim.engine.resolve_scenario(netsim.Scenario.model_validate(sc), 0)
    pred = LossPredictor(resolved.model, resolved.training)
    fresh = pred.gain(600.0, 1)
    assert fresh == pytest.approx(600.0 * (2 * 60) ** 0.5 * 2 ** -0.15 * pred.efficiency, rel=1e-12)
    for s in (0, 1, 3, 10):
        assert pred.updates_gain([600], [s]) == pytest.approx(fresh * (1 + s) ** -0.7, rel=1e-12)
    res = netsim.simulate(sc, "fedbuff", seed=2, params={"concurrency": 10, "buffer_updates": 3},
                          raise_errors=True)
    ep = res.epochs
    assert (ep["updates_staleness"].map(max) > 0).any()
    np.testing.assert_allclose(ep["loss"].to_numpy(), replay_losses(ep, sc), rtol=1e-9)


def test_stale_samples_is_the_formula():
    resolved = netsim.engine.resolve_scenario(netsim.Scenario.model_validate(fleet()), 0)
    pred = LossPredictor(resolved.model, resolved.training)
    assert pred.stale_samples(300.0, 0) == 300.0
    assert pred.stale_samples(300.0, 3) == pytest.approx(300.0 * 4.0 ** -0.7, rel=1e-15)
    np.testing.assert_allclose(pred.stale_samples(np.array([10.0, 10.0]), np.array([0, 1])),
                               [10.0, 10.0 * 2.0 ** -0.7])


def test_the_real_backend_step_from_one_version_is_federated_averaging():
    from netsim.training.real import RealBackend

    model = {"name": "mlp-digits", "variants": [{"params_fraction": 1.0}]}
    ids, samples = ["a", "b", "c"], [200, 300, 400]
    sync = RealBackend(model, ids, samples, {}, np.random.default_rng(5))
    asyn = RealBackend(model, ids, samples, {}, np.random.default_rng(5))
    for _ in range(3):
        x = sync.advance({"a": 200, "b": 150}, 0)
        y = asyn.advance_updates([Update("a", 200, 0), Update("b", 150, 0)], 0)
        assert y.loss == pytest.approx(x.loss, rel=1e-12)
    # a stale update is trained from the model it downloaded (two aggregations ago here) and
    # its change is added to the current model
    current, base = [p.copy() for p in asyn.params], asyn._versions[-3]
    rng_state = copy.deepcopy(asyn._train_rng)
    asyn.advance_updates([Update("c", 400, 2)], 0)
    after = [p.copy() for p in asyn.params]
    asyn._train_rng = rng_state
    local, _ = asyn._local(2, 400, base)
    for a, c, lo, b in zip(after, current, local, base, strict=True):
        np.testing.assert_allclose(a, c + (lo - b), rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="staleness 9 outside"):
        asyn.advance_updates([Update("c", 400, 9)], 0)


def test_the_staleness_fit_recovers_the_exponent_of_curves_the_model_made():
    """A curves table whose losses are the progress model's own with exponent 0.6: the fit
    finds 0.6 and scores R² 1 on held-out seeds (and less with no penalty)."""
    from netsim.commands.calibrate import packaged_entry
    from netsim.training import calibrate_async as ca

    entry = packaged_entry()
    rng = np.random.default_rng(0)
    rows = []
    for config, k in (("k1", 1), ("k4", 4)):
        for seed in range(6):
            for epoch in range(1, 31):
                stale = rng.integers(0, 6, size=k).tolist()
                rows.append({"config": config, "seed": seed, "epoch": epoch, "loss": 1.0,
                             "dirichlet_alpha": np.nan, "update_samples": [36] * k,
                             "update_staleness": stale, "staleness_max": max(stale)})
    table = pd.DataFrame(rows)
    table["loss"] = np.exp(ca.predicted_log_loss(table, entry, 0.6))
    fit = ca.fit_staleness(table, entry, fit_seeds=4)
    assert fit.exponent == pytest.approx(0.6, abs=1e-3)
    assert fit.r2_held_out == pytest.approx(1.0, abs=1e-6)
    assert fit.r2_held_out_without < 0.99


def test_calibrate_asynchronous_writes_curves_and_only_the_staleness_exponent(tmp_path):
    import json

    import pyarrow.parquet as pq
    import yaml

    from netsim.cli import main

    out = tmp_path / "async.parquet"
    assert main(["calibrate", "--asynchronous", "--quick", "--seeds", "2", "--updates", "20",
                 "--jobs", "1", "--no-progress", "--out", str(out)]) == 0
    meta = json.loads(pq.read_schema(out).metadata[b"netsim.calibration"])
    assert meta["updates_per_run"] == 20 and meta["seeds"] == 2
    table = pd.read_parquet(out)
    assert set(table["config"]) == {"c10-k10", "c10-k2", "c10-k1"}
    written = yaml.safe_load((tmp_path / "loss_params.yaml").read_text())["mlp-digits"]
    from netsim.commands.calibrate import packaged_entry

    packaged = packaged_entry()
    assert 0.0 <= written["staleness_exponent"] <= 10.0
    assert written["samples_half"] == packaged.samples_half  # every other constant kept
    assert "netsim calibrate --asynchronous" in written["source"]


def test_a_finish_below_the_clocks_resolution_does_not_live_lock():
    """A shared group's flow whose remaining time rounds to now (below float resolution at
    t ~ 604 s) finishes now; it was put back and woken at the same instant forever (fedasync
    on experiments/async/uniform.yaml, seed 13). In a child process, so a regression fails on
    its time-out instead of hanging the suite. The target is below the model's floor, so the
    run reaches the deadline (fedasync's schedule does not depend on the loss: the same
    flows as the scenario's own target)."""
    import subprocess
    import sys

    code = ("import netsim\n"
            "from netsim.scenario.loading import scenario_data\n"
            "sc = scenario_data('experiments/async/uniform.yaml')\n"
            "sc['training'].pop('target_accuracy')\n"
            "sc['training'].update(deadline_s=620, target_loss=0.02)\n"
            "r = netsim.simulate(sc, 'fedasync', seed=13)\n"
            "print(r.runs['status'].iloc[0], r.runs['time_s'].iloc[0])\n")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.split() == ["deadline", "620.0"]
