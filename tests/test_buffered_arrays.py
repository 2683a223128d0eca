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
from netsim.dynamics.traces import write_bandwidth_trace
from netsim.epochs.buffered_arrays import BufferedPlayer
from netsim.network.online import SharedConstraint
from netsim.network.playback import last_bit_times
from netsim.network.sharing import water_filling, water_filling_rates
from tests.player_fuzz import play_online
from tests.test_async import CHURN, STRAGGLERS, fleet
from tests.test_capacity_pieces import _assert_same
from tests.test_dynamics_fuzz import async_worlds

ASYNC_COLUMNS = ["updates_aggregated", "staleness_mean", "staleness_max", "started",
                 "in_flight"]


# -- one constraint, online ------------------------------------------------------------------
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
def players(built_worlds):
    """Per world built while the test runs, its buffered player (None: events)."""
    return built_worlds


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
    # other two land before it, wait through it and the next epoch takes them at once (stale
    # by that one aggregation: staleness counts the versions up to the aggregation that takes
    # an update); d0 and d1 start again from version 1 and are taken at version 2
    res = netsim.simulate(identical_star(), "fedbuff", seed=0,
                          params={"concurrency": 4, "buffer_updates": 2}, raise_errors=True,
                          fast_epochs=fast)
    ep = res.epochs
    assert [list(x) for x in ep["updates_ids"]] == [["d0", "d1"], ["d2", "d3"], ["d0", "d1"]]
    assert [list(x) for x in ep["updates_staleness"]] == [[0, 0], [1, 1], [1, 1]]
    # (the second epoch closes as it opens: it lasts its aggregation only)
    assert ep["end_s"].iloc[1] - ep["start_s"].iloc[1] < 1e-5


# -- capacities that change (bandwidth traces) ----------------------------------------------
def traced(sc: dict, tmp_path, rows, repeat: bool = True) -> dict:
    """``sc`` with a bandwidth trace of ``rows`` ((a, b, time (s), bit/s) each; a callable
    gets the resolved links and returns them), written under ``tmp_path``."""
    sc = copy.deepcopy(sc)
    if callable(rows):
        resolved = engine.resolve_scenario(netsim.Scenario.model_validate(sc), 0)
        rows = rows(resolved.links)
    path = tmp_path / "bw.csv"
    write_bandwidth_trace(pd.DataFrame(rows, columns=["a", "b", "time_s", "bandwidth_bps"]),
                          path)
    sc.setdefault("dynamics", {})["bandwidth"] = {"model": "trace", "trace": str(path),
                                                  "repeat": repeat}
    return sc


def stations(factors):
    """Rows scaling every station link of the cells named (link ``b``) by ``factors``
    ((time (s), factor) each) from its scenario bandwidth."""
    def rows(links):
        out = []
        for cell, steps in factors.items():
            for link in links:
                if link.b == cell:
                    out += [(link.a, link.b, t, link.bandwidth_bps * f) for t, f in steps]
        return out
    return rows


def backhauls(steps):
    """Rows setting each named cell's link to the core router: {cell: [(time, bit/s)]}."""
    def rows(links):
        return [(cell, "core-router", t, bps) for cell, s in steps.items() for t, bps in s]
    return rows


def both(*makers):
    return lambda links: [r for m in makers for r in m(links)]


TRACED = {
    # cells' station rates fall and rise (their air time binds harder, then less)
    "cells": (heavy(), both(
        stations({"wifi-cell-1": [(7.3, 0.25), (19.1, 1.5), (33.7, 1.0)],
                  "lte-cell-1": [(11.2, 0.5), (26.0, 2.0)]}),
        backhauls({"wifi-cell-2": [(15.0, 5e9), (30.0, 1e10)]})),
        "fedbuff", {"concurrency": 24, "buffer_updates": 6}),
    # wired: LTE backhauls that bind, stop binding (raised far above their members' caps)
    # and bind again; ethernet links slowed below them (the flows then bound alone)
    "links": (heavy(wired=True), both(
        backhauls({"ethernet-cell-1": [(5.0, 5e10), (21.5, 1e7), (40.0, 2e7)],
                   "ethernet-cell-2": [(9.9, 3e7), (30.1, 5e10)]}),
        stations({"ethernet-cell-3": [(12.0, 0.005), (25.0, 1.0)]})),
        "fedbuff", {"concurrency": 24, "buffer_updates": 6}),
    # private links (no medium) and churn: transfers cut after a change (air time un-booked
    # at the station rates of their start)
    "private-churn": (churn_heavy() | {"generate": heavy(shared_media=False)["generate"]},
                      both(stations({"wifi-cell-1": [(3.1, 0.3), (13.7, 1.2)],
                                     "lte-cell-1": [(6.6, 0.4), (17.0, 1.0)]})),
                      "fedasync", {"concurrency": 16, "max_staleness": 4}),
    "cells-churn": (churn_heavy(), stations({"wifi-cell-1": [(2.0, 0.2), (9.0, 3.0)],
                                             "wifi-cell-2": [(4.5, 0.5), (16.0, 0.1)]}),
                    "fedasync", {"concurrency": 16, "max_staleness": 4}),
}


def run_both(sc, policy, params):
    fast = netsim.simulate(copy.deepcopy(sc), policy, seed=1, params=params,
                           raise_errors=True)
    slow = netsim.simulate(copy.deepcopy(sc), policy, seed=1, params=params,
                           raise_errors=True, fast_epochs=False)
    return fast, slow


def assert_same_runs(fast, slow):
    _assert_same(fast, slow)
    np.testing.assert_allclose(fast.epochs[ASYNC_COLUMNS].to_numpy(float),
                               slow.epochs[ASYNC_COLUMNS].to_numpy(float), rtol=1e-9)
    for col in ("updates_ids", "updates_staleness", "updates_samples", "late_ids",
                "dropped_ids"):
        pd.testing.assert_series_equal(fast.epochs[col], slow.epochs[col])
    runs = ["time_s", "energy_j", "final_loss"]
    np.testing.assert_allclose(fast.runs[runs].to_numpy(float),
                               slow.runs[runs].to_numpy(float), rtol=1e-9)
    assert fast.runs["status"].tolist() == slow.runs["status"].tolist()


@pytest.mark.parametrize("case", sorted(TRACED))
def test_capacity_changes_in_arrays_match_the_events(case, players, tmp_path):
    """Bandwidth traces that change cells' station rates, backhauls and links while
    transfers move (a constraint binding, then not, then again): arrays and events give the
    same tables to 1e-9, air time per medium and device included."""
    base, rows, policy, params = TRACED[case]
    sc = traced(base, tmp_path, rows)
    fast, slow = run_both(sc, policy, params)
    assert players[0].epochs_by_path["arrays"] >= len(fast.epochs) > 3
    assert players[0].epochs_by_path["events"] == 0
    assert players[0].buffered_player.capacity_changes > 3
    assert players[1].epochs_by_path["arrays"] == 0
    assert_same_runs(fast, slow)


def boundary_star(n: int = 3) -> dict:
    """n devices (1 Mbit/s apart) behind one access point whose uplink (20 Mbit/s) they
    share; a 1 MB model, 0.1 s of training each."""
    sc = identical_star(n)
    sc["links"][0]["bandwidth_bps"] = 2e7
    for i in range(n):
        sc["links"][i + 1]["bandwidth_bps"] = 1e7 + 1e6 * i
    sc["model"] = {"params": 1e6, "bytes_per_param": 1, "train_flop_per_sample": 1e6,
                   "variants": [{"name": "full", "params_fraction": 1, "flop_fraction": 1}]}
    sc["training"].update(target_loss=1e-9, max_epochs=8)
    return sc


def test_capacity_changes_at_transfer_boundaries_match_the_events(players, tmp_path):
    # one device first: its download's last bit leaves at 8e6 / 1e7 = 0.8 s exactly, where
    # its link halves; its upload starts at 0.8 + 0.01 + 0.1, where the link is restored;
    # and a change at the epoch's start (t = 0)
    sc = boundary_star(1)
    up = (0.8 + 0.01) + 0.1
    sc = traced(sc, tmp_path, [("d0", "ap", 0.0, 1.2e7), ("d0", "ap", 0.8, 6e6),
                               ("d0", "ap", up, 1e7), ("srv", "ap", 2.0, 5e6)], repeat=False)
    fast, slow = run_both(sc, "fedbuff", {"concurrency": 1, "buffer_updates": 1})
    assert players[0].epochs_by_path["events"] == 0
    assert players[0].buffered_player.capacity_changes >= 3
    assert_same_runs(fast, slow)
    # three devices sharing the access point's uplink, changes where transfers end and start
    sc = traced(boundary_star(3), tmp_path,
                [("srv", "ap", 0.4, 1e7), ("d1", "ap", 0.8, 4e6), ("srv", "ap", 1.6, 3e7),
                 ("d2", "ap", 2.5, 1e6), ("srv", "ap", 3.0, 2e7)])
    fast, slow = run_both(sc, "fedbuff", {"concurrency": 3, "buffer_updates": 2})
    assert players[2].epochs_by_path["events"] == 0
    assert players[2].buffered_player.capacity_changes >= 3
    assert_same_runs(fast, slow)


def test_a_capacity_state_with_a_route_crossing_two_binding_constraints_runs_as_events(
        players, tmp_path):
    # the cells' fleet plays in arrays at its scenario capacities, but from 30 s on the
    # aggregator's link (10 Gbit/s) falls to 100 Mbit/s: the cells can then fill it, and
    # every route crosses its cell and that link, both able to saturate
    sc = traced(heavy(), tmp_path, [("aggregator", "core-router", 30.0, 1e8)], repeat=False)
    sc["training"]["max_epochs"] = 4
    params = {"concurrency": 24, "buffer_updates": 6}
    netsim.simulate(sc, "fedbuff", seed=1, params=params, raise_errors=True)
    assert players[-1].buffered_player is False
    assert players[-1].epochs_by_path["arrays"] == 0
    # the same trace at 1 Tbit/s: every state plays in arrays
    sc = traced(heavy(), tmp_path, [("aggregator", "core-router", 30.0, 1e12)], repeat=False)
    sc["training"]["max_epochs"] = 4
    netsim.simulate(sc, "fedbuff", seed=1, params=params, raise_errors=True)
    assert players[-1].buffered_player is not False
    assert players[-1].epochs_by_path["events"] == 0
