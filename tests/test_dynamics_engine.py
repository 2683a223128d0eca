"""The changing world in the engine (docs/dynamics.md): analytic cases, invariants, determinism,
the fast path against the event path, and the static world unchanged."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import simpy

import netsim
from netsim.dynamics.traces import write_availability_trace, write_bandwidth_trace
from netsim.energy import EnergyMeter
from netsim.network import FlowNetwork, Topology
from netsim.policy import Decision
from tests.test_network import link

CATEGORIES = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "energy_sleep_j"]


class FixedPolicy:
    """Every epoch the same decision among the available devices (test helper)."""

    def __init__(self, participants, keep=None, deadline=None, name="fixed"):
        self.name, self.participants = name, participants
        self.keep, self.deadline = keep, deadline

    def reset(self, scenario, rng):
        pass

    def decide(self, obs):
        chosen = {d: s for d, s in self.participants.items() if obs.available[obs.devices.index[d]]}
        if not chosen:
            return Decision(stop=True, reason="nobody available")
        keep = None if self.keep is None else min(self.keep, len(chosen))
        return Decision(participants=chosen, keep_updates=keep, epoch_deadline_s=self.deadline)


# -- the network: a capacity change and a cancelled transfer at any instant ----------------
def test_link_halved_mid_transfer_sends_the_remaining_bits_at_the_new_rate():
    env = simpy.Environment()
    net = FlowNetwork(env, Topology(["a", "b"], [link("a", "b", 1e7, 0.02)]), EnergyMeter([0, 0], [0, 0]))
    done = {}

    def go():
        yield net.transfer("a", "b", 1e6)  # 8e6 bits: 0.8 s alone
        done["t"] = env.now

    def halve():
        yield env.timeout(0.3)
        net.set_capacities([0], [5e6])

    env.process(go())
    env.process(halve())
    env.run()
    assert done["t"] == pytest.approx(0.3 + (8e6 - 1e7 * 0.3) / 5e6 + 0.02, rel=1e-12)


def test_capacity_change_reshares_two_flows_max_min():
    env = simpy.Environment()
    net = FlowNetwork(env, Topology(["a", "b"], [link("a", "b", 1e7)]), EnergyMeter([0, 0], [0, 0]))
    done = {}

    def go(name, size):
        yield net.transfer("a", "b", size)
        done[name] = env.now

    def double():
        yield env.timeout(0.5)
        net.set_capacities([0], [2e7])

    env.process(go("x", 1e6))
    env.process(go("y", 2e6))
    env.process(double())
    env.run()
    # 0..0.5 s: 5e6 bit/s each (2.5e6 bits); then 1e7 each: x has 5.5e6 left -> 0.55 s more
    assert done["x"] == pytest.approx(1.05, rel=1e-12)
    # y: 1.35e7 left at 0.5 s, 5.5e6 of them at 1e7, the rest alone at 2e7
    assert done["y"] == pytest.approx(1.05 + (1.35e7 - 5.5e6) / 2e7, rel=1e-12)


def test_cancelled_transfer_returns_its_bits_left_and_frees_the_link():
    env = simpy.Environment()
    net = FlowNetwork(env, Topology(["a", "b"], [link("a", "b", 1e7)]), EnergyMeter([0, 0], [0, 0]))
    done, handles = {}, {}
    net_left = {}

    def start():
        handles["x"] = net.send("a", "b", 1e6, lambda at: done.setdefault("x", at)) or None
        net.send_on(net.topology.route("a", "b"), 1e6, lambda at: done.setdefault("y", at))

    def cancel():
        yield env.timeout(0.4)
        flows = [f for f in net._active()]
        net_left["bits"] = net.cancel(flows[0])

    start()
    env.process(cancel())
    env.run()
    assert net_left["bits"] == pytest.approx(8e6 - 5e6 * 0.4, rel=1e-12)
    assert "x" not in done  # the cancelled transfer never arrives
    assert done["y"] == pytest.approx(0.4 + (8e6 - 2e6) / 1e7, rel=1e-12)


# -- scenarios -------------------------------------------------------------------------------
def _online_trace(tmp_path, rows, name="online.csv"):
    path = tmp_path / name
    write_availability_trace(pd.DataFrame(rows, columns=["device", "start_s", "end_s"]), path)
    return str(path)


def _dropout_star(star, tmp_path):
    s = copy.deepcopy(star)
    s["devices"][1].update(power_busy_w=3.0, power_idle_w=3.0)       # d1: one power level
    s["links"][0]["energy_j_per_bit"] = 0.0
    s["training"]["max_epochs"] = 1
    trace = _online_trace(tmp_path, [("d1", 0.0, 2.5), ("d3", 0.0, 100.0)])
    s["dynamics"] = {"availability": {"model": "trace", "trace": trace, "repeat": False}}
    return s


def test_dropout_mid_training_costs_power_times_online_time_and_counts_no_samples(star, tmp_path):
    s = _dropout_star(star, tmp_path)
    res = netsim.simulate(s, FixedPolicy({"d1": 500, "d2": 300}), seed=0, raise_errors=True)
    ep, dev = res.epochs.iloc[0], res.devices.set_index("device")
    assert ep["dropped"] == 1 and list(ep["dropped_ids"]) == ["d1"]
    assert ep["samples"] == 300                       # d1's 500 do not count
    d1 = dev.loc["d1"]
    assert d1[CATEGORIES].sum() == pytest.approx(3.0 * 2.5, rel=1e-12)  # offline afterwards
    assert d1["busy_s"] == pytest.approx(2.5 - (3.2e7 / 2e7 + 0.01), rel=1e-12)
    assert d1["online_s"] == pytest.approx(2.5, rel=1e-12)
    assert ep["energy_wasted_j"] == pytest.approx(3.0 * 2.5, rel=1e-12)
    assert d1["dropouts"] == 1 and d1["energy_wasted_j"] == pytest.approx(7.5, rel=1e-12)
    # the epoch goes on with d2: it ends when d2's update has been aggregated
    d2_s = 3.2e7 / 1e7 + 0.03 + 300 * 6e6 / 1e9 + 3.2e7 / 1e7 + 0.03
    assert ep["end_s"] == pytest.approx(d2_s + 2 * 1e6 * 1 / 1e12, rel=1e-9)


def test_dropout_mid_upload_charges_only_the_bits_sent(star, tmp_path):
    s = copy.deepcopy(star)
    s["training"]["max_epochs"] = 1
    up_start = 3.2e7 / 2e7 + 0.01 + 500 * 6e6 / 2e9               # 3.11 s
    trace = _online_trace(tmp_path, [("d1", 0.0, up_start + 0.5), ("d3", 0.0, 100.0)])
    s["dynamics"] = {"availability": {"model": "trace", "trace": trace, "repeat": False}}
    res = netsim.simulate(s, FixedPolicy({"d1": 500, "d2": 300}), seed=0, raise_errors=True)
    d1 = res.devices.set_index("device").loc["d1"]
    assert d1["bytes_sent"] == pytest.approx(2e7 * 0.5 / 8, rel=1e-9)
    assert d1["energy_comm_j"] == pytest.approx(2e7 * 0.5 * 1e-7, rel=1e-9)


def test_everyone_dropping_ends_the_epoch_with_no_progress(star, tmp_path):
    s = _dropout_star(star, tmp_path)
    res = netsim.simulate(s, FixedPolicy({"d1": 500}), seed=0, raise_errors=True)
    ep = res.epochs.iloc[0]
    assert ep["samples"] == 0 and ep["loss"] == res.runs.iloc[0]["initial_loss"]
    assert ep["end_s"] == pytest.approx(2.5, rel=1e-12)


def test_epoch_deadline_discards_late_updates(star):
    s = copy.deepcopy(star)
    s["training"]["max_epochs"] = 1
    s["dynamics"] = {}
    d3_s = 3.2e7 / 5e7 + 0.02 + 800 * 6e6 / 4e9 + 3.2e7 / 5e7 + 0.02  # 2.5 s; d1 ~4.7, d2 ~8.2
    res = netsim.simulate(s, FixedPolicy({"d1": 500, "d2": 300, "d3": 800}, deadline=3.0),
                          seed=0, raise_errors=True)
    ep = res.epochs.iloc[0]
    assert ep["late"] == 2 and sorted(ep["late_ids"]) == ["d1", "d2"] and ep["samples"] == 800
    assert ep["end_s"] == pytest.approx(3.0 + 2 * 1e6 * 1 / 1e12, rel=1e-12)
    assert ep["energy_wasted_j"] > 0
    assert d3_s < 3.0


def test_keep_updates_stops_at_the_kth_arrival(star):
    s = copy.deepcopy(star)
    s["training"]["max_epochs"] = 1
    s["dynamics"] = {}
    d3_s = 3.2e7 / 5e7 + 0.02 + 800 * 6e6 / 4e9 + 3.2e7 / 5e7 + 0.02
    d1_s = 3.2e7 / 2e7 + 0.01 + 500 * 6e6 / 2e9 + 3.2e7 / 2e7 + 0.01
    res = netsim.simulate(s, FixedPolicy({"d1": 500, "d2": 300, "d3": 800}, keep=2),
                          seed=0, raise_errors=True)
    ep = res.epochs.iloc[0]
    assert list(ep["late_ids"]) == ["d2"] and ep["samples"] == 1300
    assert ep["end_s"] == pytest.approx(max(d1_s, d3_s) + 2 * 1e6 * 2 / 1e12, rel=1e-12)


def test_sleep_power_for_online_devices_not_selected(star):
    s = copy.deepcopy(star)
    s["training"]["max_epochs"] = 1
    s["devices"][3]["power_sleep_w"] = 0.25                        # d3 sleeps
    res = netsim.simulate(s, FixedPolicy({"d1": 500}), seed=0, raise_errors=True)
    ep, d3 = res.epochs.iloc[0], res.devices.set_index("device").loc["d3"]
    assert d3["energy_sleep_j"] == pytest.approx(0.25 * ep["end_s"], rel=1e-12)
    assert d3["energy_idle_j"] == 0.0
    assert ep["energy_sleep_j"] == pytest.approx(0.25 * ep["end_s"], rel=1e-12)
    assert res.runs.iloc[0]["energy_j"] == pytest.approx(res.devices[CATEGORIES].to_numpy().sum())


def test_battery_empties_mid_epoch(star):
    s = copy.deepcopy(star)
    s["training"]["max_epochs"] = 3
    s["devices"][1].update(battery_j=5.0, battery_min_fraction=0.0)  # d1: 1 W idle, 5 W busy
    res = netsim.simulate(s, FixedPolicy({"d1": 500, "d2": 300}), seed=0, raise_errors=True)
    d1 = res.devices.set_index("device").loc["d1"]
    # download 1.61 s at 1 W (1.61 J); training at 5 W empties the 5 J after 0.678 s
    assert d1[CATEGORIES].sum() == pytest.approx(5.0, rel=1e-9)
    assert d1["battery_end_j"] == pytest.approx(0.0, abs=1e-9) and d1["dropouts"] == 1
    assert res.epochs["participant_ids"].map(lambda ids: "d1" in list(ids)).sum() == 1


# -- invariants and determinism --------------------------------------------------------------
CHURN = {
    "name": "churn-test",
    "generate": {"n_devices": 40, "seed": 5},
    "model": "mlp-digits",
    "training": {"target_loss": 0.16, "deadline_s": 1.0e6, "max_epochs": 25},
    "dynamics": {
        "availability": {"model": "markov", "mean_online_s": 0.3, "mean_offline_s": 0.4,
                         "diurnal_amplitude": 0.5},
        "bandwidth": {"model": "lognormal", "sigma": 0.5, "correlation_s": 0.5, "step_s": 0.03},
        "compute": {"spread": 0.3, "straggler_probability": 0.1, "straggler_slowdown": 4},
    },
}


@pytest.fixture(scope="module")
def churn_runs():
    return {p: netsim.simulate(copy.deepcopy(CHURN), p, seed=2, raise_errors=True)
            for p in ("fedavg-all", "random-k", "overselect")}


def test_energy_categories_sum_and_are_never_negative(churn_runs):
    for res in churn_runs.values():
        cats = res.devices[CATEGORIES].to_numpy()
        assert (cats >= -1e-9).all()
        assert cats.sum() == pytest.approx(res.runs.iloc[0]["energy_j"], rel=1e-9)
        assert res.epochs[CATEGORIES].to_numpy().sum() == pytest.approx(cats.sum(), rel=1e-9)


def test_churn_really_drops_participants(churn_runs):
    assert sum(int(r.epochs["dropped"].sum()) for r in churn_runs.values()) > 0


def test_no_offline_device_computes_or_transfers(churn_runs):
    """Every participant is online at its epoch's start; busy time lies within online time;
    a device's online intervals cover every epoch it trained in up to its stop."""
    for res in churn_runs.values():
        dev = res.devices.set_index("device")
        assert (dev["busy_s"] <= dev["online_s"] + 1e-9).all()
        intervals = dev["online_intervals_s"]
        for _, ep in res.epochs.iterrows():
            dropped = set(ep["dropped_ids"])
            for d in ep["participant_ids"]:
                flat = np.asarray(intervals[d])
                starts, ends = flat[0::2], flat[1::2]
                inside = (starts <= ep["start_s"] + 1e-12) & (ep["start_s"] < ends)
                assert inside.any(), (d, ep["epoch"])
                if d not in dropped:  # online to the end of its update at least
                    k = np.flatnonzero(inside)[0]
                    assert ends[k] >= ep["start_s"]


def test_same_seed_identical_tables_and_world_independent_of_policy(churn_runs):
    again = netsim.simulate(copy.deepcopy(CHURN), "random-k", seed=2, raise_errors=True)
    pd.testing.assert_frame_equal(again.epochs, churn_runs["random-k"].epochs)
    pd.testing.assert_frame_equal(again.devices, churn_runs["random-k"].devices)
    # the sessions any two policies see are the same up to the shorter run's end
    a, b = churn_runs["fedavg-all"], churn_runs["random-k"]
    t_end = min(a.runs.iloc[0]["time_s"], b.runs.iloc[0]["time_s"])
    for d in a.devices["device"][:40]:
        ia = np.asarray(a.devices.set_index("device").loc[d, "online_intervals_s"])
        ib = np.asarray(b.devices.set_index("device").loc[d, "online_intervals_s"])
        starts_a, starts_b = ia[0::2], ib[0::2]
        assert np.array_equal(starts_a[starts_a < t_end], starts_b[starts_b < t_end])


def test_fast_path_equals_event_path_under_dynamics():
    s = copy.deepcopy(CHURN)
    s["dynamics"]["availability"].update(mean_online_s=50.0, mean_offline_s=50.0)
    s["dynamics"]["bandwidth"].update(step_s=0.5)
    fast = netsim.simulate(copy.deepcopy(s), "random-k", seed=3, raise_errors=True)
    events = netsim.simulate(copy.deepcopy(s), "random-k", seed=3, raise_errors=True,
                             fast_epochs=False)
    for col in ("start_s", "end_s", *CATEGORIES, "loss", "samples", "dropped"):
        np.testing.assert_allclose(fast.epochs[col].astype(float), events.epochs[col].astype(float),
                                   rtol=1e-9, atol=1e-12)


def test_a_static_dynamics_block_changes_nothing(star):
    plain = netsim.simulate(copy.deepcopy(star), "random-k", seed=4, raise_errors=True)
    s = copy.deepcopy(star)
    s["dynamics"] = {"availability": {"model": "bernoulli"}, "bandwidth": {"model": "constant"}}
    same = netsim.simulate(s, "random-k", seed=4, raise_errors=True)
    cols = [c for c in plain.epochs.columns if c != "run_id"]
    pd.testing.assert_frame_equal(plain.epochs[cols], same.epochs[cols])


def test_bandwidth_trace_drives_link_capacity(star, tmp_path):
    s = copy.deepcopy(star)
    s["training"]["max_epochs"] = 1
    path = tmp_path / "bw.csv"
    write_bandwidth_trace(pd.DataFrame({"a": ["server"], "b": ["d1"], "time_s": [0.0],
                                        "bandwidth_bps": [1e7]}), path)
    s["dynamics"] = {"bandwidth": {"model": "trace", "trace": str(path)}}
    res = netsim.simulate(s, FixedPolicy({"d1": 500}), seed=0, raise_errors=True)
    d1 = 3.2e7 / 1e7 + 0.01 + 500 * 6e6 / 2e9 + 3.2e7 / 1e7 + 0.01  # halved both ways
    assert res.epochs.iloc[0]["end_s"] == pytest.approx(d1 + 2e6 / 1e12, rel=1e-9)


def test_the_world_waits_when_nobody_is_online(star, tmp_path):
    s = copy.deepcopy(star)
    s["training"]["max_epochs"] = 1
    trace = _online_trace(tmp_path, [(d, 50.0, 100.0) for d in ("d1", "d2", "d3")])
    s["dynamics"] = {"availability": {"model": "trace", "trace": trace, "repeat": False}}
    res = netsim.simulate(s, FixedPolicy({"d1": 500}), seed=0, raise_errors=True)
    ep = res.epochs.iloc[0]
    assert ep["start_s"] == pytest.approx(50.0) and ep["samples"] == 500
    # the server idled through the wait at 50 W: in the epoch's energy and the run's
    assert ep[CATEGORIES].sum() == pytest.approx(res.runs.iloc[0]["energy_j"], rel=1e-12)
    assert ep["energy_idle_j"] >= 50.0 * 50.0


class Recording(FixedPolicy):
    def __init__(self, participants):
        super().__init__(participants)
        self.seen = []

    def decide(self, obs):
        self.seen.append((obs.measured_flop_per_s.copy(), obs.measured_down_bps.copy(),
                          obs.measured_up_bps.copy()))
        with pytest.raises(ValueError):
            obs.measured_up_bps[0] = 1.0  # read-only
        return super().decide(obs)


def test_observation_shows_what_each_device_achieved_last_time(star):
    s = copy.deepcopy(star)
    s["training"]["max_epochs"] = 2
    pol = Recording({"d1": 500, "d2": 300})
    netsim.simulate(s, pol, seed=0, raise_errors=True)
    flop0, down0, _ = pol.seen[0]
    assert np.isnan(flop0).all() and np.isnan(down0).all()       # nothing measured yet
    flop1, down1, up1 = pol.seen[1]
    assert flop1[1] == pytest.approx(2e9) and flop1[2] == pytest.approx(1e9)
    assert down1[1] == pytest.approx(2e7) and up1[2] == pytest.approx(1e7)  # alone on its link
    assert np.isnan(flop1[3])                                      # d3 never took part


def test_a_generated_world_replayed_from_its_traces_gives_the_same_run(tmp_path):
    """netsim traces generate's tables are the world a run sees: replaying them as traces
    reproduces the markov/log-normal run exactly (compute spread comes from the same stream)."""
    from netsim.dynamics.sample import sample_traces
    from netsim.scenario.loading import load_scenario

    s = copy.deepcopy(CHURN)
    s["training"]["max_epochs"] = 15
    s["dynamics"]["bandwidth"].update(step_s=0.25)
    original = netsim.simulate(copy.deepcopy(s), "random-k", seed=7, raise_errors=True)
    horizon = float(original.runs.iloc[0]["time_s"]) + 5.0
    availability, bandwidth = sample_traces(load_scenario(copy.deepcopy(s)), 7, horizon)
    write_availability_trace(availability, tmp_path / "online.parquet")
    write_bandwidth_trace(bandwidth, tmp_path / "bw.csv")
    replay = copy.deepcopy(s)
    replay["dynamics"]["availability"] = {"model": "trace", "trace": str(tmp_path / "online.parquet"),
                                          "repeat": False}
    replay["dynamics"]["bandwidth"] = {"model": "trace", "trace": str(tmp_path / "bw.csv"),
                                       "repeat": False}
    again = netsim.simulate(replay, "random-k", seed=7, raise_errors=True)
    assert int(original.epochs["dropped"].sum()) > 0
    for col in ("start_s", "end_s", *CATEGORIES, "loss", "samples", "dropped"):
        np.testing.assert_allclose(again.epochs[col].astype(float),
                                   original.epochs[col].astype(float), rtol=1e-9, atol=1e-12)


def test_a_participant_offline_after_its_update_left_is_not_charged_to_the_epochs_end():
    """Regression (0.5.0): a participant whose device went offline after its update had left
    was kept selected until the epoch's end, charged idle power while offline, and the epoch's
    sleep energy went negative (churn.yaml, fedavg-all, seed 1: -0.048 J in an epoch)."""
    from netsim.scenario.loading import scenario_data

    res = netsim.simulate(scenario_data("experiments/dynamics/churn.yaml"), "fedavg-all", seed=1)
    cats = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "energy_sleep_j"]
    assert (res.epochs[cats].to_numpy() >= 0.0).all()
    assert res.epochs[cats].to_numpy().sum() == pytest.approx(res.runs["energy_j"].iloc[0],
                                                              rel=1e-9)
