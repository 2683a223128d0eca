"""Asynchronous tiers in arrays (netsim.epochs.tiered_arrays) against the event path
(``fast_epochs=False``, the reference): rfl-ha and async-hfl on small explicit fleets and
generated ones, with several edge rounds, buffer sizes (the cloud waiting for every edge
included), selections, throughput caps, re-association, staleness bounds and a deadline, give
the same epochs, devices and runs tables (numbers to 1e-9; ids, samples and staleness lists
equal; lists of times to 1e-9); worlds the array path cannot play stay on events."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest

import netsim
from tests.test_hierarchy import _fleet, tiny


def generated(n: int = 120, per_cell: int = 12, seed: int = 5, shared_media: bool = True,
              metro_bps: float = 1e10, max_epochs: int = 12, deadline_s: float = 1e6) -> dict:
    """A generated fleet with an edge on every cell (a device's routes to its edge cross its
    access link or its cell's medium only) behind a metro link they cannot fill."""
    return {"name": "tiers-arrays", "seed": 0,
            "generate": {"n_devices": n, "devices_per_cell": per_cell, "seed": seed,
                         "access": {"wifi": 0.6, "lte": 0.4}, "shared_media": shared_media,
                         "edges": {"cells_per_edge": 1, "backhaul_bps": 5e7,
                                   "metro_bps": metro_bps}},
            "model": "small-cnn",
            "training": {"target_loss": 0.01, "deadline_s": deadline_s,
                         "max_epochs": max_epochs}}



def small(shared_cloud_bps: float | None = None) -> dict:
    """:func:`tests.test_hierarchy.tiny` (two edges, five devices) for 10 epochs."""
    sc = tiny(shared_cloud_bps)
    sc["training"]["max_epochs"] = 10
    return sc


def _list_equal(a: pd.Series, b: pd.Series) -> None:
    """Equal lists; lists of floats (times) to 1e-9."""
    for x, y in zip(a, b, strict=True):
        if isinstance(x, list) and x and isinstance(x[0], float):
            np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)
        else:
            assert x == y


def assert_same_tables(fast, slow, parsed: tuple[str, ...] = ()) -> None:
    """The epochs, devices and runs tables equal: numbers to 1e-9, lists of ids, samples and
    staleness exactly (lists of times to 1e-9); the JSON columns named in ``parsed``
    compared parsed, their numbers to 1e-9."""
    for table in ("epochs", "devices", "runs"):
        a, b = getattr(fast, table), getattr(slow, table)
        assert list(a.columns) == list(b.columns) and len(a) == len(b)
        for col in a.columns:
            if "wall" in col:
                continue
            x, y = a[col], b[col]
            if col in parsed:
                for p, q in zip(x, y, strict=True):
                    p, q = json.loads(p), json.loads(q)
                    assert p.keys() == q.keys(), f"{table}.{col}"
                    np.testing.assert_allclose([p[k] for k in p], [q[k] for k in p],
                                               rtol=1e-9, atol=1e-12)
            elif pd.api.types.is_bool_dtype(x) or not pd.api.types.is_numeric_dtype(x):
                if x.dtype == object:
                    _list_equal(x, y)
                else:
                    pd.testing.assert_series_equal(x, y)
            else:
                np.testing.assert_allclose(x.to_numpy(float), y.to_numpy(float), rtol=1e-9,
                                           atol=1e-12, err_msg=f"{table}.{col}")


def both(built_worlds, sc: dict, policy: str, params: dict, seed: int = 1):
    fast = netsim.simulate(copy.deepcopy(sc), policy, seed=seed, params=params,
                           raise_errors=True)
    slow = netsim.simulate(copy.deepcopy(sc), policy, seed=seed, params=params,
                           raise_errors=True, fast_epochs=False)
    return fast, slow, built_worlds[-2], built_worlds[-1]


CASES = {
    "rfl-ha/cloud-waits-for-every-edge": (small(), "rfl-ha",
                                          {"edge_rounds": 1, "buffer_updates": 2}),
    "rfl-ha/three-edge-rounds": (small(), "rfl-ha", {"edge_rounds": 3, "buffer_updates": 1}),
    "rfl-ha/shared-cloud-link": (small(3e7), "rfl-ha",
                                 {"edge_rounds": 2, "buffer_updates": 1}),
    "async-hfl/small": (small(), "async-hfl", {"edge_rounds": 2, "edge_buffer_updates": 1,
                                              "participants_per_edge": 3}),
    "rfl-ha/generated": (generated(), "rfl-ha",
                         {"edge_rounds": 2, "participants_per_edge": 4, "buffer_updates": 2}),
    "rfl-ha/generated-sync-cloud": (generated(), "rfl-ha",
                                    {"edge_rounds": 2, "buffer_updates": 10}),
    "async-hfl/generated": (generated(), "async-hfl",
                            {"edge_rounds": 3, "participants_per_edge": 5,
                             "edge_buffer_updates": 2, "buffer_updates": 2}),
    "async-hfl/random-stale": (generated(), "async-hfl",
                               {"edge_rounds": 2, "participants_per_edge": 6,
                                "edge_buffer_updates": 3, "buffer_updates": 1,
                                "selection": "random", "max_staleness": 1}),
    "async-hfl/throughput-cap-reassociate": (
        generated(), "async-hfl", {"edge_rounds": 2, "participants_per_edge": 8,
                                   "edge_buffer_updates": 2, "buffer_updates": 3,
                                   "throughput_cap_bps": 3e6, "reassociate_every": 3}),
    "async-hfl/private-links": (generated(shared_media=False, per_cell=20), "async-hfl",
                                {"edge_rounds": 4, "participants_per_edge": 10,
                                 "edge_buffer_updates": 4, "buffer_updates": 2}),
    "rfl-ha/deadline": (generated(deadline_s=15.0, max_epochs=1000), "rfl-ha",
                        {"edge_rounds": 3, "participants_per_edge": 6, "buffer_updates": 1}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_asynchronous_tiers_in_arrays_match_the_events(case, built_worlds):
    sc, policy, params = CASES[case]
    fast, slow, arrays, events = both(built_worlds, sc, policy, params)
    assert arrays.epochs_by_path == {"arrays": len(fast.epochs), "events": 0}
    assert events.epochs_by_path == {"arrays": 0, "events": len(slow.epochs)}
    assert len(fast.epochs) > 3
    assert_same_tables(fast, slow)
    e = fast.epochs
    if case.endswith("deadline"):  # edge and device jobs in flight at the deadline: cut
        assert fast.runs["status"].iloc[0] == "deadline" and e["in_flight"].iloc[-1] > 0
    if case.endswith("stale"):  # edge models staler than allowed: discarded
        assert e["late"].sum() > 0
    if case == "async-hfl/generated":  # stale at both tiers
        assert (e["edge_staleness_max"] > 0).any()
    assert (e["staleness_max"] > 0).any() or "waits" in case or "sync" in case


@pytest.mark.parametrize("seed", range(4))
def test_random_generated_tiers_in_arrays_match_the_events(seed, built_worlds):
    rng = np.random.default_rng(seed)
    sc = generated(n=int(rng.integers(40, 160)), per_cell=int(rng.integers(4, 20)),
                   seed=int(rng.integers(0, 100)), shared_media=bool(rng.integers(0, 2)),
                   max_epochs=int(rng.integers(6, 14)))
    policy = ("rfl-ha", "async-hfl")[seed % 2]
    params = {"edge_rounds": int(rng.integers(1, 4)),
              "participants_per_edge": int(rng.integers(1, 8)),
              "buffer_updates": int(rng.integers(1, 4))}
    if policy == "async-hfl":
        params.update(edge_buffer_updates=int(rng.integers(1, 5)),
                      selection=("utility", "random")[int(rng.integers(0, 2))])
    fast, slow, arrays, _ = both(built_worlds, sc, policy, params, seed=seed)
    assert arrays.epochs_by_path["events"] == 0 and arrays.epochs_by_path["arrays"] > 0
    assert_same_tables(fast, slow)


def test_routes_that_cross_two_constraints_that_can_saturate_stay_on_events(built_worlds):
    # two cells per edge: the second cell's devices reach their edge over their cell's
    # backhaul too, and the edges' models share a metro link they can fill
    sc = _fleet()
    sc["training"]["max_epochs"] = 4
    params = {"edge_rounds": 2, "participants_per_edge": 4, "buffer_updates": 2}
    fast, slow, events, reference = both(built_worlds, sc, "rfl-ha", params)
    assert events.tiered().player is None and reference.tiered().player is None
    assert events.epochs_by_path == {"arrays": 0, "events": 4}
    assert_same_tables(fast, slow)


def test_links_that_change_without_known_states_and_the_reference_stay_on_events(
        built_worlds):
    """Log-normal bandwidth (capacities with no states known up front: the star's arrays do
    not play it either) and ``fast_epochs=False`` stay on events; a changing world the
    star's arrays play is tests/test_tiers_arrays_dynamics.py's."""
    sc = tiny()
    sc["dynamics"] = {"bandwidth": {"model": "lognormal", "sigma": 0.4, "correlation_s": 10,
                                    "step_s": 0.5}}
    netsim.simulate(sc, "rfl-ha", seed=0, params={"edge_rounds": 2, "buffer_updates": 1},
                    raise_errors=True)
    world = built_worlds[-1]
    assert world.tiered().player is None and world.epochs_by_path["arrays"] == 0
    netsim.simulate(tiny(), "rfl-ha", seed=0, params={"edge_rounds": 2, "buffer_updates": 1},
                    raise_errors=True, fast_epochs=False)
    assert built_worlds[-1].tiered().player is None
