"""Asynchronous tiers in arrays in a changing world (issue 56 item 5; netsim.epochs
.tiered_arrays on the star's buffered player, netsim.epochs.buffered_arrays) against the event
path (``fast_epochs=False``, the reference): rfl-ha and async-hfl under sessions (a device
leaving mid-job, another between edge rounds), batteries (one emptying mid-job), compute
spread with stragglers, and bandwidth traces on a device link and on a backhaul give the same
epochs, devices and runs tables (numbers to 1e-9; ids, samples and staleness lists equal); so
do random generated fleets with Markov sessions, stragglers and batteries (a world that
waits for someone to come online with tier jobs in flight included); capacities whose states
are not known up front (log-normal links) stay on events."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import netsim
from tests.test_edges_dynamics import _bandwidth_trace, _sessions, tiny
from tests.test_tiers_arrays import assert_same_tables as same_tables
from tests.test_tiers_arrays import generated

POLICIES = {
    "rfl-ha": {"edge_rounds": 2, "buffer_updates": 1},
    "async-hfl": {"edge_rounds": 2, "participants_per_edge": 3, "edge_buffer_updates": 2,
                  "buffer_updates": 1},
}


def assert_same_tables(fast, slow) -> None:
    """:func:`tests.test_tiers_arrays.assert_same_tables`, the air time by medium (JSON)
    parsed: the ledger books the same transfers in other batches, so its numbers agree to
    1e-9, not in their last digit."""
    same_tables(fast, slow, parsed=("airtime_by_medium_s",))


def both(built_worlds, data: dict, policy: str, params: dict, seed: int = 1):
    """The run in arrays and as events, both worlds' paths checked."""
    fast = netsim.simulate(copy.deepcopy(data), policy, seed=seed, params=params,
                           raise_errors=True)
    arrays = built_worlds[-1]
    slow = netsim.simulate(copy.deepcopy(data), policy, seed=seed, params=params,
                           raise_errors=True, fast_epochs=False)
    events = built_worlds[-1]
    assert arrays.epochs_by_path == {"arrays": len(fast.epochs), "events": 0}
    assert events.epochs_by_path == {"arrays": 0, "events": len(slow.epochs)}
    assert_same_tables(fast, slow)
    return fast, arrays


def _worlds(tmp_path: Path) -> dict[str, dict]:
    trace = {"model": "trace", "trace": _bandwidth_trace(tmp_path)}
    device_link = tmp_path / "device-link.csv"  # d0's link: halved from 0.3 s, back at 3 s
    pd.DataFrame([("d0", "gw1", 0.0, 1e7, 1e7), ("d0", "gw1", 0.3, 5e6, 5e6),
                  ("d0", "gw1", 3.0, 1e7, 1e7)],
                 columns=["a", "b", "time_s", "bandwidth_up_bps", "bandwidth_down_bps"]
                 ).to_csv(device_link, index=False)
    return {
        "sessions": tiny({"availability": _sessions(tmp_path, [
            ("d0", 0.0, 2.0), ("d2", 0.0, 3.5), ("d2", 12.0, 1e6)])}, max_epochs=6),
        "batteries": tiny({"compute": {"spread": 0.0}}, batteries={"d3": 5.0, "d4": 60.0},
                          max_epochs=6),
        "stragglers": tiny({"compute": {"spread": 0.3, "straggler_probability": 0.3}},
                           max_epochs=6),
        "device-link-trace": tiny({"bandwidth": {"model": "trace",
                                                 "trace": str(device_link)}}, max_epochs=6),
        "backhaul-trace-sessions-batteries": tiny(
            {"availability": _sessions(tmp_path, [("d0", 0.0, 2.0), ("d2", 0.0, 3.5),
                                                  ("d2", 12.0, 1e6)]),
             "bandwidth": trace}, batteries={"d3": 5.0, "d4": 400.0}, max_epochs=6),
    }


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("world", ["sessions", "batteries", "stragglers", "device-link-trace",
                                   "backhaul-trace-sessions-batteries"])
def test_tiers_in_arrays_match_the_events_in_a_changing_world(tmp_path, built_worlds, policy,
                                                              world):
    fast, arrays = both(built_worlds, _worlds(tmp_path)[world], policy, POLICIES[policy])
    dev = fast.devices.set_index("device")
    if world in ("sessions", "backhaul-trace-sessions-batteries"):  # (d0 leaves mid-job)
        assert dev.loc["d0", "dropouts"] == 1 and fast.epochs["dropped"].sum() >= 1
    if world in ("batteries", "backhaul-trace-sessions-batteries"):  # (d3 empties mid-job)
        assert dev.loc["d3", "dropouts"] == 1
        assert dev.loc["d3", "battery_end_j"] == pytest.approx(0.0, abs=1e-9)
    if world.endswith("trace") or world.startswith("backhaul"):
        assert arrays.tiered().player.capacity_changes > 0  # (flows re-shared at changes)


@pytest.mark.parametrize("seed", range(3))
def test_random_changing_generated_tiers_in_arrays_match_the_events(built_worlds, seed):
    rng = np.random.default_rng(100 + seed)
    sc = generated(n=int(rng.integers(40, 100)), per_cell=int(rng.integers(4, 14)),
                   seed=int(rng.integers(0, 100)), shared_media=bool(rng.integers(0, 2)),
                   max_epochs=int(rng.integers(5, 10)))
    sc["dynamics"] = {
        "availability": {"model": "markov", "mean_online_s": float(rng.uniform(2.0, 8.0)),
                         "mean_offline_s": float(rng.uniform(1.0, 6.0))},
        "compute": {"spread": 0.3, "straggler_probability": 0.1}}
    policy = ("rfl-ha", "async-hfl", "async-hfl")[seed]
    params = {"edge_rounds": int(rng.integers(1, 4)),
              "participants_per_edge": int(rng.integers(1, 6)),
              "buffer_updates": int(rng.integers(1, 4))}
    if policy == "async-hfl":
        params["edge_buffer_updates"] = int(rng.integers(1, 4))
    fast, _ = both(built_worlds, sc, policy, params, seed=seed)
    assert fast.epochs["dropped"].sum() > 0  # (sessions end mid-job)


@pytest.mark.parametrize("off_s", [10.7, 20.0])
def test_a_world_that_waits_for_someone_with_tier_jobs_in_flight(tmp_path, built_worlds,
                                                                 off_s):
    """Everyone is offline from ``off_s`` for 4 s but d0, back for 1 s at ``off_s + 1`` with a
    battery too low to volunteer: the world waits (twice) while edge models and the cloud's
    downloads are on the backhauls, whose capacities change meanwhile (a trace); the wait
    guard plays them as the events do (the capacities the world sets at a wait's end
    re-share them then)."""
    devices = ("d0", "d1", "d2", "d3", "d4", "d5")
    rows = [(d, 0.0, off_s) for d in devices] + [(d, off_s + 4.0, 1e6) for d in devices]
    rows.append(("d0", off_s + 1.0, off_s + 2.0))
    path = tmp_path / "online.csv"
    pd.DataFrame(rows, columns=["device", "start_s", "end_s"]).sort_values(
        ["device", "start_s"]).to_csv(path, index=False)
    trace = tmp_path / "backhauls.csv"
    pd.DataFrame([("gw1", "cloud", 0.0, 5e7, 5e7), ("gw2", "cloud", 0.0, 4e7, 4e7),
                  ("gw2", "cloud", off_s + 0.01, 1e7, 1e7),
                  ("gw1", "cloud", off_s + 0.5, 1e7, 2e7),
                  ("gw1", "cloud", off_s + 3.0, 3e7, 3e7)],
                 columns=["a", "b", "time_s", "bandwidth_up_bps", "bandwidth_down_bps"]
                 ).to_csv(trace, index=False)
    data = tiny({"availability": {"model": "trace", "trace": str(path), "repeat": False},
                 "bandwidth": {"model": "trace", "trace": str(trace)}},
                batteries={"d0": 1000.0}, max_epochs=6)
    next(d for d in data["devices"] if d["id"] == "d0")["battery_min_fraction"] = 0.9999
    for policy, params in POLICIES.items():
        fast, _ = both(built_worlds, data, policy, params)
        assert (fast.epochs["start_s"] == off_s + 4.0).any()  # (after the wait)


def test_lognormal_links_stay_on_events(built_worlds):
    data = tiny({"bandwidth": {"model": "lognormal", "sigma": 0.4, "correlation_s": 10,
                               "step_s": 0.5}})
    r = netsim.simulate(data, "rfl-ha", seed=0, params=POLICIES["rfl-ha"], raise_errors=True)
    world = built_worlds[-1]
    assert world.tiered().player is None
    assert world.epochs_by_path == {"arrays": 0, "events": len(r.epochs)}
