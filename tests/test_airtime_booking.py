"""Air time is booked at the station rates in force when a transfer starts (docs/wireless.md,
"Limits"): under a changing bandwidth a transfer started before a station's rate changes books
its bits over the old rate, one started after over the new one, whenever the books are read;
a cancelled transfer takes back the air time of the bits it did not send at its start's rates.
The array path (netsim.epochs.arrays.book) books uploads that start after a change at the
rates of their start too, so events and arrays give the same air time on changing worlds."""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
import pytest

import netsim
from netsim import engine
from netsim.dynamics.traces import write_bandwidth_trace
from netsim.epochs import guarded
from netsim.scenario.loading import load_scenario, scenario_data
from netsim.simclock import fire_after
from tests.test_capacity_pieces import Everyone, _airtime
from tests.test_media import cell_scenario

RATES = (8e7, 8e7, 2.4e7, 5.4e7)  # cell_scenario's station rates (bit/s)


def world(**kw) -> engine.World:
    sc = netsim.Scenario.model_validate(cell_scenario(**kw))
    return engine.World(engine.resolve_scenario(sc, 0), np.random.default_rng(0))


def _station_link(w: engine.World, src: str, dst: str):
    """The route src -> dst, its one (station, directed link) of air time, the link's rate."""
    route = w.network.topology.route(src, dst)
    assert len(route.airtime) == 1
    station, d = route.airtime[0]
    return route, station, d, w.network.capacity_bps[d]


# -- the flow network: a station's rate halves at a known instant ----------------------------
@pytest.mark.parametrize("kind", ["wifi", "cellular"])
def test_a_transfer_books_its_air_time_at_the_rate_of_its_start(kind):
    """phone-0 uploads twice: one transfer before its rate halves (at 1 s, while it moves),
    one after. The first books bits / r_old, the second bits / r_new, though the books are
    read at the end (both once under r_new)."""
    w = world(kind=kind)
    net, env = w.network, w.env
    route, station, d, r_old = _station_link(w, "phone-0", "server")
    assert r_old == RATES[0]
    r_new = r_old / 2.0
    size = 2e7  # bytes: 2 s alone at r_old, still moving at the change
    bits = 8.0 * size
    arrived = []
    net.send_on(route, size, arrived.append)
    fire_after(env, 1.0, lambda _e: net.set_capacities([d], [r_new]))
    fire_after(env, 1.5, lambda _e: net.send_on(route, size, arrived.append))
    env.run()
    assert len(arrived) == 2 and net.active_flows == 0
    medium = [m.id for m in w.topology.media].index("cell-1")
    want = bits / r_old + bits / r_new
    assert net.ledger.airtime_s[station] == pytest.approx(want, rel=1e-12)
    assert net.ledger.airtime_by_medium_s[medium] == pytest.approx(want, rel=1e-12)
    assert net.ledger.airtime_s.sum() == pytest.approx(want, rel=1e-12)  # (no other station)


def test_books_read_between_changes_keep_each_transfers_start_rate():
    """Readings before and after each change see the same booked air time for a transfer
    (nothing re-priced at a reading), and a rate restored later changes nothing booked."""
    w = world()
    net, env = w.network, w.env
    route, station, d, r0 = _station_link(w, "phone-2", "server")
    bits = 8.0 * 1e6
    readings = []
    for k, rate in enumerate([r0, r0 / 2.0, r0 * 3.0, r0]):
        if k:
            net.set_capacities([d], [rate])
        net.send_on(route, 1e6, lambda _t: None)
        readings.append(float(net.ledger.airtime_s[station]))
        env.run()
    expect = np.cumsum([bits / r for r in (r0, r0 / 2.0, r0 * 3.0, r0)])
    np.testing.assert_allclose(readings, expect, rtol=1e-12)
    assert net.ledger.airtime_s[station] == pytest.approx(expect[-1], rel=1e-12)


def test_a_cancelled_transfer_takes_back_its_unsent_bits_at_its_start_rate():
    """phone-1's upload starts under r_old, its rate halves at 1 s and it is cancelled at 1.5 s
    (as netsim.dynamics.epoch does: cancel, then un-book the bits not sent): its air time is
    the bits it sent over r_old."""
    w = world()
    net, env = w.network, w.env
    route, station, d, r_old = _station_link(w, "phone-1", "server")
    size = 1e8  # bytes: far from done at 1.5 s
    flow = net.send_on(route, size, lambda _t: pytest.fail("cancelled"))
    fire_after(env, 1.0, lambda _e: net.set_capacities([d], [r_old / 2.0]))
    left = []

    def stop(_e):
        left.append(net.cancel(flow))
        net.book([route.id], [-left[0] / 8.0])

    fire_after(env, 1.5, stop)
    env.run()
    sent = 8.0 * size - left[0]
    assert 0.0 < sent < 8.0 * size
    assert net.ledger.airtime_s[station] == pytest.approx(sent / r_old, rel=1e-12)
    assert net.ledger.bytes_sent.sum() == pytest.approx(sent / 8.0, rel=1e-12)
    assert not net._start_rates  # (nothing kept for a flow gone)


# -- epochs: arrays and events --------------------------------------------------------------
@pytest.fixture
def plans(monkeypatch):
    """Per epoch of a changing world that could play in arrays: (capacity changes inside
    its phases, whether the capacities change between its start and its last arrival);
    None where it needed the events."""
    seen = []
    original = guarded._arrays_plan

    def spy(world, *args, **kwargs):
        plan = original(world, *args, **kwargs)
        if plan is None:
            seen.append(None)
        else:
            start = world.env.now
            changed = guarded._pieces(world).next_change_s(start) < float(plan.close_s)
            seen.append((plan.capacity_changes, bool(changed)))
        return plan

    monkeypatch.setattr(guarded, "_arrays_plan", spy)
    return seen


def _both(scenario, policy=None, seed=0, params=None):
    runs = []
    for fast_epochs in (True, False):
        runs.append(netsim.simulate(copy.deepcopy(scenario),
                                    Everyone() if policy is None else policy, seed=seed,
                                    params=params, raise_errors=True, fast_epochs=fast_epochs))
    return runs


def _assert_same_airtime(fast, slow):
    for a, b in zip(_airtime(fast.epochs), _airtime(slow.epochs), strict=True):
        assert set(a) == set(b)
        np.testing.assert_allclose([a[k] for k in sorted(a)], [b[k] for k in sorted(b)],
                                   rtol=1e-9)
    np.testing.assert_allclose(fast.devices["airtime_s"].to_numpy(float),
                               slow.devices["airtime_s"].to_numpy(float), rtol=1e-9, atol=1e-12)


def test_a_rate_halved_while_the_phone_trains_books_the_upload_at_the_new_rate(tmp_path, plans):
    """One phone in a Wi-Fi cell; its link's rate halves while it trains (no transfer
    moving): the download's air time at the old rate, the upload's at the new one, in arrays
    and as events."""
    s = cell_scenario(rates=(8e7,))
    s["model"] = {"params": 1e7, "bytes_per_param": 1, "train_flop_per_sample": 1e8,
                  "variants": [{"name": "full", "params_fraction": 1, "flop_fraction": 1}]}
    s["training"] = {"target_loss": 1e-9, "deadline_s": 1e9, "max_epochs": 1}
    bits = 8e7
    # download about 1 s (+ latency), training 600 x 1e8 / 2e10 = 3 s: the change at 2.5 s
    path = tmp_path / "bw.csv"
    write_bandwidth_trace(pd.DataFrame({"a": ["phone-0"], "b": ["ap"], "time_s": [2.5],
                                        "bandwidth_bps": [4e7]}), path)
    s["dynamics"] = {"bandwidth": {"model": "trace", "trace": str(path), "repeat": False}}
    fast, slow = _both(s)
    assert plans[0] == (0, True)  # arrays, the change while it trains
    want = bits / 8e7 + bits / 4e7
    for res in (fast, slow):
        dev = res.devices.set_index("device")
        assert dev.loc["phone-0", "airtime_s"] == pytest.approx(want, rel=1e-12)
        assert _airtime(res.epochs)[0] == {"cell-1": pytest.approx(want, rel=1e-12)}
    assert fast.epochs.iloc[0]["end_s"] == pytest.approx(slow.epochs.iloc[0]["end_s"], rel=1e-12)


def _changing(data, step_s, sigma=0.6):
    data = copy.deepcopy(data)
    data["dynamics"] = {"availability": {"model": "bernoulli"},
                        "bandwidth": {"model": "lognormal", "sigma": sigma,
                                      "correlation_s": 3 * step_s, "step_s": step_s}}
    return data


@pytest.mark.parametrize("kind", ["wifi", "cellular"])
@pytest.mark.parametrize(("when", "step_s"), [("in transfers", 0.7), ("in transfers", 3.0),
                                              ("while training", 7.0)])
def test_a_cell_whose_rates_change_books_the_same_air_time_on_both_paths(plans, kind, when,
                                                                        step_s):
    """A cell whose station rates change every ``step_s``: inside transfers (uploads start
    in different pieces: the phones train at different speeds) or, with equal phones, short
    transfers and long training, only while they train. Air time per epoch and medium and
    per device agree to 1e-9."""
    data = cell_scenario(kind)
    data["training"]["max_epochs"] = 8
    if when == "in transfers":
        data["model"].update(params=1e6, train_flop_per_sample=1e9)
    else:  # (transfers of about 0.05 s, training of 30 s)
        data["model"].update(params=1e5, train_flop_per_sample=1e9)
        for dev in data["devices"][1:]:
            dev["flop_per_s"] = 2e10
    fast, slow = _both(_changing(data, step_s))
    played = [p for p in plans[:len(fast.epochs)] if p is not None]
    assert any(changed for _, changed in played)
    if when == "while training":
        assert any(p == (0, True) for p in played)
    else:
        assert any(n > 0 for n, _ in played)
    _assert_same_airtime(fast, slow)


@pytest.mark.parametrize("seed", range(4))
def test_changing_worlds_with_media_book_the_same_air_time_on_both_paths(plans, seed):
    """Generated networks of Wi-Fi cells and the churn experiment's world (sessions,
    capacities and compute all change): events and arrays agree on every epoch's air time,
    those whose only change falls while everyone trains included."""
    if seed < 2:
        data = _changing({"name": "gen", "seed": seed, "model": "mlp-digits",
                          "generate": {"n_devices": 40, "devices_per_cell": 8,
                                       "seed": seed + 3},
                          "training": {"target_loss": 1e-9, "deadline_s": 1e12,
                                       "max_epochs": 6}}, 0.01)
        fast, slow = _both(load_scenario(data))
    else:
        data = scenario_data("experiments/dynamics/churn.yaml")
        data["training"]["max_epochs"] = 12
        data["seed"] = seed
        policy, params = ("fedavg-all", {}) if seed % 2 else ("random-k", {"k": 10})
        fast, slow = _both(data, policy, seed, params)
    assert any(p is not None for p in plans[:len(fast.epochs)])
    assert sum(fast.devices["airtime_s"]) > 0.0
    _assert_same_airtime(fast, slow)


def test_the_golden_churn_epoch_that_changes_while_everyone_trains_agrees():
    """The golden case churn/random-k/0 has an array epoch whose only capacity change falls
    while everyone trains: its air time is now the events' (it was booked at the rates of
    the epoch's start in arrays, of its end as events)."""
    from tests.golden_tables import _cases

    sc, pol, seed, params = _cases()["churn/random-k/0"]
    fast, slow = (netsim.simulate(copy.deepcopy(sc), pol, seed=seed, params=params,
                                  fast_epochs=f) for f in (True, False))
    _assert_same_airtime(fast, slow)
    assert math.isclose(fast.devices["airtime_s"].sum(), slow.devices["airtime_s"].sum(),
                        rel_tol=1e-9)
