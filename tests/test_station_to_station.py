"""A transfer between two stations of one cell crosses the cell's medium twice (up to the
access point, down again): its bits take air time at both station rates. The flow network
counts that constraint once with the two coefficients summed (netsim.network.topology.Route);
before, such a transfer (a model-parallel cluster's activations between two phones of one
Wi-Fi cell) crashed when it ended."""

from __future__ import annotations

import numpy as np
import pytest

import netsim
from netsim import engine
from netsim.network.sharing import progressive_filling
from tests.test_media import cell_scenario

RATES = (8e7, 8e7, 2.4e7, 5.4e7)  # cell_scenario's station rates (bit/s)


def world(**kw) -> engine.World:
    sc = netsim.Scenario.model_validate(cell_scenario(**kw))
    return engine.World(engine.resolve_scenario(sc, 0), np.random.default_rng(0))


@pytest.mark.parametrize("kind", ["wifi", "cellular"])
def test_alone_in_its_cell_it_takes_its_air_time_at_both_rates(kind):
    w = world(kind=kind)
    size = 2.5e6  # bytes
    route = w.network.topology.route("phone-1", "phone-2")
    arrived = w.network.transfer("phone-1", "phone-2", size)
    w.env.run(arrived)
    bits = 8.0 * size
    if kind == "wifi":  # one air-time budget: the two crossings share it
        expect = bits / RATES[1] + bits / RATES[2]
    else:  # cellular: uplink and downlink are separate budgets, each crossed once
        expect = bits / min(RATES[1], RATES[2])
    assert w.env.now == pytest.approx(expect + route.latency_s, rel=1e-12)
    assert route.bottleneck_bps == pytest.approx(bits / expect, rel=1e-12)
    assert w.network.active_flows == 0


def test_rates_beside_other_transfers_are_the_progressive_filling_of_every_crossing():
    """Transfers station to station and station to server at once: the network's rates are
    the reference progressive filling over the routes as crossed (a medium twice, with its
    coefficient at each crossing)."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        w = world(backhaul=str(rng.choice(["1 Gbit/s", "60 Mbit/s"])))
        net, topo = w.network, w.network.topology
        pairs = []
        for _ in range(int(rng.integers(2, 7))):
            a, b = rng.choice(4, size=2, replace=False)
            dst = f"phone-{b}" if rng.random() < 0.6 else "server"
            pairs.append((f"phone-{a}", dst))
        flows = []
        with net.batch():
            for src, dst in pairs:
                flows.append(net.send_on(topo.route(src, dst), float(rng.uniform(1e5, 1e6)),
                                         lambda _t: None))
        while w.env.peek() == w.env.now:  # (a re-share due at this instant)
            w.env.step()
        cap = net.capacity_bps
        routes = [topo.route(src, dst) for src, dst in pairs]
        want = progressive_filling(
            [r.hops for r in routes], cap,
            [tuple(1.0 if q < 0 else 1.0 / cap[q] for q in r.rate_refs) or None
             for r in routes])
        got = [net.rate_bps(f) for f in flows]
        np.testing.assert_allclose(got, want, rtol=1e-9)
        w.env.run()
        assert net.active_flows == 0
