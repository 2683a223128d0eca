"""The epoch fast path (netsim.fastepoch, netsim.network.playback) against the event engine."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import netsim
from netsim.engine import World, resolve_scenario
from netsim.epochs import arrays as static_arrays
from netsim.fastepoch import RouteTable, play_plain_epoch
from netsim.network.playback import last_bit_times
from netsim.policy import Decision
from netsim.scenario.loading import load_scenario
from netsim.simclock import fire_after
from tests.test_network import link, make


def network_last_bits(start_s, cap_bps, bits, capacity_bps) -> np.ndarray:
    """The same flows through the event engine's FlowNetwork: device i behind a link of
    ``cap_bps[i]`` to an access point whose uplink (``capacity_bps``) they all share."""
    m = len(start_s)
    nodes = ["srv", "ap"] + [f"d{i}" for i in range(m)]
    links = [link("ap", "srv", capacity_bps)] + [link(f"d{i}", "ap", c) for i, c in
                                                 enumerate(cap_bps)]
    env, _, net = make(nodes, links)
    out = np.full(m, np.nan)
    for i in range(m):
        def start(_event, i=i):
            net.send(f"d{i}", "srv", bits[i] / 8.0, lambda at, i=i: out.__setitem__(i, at))
        fire_after(env, start_s[i], start)
    env.run()
    return out


def test_one_flow_alone_takes_bits_over_its_cap_and_equal_flows_share_equally():
    one = last_bit_times(np.array([2.0]), np.array([1e6]), np.array([8e6]), 1e7)
    assert one[0] == pytest.approx(2.0 + 8.0)
    two = last_bit_times(np.zeros(2), np.array([1e7, 1e7]), np.array([4e6, 4e6]), 1e6)
    np.testing.assert_allclose(two, [8.0, 8.0])  # 1 Mbit/s each, 4 Mbit each
    # a slow flow keeps its cap, the other takes the rest, then the whole link
    mixed = last_bit_times(np.zeros(2), np.array([2e5, 1e7]), np.array([1e6, 1e6]), 1e6)
    np.testing.assert_allclose(mixed, [5.0, 1.25])


def test_a_late_flow_slows_an_early_one_down():
    # flow 0 alone at 1 Mbit/s for 1 s (1 Mbit of 3), then both share 0.5 Mbit/s each
    t = last_bit_times(np.array([0.0, 1.0]), np.array([1e7, 1e7]), np.array([3e6, 1e6]), 1e6)
    np.testing.assert_allclose(t, [4.0, 3.0])


@pytest.mark.parametrize("seed", range(40))
def test_one_shared_link_matches_the_flow_network(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 40))
    together = seed % 4 == 0
    start = np.full(m, 0.5) if together else np.round(rng.uniform(0.0, 4.0, m), seed % 3)
    caps = rng.choice([1e6, 2e6, 5e6, 1e7], m) * (1.0 if seed % 2 else rng.uniform(0.5, 1.5, m))
    bits = np.full(m, 2e6) if together or seed % 3 == 0 else rng.choice([1e6, 4e6], m)
    capacity = float(rng.uniform(2e6, 5e7))
    np.testing.assert_allclose(last_bit_times(start, caps, bits, capacity),
                               network_last_bits(start, caps, bits, capacity), rtol=1e-9)


def _both_paths(monkeypatch, scenario, policy="fedavg-all", seed=0, played_fast=True):
    """The run with the fast path on and off; asserts whether the fast path played the
    epochs (else the comparison would be of the event path with itself)."""
    plans = []

    def spy(*args, **kwargs):
        plans.append(play_plain_epoch(*args, **kwargs))
        return plans[-1]

    with monkeypatch.context() as m:
        m.setattr(static_arrays, "play_plain_epoch", spy)
        fast = netsim.simulate(scenario, policy, seed=seed, raise_errors=True)
    assert plans and all((p is not None) == played_fast for p in plans)
    with monkeypatch.context() as m:
        m.setattr(static_arrays, "play_plain_epoch", None)  # (called, it would raise)
        slow = netsim.simulate(scenario, policy, seed=seed, raise_errors=True,
                               fast_epochs=False)
    return fast, slow


def _assert_same_tables(fast, slow):
    cols = ["start_s", "end_s", "energy_compute_j", "energy_comm_j", "energy_idle_j", "loss"]
    np.testing.assert_allclose(fast.epochs[cols].to_numpy(float),
                               slow.epochs[cols].to_numpy(float), rtol=1e-9)
    pd.testing.assert_series_equal(fast.epochs["participant_ids"], slow.epochs["participant_ids"])
    cols = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "busy_s", "bytes_sent",
            "bytes_received", "energy_radio_j", "airtime_s"]
    np.testing.assert_allclose(fast.devices[cols].to_numpy(float),
                               slow.devices[cols].to_numpy(float), rtol=1e-9, atol=1e-12)


def _generated(n, per_cell, seed, epochs=3):
    return {"name": "gen", "seed": seed,
            "generate": {"n_devices": n, "devices_per_cell": per_cell, "seed": seed,
                         "shared_media": False},  # (wired sharing; media: test_media.py)
            "model": "small-cnn",
            "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": epochs}}


@pytest.mark.parametrize(("n", "per_cell", "fibre_bps"), [
    (12, 4, None),        # no link binds
    (300, 32, None),      # the aggregator's fibre binds both ways
    (120, 40, 2e8),       # the aggregator's link binds and flows drop in and out of sharing
])
def test_generated_networks_give_the_event_engines_tables(monkeypatch, n, per_cell, fibre_bps):
    scenario = load_scenario(_generated(n, per_cell, seed=n))
    if fibre_bps is not None:  # a slower aggregator link: (40 devices per cell: cells safe)
        resolved = resolve_scenario(scenario, 0)
        links = [link.model_copy(update={"bandwidth_bps": fibre_bps})
                 if "aggregator" in (link.a, link.b) else link for link in resolved.links]
        scenario = resolved.model_copy(update={"links": tuple(links)})
    fast, slow = _both_paths(monkeypatch, scenario)
    _assert_same_tables(fast, slow)
    assert fast.runs.iloc[0]["epochs"] == 3


@pytest.mark.parametrize("policy", ["random-k", "greedy-energy", "pact"])
def test_policies_on_the_default_scenario_give_the_event_engines_tables(monkeypatch, policy):
    fast, slow = _both_paths(monkeypatch, "default", policy)
    _assert_same_tables(fast, slow)


def _two_tier(n):
    """n devices behind one access point: the backhaul and the aggregator's link both bind."""
    devices = [{"id": "srv", "flop_per_s": 1e12, "memory_bytes": 1e11, "power_busy_w": 100,
                "power_idle_w": 10}]
    links = [{"a": "srv", "b": "core", "bandwidth_bps": 1e7, "latency_s": 0.001},
             {"a": "core", "b": "ap", "bandwidth_bps": 5e6, "latency_s": 0.001},
             {"a": "core", "b": "lone", "bandwidth_bps": 1e8, "latency_s": 0.001}]
    for i in range(n):
        devices.append({"id": f"d{i}", "flop_per_s": 1e10 * (1 + i), "memory_bytes": 4e9,
                        "power_busy_w": 5, "power_idle_w": 1, "samples": 100})
        links.append({"a": f"d{i}", "b": "ap", "bandwidth_bps": 1e7, "latency_s": 0.005})
    devices.append({"id": "lone", "flop_per_s": 1e10, "memory_bytes": 4e9, "power_busy_w": 5,
                    "power_idle_w": 1, "samples": 100})
    return {"name": "two-tier", "devices": devices, "links": links, "aggregator": "srv",
            "model": "small-cnn",
            "training": {"target_loss": 1e-9, "deadline_s": 1e9, "max_epochs": 2}}


@pytest.mark.parametrize("nested", [True, False])
def test_routes_crossing_two_binding_links_nested_in_arrays_else_events(monkeypatch, nested):
    """The backhaul and the aggregator's link both bind (the lone device's transfers cross the
    aggregator's link only). Nested (each device's backhaul is its bottleneck:
    netsim.network.nested) the epoch plays in arrays; with one device on a slower link of its
    own, the backhaul's members no longer share one rate: events."""
    data = _two_tier(4)
    if not nested:
        data["links"][3]["bandwidth_bps"] = 2e6  # d0's own link, below the backhaul's share
    scenario = resolve_scenario(load_scenario(data), 0)
    world = World(scenario, np.random.default_rng(0))
    rows = np.array([world.devices.index[d] for d in ("d0", "d1", "d2", "d3", "lone")])
    down, up = RouteTable.of(world.routes_down), RouteTable.of(world.routes_up)
    capacity = np.asarray(world.topology.capacity_bps)
    played = play_plain_epoch(0.0, rows, np.ones(len(rows)), 8e6, down, up, capacity)
    assert (played is not None) == nested
    fast, slow = _both_paths(monkeypatch, scenario, played_fast=nested)
    _assert_same_tables(fast, slow)


def _simpy_steps(world: World, decision: Decision) -> int:
    steps, original = [0], world.env.step

    def counting_step():
        steps[0] += 1
        original()

    world.env.step = counting_step
    world.run_epoch(decision)
    return steps[0]


def test_fast_epochs_schedule_a_constant_number_of_simpy_events():
    """A plain epoch played forward costs SimPy events per epoch, none per participant: the
    instant of the last arrival that the clock runs to (stepped twice: SimPy steps the event
    that stopped a run again when the next run starts) and the aggregation's timeout."""
    counts = {}
    for n in (10, 300):
        scenario = resolve_scenario(load_scenario(_generated(n, 16, seed=1)), 0)
        world = World(scenario, np.random.default_rng(0))
        counts[n] = _simpy_steps(world, Decision(participants={d: 10 for d in
                                                               world.devices.ids[1:]}))
    assert counts[10] == counts[300] == 3


def test_an_epoch_on_a_busy_network_runs_as_events():
    scenario = resolve_scenario(load_scenario(_two_tier(2)), 0)
    ends = {}
    for busy, fast in ((False, True), (True, True), (True, False)):
        world = World(scenario, np.random.default_rng(0), fast_epochs=fast)
        if busy:  # a transfer still moving on the aggregator's link: lone's download shares it
            world.network.send("srv", "lone", 1e6, lambda at: None)
        ends[busy, fast] = world.run_epoch(Decision(participants={"lone": 10})).end_s
    assert ends[True, True] == ends[True, False]   # the engine took the event path
    assert ends[True, True] > ends[False, True]    # (which the moving transfer slows down)


def test_cells_behind_ethernet_backhauls_play_in_arrays(monkeypatch):
    """Generated cells behind 1 Gbit/s ethernet backhauls: a cell's stations together could
    fill its backhaul, but through the cell's air time they put at most its fastest station's
    rate on it, so the backhaul never binds and the epoch plays in arrays (before 0.6.0 the
    backhaul was taken as the stations' inner constraint and every epoch ran as events); the
    tables are the event path's."""
    data = {"name": "ethernet", "seed": 0,
            "generate": {"n_devices": 96, "devices_per_cell": 32, "backhaul": "ethernet",
                         "seed": 1},
            "model": "resnet18",
            "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": 2}}
    fast, slow = _both_paths(monkeypatch, load_scenario(data), played_fast=True)
    _assert_same_tables(fast, slow)
