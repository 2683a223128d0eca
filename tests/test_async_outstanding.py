"""A client holds at most one outstanding update (FedAsync, FedBuff and FedDES define it so;
docs/async.md): a device whose update waits in the aggregator's buffer is not started again
until that update is aggregated or discarded, and an update's staleness counts the versions
aggregated between its job's download and its aggregation. Both hold on the event path and in
the buffered arrays, which give the same tables to 1e-9, where the aggregator is the
bottleneck and every client is in flight (issue 47's item 6)."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

import netsim
from netsim.policy import Decision
from tests.test_async import LOSS, fleet
from tests.test_capacity_pieces import _assert_same


def slow_aggregator(n: int = 3) -> dict:
    """``n`` identical devices that train 1 s on links that take no time, and an aggregator
    that averages one update in 1 s: every update arrives at about 1 s, and the aggregator
    then takes them one a second."""
    devices = [{"id": "agg", "flop_per_s": 2e6, "memory_bytes": 1e11, "power_busy_w": 10.0,
                "power_idle_w": 1.0}]
    links = []
    for i in range(n):
        devices.append({"id": f"d{i}", "flop_per_s": 1e9, "memory_bytes": 4e9,
                        "power_busy_w": 4.0, "power_idle_w": 1.0, "samples": 100})
        links.append({"a": "agg", "b": f"d{i}", "bandwidth_bps": 1e12, "latency_s": 0.0,
                      "energy_j_per_bit": 0.0})
    return {"name": "slow-aggregator", "seed": 0, "devices": devices, "links": links,
            "aggregator": "agg",
            "model": {"params": 1e6, "bytes_per_param": 1e-6, "train_flop_per_sample": 1e7,
                      "loss": LOSS},
            "training": {"target_loss": 1e-3, "deadline_s": 1e6, "max_epochs": 6}}


@pytest.mark.parametrize("fast", [True, False], ids=["arrays", "events"])
def test_a_device_waits_for_its_update_to_be_aggregated_before_it_starts_again(fast):
    """Three updates land at about 1 s; the aggregator takes one a second. d0's is taken
    first (version 0 -> 1) and d0 starts again from version 1; d1's waits through that
    aggregation (staleness 1), d2's through two (staleness 2). From then on each update is
    taken two aggregations after its download: staleness 2, one job started per aggregation."""
    res = netsim.simulate(slow_aggregator(), "fedasync", seed=0, params={"concurrency": 3},
                          raise_errors=True, fast_epochs=fast)
    ep = res.epochs
    assert ep["started"].tolist() == [3, 1, 1, 1, 1, 1]
    assert [list(x) for x in ep["participant_ids"]] == [["d0", "d1", "d2"], ["d0"], ["d1"],
                                                        ["d2"], ["d0"], ["d1"]]
    assert [list(x) for x in ep["updates_ids"]] == [["d0"], ["d1"], ["d2"], ["d0"], ["d1"],
                                                    ["d2"]]
    assert [list(x) for x in ep["updates_staleness"]] == [[0], [1], [2], [2], [2], [2]]
    np.testing.assert_allclose(ep["end_s"], [2.0, 3.0, 4.0, 5.0, 6.0, 7.0], atol=1e-6)


def test_the_observation_counts_a_waiting_update_as_its_device_busy():
    seen = []

    class Look:
        name = "look"

        def reset(self, scenario, rng):
            pass

        def decide(self, obs):
            ids = obs.devices.ids
            seen.append(({ids[i] for i in np.flatnonzero(obs.busy)}, obs.buffered))
            free = [d for d in ("d0", "d1", "d2") if not obs.busy[obs.devices.index[d]]]
            return Decision(participants={d: 100 for d in free}, buffer_updates=1)

    netsim.simulate(slow_aggregator(), Look(), seed=0, raise_errors=True)
    busy = [b for b, _ in seen]
    assert busy[:3] == [set(), {"d1", "d2"}, {"d0", "d2"}]
    assert [n for _, n in seen[:3]] == [0, 2, 1]


@pytest.mark.parametrize("fast", [True, False], ids=["arrays", "events"])
def test_an_update_that_waits_past_max_staleness_is_discarded_when_the_version_moves(fast):
    """max_staleness 1: d2's update (version 0) waits through two aggregations; as the
    second ends its staleness would be 2, so it is discarded then (the epoch of that
    aggregation records it late, its energy wasted), and d2 starts again."""
    res = netsim.simulate(slow_aggregator(), "fedasync", seed=0,
                          params={"concurrency": 3, "max_staleness": 1}, raise_errors=True,
                          fast_epochs=fast)
    ep = res.epochs
    assert [list(x) for x in ep["updates_ids"]][:2] == [["d0"], ["d1"]]
    assert [list(x) for x in ep["late_ids"]][:2] == [[], ["d2"]]
    assert [list(x) for x in ep["participant_ids"]][:3] == [["d0", "d1", "d2"], ["d0"],
                                                            ["d1", "d2"]]
    assert max(s for x in ep["updates_staleness"] for s in x) <= 1
    # trained 1 s at 4 W, then idle at 1 W until the second aggregation ended at 3 s
    assert ep["energy_wasted_j"].iloc[1] == pytest.approx(4.0 + 2.0, rel=1e-6)


def _outstanding_never_exceeds_one(ep: pd.DataFrame) -> int:
    """Walk the epochs: a device is started at its epoch's start and its job ends (update
    aggregated, discarded or dropped) within an epoch; returns the outstanding jobs left."""
    outstanding: dict[str, int] = {}
    for _, row in ep.iterrows():
        for d in row["participant_ids"]:
            assert not outstanding.get(d), f"{d} started with an update outstanding"
            outstanding[d] = 1
        for col in ("updates_ids", "late_ids", "dropped_ids"):
            for d in row[col]:
                assert outstanding.get(d) == 1, f"{d}'s update resolved twice"
                outstanding[d] = 0
    return sum(outstanding.values())


def bottleneck_fleet(dynamics: dict | None = None) -> dict:
    """:func:`tests.test_async.fleet` with an aggregator that takes 0.5 s an update: with
    every device in flight, updates arrive faster than it aggregates them."""
    sc = fleet(dynamics, n=30)
    sc["generate"]["aggregator_class"] = "sbc"
    sc["model"]["params"] = 1.25e9
    sc["model"]["bytes_per_param"] = 0.01
    sc["training"]["max_epochs"] = 90
    return sc


@pytest.mark.parametrize("dynamics", [None, "churn"])
def test_every_client_in_flight_behind_a_bottleneck_aggregator(dynamics):
    from tests.test_async import CHURN

    sc = bottleneck_fleet(copy.deepcopy(CHURN) if dynamics else None)
    runs = [netsim.simulate(copy.deepcopy(sc), "fedbuff", seed=1,
                            params={"concurrency": 30, "buffer_updates": 2},
                            raise_errors=True, fast_epochs=fast) for fast in (True, False)]
    for res in runs:
        ep = res.epochs
        assert ep["updates_aggregated"].sum() >= 100
        left = _outstanding_never_exceeds_one(ep)
        assert left <= 30
        assert ep["started"].sum() == ep["updates_aggregated"].sum() + ep["late"].sum() \
            + ep["dropped"].sum() + left
    fast, slow = runs
    _assert_same(fast, slow)
    for col in ("updates_ids", "updates_staleness", "dropped_ids", "late_ids"):
        pd.testing.assert_series_equal(fast.epochs[col], slow.epochs[col])
