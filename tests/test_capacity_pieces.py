"""Transfers played in arrays across capacity changes (netsim.fastepoch.play_phase with
pieces): a changing world's epoch whose link capacities change while transfers move plays in
arrays, piece by piece, and gives the event path's times, bytes, energy, busy time, air time
and measurements (the event path re-shares at each change: FlowNetwork.set_capacities)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest

import netsim
from netsim import engine
from netsim.dynamics.traces import write_bandwidth_trace
from netsim.engine import resolve_scenario
from netsim.epochs import guarded
from netsim.fastepoch import CapacityPieces, RouteTable, play_phase
from netsim.network.nested import nested_last_bit_times, nested_last_bit_times_until
from netsim.network.playback import last_bit_times, last_bit_times_until
from netsim.policy import Decision
from netsim.scenario.loading import load_scenario, scenario_data
from netsim.simclock import fire_after
from tests.test_media import cell_scenario
from tests.test_network import link, make

CATEGORIES = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "energy_sleep_j"]


# -- the playback up to a horizon -----------------------------------------------------------
def test_one_flow_stopped_at_a_horizon_has_its_bits_left():
    done, left = last_bit_times_until(np.array([1.0]), np.array([2e6]), np.array([8e6]), 1e7,
                                      until_s=3.0)
    assert done[0] == np.inf and left[0] == pytest.approx(8e6 - 2e6 * 2.0)
    done, left = last_bit_times_until(np.array([1.0]), np.array([2e6]), np.array([8e6]), 1e7,
                                      until_s=5.0)
    assert done[0] == pytest.approx(5.0) and left[0] == 0.0


@pytest.mark.parametrize("seed", range(30))
def test_a_phase_cut_in_two_pieces_of_equal_capacity_is_the_phase(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 30))
    start = np.round(rng.uniform(0.0, 3.0, m), seed % 3)
    if seed % 4 == 0:
        start[:] = 0.5
    caps = rng.choice([1e6, 2e6, 5e6, 1e7], m) * rng.uniform(0.5, 1.5, m)
    bits = rng.choice([1e6, 4e6], m) if seed % 2 else np.full(m, 2e6)
    capacity = float(rng.uniform(2e6, 3e7))
    whole = last_bit_times(start, caps, bits, capacity)
    cut = float(rng.uniform(0.0, whole.max()))

    done, left = last_bit_times_until(start, caps, bits, capacity, until_s=cut)
    rest = ~(done <= cut)
    if rest.any():
        later = np.maximum(start[rest], cut)
        done[rest] = last_bit_times(later, caps[rest], left[rest], capacity)
    np.testing.assert_allclose(done, whole, rtol=1e-9)


@pytest.mark.parametrize("seed", range(30))
def test_a_nested_phase_cut_in_two_pieces_is_the_phase(seed):
    rng = np.random.default_rng(seed)
    m, n_groups = int(rng.integers(2, 25)), int(rng.integers(1, 5))
    group = rng.integers(0, n_groups, m)
    coef = 1.0 / rng.uniform(1.0, 10.0, m)
    gcap = rng.uniform(0.5, 2.0, n_groups)
    outer = float(rng.uniform(0.5, 8.0))
    start = np.round(rng.uniform(0.0, 3.0, m), 1)
    if seed % 4 == 0:
        start[:] = 0.0
    bits = rng.choice([1.0, 4.0], m) if seed % 2 else np.full(m, 2.0)
    whole = nested_last_bit_times(start, bits, group, coef, gcap, outer)
    cut = float(rng.uniform(0.0, whole.max()))
    done, left = nested_last_bit_times_until(start, bits, group, coef, gcap, outer, cut)
    rest = ~(done <= cut)
    if rest.any():
        done[rest] = nested_last_bit_times(np.maximum(start[rest], cut), left[rest],
                                           group[rest], coef[rest], gcap, outer)
    np.testing.assert_allclose(done, whole, rtol=1e-9)


# -- a phase across capacity changes against the flow network -------------------------------
def _star(m, caps, capacity):
    nodes = ["srv", "ap"] + [f"d{i}" for i in range(m)]
    links = [link("ap", "srv", capacity)] + [link(f"d{i}", "ap", c) for i, c in enumerate(caps)]
    return nodes, links


@pytest.mark.parametrize("seed", range(25))
def test_uploads_across_capacity_changes_match_the_flow_network(seed):
    """Devices behind their own links upload over a shared one; every link's capacity changes
    at known instants (some while transfers move): the pieces give the flow network's
    last-bit times (it re-shares at each change)."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 25))
    base = np.concatenate([[float(rng.uniform(3e6, 3e7))],
                           rng.choice([1e6, 2e6, 5e6, 1e7], m) * rng.uniform(0.5, 1.5, m)])
    starts = np.round(rng.uniform(0.0, 2.0, m), seed % 3)
    bits = 4e6
    step = float(rng.uniform(0.05, 1.0))
    n_pieces = 200
    factors = np.exp(0.5 * rng.standard_normal((n_pieces, len(base))))  # per piece, per link
    nodes, links = _star(m, base[1:], base[0])
    env, _, net = make(nodes, links)
    n_dir = 2 * len(links)
    up_dir = np.array([2 * i if links[i].a != "srv" else 2 * i + 1 for i in range(len(links))])

    def directions_at(k):
        caps = np.array(net.capacity_bps[:n_dir])
        caps[up_dir] = base * factors[k]
        caps[up_dir ^ 1] = base * factors[k]
        return caps

    first = directions_at(0)
    net.set_capacities(list(range(n_dir)), first.tolist())
    for k in range(1, n_pieces):
        fire_after(env, k * step, lambda _e, k=k: net.set_capacities(
            list(range(n_dir)), directions_at(k).tolist()))
    got = np.full(m, np.nan)
    for i in range(m):
        fire_after(env, starts[i], lambda _e, i=i: net.send(
            f"d{i}", "srv", bits / 8.0, lambda at, i=i: got.__setitem__(i, at)))
    env.run(until=n_pieces * step)
    assert not np.isnan(got).any()

    routes = [net.topology.route(f"d{i}", "srv") for i in range(m)]
    table = RouteTable.of(routes)
    rows = np.arange(m)
    pieces = CapacityPieces(
        lambda t: directions_at(min(int(np.floor(t / step + 1e-12)), n_pieces - 1)),
        lambda t: (np.floor(t / step + 1e-12) + 1) * step)
    played = play_phase(starts, rows, table, bits, first, table.hops_of(rows), None, pieces)
    assert played is not None
    last_bit, changes = played
    np.testing.assert_allclose(last_bit, got, rtol=1e-9)  # (no latency on these links)
    assert changes >= 1


# -- epochs of a changing world: arrays against events ------------------------------------
@pytest.fixture
def worlds(monkeypatch):
    """The worlds built while the test runs (their epochs_by_path) and, per epoch of a
    changing world that could play in arrays, how many capacity changes fell inside its
    phases (None: it needed the events)."""
    built, changes = [], []
    original_init, original_plain = engine.World.__init__, guarded._arrays_plan

    def keep(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        built.append(self)

    def spy(*args, **kwargs):
        plan = original_plain(*args, **kwargs)
        changes.append(None if plan is None else plan.capacity_changes)
        return plan

    monkeypatch.setattr(engine.World, "__init__", keep)
    monkeypatch.setattr(guarded, "_arrays_plan", spy)
    return built, changes


def _airtime(frame: pd.DataFrame) -> list[dict[str, float]]:
    return [json.loads(v) if isinstance(v, str) else dict(v)
            for v in frame["airtime_by_medium_s"]]


def _assert_same(fast, slow):
    """The tables agree to 1e-9, air time per epoch and medium and per device included."""
    cols = ["start_s", "end_s", "samples", "participants", "loss", "dropped", "late",
            "energy_wasted_j", *CATEGORIES]
    np.testing.assert_allclose(fast.epochs[cols].to_numpy(float),
                               slow.epochs[cols].to_numpy(float), rtol=1e-9, atol=1e-12)
    pd.testing.assert_series_equal(fast.epochs["participant_ids"], slow.epochs["participant_ids"])
    for a, b in zip(_airtime(fast.epochs), _airtime(slow.epochs), strict=True):
        assert set(a) == set(b)
        np.testing.assert_allclose([a[k] for k in sorted(a)], [b[k] for k in sorted(b)],
                                   rtol=1e-9)
    cols = [*CATEGORIES, "energy_radio_j", "busy_s", "online_s", "bytes_sent",
            "bytes_received", "airtime_s"]
    np.testing.assert_allclose(fast.devices[cols].to_numpy(float),
                               slow.devices[cols].to_numpy(float), rtol=1e-9, atol=1e-12)


class Everyone:
    """Every available device that holds samples, every epoch, recording what the previous
    epochs measured (speed, download and upload throughput) as the policy sees it."""

    name = "everyone"

    def __init__(self) -> None:
        self.seen: list[np.ndarray] = []

    def reset(self, scenario, rng):
        pass

    def decide(self, obs):
        self.seen.append(np.stack([obs.measured_flop_per_s, obs.measured_down_bps,
                                   obs.measured_up_bps]))
        t = obs.devices.trainers
        rows = t[obs.available[t]]
        if not len(rows):
            return Decision(stop=True, reason="nobody available")
        ids, samples = obs.devices.ids, obs.devices.samples
        return Decision(participants={ids[i]: int(samples[i]) for i in rows})


def _both(scenario, policy=None, seed=0, params=None):
    """The run in arrays and as events; with no policy given, :class:`Everyone`, whose
    measurements are compared too."""
    runs, seen = [], []
    for fast_epochs in (True, False):
        pol = Everyone() if policy is None else policy
        runs.append(netsim.simulate(copy.deepcopy(scenario), pol, seed=seed, params=params,
                                    raise_errors=True, fast_epochs=fast_epochs))
        if policy is None:
            seen.append(np.array(pol.seen))
    if seen:
        np.testing.assert_allclose(seen[0], seen[1], rtol=1e-9)
    return runs[0], runs[1]


def test_a_link_halved_mid_download_plays_in_arrays_at_both_rates(tmp_path, worlds):
    """One phone behind its own link (no medium): the download's first 0.4 s at 10 Mbit/s,
    the rest at 5; the upload at 5 Mbit/s. Hand-worked: bits before the change at the first
    rate, the rest at the second, plus latency."""
    s = {"name": "one", "seed": 0,
         "devices": [{"id": "srv", "flop_per_s": 1e12, "memory_bytes": 1e11, "power_busy_w": 100,
                      "power_idle_w": 20},
                     {"id": "d1", "flop_per_s": 1e9, "memory_bytes": 4e9, "power_busy_w": 5,
                      "power_idle_w": 1, "samples": 100}],
         "links": [{"a": "srv", "b": "d1", "bandwidth_bps": 1e7, "latency_s": 0.01,
                    "energy_j_per_bit": 1e-8}],
         "aggregator": "srv",
         "model": {"params": 1e6, "bytes_per_param": 1, "train_flop_per_sample": 1e6,
                   "variants": [{"name": "full", "params_fraction": 1, "flop_fraction": 1}]},
         "training": {"target_loss": 1e-9, "deadline_s": 1e9, "max_epochs": 1}}
    path = tmp_path / "bw.csv"
    write_bandwidth_trace(pd.DataFrame({"a": ["srv"], "b": ["d1"], "time_s": [0.4],
                                        "bandwidth_bps": [5e6]}), path)
    s["dynamics"] = {"bandwidth": {"model": "trace", "trace": str(path), "repeat": False}}
    fast, slow = _both(s)
    bits = 8e6
    down = 0.4 + (bits - 1e7 * 0.4) / 5e6 + 0.01       # 1.21 s
    train = 100 * 1e6 / 1e9                              # 0.1 s
    up = bits / 5e6 + 0.01                               # 1.61 s
    aggregate = fast.epochs.iloc[0]["end_s"] - (down + train + up)
    assert 0.0 <= aggregate < 1e-3
    assert fast.epochs.iloc[0]["end_s"] == pytest.approx(slow.epochs.iloc[0]["end_s"], rel=1e-12)
    built, changes = worlds
    assert built[0].epochs_by_path == {"arrays": 1, "events": 0}
    assert changes == [1]
    _assert_same(fast, slow)
    # the measured download throughput: bits over the time they took
    assert fast.devices.set_index("device").loc["d1", "bytes_received"] == pytest.approx(1e6)


def _changing(data, step_s, sigma=0.6):
    data = copy.deepcopy(data)
    data["dynamics"] = {"availability": {"model": "bernoulli"},
                        "bandwidth": {"model": "lognormal", "sigma": sigma,
                                      "correlation_s": 3 * step_s, "step_s": step_s},
                        "compute": {"spread": 0.3, "straggler_probability": 0.1,
                                    "straggler_slowdown": 4}}
    return data


@pytest.mark.parametrize("backhaul", ["1 Gbit/s", "60 Mbit/s"])
@pytest.mark.parametrize("kind", ["wifi", "cellular"])
@pytest.mark.parametrize("step_s", [0.3, 1.7])
def test_a_cell_with_changing_rates_gives_the_events_tables(worlds, kind, backhaul, step_s):
    """A Wi-Fi or cellular cell (station rates and coefficients change with the links'
    capacities) behind a backhaul that binds or not: capacity changes fall inside transfers,
    the epochs play in arrays and give the event path's tables."""
    scenario = _changing(cell_scenario(kind, backhaul=backhaul), step_s)
    fast, slow = _both(scenario)
    built, changes = worlds
    assert built[0].epochs_by_path["arrays"] >= 3 and max(c or 0 for c in changes) >= 1
    _assert_same(fast, slow)


@pytest.mark.parametrize(("n", "per_cell", "fibre_bps", "seed"), [
    (40, 8, None, 0),
    (60, 8, 5e7, 1),     # a fibre the cells fill: nested (netsim.network.nested)
    (120, 8, 3e8, 2),    # the fibre binds some cells, others bind themselves
    (30, 6, None, 3),
])
def test_generated_networks_with_changing_capacities_give_the_events_tables(
        worlds, n, per_cell, fibre_bps, seed):
    data = {"name": "gen", "seed": seed, "model": "mlp-digits",
            "generate": {"n_devices": n, "devices_per_cell": per_cell, "seed": seed + 3},
            "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": 6}}
    scenario = load_scenario(_changing(data, 0.01))
    if fibre_bps is not None:
        resolved = resolve_scenario(scenario, 0)
        links = [lk.model_copy(update={"bandwidth_bps": fibre_bps})
                 if "aggregator" in (lk.a, lk.b) else lk for lk in resolved.links]
        scenario = resolved.model_copy(update={"links": tuple(links)})
    fast, slow = _both(scenario)
    built, changes = worlds
    assert built[0].epochs_by_path["arrays"] >= 3 and max(c or 0 for c in changes) >= 1
    _assert_same(fast, slow)


@pytest.mark.parametrize("seed", range(6))
def test_random_changing_worlds_with_churn_match_the_events(worlds, seed):
    """Sessions, capacities and compute all change (the churn experiment's world, shorter):
    the epochs that play in arrays across capacity changes agree with the events."""
    data = scenario_data("experiments/dynamics/churn.yaml")
    data["training"]["max_epochs"] = 12
    data["seed"] = seed
    rng = np.random.default_rng(seed)
    data["dynamics"]["bandwidth"]["step_s"] = float(rng.choice([0.02, 0.05, 0.1]))
    policy, params = ("fedavg-all", {}) if seed % 2 else ("random-k", {"k": 10})
    fast, slow = _both(data, policy, seed, params)
    _, changes = worlds
    fast_changes = changes[:len(fast.epochs)]
    assert max(c or 0 for c in fast_changes) >= 1
    _assert_same(fast, slow)
