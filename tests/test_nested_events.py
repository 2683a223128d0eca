"""The flow network's nested groups (netsim.network.flows): cells under one binding outer link
kept by events, against closed forms, the fluid replay and the same network with the nesting
turned off (progressive filling at every instant)."""

import gc

import numpy as np
import pytest
import simpy

from netsim.energy import EnergyMeter
from netsim.network import FlowNetwork, Topology
from netsim.network.fluid import replay
from tests.test_media import link, medium

MB = 1e6


def cells_behind_uplink(cells, uplink_bps, kind="wifi", backhaul_bps=1e12):
    """Cells ``cells`` (each a list of station rates, bit/s) behind access points ap0.. on a
    router 'core' whose link to the aggregator 'agg' has ``uplink_bps``; stations s{c}_{i}."""
    links, media, stations = [], [], []
    for c, rates in enumerate(cells):
        media.append(medium(f"m{c}", kind))
        links.append(link("core", f"ap{c}", backhaul_bps))
        for i, r in enumerate(rates):
            stations.append(f"s{c}_{i}")
            links.append(link(f"s{c}_{i}", f"ap{c}", float(r), medium=f"m{c}"))
    links.insert(0, link("agg", "core", uplink_bps))
    nodes = ["agg", *stations, "core", *(f"ap{c}" for c in range(len(cells)))]
    env = simpy.Environment()
    meter = EnergyMeter([0.0] * len(nodes), [0.0] * len(nodes))
    topo = Topology(nodes, links, media, n_devices=1 + len(stations))
    return env, FlowNetwork(env, topo, meter), stations


def without_nesting(monkeypatch):
    """Turn the nested groups off: progressive filling wherever flows cross two unsafe
    constraints (the reference the nests must reproduce)."""
    monkeypatch.setattr(FlowNetwork, "_build_nests", lambda self, flows, now: False)
    monkeypatch.setattr(FlowNetwork, "_nest_outer", lambda self, o, now, starting: False)
    monkeypatch.setattr(FlowNetwork, "_nest_cell", lambda self, h, now, starting: False)


def run(env, net, transfers, cancel_at=None, capacities_at=None):
    """transfers: (name, src, dst, bytes, start_s); returns each arrival (s), the rates seen
    at 0.1 s, and the bits left by the transfers cancelled at ``cancel_at`` ((s, names))."""
    out, flows, rates, left = {}, {}, {}, {}

    def one(name, src, dst, size, start):
        yield env.timeout(start)
        route = net.topology.route(src, dst)
        flows[name] = net.send_on(route, size, lambda at, name=name: out.__setitem__(name, at))

    def look():
        yield env.timeout(0.1)
        rates.update({name: net.rate_bps(f) for name, f in flows.items()})

    def stop(at, names):
        yield env.timeout(at)
        for name in names:
            if name in flows:  # (started by then)
                left[name] = net.cancel(flows[name])

    def change(at, directions, caps):
        yield env.timeout(at)
        net.set_capacities(directions, caps)

    for t in transfers:
        env.process(one(*t))
    env.process(look())
    if cancel_at is not None:
        env.process(stop(*cancel_at))
    if capacities_at is not None:
        env.process(change(*capacities_at))
    env.run()
    return out, rates, left


def test_two_cells_under_a_binding_uplink_by_hand():
    """Cell A: two stations at 80 Mbit/s (level 40 each), cell B: three at 60 (level 20);
    uplink 120 Mbit/s. The caps overfill it (2 x 40 + 3 x 20 = 140): B runs at its level 20,
    A shares the 60 left (30 each). B's 16 Mbit end at 0.8 s, when A has 8 of its 32 Mbit
    left, then alone at its level 40: A ends at 1.0 s. Every start is its own event (no
    batch), so the uplink turns into a nest incrementally: no re-share, no progressive
    filling."""
    env, net, stations = cells_behind_uplink([[80e6, 80e6], [60e6] * 3], 120e6)
    a = [s for s in stations if s.startswith("s0")]
    b = [s for s in stations if s.startswith("s1")]
    transfers = [(s, "agg", s, 4 * MB, 0.0) for s in a] + [(s, "agg", s, 2 * MB, 0.0) for s in b]
    out, rates, _ = run(env, net, transfers)
    for s in a:
        assert out[s] == pytest.approx(1.0, rel=1e-12)
        assert rates[s] == pytest.approx(30e6, rel=1e-12)
    for s in b:
        assert out[s] == pytest.approx(0.8, rel=1e-12)
        assert rates[s] == pytest.approx(20e6, rel=1e-12)
    assert net.full_recomputations == 0 and net.reshares == 0
    assert net.nested_updates > 0


def test_an_ended_nest_leaves_nothing_to_the_cyclic_collector():
    """The by-hand case run twice over (a nest built and ended each time): once it has
    ended, its entities and the finished flows their heaps held are freed by reference
    counting, so the cyclic collector finds none of the network's objects (a nest and its
    entities refer to each other; _Nest.release breaks that at its end)."""
    env, net, stations = cells_behind_uplink([[80e6, 80e6], [60e6] * 3], 120e6)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for start in (0.0, 5.0):
            transfers = [(s, "agg", s, (4 if s.startswith("s0") else 2) * MB, start)
                         for s in stations]
            out, _, _ = run(env, net, transfers)
            assert len(out) == len(stations)
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage if type(o).__module__.startswith("netsim")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert net.nested_updates > 0 and net.reshares == 0
    assert left == []


def test_the_same_case_without_nesting_falls_back_to_progressive_filling(monkeypatch):
    """The reference the nests replace: the same arrivals, by progressive filling."""
    without_nesting(monkeypatch)
    env, net, stations = cells_behind_uplink([[80e6, 80e6], [60e6] * 3], 120e6)
    transfers = [(s, "agg", s, (4 if s.startswith("s0") else 2) * MB, 0.0) for s in stations]
    out, _, _ = run(env, net, transfers)
    assert all(out[s] == pytest.approx(1.0 if s.startswith("s0") else 0.8) for s in stations)
    assert net.full_recomputations > 0 and net.nested_updates == 0


def _random_case(rng, kind):
    n_cells = int(rng.integers(2, 6))
    cells = [rng.choice([6e6, 24e6, 54e6, 80e6], size=int(rng.integers(1, 7))).tolist()
             for _ in range(n_cells)]
    largest = sum(max(c) for c in cells)
    env, net, stations = cells_behind_uplink(cells, largest * float(rng.uniform(0.3, 0.9)), kind)
    # wifi: one direction per run (a cell's air time is shared by both directions, so
    # downloads and uploads through one cell do not nest); cellular: both, two nests
    both = kind == "cellular"
    up = rng.random() < 0.5
    transfers = []
    for k, s in enumerate(stations * 2):
        to_agg = rng.random() < 0.5 if both else up
        transfers.append((f"t{k}", *((s, "agg") if to_agg else ("agg", s)),
                          float(rng.uniform(0.2, 3.0)) * MB,
                          float(rng.choice([0.0, rng.uniform(0, 0.5)]))))
    return env, net, transfers


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("kind", ["wifi", "cellular"])
def test_nested_groups_are_the_fluid_replay(seed, kind):
    """Random cells behind a binding uplink, transfers at random starts and sizes: the
    arrivals are the fluid replay's (progressive filling at every event), and the nests
    alone kept the rates (progressive filling never ran)."""
    rng = np.random.default_rng(seed)
    env, net, transfers = _random_case(rng, kind)
    out, _, _ = run(env, net, transfers)
    topo = net.topology
    hops, coefs = [], []
    for _, src, dst, _, _ in transfers:
        route = topo.route(src, dst)
        hops.append(list(route.hops))
        coefs.append(list(route.coefficients(topo.constraint_capacity)))
    last = replay(hops, coefs, np.array([8.0 * t[3] for t in transfers]),
                  np.array([t[4] for t in transfers]), np.array(topo.constraint_capacity))
    np.testing.assert_allclose([out[t[0]] for t in transfers], last, rtol=1e-9)
    assert net.full_recomputations == 0


def test_the_random_cases_do_nest():
    """(The test above must see the nested case: most of its cases bind the uplink.)"""
    nested = 0
    for kind in ("wifi", "cellular"):
        for seed in range(12):
            env, net, transfers = _random_case(np.random.default_rng(seed), kind)
            run(env, net, transfers)
            nested += net.nested_updates > 0
    assert nested >= 18


@pytest.mark.parametrize("seed", range(8))
def test_cancels_and_capacity_changes_match_progressive_filling(seed, monkeypatch):
    """Transfers cancelled and the uplink's capacity changed midway: arrivals, rates and the
    bits left are those of the same network without nesting (progressive filling)."""
    def once():
        rng = np.random.default_rng(seed)
        env, net, transfers = _random_case(rng, "cellular")
        names = [t[0] for t in transfers]
        cancel = (float(rng.uniform(0.05, 0.6)), list(rng.choice(names, 3, replace=False)))
        uplink = net.topology.capacity_bps[0] * float(rng.uniform(0.5, 1.5))
        change = (float(rng.uniform(0.05, 0.6)), [0, 1], [uplink, uplink])
        return net, run(env, net, transfers, cancel, change)

    net, (out, rates, left) = once()
    assert net.full_recomputations == 0 and net.nested_updates > 0
    without_nesting(monkeypatch)
    reference, (ref_out, ref_rates, ref_left) = once()
    assert reference.nested_updates == 0
    assert set(out) == set(ref_out)
    for name, at in ref_out.items():
        assert out[name] == pytest.approx(at, rel=1e-9), name
    for name, rate in ref_rates.items():
        assert rates[name] == pytest.approx(rate, rel=1e-9), name
    for name, bits in ref_left.items():
        assert left[name] == pytest.approx(bits, rel=1e-9, abs=1e-3), name


def test_a_flow_missing_the_outer_link_breaks_the_nesting(monkeypatch):
    """A transfer between stations of two cells whose other flows cross the uplink: those
    cells no longer nest under it, so the network falls back to progressive filling (and
    still gives its arrivals)."""
    env, net, stations = cells_behind_uplink([[80e6, 80e6, 54e6], [60e6] * 3], 100e6)
    transfers = [(s, "agg", s, 2 * MB, 0.0) for s in stations]
    transfers.append(("across", "s0_0", "s1_0", 1 * MB, 0.05))
    out, _, _ = run(env, net, transfers)
    assert net.full_recomputations > 0
    without_nesting(monkeypatch)
    env, reference, _ = cells_behind_uplink([[80e6, 80e6, 54e6], [60e6] * 3], 100e6)
    ref_out, _, _ = run(env, reference, transfers)
    for name, at in ref_out.items():
        assert out[name] == pytest.approx(at, rel=1e-9), name


def test_a_capacity_change_no_flow_crosses_reshares_nothing():
    """Changing the capacity of a link no transfer crosses changes no rate and re-shares
    nothing; changing the uplink they all cross re-shares them (and the nests come back)."""
    env, net, stations = cells_behind_uplink([[80e6, 80e6], [60e6] * 3, [54e6]], 120e6)
    idle = net.topology.route(stations[-1], "agg").hops[0]  # the last station's own link
    transfers = [(s, "agg", s, 4 * MB, 0.0) for s in stations[:-1]]
    seen = {}

    def change():
        yield env.timeout(0.2)
        before = {s: net.rate_bps(f) for s, f in flows.items()}
        net.set_capacities([idle], [1e6])
        seen["idle"] = (net.reshares, before == {s: net.rate_bps(f) for s, f in flows.items()})
        net.set_capacities([0], [100e6])
        seen["uplink"] = net.reshares

    flows = {s: net.send_on(net.topology.route(src, dst), size, lambda _at: None)
             for s, src, dst, size, _ in transfers}
    env.process(change())
    env.run()
    assert seen["idle"] == (0, True)
    assert seen["uplink"] == 1 and net.nested_rebuilds == 1
    assert net.full_recomputations == 0


def _batched(env, net, transfers, cancel=()):
    """Every transfer started at 0 inside one batch (as an epoch's downloads), those named in
    ``cancel`` cancelled inside it; returns the arrivals of the others."""
    out, flows = {}, {}
    with net.batch():
        for name, src, dst, size, _ in transfers:
            route = net.topology.route(src, dst)
            flows[name] = net.send_on(route, size,
                                      lambda at, name=name: out.__setitem__(name, at))
        for name in cancel:
            net.cancel(flows[name])
    env.run()
    return out


@pytest.mark.parametrize("seed", range(8))
def test_a_batch_whose_cells_nest_meanwhile_is_the_fluid_replay(seed):
    """Starts in one batch join the cells' groups at its end, unless the outer link nests
    meanwhile and its cells take them: the arrivals are the fluid replay's either way, also
    with transfers cancelled inside the batch."""
    rng = np.random.default_rng(100 + seed)
    env, net, transfers = _random_case(rng, "wifi")
    cancel = [t[0] for t in transfers[::5]]
    out = _batched(env, net, transfers, cancel)
    kept = [t for t in transfers if t[0] not in cancel]
    topo = net.topology
    routes = [topo.route(src, dst) for _, src, dst, _, _ in kept]
    last = replay([list(r.hops) for r in routes],
                  [list(r.coefficients(topo.constraint_capacity)) for r in routes],
                  np.array([8.0 * t[3] for t in kept]), np.zeros(len(kept)),
                  np.array(topo.constraint_capacity))
    latency = np.array([r.latency_s for r in routes])
    np.testing.assert_allclose([out[t[0]] for t in kept], last + latency, rtol=1e-9)
    assert sorted(out) == sorted(t[0] for t in kept)


def test_batched_starts_enrolled_at_the_end_or_taken_by_a_nest():
    """(The test above must see both: some batches nest, taking the pending starts into
    cells, and their flows finish by the nests' rates.)"""
    nested = 0
    for seed in range(8):
        env, net, transfers = _random_case(np.random.default_rng(100 + seed), "wifi")
        _batched(env, net, transfers)
        nested += net.nested_updates > 0 and net.reshares == 0
    assert nested >= 4


def test_a_nest_that_ends_leaves_no_live_wakeup_behind():
    """Cell B (three stations at 60 Mbit/s, level 20) is capped while A (two at 80, level 40)
    shares the 120 Mbit/s uplink; A's small transfers end at 0.267 s, the uplink turns safe
    and the nest ends with B's members still moving. Its entities go with it: no live entry
    of the wake-up heap refers to one (a stale one would wake the network for nothing), and
    B's members become a group at their level, 20 Mbit/s each, ending at 1.6 s."""
    env, net, stations = cells_behind_uplink([[80e6, 80e6], [60e6] * 3], 120e6)
    a = [s for s in stations if s.startswith("s0")]
    b = [s for s in stations if s.startswith("s1")]
    out = {}
    for s in a + b:
        net.send_on(net.topology.route("agg", s), (1 if s in a else 4) * MB,
                    lambda at, s=s: out.__setitem__(s, at))
    env.run(until=0.5)
    assert net.nested_updates > 0 and not net._nests and len(out) == 2
    live = [obj for _, stamp, obj in net._group_heap if obj.stamp == stamp]
    assert live and all(obj in net._groups.values() for obj in live)
    env.run()
    assert all(out[s] == pytest.approx(8 * MB / 30e6, rel=1e-12) for s in a)
    assert all(out[s] == pytest.approx(32 * MB / 20e6, rel=1e-12) for s in b)
