"""Participants that stop mid-epoch inside the array players (netsim.epochs.stopping, issue
47): a session that ends, a battery that empties, the epoch's deadline or its
``keep_updates``-th update ends a participant's transfer or training at that instant, one
more piece boundary of its phase, instead of sending the epoch to the guarded events. Every such epoch stays in arrays, and the tables are the
event path's (``fast_epochs=False``) to 1e-9: a hand-worked re-share at a stop, the changing
world's analytic cases, random changing worlds and a fleet whose sessions end in most
epochs."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import netsim
from netsim.dynamics.epoch import stop_instant, stop_instants
from tests.test_dynamics_engine import FixedPolicy, _dropout_star
from tests.test_dynamics_fuzz import worlds

CATEGORIES = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "energy_sleep_j"]
EPOCH_COLUMNS = ["start_s", "end_s", "samples", "participants", "loss", "dropped", "late",
                 "energy_wasted_j", *CATEGORIES]
DEVICE_COLUMNS = [*CATEGORIES, "energy_radio_j", "busy_s", "online_s", "bytes_sent",
                  "bytes_received", "airtime_s", "dropouts", "energy_wasted_j"]


@pytest.fixture
def paths(built_worlds):
    """Per world built while the test runs: its epochs by path and why events."""
    return built_worlds


def _close(a: np.ndarray, b: np.ndarray) -> None:
    """Equal to 1e-9 of each value, or of the column's scale where a value is a difference
    of running totals that should be 0 (rounding leaves 1e-11 J of a 1e5 J sum)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = np.nanmax(np.abs(np.concatenate([a.ravel(), b.ravel(), [0.0]])), initial=0.0)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=max(1e-12, 1e-9 * scale))


def assert_same(fast, slow) -> None:
    """The two runs' tables agree to 1e-9 (module docstring)."""
    assert len(fast.epochs) == len(slow.epochs)
    for col in EPOCH_COLUMNS:
        _close(fast.epochs[col], slow.epochs[col])
    for col in ("participant_ids", "dropped_ids", "late_ids"):
        assert fast.epochs[col].map(list).tolist() == slow.epochs[col].map(list).tolist(), col
    for col in DEVICE_COLUMNS:
        _close(fast.devices[col], slow.devices[col])
    for col in ("time_s", "energy_j", "final_loss"):
        _close(fast.runs[col], slow.runs[col])
    assert fast.runs["status"].tolist() == slow.runs["status"].tolist()


def both(scenario, policy, paths, seed: int = 0, **kwargs):
    """The run in arrays and as events; asserts every epoch of the first played in arrays."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = netsim.simulate(copy.deepcopy(scenario), copy.deepcopy(policy), seed=seed,
                               raise_errors=True, **kwargs)
        arrays = dict(paths[-1].epochs_by_path)
        slow = netsim.simulate(copy.deepcopy(scenario), copy.deepcopy(policy), seed=seed,
                               raise_errors=True, fast_epochs=False, **kwargs)
    assert paths[-1].epochs_by_path["arrays"] == 0
    assert_same(fast, slow)
    return fast, arrays


def shared_uplink() -> dict:
    """Two devices behind one 10 Mbit/s uplink, each on its own 100 Mbit/s link, a 10 Mbit
    model: both downloads share the uplink at 5 Mbit/s. d0 idles at 1 W on a 1 J battery:
    it empties at 1 s, 5 Mbit into its download; d1 then has the uplink alone, and its last
    5 Mbit arrive at 1.5 s (the events: d0's transfer cancelled, d1's re-shared)."""
    devices = [{"id": "srv", "flop_per_s": 1e12, "memory_bytes": 1e11, "power_busy_w": 10.0,
                "power_idle_w": 1.0}]
    links = [{"a": "srv", "b": "ap", "bandwidth_bps": 1e7, "latency_s": 0.0,
              "energy_j_per_bit": 1e-8}]
    for i in range(2):
        devices.append({"id": f"d{i}", "flop_per_s": 1e9, "memory_bytes": 4e9,
                        "power_busy_w": 2.0, "power_idle_w": 1.0, "samples": 100,
                        **({"battery_j": 1.0, "battery_min_fraction": 0.0} if i == 0 else {})})
        links.append({"a": f"d{i}", "b": "ap", "bandwidth_bps": 1e8, "latency_s": 0.0,
                      "energy_j_per_bit": 1e-8})
    return {"name": "shared-uplink", "seed": 0, "devices": devices, "links": links,
            "aggregator": "srv",
            "model": {"params": 1.25e6, "bytes_per_param": 1, "train_flop_per_sample": 1e7,
                      "loss": {"initial_loss": 2.3, "floor_full": 0.05, "samples_half": 3000.0,
                               "exponent": 0.9, "noise_run_sigma": 0.0,
                               "noise_epoch_sigma": 0.0}},
            "training": {"target_loss": 1e-3, "deadline_s": 1e6, "max_epochs": 1},
            "dynamics": {"compute": {"spread": 0.0}}}


def test_a_battery_empty_mid_download_re_shares_the_link_at_that_instant(paths):
    fast, arrays = both(shared_uplink(), FixedPolicy({"d0": 100, "d1": 100}), paths)
    assert arrays == {"arrays": 1, "events": 0}
    ep, dev = fast.epochs.iloc[0], fast.devices.set_index("device")
    assert list(ep["dropped_ids"]) == ["d0"] and ep["samples"] == 100
    assert dev.loc["d0", "bytes_received"] == pytest.approx(5e6 / 8, rel=1e-12)
    assert dev.loc["d0", "battery_end_j"] == pytest.approx(0.0, abs=1e-12)
    # d1: download to 1.5 s, 1 s of training, its 10 Mbit upload alone at 10 Mbit/s
    assert dev.loc["d1", "busy_s"] == pytest.approx(1.0, rel=1e-12)
    assert ep["end_s"] == pytest.approx(1.5 + 1.0 + 1.0 + 2 * 1.25e6 / 1e12, rel=1e-12)


@pytest.mark.parametrize("where", ["training", "upload", "everyone", "deadline", "keep"])
def test_the_changing_worlds_analytic_cases_play_in_arrays(where, star, tmp_path, paths):
    """tests/test_dynamics_engine.py's cases (their values checked there): a dropout mid-
    training, mid-upload, everyone dropping, updates cut by the epoch's deadline, the epoch
    closed at its second update."""
    if where in ("deadline", "keep"):
        s = copy.deepcopy(star)
        s["training"]["max_epochs"] = 1
        s["dynamics"] = {}
        policy = FixedPolicy({"d1": 500, "d2": 300, "d3": 800},
                             **({"deadline": 3.0} if where == "deadline" else {"keep": 2}))
    else:
        s = _dropout_star(star, tmp_path)
        policy = FixedPolicy({"d1": 500} if where == "everyone" else {"d1": 500, "d2": 300})
        if where == "upload":
            s["dynamics"]["availability"]["trace"] = _upload_trace(tmp_path)
    fast, arrays = both(s, policy, paths)
    assert arrays == {"arrays": 1, "events": 0}
    assert fast.epochs["dropped"].sum() + fast.epochs["late"].sum() >= 1


def _upload_trace(tmp_path) -> str:
    from tests.test_dynamics_engine import _online_trace

    up_start = 3.2e7 / 2e7 + 0.01 + 500 * 6e6 / 2e9
    return _online_trace(tmp_path, [("d1", 0.0, up_start + 0.5), ("d3", 0.0, 100.0)],
                         "upload.csv")


def test_sessions_ending_in_most_epochs_stay_in_arrays(paths):
    """Generated cells, markov sessions of a minute on and off, log-normal bandwidth,
    stragglers: participants drop in most epochs, mid-transfer and mid-training."""
    sc = {"name": "sessions", "seed": 0,
          "generate": {"n_devices": 120, "devices_per_cell": 16, "seed": 1},
          "model": "small-cnn",
          "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": 12},
          "dynamics": {"availability": {"model": "markov", "mean_online_s": "1 min",
                                        "mean_offline_s": "1 min"},
                       "bandwidth": {"model": "lognormal", "sigma": 0.3, "correlation_s": 60,
                                     "step_s": 2},
                       "compute": {"spread": 0.2, "straggler_probability": 0.05,
                                   "straggler_slowdown": 5}}}
    fast, arrays = both(sc, "fedavg-all", paths)
    assert arrays == {"arrays": 12, "events": 0}
    assert (fast.epochs["dropped"] > 0).sum() >= 6


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=worlds(), seed=st.integers(0, 3))
def test_random_changing_worlds_in_arrays_match_the_events(case, seed):
    """tests/test_dynamics_fuzz.py's random worlds (sessions, batteries of 0.5-50 J, sleep
    power, log-normal capacities, stragglers, deadlines, kept updates): arrays and events
    give the same tables to 1e-9."""
    scenario, policy, _ = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = netsim.simulate(copy.deepcopy(scenario), copy.deepcopy(policy), seed=seed,
                               raise_errors=True)
        slow = netsim.simulate(copy.deepcopy(scenario), copy.deepcopy(policy), seed=seed,
                               raise_errors=True, fast_epochs=False)
    assert_same(fast, slow)


def _zero_idle_battery() -> dict:
    """A phone whose 1 J battery training alone would empty in 1 s, that draws nothing idle
    (0 W): its upload, 1.54 s at 100 kbit/s, runs past the instant its training's stop was
    armed for (hypothesis found it: the event path emptied it there)."""
    device = {"flop_per_s": 1e8, "memory_bytes": 4e9, "power_busy_w": 1.0, "power_idle_w": 0.0,
              "samples": 1}
    return {"name": "zero-idle-battery",
            "devices": [{"id": "srv", "flop_per_s": 1e12, "memory_bytes": 1e11,
                         "power_busy_w": 100, "power_idle_w": 20},
                        {"id": "d0", **device, "battery_j": 1.0, "battery_min_fraction": 0.0},
                        {"id": "d1", **device}],
            "links": [{"a": "srv", "b": "ap", "bandwidth_bps": 1e6, "latency_s": 0.001,
                       "energy_j_per_bit": 1e-9},
                      {"a": "d0", "b": "ap", "bandwidth_bps": 1e5, "latency_s": 0.0,
                       "energy_j_per_bit": 0.0},
                      {"a": "d1", "b": "ap", "bandwidth_bps": 1e5, "latency_s": 0.0,
                       "energy_j_per_bit": 0.0}],
            "aggregator": "srv", "model": "mlp-digits",
            "training": {"target_loss": 0.05, "deadline_s": 1e5, "max_epochs": 2},
            "dynamics": {"availability": {"model": "bernoulli"}}}


@pytest.mark.parametrize("policy", ["fedavg-all", "fedbuff"])
def test_a_stop_armed_for_training_is_void_once_the_upload_draws_nothing(policy):
    params = {"concurrency": 2, "buffer_updates": 1} if policy == "fedbuff" else {}
    runs = [netsim.simulate(_zero_idle_battery(), policy, seed=0, params=params,
                            raise_errors=True, fast_epochs=fast) for fast in (True, False)]
    for res in runs:
        d0 = res.devices.set_index("device").loc["d0"]
        assert d0["dropouts"] == 0 and d0["battery_end_j"] > 0.99
        assert list(d0["online_intervals_s"]) == [0.0, res.runs["time_s"].iloc[0]]
        assert all("d0" in ids for ids in res.epochs["participant_ids"])
    assert_same(*runs)


def test_the_array_rule_of_a_stop_is_the_scalar_one():
    rng = np.random.default_rng(0)
    since = rng.uniform(0, 10, 200)
    left = np.where(rng.random(200) < 0.3, np.inf, rng.uniform(0, 20, 200))
    power = np.where(rng.random(200) < 0.2, 0.0, rng.uniform(0, 5, 200))
    offline = np.where(rng.random(200) < 0.3, np.inf, rng.uniform(0, 30, 200))
    at, empty = stop_instants(since, left, power, offline)
    want = [stop_instant(*args) for args in zip(since, left, power, offline, strict=True)]
    assert at.tolist() == [w[0] for w in want] and empty.tolist() == [w[1] for w in want]
