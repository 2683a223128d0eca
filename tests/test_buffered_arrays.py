"""Buffered asynchronous epochs in arrays (netsim.epochs.buffered_arrays) against the event
path (``fast_epochs=False``, the reference): the same tables to 1e-9 (times, energy per
category, per device, bytes, air time, staleness), the one constraint kept online against
the array playback and a hand-worked case, and the worlds that must stay on events."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

import netsim
from netsim import engine
from netsim.epochs.buffered_arrays import BufferedPlayer
from netsim.network.online import SharedConstraint
from netsim.network.playback import last_bit_times
from netsim.network.sharing import water_filling, water_filling_rates
from tests.test_async import CHURN, STRAGGLERS, fleet
from tests.test_capacity_pieces import _assert_same
from tests.test_dynamics_fuzz import async_worlds

ASYNC_COLUMNS = ["updates_aggregated", "staleness_mean", "staleness_max", "started",
                 "in_flight"]


# -- one constraint, online ------------------------------------------------------------------
def play_online(start_s, cap_bps, bits, capacity_bps, coef):
    """Flows started in time order on one SharedConstraint, finishes played as they come:
    when each last bit leaves (s)."""
    c = SharedConstraint(capacity_bps)
    order = np.argsort(start_s, kind="stable").tolist()
    out = np.full(len(start_s), np.inf)
    k = 0
    while k < len(order) or c.flows:
        at = c.next_finish_s()
        if k < len(order) and start_s[order[k]] <= at:
            j = order[k]
            c.add(j, float(bits[j]), float(cap_bps[j]), float(coef[j]), float(start_s[j]))
            k += 1
            continue
        for j in c.finish_due(at):
            out[j] = at
    return out


@pytest.mark.parametrize("seed", range(12))
def test_online_constraint_matches_the_array_playback(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 30))
    start = np.round(rng.uniform(0.0, 5.0, m), 1)  # (ties included)
    cap = rng.uniform(1e6, 2e7, m)
    bits = rng.uniform(1e5, 5e7, m)
    medium = seed % 2 == 1
    coef = 1.0 / rng.uniform(1e6, 3e7, m) if medium else np.ones(m)
    capacity = 1.0 if medium else float(rng.uniform(5e6, 4e7))
    cap = np.minimum(cap, capacity / coef)  # (a flow's cap includes this constraint)
    want = last_bit_times(start, cap, bits, capacity, coef if medium else None)
    np.testing.assert_allclose(play_online(start, cap, bits, capacity, coef), want, rtol=1e-9)


def test_two_flows_share_a_link_then_the_second_runs_alone():
    # 10 Mbit/s; flow a (8 Mbit) at t=0, flow b (8 Mbit) at t=0.4: a alone sends 4 Mbit by
    # 0.4, then both at 5 Mbit/s: a ends at 0.4 + 4/5 = 1.2, b has 4 Mbit left then, alone:
    # 1.2 + 0.4 = 1.6
    got = play_online(np.array([0.0, 0.4]), np.array([1e7, 1e7]), np.array([8e6, 8e6]),
                      1e7, np.ones(2))
    np.testing.assert_allclose(got, [1.2, 1.6], rtol=1e-12)


def test_a_slow_flow_keeps_its_cap_and_the_rest_share():
    c = SharedConstraint(1e7)
    c.add("slow", 1e6, 2e6, 1.0, 0.0)
    c.add("fast", 1e7, 1e8, 1.0, 0.0)
    assert c.flows["slow"][3] == 2e6 and c.flows["fast"][3] == pytest.approx(8e6)
    assert c.remove("fast", 0.5) == pytest.approx(1e7 - 4e6)
    assert c.bits_left("slow", 0.5) == pytest.approx(0.0)


@pytest.mark.parametrize("seed", range(20))
def test_list_water_filling_is_the_array_one(seed):
    rng = np.random.default_rng(100 + seed)
    m = int(rng.integers(1, 12))
    cap = rng.choice([1e6, 2e6, 5e6, 1e7], m) * rng.uniform(0.5, 1.5, m).round(1)
    coef = np.ones(m) if seed % 2 else 1.0 / rng.uniform(1e6, 2e7, m)
    capacity = float(rng.uniform(0.2, 1.2) * (coef * cap).sum())
    np.testing.assert_allclose(water_filling_rates(cap.tolist(), coef.tolist(), capacity),
                               water_filling(cap, capacity, None if seed % 2 else coef),
                               rtol=1e-12)


# -- whole runs: arrays against events --------------------------------------------------------
@pytest.fixture
def players(monkeypatch):
    """Per world built while the test runs, its buffered player (None: events)."""
    built: list = []
    original = engine.World.__init__

    def keep(self, *args, **kwargs):
        original(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(engine.World, "__init__", keep)
    return built


def heavy(n: int = 40, shared_media: bool = True, deadline_s: float = 1e6,
          wired: bool = False) -> dict:
    """:func:`fleet` with a model large enough that cells and links saturate (several jobs
    share a cell's air time, downloads beside uploads); ``wired``: ethernet devices behind
    LTE backhauls, links only (the backhauls saturate)."""
    sc = fleet(n=n)
    sc["generate"]["shared_media"] = shared_media
    if wired:
        sc["generate"].update(access={"ethernet": 1.0}, backhaul="lte", shared_media=False)
    sc["model"]["params"] = 2.5e7
    sc["training"]["deadline_s"] = deadline_s
    sc["training"]["max_epochs"] = 60
    return sc


def churn_heavy() -> dict:
    """:func:`heavy` in the changing world of sessions and stragglers (:data:`CHURN`), with
    sessions short enough that jobs drop out mid-transfer and batteries small enough that
    some empty."""
    sc = heavy()
    sc["dynamics"] = copy.deepcopy(CHURN)
    sc["dynamics"]["availability"].update(mean_online_s="20 s", mean_offline_s="20 s")
    return sc


def batteries_star(n: int = 12) -> dict:
    """An explicit star behind one access point whose devices run on batteries of 8-40 J at
    1-6 W: several empty mid-job (training, a transfer, or as an upload would start)."""
    devices = [{"id": "srv", "flop_per_s": 1e12, "memory_bytes": 1e11, "power_busy_w": 100,
                "power_idle_w": 20}]
    links = [{"a": "srv", "b": "ap", "bandwidth_bps": 2e7, "latency_s": 0.001,
              "energy_j_per_bit": 1e-9}]
    for i in range(n):
        devices.append({"id": f"d{i}", "flop_per_s": 1e9 * (1 + i % 4), "memory_bytes": 4e9,
                        "power_busy_w": 2.0 + i % 5, "power_idle_w": 1.0, "samples": 200,
                        "battery_j": 8.0 + 3.0 * i, "battery_min_fraction": 0.0})
        links.append({"a": f"d{i}", "b": "ap", "bandwidth_bps": 5e6 * (1 + i % 3),
                      "latency_s": 0.01, "energy_j_per_bit": 2e-7})
    return {"name": "batteries", "seed": 0, "devices": devices, "links": links,
            "aggregator": "srv", "model": "small-cnn",
            "training": {"target_loss": 0.05, "deadline_s": 1e5, "max_epochs": 40},
            "dynamics": {"compute": {"spread": 0.2}}}


CASES = {
    "fedbuff/cells": (heavy(), "fedbuff", {"concurrency": 24, "buffer_updates": 6}),
    "fedbuff/private": (heavy(shared_media=False), "fedbuff",
                        {"concurrency": 24, "buffer_updates": 6}),
    "fedbuff/links": (heavy(wired=True), "fedbuff",
                      {"concurrency": 24, "buffer_updates": 6}),
    "fedasync/stale": (heavy(), "fedasync", {"concurrency": 16, "max_staleness": 3}),
    "fedbuff/compute": (fleet(n=30), "fedbuff", {"concurrency": 12, "buffer_updates": 4}),
    "fedbuff/stragglers": (fleet(STRAGGLERS, n=30), "fedbuff",
                           {"concurrency": 12, "buffer_updates": 4}),
    "fedbuff/churn": (fleet(CHURN, n=30), "fedbuff", {"concurrency": 12, "buffer_updates": 4}),
    "fedbuff/batteries": (batteries_star(), "fedbuff", {"concurrency": 8, "buffer_updates": 2}),
    "fedasync/churn-cells": (churn_heavy(), "fedasync",
                             {"concurrency": 16, "max_staleness": 4}),
    "fedbuff/deadline": (heavy(deadline_s=300.0), "fedbuff",
                         {"concurrency": 24, "buffer_updates": 6}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_buffered_epochs_in_arrays_match_the_events(case, players):
    sc, policy, params = CASES[case]
    fast = netsim.simulate(copy.deepcopy(sc), policy, seed=1, params=params,
                           raise_errors=True)
    slow = netsim.simulate(copy.deepcopy(sc), policy, seed=1, params=params,
                           raise_errors=True, fast_epochs=False)
    # (a last epoch past the deadline runs, in the run's totals, and is not recorded)
    assert players[0].epochs_by_path["arrays"] >= len(fast.epochs) > 3
    assert players[0].epochs_by_path["events"] == 0
    assert players[1].epochs_by_path["arrays"] == 0
    _assert_same(fast, slow)
    np.testing.assert_allclose(fast.epochs[ASYNC_COLUMNS].to_numpy(float),
                               slow.epochs[ASYNC_COLUMNS].to_numpy(float), rtol=1e-9)
    for col in ("updates_ids", "updates_staleness", "updates_samples", "late_ids"):
        pd.testing.assert_series_equal(fast.epochs[col], slow.epochs[col])
    runs = ["time_s", "energy_j", "final_loss"]  # (the jobs cut with the run included)
    np.testing.assert_allclose(fast.runs[runs].to_numpy(float),
                               slow.runs[runs].to_numpy(float), rtol=1e-9)
    assert fast.runs["status"].tolist() == slow.runs["status"].tolist()
    if case.endswith("deadline"):  # jobs in flight at the deadline: cut, bits un-booked
        assert fast.runs["status"].iloc[0] == "deadline"
        assert int(fast.epochs["in_flight"].iloc[-1]) > 0
    if case.endswith("stale"):  # updates staler than allowed: discarded
        assert fast.epochs["late"].sum() > 0


def test_changing_capacities_and_the_reference_stay_on_events(players):
    params = {"concurrency": 8, "buffer_updates": 2}
    sc = fleet({"bandwidth": {"model": "lognormal", "sigma": 0.5, "correlation_s": "1 s",
                              "step_s": "0.1 s"}}, n=20)
    sc["training"]["max_epochs"] = 5
    netsim.simulate(sc, "fedbuff", seed=0, params=params, raise_errors=True)
    assert players[-1].buffered_player is False and players[-1].epochs_by_path["arrays"] == 0
    sc = fleet(n=20)
    sc["training"]["max_epochs"] = 5
    netsim.simulate(sc, "fedbuff", seed=0, params=params, raise_errors=True,
                    fast_epochs=False)
    assert players[-1].buffered_player is False


def test_cells_under_an_aggregator_link_they_can_fill_stay_on_events():
    # 3,000 generated devices: every cell's flows also cross the aggregator's link, which
    # their cells together can fill (two constraints that can saturate on one route)
    sc = {"name": "nested", "seed": 0, "generate": {"n_devices": 3000, "devices_per_cell": 16,
                                                    "seed": 1},
          "model": "small-cnn",
          "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": 1}}
    resolved = engine.resolve_scenario(netsim.Scenario.model_validate(sc), 0)
    world = engine.World(resolved, np.random.default_rng(0))
    assert BufferedPlayer.of(world) is None
    sc["generate"]["n_devices"] = 1000
    resolved = engine.resolve_scenario(netsim.Scenario.model_validate(sc), 0)
    assert BufferedPlayer.of(engine.World(resolved, np.random.default_rng(0))) is not None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=async_worlds())
def test_random_asynchronous_worlds_in_arrays_match_the_events(case):
    """Random changing worlds without capacity changes (sessions, stragglers, batteries of
    0.5-50 J that empty mid-job, sleep power; generated cells and explicit stars), fedbuff or
    fedasync: arrays and events give the same tables to 1e-9."""
    scenario, name, params, seed = case
    scenario["dynamics"]["bandwidth"] = {"model": "constant"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = netsim.simulate(copy.deepcopy(scenario), name, seed=seed, params=params,
                               raise_errors=True)
        slow = netsim.simulate(copy.deepcopy(scenario), name, seed=seed, params=params,
                               raise_errors=True, fast_epochs=False)
    _assert_same(fast, slow)
    for col in ("updates_ids", "updates_staleness", "dropped_ids", "late_ids"):
        pd.testing.assert_series_equal(fast.epochs[col], slow.epochs[col])
    np.testing.assert_allclose(fast.runs[["time_s", "energy_j"]].to_numpy(float),
                               slow.runs[["time_s", "energy_j"]].to_numpy(float), rtol=1e-9)


def identical_star(n: int = 4) -> dict:
    """n identical devices on identical links: every job's instants tie exactly."""
    devices = [{"id": "srv", "flop_per_s": 1e12, "memory_bytes": 1e11, "power_busy_w": 100,
                "power_idle_w": 20}]
    links = [{"a": "srv", "b": "ap", "bandwidth_bps": 1e10, "latency_s": 0.001,
              "energy_j_per_bit": 1e-9}]
    for i in range(n):
        devices.append({"id": f"d{i}", "flop_per_s": 1e9, "memory_bytes": 4e9,
                        "power_busy_w": 3.0, "power_idle_w": 1.0, "samples": 100})
        links.append({"a": f"d{i}", "b": "ap", "bandwidth_bps": 1e7, "latency_s": 0.01,
                      "energy_j_per_bit": 1e-7})
    return {"name": "ties", "seed": 0, "devices": devices, "links": links,
            "aggregator": "srv", "model": "small-cnn",
            "training": {"target_loss": 0.01, "deadline_s": 1e5, "max_epochs": 3}}


@pytest.mark.parametrize("fast", [True, False])
def test_updates_arriving_together_are_taken_in_start_order(fast):
    # four jobs land at one instant, K = 2: the aggregation takes the two started first; the
    # other two land before it (staleness 0, not 1) and the next epoch takes them at once
    res = netsim.simulate(identical_star(), "fedbuff", seed=0,
                          params={"concurrency": 4, "buffer_updates": 2}, raise_errors=True,
                          fast_epochs=fast)
    ep = res.epochs
    assert [list(x) for x in ep["updates_ids"]] == [["d0", "d1"], ["d2", "d3"], ["d0", "d1"]]
    assert [list(x) for x in ep["updates_staleness"]] == [[0, 0], [0, 0], [1, 1]]
    # (the second epoch closes as it opens: it lasts its aggregation only)
    assert ep["end_s"].iloc[1] - ep["start_s"].iloc[1] < 1e-5
