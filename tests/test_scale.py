"""Work that follows the participants (issue 26): the counter-based session draws, the
availability queue, energy totals from running sums and battery checks of the few, each
against the direct computation over the whole fleet."""

import copy

import numpy as np
import pytest
from scipy import stats

import netsim
import netsim.engine as engine
from netsim.dynamics.availability import AvailabilityTimeline, MarkovSessions
from netsim.dynamics.counter_rng import uniforms
from netsim.scenario.loading import scenario_data


def test_counter_draws_are_uniform_and_do_not_depend_on_what_is_drawn_with_them():
    devices = np.repeat(np.arange(1000), 50)
    counters = np.tile(np.arange(50), 1000)
    u = uniforms(12345, devices, counters)
    assert 0.0 < u.min() and u.max() < 1.0
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    # neighbouring devices and counters are not correlated
    grid = u.reshape(1000, 50)
    assert abs(np.corrcoef(grid[:, 0], grid[:, 1])[0, 1]) < 0.1
    assert abs(np.corrcoef(grid[:-1, 0], grid[1:, 0])[0, 1]) < 0.1
    # a draw is a function of (key, device, counter) alone
    alone = uniforms(12345, np.array([17]), np.array([3]))
    assert alone[0] == grid[17, 3]
    assert uniforms(12346, np.array([17]), np.array([3]))[0] != alone[0]


def _sessions(n, seed=3, amplitude=0.5):
    always = np.zeros(n, dtype=bool)
    always[0] = True
    return MarkovSessions(np.full(n, 50.0), np.full(n, 80.0), amplitude, always,
                          np.random.SeedSequence(seed))


def test_sessions_do_not_depend_on_when_the_engine_asks():
    """Advancing in many small steps or in one gives every device the same intervals."""
    fine, coarse = AvailabilityTimeline(_sessions(300), 300), AvailabilityTimeline(_sessions(300), 300)
    for t in np.linspace(0.0, 2000.0, 401):
        fine.advance(float(t))
    coarse.advance(2000.0)
    assert fine.intervals_s(2000.0) == coarse.intervals_s(2000.0)
    np.testing.assert_array_equal(fine.online_time_s(2000.0), coarse.online_time_s(2000.0))


def test_sessions_have_the_stationary_online_share_and_mean_lengths():
    n, horizon = 4000, 20_000.0
    timeline = AvailabilityTimeline(_sessions(n, amplitude=0.0), n)
    assert timeline.online[1:].mean() == pytest.approx(50 / 130, abs=0.03)
    timeline.advance(horizon)
    share = timeline.online_time_s(horizon)[1:] / horizon
    assert share.mean() == pytest.approx(50 / 130, abs=0.01)
    lengths = np.concatenate([np.diff(np.array(iv).reshape(-1, 2), axis=1).ravel()
                              for iv in timeline.intervals_s(horizon)[1:200]])
    assert lengths.mean() == pytest.approx(50.0, rel=0.1)


def test_weighted_online_time_is_the_sum_over_devices():
    n = 500
    timeline = AvailabilityTimeline(_sessions(n), n)
    w = np.random.default_rng(0).uniform(0.0, 3.0, n)
    timeline.track("w", w)
    for t in (10.0, 333.3, 1234.5):
        timeline.advance(t)
        if t == 333.3:
            timeline.kill(7, t)
        assert timeline.weighted_s("w", t) == pytest.approx(
            float(np.dot(w, timeline.online_time_s(t))), rel=1e-12)
    assert timeline.next_change_at() == pytest.approx(
        float(timeline.next_change_s.min()), rel=0, abs=0)


def _batteries_scenario(n=300):
    sc = copy.deepcopy(scenario_data("default"))
    sc["generate"]["n_devices"] = n
    sc["training"].update(target_loss=0.01, max_epochs=40, deadline_s=1e9)
    sc["dynamics"] = {"availability": {"model": "markov", "mean_online_s": 2.0,
                                       "mean_offline_s": 3.0}}
    return sc


def test_energy_totals_and_battery_checks_are_those_over_the_whole_fleet(monkeypatch):
    """Each epoch: the running totals equal the per-node snapshot's sums, and the devices
    marked low or taken offline are those a check of every battery finds (tiny batteries:
    many cross their thresholds)."""
    sc = _batteries_scenario()
    seen = {"epochs": 0, "low": 0}
    original_begin = engine.World.begin_epoch

    def begin_epoch(self):
        original_begin(self)
        if not self.dynamic:
            return
        now = self.now_s
        totals, snap = self.meter.totals(now), self.meter.snapshot(now)
        for cat in ("compute_j", "communication_j", "idle_j", "sleep_j"):
            assert getattr(totals, cat) == pytest.approx(getattr(snap.totals(), cat),
                                                         rel=1e-9, abs=1e-9), cat
        b = self.dynamics.batteries
        left = self.battery_left_j(now)
        low = left < b.min_fraction * b.capacity_j
        np.testing.assert_array_equal(self._low, low)
        assert not np.any((left <= 0.0) & self.dynamics.timeline.online)
        seen["epochs"] += 1
        seen["low"] = max(seen["low"], int(low.sum()))

    monkeypatch.setattr(engine.World, "begin_epoch", begin_epoch)
    from netsim.scenario import generator

    catalog = copy.deepcopy(generator.edge_catalog())
    for cls in catalog["device_classes"].values():
        if cls.get("battery_j"):
            cls["battery_j"] = 3.0  # joules: runs low and empties within the run
    monkeypatch.setattr(generator, "edge_catalog", lambda: catalog)
    res = netsim.simulate(sc, "random-k", seed=1, params={"k": 30}, raise_errors=True)
    assert seen["epochs"] >= 20 and seen["low"] > 0
    assert res.epochs[["energy_compute_j", "energy_comm_j", "energy_idle_j",
                       "energy_sleep_j"]].to_numpy().sum() == pytest.approx(
        res.runs.iloc[0]["energy_j"], rel=1e-9)


def test_a_fleet_of_100_000_runs_and_its_devices_table_is_whole():
    """A generated fleet of 100,000 devices with markov sessions: the run completes, the
    devices table has a row per device and network node, and its energies add up to the
    run's."""
    sc = copy.deepcopy(scenario_data("default"))
    sc["generate"].update(n_devices=100_000, devices_per_cell=32)
    sc["training"].update(max_epochs=5)
    sc["dynamics"] = {"availability": {"model": "markov"}}
    res = netsim.simulate(sc, "random-k", seed=0, params={"k": 100}, raise_errors=True)
    run = res.runs.iloc[0]
    assert run["epochs"] == 5 and len(res.epochs) == 5
    assert (res.epochs["participants"] <= 100).all()
    devices = res.devices
    assert int((~devices["network_node"]).sum()) == 100_001  # devices and the aggregator
    # the core router and the cells: per access type, one per 32 devices, the last partial
    assert 1 + 100_000 / 32 <= int(devices["network_node"].sum()) <= 1 + 100_000 // 32 + 3
    cats = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "energy_sleep_j"]
    assert devices[cats].to_numpy().sum() == pytest.approx(run["energy_j"], rel=1e-9)
    assert res.epochs[cats].to_numpy().sum() == pytest.approx(run["energy_j"], rel=1e-9)


def test_a_fleets_world_holds_under_a_kilobyte_per_device():
    """What a generated fleet's World holds per device (its device table, routes as arrays,
    the topology's arrays, meters and the flow network's books), traced while it is built:
    848 bytes at 100,000 devices (issue 47; about 1,480 at 1,000,000 before, when `netsim run
    million` peaked at 2.75 GiB, 1.45 GiB since), held under 1,000; its peak while building
    under 1,100."""
    import tracemalloc

    from netsim.scenario.loading import load_scenario

    sc = copy.deepcopy(scenario_data("default"))
    sc["generate"].update(n_devices=100_000, devices_per_cell=32)
    resolved = engine.resolve_scenario(load_scenario(sc), 0)
    tracemalloc.start()
    try:
        world = engine.World(resolved, np.random.default_rng(0))
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert world.devices.n == 100_001
    assert held / 100_000 < 1_000 and peak / 100_000 < 1_100
