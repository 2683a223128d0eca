"""The engine: epoch semantics, energy accounting, determinism, isolation, event counts."""

import numpy as np
import pandas as pd
import pytest

import netsim
from netsim.engine import World, resolve_scenario
from netsim.policy import Decision
from netsim.scenario.loading import load_scenario


class FixedPolicy:
    """Every epoch the same decision (test helper)."""

    def __init__(self, participants, variant=0, name="fixed"):
        self.name, self.participants, self.variant = name, participants, variant

    def reset(self, scenario, rng):
        pass

    def decide(self, obs):
        return Decision(participants=self.participants, variant=self.variant)


def one_epoch(star, participants, variant=0):
    star["training"]["max_epochs"] = 1
    return netsim.simulate(star, FixedPolicy(participants, variant), seed=0, raise_errors=True)


def test_epoch_in_contention_free_star_is_slowest_participant_plus_aggregation(star):
    res = one_epoch(star, {"d1": 500, "d2": 300, "d3": 800})
    nbytes, bits = 4.0e6, 3.2e7
    per_device = {
        "d1": bits / 2e7 + 0.01 + 500 * 6e6 / 2e9 + bits / 2e7 + 0.01,
        "d2": bits / 1e7 + 0.03 + 300 * 6e6 / 1e9 + bits / 1e7 + 0.03,
        "d3": bits / 5e7 + 0.02 + 800 * 6e6 / 4e9 + bits / 5e7 + 0.02,
    }
    aggregation = 2 * 1e6 * 3 / 1e12
    ep = res.epochs.iloc[0]
    assert ep["end_s"] - ep["start_s"] == pytest.approx(max(per_device.values()) + aggregation)
    dev = res.devices.set_index("device")
    assert dev.loc["d2", "busy_s"] == pytest.approx(300 * 6e6 / 1e9)
    assert dev.loc["d1", "bytes_sent"] == nbytes and dev.loc["server", "bytes_sent"] == 3 * nbytes


def test_energy_by_category_matches_the_analytic_epoch(star):
    res = one_epoch(star, {"d1": 500})
    t = res.epochs.iloc[0]["end_s"]
    dev = res.devices.set_index("device")
    busy = 500 * 6e6 / 2e9
    assert dev.loc["d1", "energy_compute_j"] == pytest.approx(5.0 * busy)
    assert dev.loc["d1", "energy_idle_j"] == pytest.approx(1.0 * (t - busy))
    assert dev.loc["d2", "energy_idle_j"] == pytest.approx(0.5 * t)  # non-participants idle
    assert dev.loc["d1", "energy_comm_j"] == pytest.approx(3.2e7 * 1e-7)  # upload, sent by d1
    assert dev.loc["server", "energy_comm_j"] == pytest.approx(3.2e7 * 1e-7)  # download
    agg_busy = 2 * 1e6 / 1e12
    assert dev.loc["server", "energy_compute_j"] == pytest.approx(200.0 * agg_busy)


def test_categories_over_all_nodes_sum_to_run_total_and_epochs(star):
    star["training"]["max_epochs"] = 8
    res = netsim.simulate(star, "fedavg-all", seed=2)
    cats = ["energy_compute_j", "energy_comm_j", "energy_idle_j"]
    total = res.runs.iloc[0]["energy_j"]
    assert res.devices[cats].to_numpy().sum() == pytest.approx(total, rel=1e-12)
    assert res.epochs[cats].to_numpy().sum() == pytest.approx(total, rel=1e-12)
    assert (res.devices[cats].to_numpy() >= 0).all() and (res.epochs[cats].to_numpy() >= 0).all()


def test_pruned_variant_moves_proportionally_fewer_bytes_and_flop(star):
    full = one_epoch(star, {"d1": 500}, variant=0).devices.set_index("device")
    half = one_epoch(star, {"d1": 500}, variant=1).devices.set_index("device")
    assert half.loc["d1", "bytes_sent"] == pytest.approx(0.5 * full.loc["d1", "bytes_sent"])
    assert half.loc["d1", "busy_s"] == pytest.approx(0.5 * full.loc["d1", "busy_s"])


def test_network_node_forwards_and_is_charged_for_what_it_sends(star):
    star["links"] = [
        {"a": "server", "b": "switch", "bandwidth_bps": 1e9, "latency_s": 0.001, "energy_j_per_bit": 1e-9},
        {"a": "switch", "b": "d1", "bandwidth_bps": 2e7, "latency_s": 0.01, "energy_j_per_bit": 1e-7},
        {"a": "switch", "b": "d2", "bandwidth_bps": 1e7, "latency_s": 0.01, "energy_j_per_bit": 1e-7},
        {"a": "switch", "b": "d3", "bandwidth_bps": 1e7, "latency_s": 0.01, "energy_j_per_bit": 1e-7},
    ]
    dev = one_epoch(star, {"d1": 500}).devices.set_index("device")
    # The switch sends the download on to d1 and the upload on to the server.
    assert dev.loc["switch", "energy_comm_j"] == pytest.approx(3.2e7 * 1e-7 + 3.2e7 * 1e-9)
    assert dev.loc["server", "energy_comm_j"] == pytest.approx(3.2e7 * 1e-9)
    assert dev.loc["switch", "energy_compute_j"] == 0 and dev.loc["switch", "energy_idle_j"] == 0
    assert bool(dev.loc["switch", "network_node"])


def test_same_seed_identical_tables_different_seed_different_noise():
    a = netsim.simulate("default", "greedy-energy", seed=4)
    b = netsim.simulate("default", "greedy-energy", seed=4)
    c = netsim.simulate("default", "greedy-energy", seed=5)
    for name in ("runs", "epochs", "devices"):
        x, y = getattr(a, name), getattr(b, name)
        pd.testing.assert_frame_equal(x.drop(columns=["wall_s"], errors="ignore"),
                                      y.drop(columns=["wall_s"], errors="ignore"))
    assert not np.allclose(a.epochs["loss"].to_numpy()[:5], c.epochs["loss"].to_numpy()[:5])


def test_two_simulations_interleaved_in_one_process_do_not_interact(star):
    scenario = resolve_scenario(load_scenario(star), 0)
    decision = Decision(participants={"d1": 500, "d2": 300})
    lone = World(scenario, np.random.default_rng(0))
    alone = [lone.run_epoch(decision).end_s for _ in range(3)]
    w1, w2 = World(scenario, np.random.default_rng(0)), World(scenario, np.random.default_rng(1))
    mixed = []
    for _ in range(3):
        mixed.append(w1.run_epoch(decision).end_s)
        w2.run_epoch(Decision(participants={"d3": 800}))
    assert mixed == alone


def test_invalid_decisions_are_rejected_naming_policy_and_field(star):
    cases = [
        ({"nope": 10}, 0, "participants['nope']: unknown device"),
        ({"d1": 501}, 0, "participants['d1']: samples 501 outside 1..500"),
        ({"d1": True}, 0, "participants['d1']: samples must be an integer, got True"),
        ({"d1": 10, "d2": 0}, 0, "participants['d2']: samples 0 outside 1..300"),
        ({"d1": 10}, 5, "variant: 5 is not a variant index"),
        ({}, 0, "participants: no participant"),
    ]
    for participants, variant, expected in cases:
        star["training"]["max_epochs"] = 2
        res = netsim.simulate(star, FixedPolicy(participants, variant, name="bad"), seed=0)
        run = res.runs.iloc[0]
        assert run["status"] == "failed"
        assert "policy 'bad'" in run["error"] and expected in run["error"], run["error"]


def test_memory_check_rejects_a_model_that_does_not_fit(star):
    star["devices"][1]["memory_bytes"] = 1.0e6  # model 4 MB x 3 (weights, grads, optimizer)
    res = netsim.simulate(star, FixedPolicy({"d1": 500}), seed=0)
    assert res.runs.iloc[0]["status"] == "failed"
    assert "participants['d1']: the variant needs" in res.runs.iloc[0]["error"]


def test_unavailable_devices_cannot_take_part(star):
    star["devices"][1]["availability"] = 0.3
    star["training"]["max_epochs"] = 30
    res = netsim.simulate(star, FixedPolicy({"d1": 500}), seed=0)
    assert res.runs.iloc[0]["status"] == "failed"
    assert "not available this epoch" in res.runs.iloc[0]["error"]
    ok = netsim.simulate(star, "fedavg-all", seed=0)
    counts = ok.epochs["participants"].to_numpy()
    assert counts.min() == 2 and counts.max() == 3  # d1 sits out some epochs


def test_run_stops_at_target_deadline_and_max_epochs(star):
    res = netsim.simulate(star, "fedavg-all", seed=0)
    run = res.runs.iloc[0]
    if run["status"] == "ok":
        assert run["final_loss"] <= 0.3 and res.epochs["loss"].iloc[:-1].min() > 0.3
    star["training"]["deadline_s"] = 1.0
    late = netsim.simulate(star, "fedavg-all", seed=0).runs.iloc[0]
    assert late["status"] == "deadline" and not late["target_reached"]
    star["training"]["deadline_s"] = 3600
    star["training"]["target_loss"] = 1e-6
    star["training"]["max_epochs"] = 4
    capped = netsim.simulate(star, "fedavg-all", seed=0).runs.iloc[0]
    assert capped["status"] == "target_missed" and capped["epochs"] == 4


def _count_epoch_events(n: int, distinct: bool) -> int:
    devices = [{"id": "srv", "flop_per_s": 1e12, "memory_bytes": 1e11, "power_busy_w": 100,
                "power_idle_w": 10}]
    links = []
    for i in range(n):
        scale = 2.0 - (i / n if distinct else 1.0)  # later devices slower: no timer re-arming
        devices.append({"id": f"d{i}", "flop_per_s": 1e10 * scale, "memory_bytes": 4e9,
                        "power_busy_w": 5, "power_idle_w": 1, "samples": 100})
        links.append({"a": "srv", "b": f"d{i}", "bandwidth_bps": 2e7 * scale, "latency_s": 0.01})
    sc = load_scenario({"devices": devices, "links": links, "aggregator": "srv",
                        "model": "small-cnn", "training": {"target_loss": 0.1, "deadline_s": 1e6}})
    world = World(resolve_scenario(sc, 0), np.random.default_rng(0), fast_epochs=False)
    steps = [0]
    original = world.env.step

    def counting_step():
        steps[0] += 1
        original()

    world.env.step = counting_step
    world.run_epoch(Decision(participants={f"d{i}": 100 for i in range(n)}))
    return steps[0]


def test_events_per_device_epoch_are_pinned():
    """Per participant-epoch: the end of its training (1); downloads and uploads schedule no
    arrival events (the network reports arrival times when the last bit leaves, see
    FlowNetwork.send), only one shared wake-up per distinct instant at which transfers finish.
    Identical devices share their wake-ups (1 per participant); distinct ones need one per
    download and upload (3). (Worst case 4: if each new transfer ends before every earlier one,
    each re-arms the timer and the superseded wake-up still fires; in random order that costs
    about ln(n) events in total.) A change here is a change in the engine's cost. This is the
    event path (the reference, and the path of epochs the fast path hands over); the fast path's
    count is pinned in tests/test_fastepoch.py."""
    same = {n: _count_epoch_events(n, distinct=False) for n in (10, 100)}
    distinct = {n: _count_epoch_events(n, distinct=True) for n in (10, 100)}
    assert (same[100] - same[10]) / 90 == 1
    assert (distinct[100] - distinct[10]) / 90 == 3
    assert same[10] - 1 * 10 == 5  # per epoch: 2 shared wake-ups, barrier, run-until, aggregation


class _Raises:
    def __init__(self, params):
        self.name, self.params = "test-raises", params

    def reset(self, scenario, rng):
        pass

    def decide(self, obs):
        raise RuntimeError("boom")


def test_a_policy_error_is_recorded_as_failed(star):
    res = netsim.simulate(star, _Raises(None), seed=0)
    assert res.runs.iloc[0]["status"] == "failed" and "boom" in res.runs.iloc[0]["error"]
    with pytest.raises(RuntimeError):
        netsim.simulate(star, _Raises(None), seed=0, raise_errors=True)
