"""Link directions that can never bind keep no books (netsim.network.neverbind): which ones are
left out, that they count again when that stops holding (a second cell reaching them, a
capacity change), and that every arrival, rate and table is the one full books give."""

import numpy as np
import pandas as pd
import pytest

import netsim
from netsim.network import FlowNetwork
from netsim.network.neverbind import NeverBinding
from tests.test_nested_events import MB, _random_case, cells_behind_uplink, run


def full_books(monkeypatch):
    """Every link direction keeps its books (the reference)."""
    monkeypatch.setattr(NeverBinding, "leaves_out", lambda self, h, medium, ratio, cap: False)


def directions(net: FlowNetwork, a: str, b: str) -> tuple[int, int]:
    """The two directions (constraint indices) of the link between nodes a and b."""
    i = next(k for k, link in enumerate(net.topology.links) if {link.a, link.b} == {a, b})
    return 2 * i, 2 * i + 1


def test_station_links_and_a_backhaul_the_cell_cannot_fill_keep_no_books():
    """Two cells behind a 100 Mbit/s uplink: while their transfers move, a station's own link
    (its load is at most its rate) and a cell's 1 Tbit/s backhaul are crossed by flows but
    keep no books; the uplink, which both cells reach and which binds, keeps its own."""
    env, net, stations = cells_behind_uplink([[80e6, 80e6], [60e6] * 3], 100e6)
    seen = {}

    def look():
        yield env.timeout(0.05)
        for name, (a, b) in {"station": ("s0_0", "ap0"), "backhaul": ("core", "ap0"),
                             "uplink": ("agg", "core")}.items():
            seen[name] = [len(net._link_flows.get(h, ())) for h in directions(net, a, b)]

    env.process(look())
    run(env, net, [(s, s, "agg", 2 * MB, 0.0) for s in stations])
    assert seen["station"] == [0, 0] and seen["backhaul"] == [0, 0]
    assert sum(seen["uplink"]) == len(stations)
    assert net.nested_updates > 0  # (the uplink did bind: the cells nested under it)


def test_a_direction_left_out_counts_again_when_a_second_cell_reaches_it(monkeypatch):
    """The uplink is left out while only cell 0's transfers (80 Mbit/s at most) cross it; when
    cell 1's start, it counts again: cell 0's flows present join its books, it binds, and
    every arrival and rate is the one full books give, bit for bit."""
    transfers = [("a0", "s0_0", "agg", 4 * MB, 0.0), ("a1", "s0_1", "agg", 4 * MB, 0.0)]
    transfers += [(f"b{i}", f"s1_{i}", "agg", 2 * MB, 0.05) for i in range(3)]
    seen = {}

    def case():
        env, net, _ = cells_behind_uplink([[80e6, 80e6], [60e6] * 3], 100e6)
        uplink = directions(net, "agg", "core")

        def look(at, key):
            yield env.timeout(at)
            seen[key] = sorted(len(net._link_flows.get(h, ())) for h in uplink)

        env.process(look(0.01, "before"))
        env.process(look(0.06, "after"))
        return net, run(env, net, transfers)

    net, (out, rates, _) = case()
    assert seen == {"before": [0, 0], "after": [0, 5]}
    assert net.full_recomputations == 0 and net.nested_updates > 0
    full_books(monkeypatch)
    _, (ref_out, ref_rates, _) = case()
    assert out == ref_out and rates == ref_rates


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["wifi", "cellular"])
def test_random_cells_with_cancels_and_a_capacity_change_give_the_full_books_results(
        seed, kind, monkeypatch):
    """Random cells behind a binding uplink, transfers cancelled midway and a station link's
    capacity changed (which ends the leaving-out, counting every direction again): arrivals,
    rates and the bits left are those of full books, bit for bit."""
    def once():
        rng = np.random.default_rng(seed)
        env, net, transfers = _random_case(rng, kind)
        names = [t[0] for t in transfers]
        cancel = (float(rng.uniform(0.05, 0.6)), list(rng.choice(names, 3, replace=False)))
        station = directions(net, "s0_0", "ap0")
        rate = net.topology.capacity_bps[station[0]] * float(rng.uniform(0.5, 1.5))
        change = (float(rng.uniform(0.05, 0.6)), list(station), [rate, rate])
        return net, run(env, net, transfers, cancel, change)

    net, results = once()
    assert not net._never_bind.active  # (the capacity change ended it)
    full_books(monkeypatch)
    _, reference = once()
    assert results == reference


def test_generated_fleet_tables_are_those_of_full_books(monkeypatch):
    """A generated fleet of 400 devices (Wi-Fi and LTE cells, backhauls, an aggregator link)
    on the event path: every table is the one full books give."""
    scenario = {"name": "g400", "seed": 0, "generate": {"n_devices": 400, "seed": 2},
                "model": "resnet18",
                "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": 3}}
    left = netsim.simulate(scenario, "fedavg-all", seed=0, raise_errors=True, fast_epochs=False)
    full_books(monkeypatch)
    full = netsim.simulate(scenario, "fedavg-all", seed=0, raise_errors=True, fast_epochs=False)
    for name in ("epochs", "devices"):
        pd.testing.assert_frame_equal(getattr(left, name).drop(columns=["wall_s"],
                                                               errors="ignore"),
                                      getattr(full, name).drop(columns=["wall_s"],
                                                               errors="ignore"),
                                      check_exact=True)
