"""The per-run check of buffered arrays (:meth:`BufferedPlayer.of`: can the run's buffered
epochs play in arrays?) and :func:`can_bind` read in blocks, against the computation they
replace (kept here as the reference, as it stood before 0.6.0's blocks): the same constraints
that can bind, bit for bit (the sums add the same terms in the same order: knife-edge
capacities included), and the same decision, binding constraint and coefficient per route on
generated fleets and hand-built topologies that go either way."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netsim
from netsim import engine
from netsim.epochs.buffered_arrays import BufferedPlayer, can_play
from netsim.fastepoch import hop_coefficients
from netsim.network.sharing import CAPACITY_TOLERANCE, _inner, can_bind, can_bind_blocks
from tests.test_media import cell_scenario


# -- the reference: the check as it read every route at once ------------------------------
def reference_can_bind(owner, hops, coef, cap_bps, capacity, passes=4):
    """can_bind before it read hops in blocks (sorted: np.unique, np.lexsort)."""
    crossed, local = np.unique(hops, return_inverse=True)
    out = np.zeros(len(capacity), dtype=bool)
    out[crossed] = _reference(owner, local.astype(np.intp), coef, cap_bps,
                              np.asarray(capacity, dtype=float)[crossed], passes)
    return out


def _reference(owner, hops, coef, cap_bps, capacity, passes):
    n_constraints = len(capacity)
    a = np.ones(len(hops)) if coef is None else coef
    load = a * cap_bps[owner]
    limit = capacity * (1.0 + CAPACITY_TOLERANCE)
    binding = np.bincount(hops, weights=load, minlength=n_constraints) > limit
    n_flows = np.bincount(hops, minlength=n_constraints)
    for _ in range(passes):
        hit = binding[hops]
        per_flow = np.bincount(owner[hit], minlength=len(cap_bps))
        if not len(per_flow) or per_flow.max() <= 1:
            break
        at = np.flatnonzero(hit)
        o, h = owner[at], hops[at]
        order = np.lexsort((h, capacity[h] / a[at], n_flows[h], o))
        first = order[np.concatenate([[True], o[order][1:] != o[order][:-1]])]
        inner = np.full(len(cap_bps), -1, dtype=np.intp)
        inner[o[first]] = h[first]
        own = hit & (inner[owner] == hops)
        inner_coef = np.zeros(len(cap_bps))
        inner_coef[owner[own]] = a[own]
        new_load = np.bincount(hops[own], weights=load[own], minlength=n_constraints)
        via = hit & ~own
        if via.any():
            c, g = hops[via], inner[owner[via]]
            pair = c.astype(np.int64) * n_constraints + g
            pairs, at = np.unique(pair, return_inverse=True)
            total = np.bincount(at, weights=load[via])
            ratio = np.zeros(len(pairs))
            np.maximum.at(ratio, at, a[via] / inner_coef[owner[via]])
            bound = np.minimum(total, capacity[pairs % n_constraints] * ratio)
            new_load += np.bincount(pairs // n_constraints, weights=bound,
                                    minlength=n_constraints)
        cleared = binding & (new_load <= limit)
        if not cleared.any():
            break
        binding &= ~cleared
    return binding


def reference_check(world):
    """BufferedPlayer.of's decision as it read every route at once: None (events), or per
    route (downloads, then uploads) the constraint that can bind (-1: none) and its
    coefficient."""
    down, up, capacity, _ = world.static_tables()
    n = len(down.route_id)
    rows = np.arange(n)
    (o_down, h_down, r_down), (o_up, h_up, r_up) = down.hops_of(rows), up.hops_of(rows)
    owner = np.concatenate([o_down, o_up + n])
    hops = np.concatenate([h_down, h_up])
    refs = np.concatenate([r_down, r_up])
    coef = np.where(refs < 0, 1.0, 1.0 / capacity[np.maximum(refs, 0)])
    caps = np.concatenate([down.cap_bps, up.cap_bps])
    binding = reference_can_bind(owner, hops, coef, caps, capacity)
    hit = binding[hops]
    per_flow = np.bincount(owner[hit], minlength=2 * n)
    if len(per_flow) and per_flow.max() > 1:
        return None
    onset = world.devices.onset_flows
    if onset is not None and len(hops):
        device = owner % n
        for m in np.flatnonzero(np.isfinite(onset)).tolist():
            if len(np.unique(device[hops == m])) > onset[m]:
                return None
    bind = np.full(2 * n, -1, dtype=np.intp)
    bind[owner[hit]] = hops[hit]
    on = np.ones(2 * n)
    on[owner[hit]] = coef[hit]
    return bind, on


# -- can_bind ---------------------------------------------------------------------------------
def random_flows(rng, n_flows, n_links, n_media=2, spare=0, ties=False):
    """Flows as a fleet's routes are: each crosses 1 to 3 of ``n_links`` shared link
    directions and, half of them, one of ``n_media`` media (budget 1, coefficient 1 / its
    station's rate) with its station's own link; caps from their hops as a route's are;
    shared capacities around what their flows' caps load them with (some fill, some not);
    ``spare`` constraints no flow crosses. ``ties``: two station rates and two capacity
    scales (the inner constraint decided by its later keys). (owner, hops, coef, caps,
    capacity)."""
    n_links = max(n_links, 1)
    owner, hops, refs = [], [], []
    stations: list[float] = []
    first_station = n_links + n_media
    for f in range(n_flows):
        for c in rng.choice(n_links, size=int(rng.integers(1, min(3, n_links) + 1)),
                            replace=False):
            owner.append(f)
            hops.append(int(c))
            refs.append(-1)
        if n_media and rng.random() < 0.5:
            rate = float(rng.choice([1e6, 2e6])) if ties else \
                float(np.exp(rng.uniform(np.log(1e6), np.log(1e8))))
            station = first_station + len(stations)
            stations.append(rate)
            owner += [f, f]
            hops += [station, n_links + int(rng.integers(0, n_media))]
            refs += [-1, station]
    order = np.argsort(rng.random(len(owner)), kind="stable")  # (hops in any order)
    owner, hops, refs = (np.array(x, dtype=np.intp)[order] for x in (owner, hops, refs))
    capacity = np.concatenate([np.full(first_station, np.inf), stations,
                               rng.uniform(1e6, 1e8, spare)])
    capacity[n_links:first_station] = 1.0
    coef = hop_coefficients(refs, capacity)
    caps = np.full(n_flows, 1e8)  # (a flow on links only: a device's own rate)
    np.minimum.at(caps, owner, capacity[hops] / coef)
    load = np.bincount(hops, weights=coef * caps[owner], minlength=len(capacity))
    scale = rng.choice([0.3, 1.5], size=n_links) if ties else rng.uniform(0.2, 2.0, n_links)
    capacity[:n_links] = np.maximum(load[:n_links], 1e6) * scale
    np.minimum.at(caps, owner, capacity[hops] / coef)
    return owner, hops, coef, caps, capacity


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_flows=st.integers(1, 60),
       n_links=st.integers(1, 8), n_media=st.integers(0, 3),
       spare=st.sampled_from([0, 0, 3, 2000]), ties=st.booleans(), no_coef=st.booleans())
def test_can_bind_is_the_reference_bit_for_bit(seed, n_flows, n_links, n_media, spare, ties,
                                               no_coef):
    rng = np.random.default_rng(seed)
    owner, hops, coef, caps, capacity = random_flows(rng, n_flows, n_links, n_media, spare,
                                                     ties)
    if no_coef:
        coef = None
    want = reference_can_bind(owner, hops, coef, caps, capacity)
    np.testing.assert_array_equal(can_bind(owner, hops, coef, caps, capacity), want)
    # the same hops in blocks (cut anywhere, empty blocks included)
    cuts = np.sort(rng.integers(0, len(hops) + 1, size=int(rng.integers(0, 5))))
    parts = np.split(np.arange(len(hops)), cuts)

    def blocks():
        return ((owner[p], hops[p], None if coef is None else coef[p]) for p in parts)

    np.testing.assert_array_equal(can_bind_blocks(blocks, caps, capacity), want)


@pytest.mark.parametrize("seed", range(12))
def test_can_bind_on_many_hops_is_the_reference_bit_for_bit(seed):
    """Past _FEW hops: minima per flow and counts per pair instead of sorts."""
    rng = np.random.default_rng(seed)
    owner, hops, coef, caps, capacity = random_flows(rng, 3000, 1 + seed % 8, 1 + seed % 3,
                                                     ties=seed % 2 == 1)
    assert len(hops) > 4096
    want = reference_can_bind(owner, hops, coef, caps, capacity)
    np.testing.assert_array_equal(can_bind(owner, hops, coef, caps, capacity), want)
    blocks = np.array_split(np.arange(len(hops)), 5)
    np.testing.assert_array_equal(can_bind_blocks(
        lambda: ((owner[b], hops[b], coef[b]) for b in blocks), caps, capacity), want)


def test_a_tie_on_fewest_flows_and_on_capacity_over_coefficient_takes_the_lowest_index():
    # flow 0 crosses constraints 1 and 2 (two flows each, same capacity / coefficient): its
    # inner constraint is 1, which clears 2 through the group (2, 1) but not the other way
    owner = np.array([0, 0, 1, 2])
    hops = np.array([2, 1, 1, 2])
    coef = np.ones(4)
    caps = np.array([10.0, 10.0, 10.0])
    capacity = np.array([100.0, 15.0, 15.0])
    want = reference_can_bind(owner, hops, coef, caps, capacity)
    np.testing.assert_array_equal(can_bind(owner, hops, coef, caps, capacity), want)


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("m", [80, 6000])
def test_the_inner_constraint_is_the_first_in_the_sorted_order(seed, m):
    """_inner (minima per flow, or a sort below _FEW hops) against the sort (fewest flows,
    then capacity / coefficient, then the lowest index; ties on each key, inf and nan
    included)."""
    rng = np.random.default_rng(seed)
    n_owners, n_constraints = m // 4, 12
    owner = rng.integers(0, n_owners - 2, m)  # (the last two: no hops)
    hops = rng.integers(0, n_constraints, m)
    n_flows = rng.integers(1, 4, n_constraints)
    capacity = rng.choice([1.0, 2.0, np.inf, 0.0], n_constraints)
    coef = rng.choice([1.0, 0.5, np.inf, 0.0], m)
    with np.errstate(divide="ignore", invalid="ignore"):
        if seed % 2:  # (no nan: the minima; else the sort)
            coef = np.where(np.isnan(capacity[hops] / coef), 1.0, coef)
        order = np.lexsort((hops, capacity[hops] / coef, n_flows[hops], owner))
        head = order[np.concatenate([[True], owner[order][1:] != owner[order][:-1]])]
        want = np.full(n_owners, -1)
        want[owner[head]] = hops[head]
        np.testing.assert_array_equal(_inner(owner, hops, n_flows, capacity, coef, n_owners),
                                      want)


def knife_edge(seed):
    """Random flows whose link capacities put each link's limit within a few units in the
    last place of its load summed in the hops' order."""
    rng = np.random.default_rng(seed)
    owner, hops, coef, caps, capacity = random_flows(rng, 300, 4, 2)
    load = np.bincount(hops, weights=coef * caps[owner], minlength=len(capacity))
    edge = capacity.copy()
    edge[:4] = load[:4] / (1.0 + CAPACITY_TOLERANCE) \
        * (1.0 + rng.integers(-3, 4, 4) * np.finfo(float).eps)
    return owner, hops, coef, caps, edge


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("passes", [0, 4])
def test_knife_edge_capacities_give_the_reference(seed, passes):
    """Only the same terms added in the same order give the same answer at these
    capacities (the hops read in reverse give another on some of these seeds)."""
    owner, hops, coef, caps, capacity = knife_edge(seed)
    want = reference_can_bind(owner, hops, coef, caps, capacity, passes)
    np.testing.assert_array_equal(can_bind(owner, hops, coef, caps, capacity, passes), want)
    half = len(hops) // 2
    np.testing.assert_array_equal(can_bind_blocks(
        lambda: ((owner[:half], hops[:half], coef[:half]),
                 (owner[half:], hops[half:], coef[half:])), caps, capacity, passes), want)


def test_the_knife_edge_is_sharp():
    """The seeds above tell a sum's order: reversed, some answers change."""
    changed = 0
    for seed in range(40):
        owner, hops, coef, caps, capacity = knife_edge(seed)
        r = np.arange(len(hops))[::-1]
        changed += not np.array_equal(
            reference_can_bind(owner[r], hops[r], coef[r], caps, capacity, 0),
            reference_can_bind(owner, hops, coef, caps, capacity, 0))
    assert changed >= 5


def test_the_route_tables_blocks_are_hops_of_every_row():
    world = world_of(generated(300, 8))
    for t in world.static_tables()[:2]:
        want = t.hops_of(np.arange(len(t.route_id)))
        for size in (1, 7, 100, 1 << 20):
            got = list(t.blocks(size))
            assert all(len(h) <= size or len(np.unique(o)) == 1 for o, h, _ in got)
            for k in range(3):
                np.testing.assert_array_equal(np.concatenate([b[k] for b in got]), want[k])


# -- the decision -------------------------------------------------------------------------
def world_of(sc, fibre_bps=None):
    resolved = engine.resolve_scenario(netsim.Scenario.model_validate(sc), 0)
    if fibre_bps is not None:  # (the aggregator's link: what the cells can fill or not)
        links = [lk.model_copy(update={"bandwidth_bps": fibre_bps})
                 if resolved.aggregator in (lk.a, lk.b) else lk for lk in resolved.links]
        resolved = resolved.model_copy(update={"links": tuple(links)})
    return engine.World(resolved, np.random.default_rng(0))


def generated(n, per_cell, access=None, shared_media=True):
    gen = {"n_devices": n, "devices_per_cell": per_cell, "seed": 1,
           "shared_media": shared_media}
    if access is not None:
        gen["access"] = access
    return {"name": "fleet", "seed": 0, "generate": gen, "model": "small-cnn",
            "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": 1}}


FLEETS = [
    (generated(200, 16), None, True),
    (generated(1000, 16), None, True),
    (generated(3000, 16), None, False),   # cells under an aggregator link they can fill
    (generated(3000, 16), 1e12, True),    # a link they cannot
    (generated(1000, 4), None, False),
    (generated(1000, 4), 1e12, True),
    (generated(2000, 64), None, True),
    (generated(500, 64, {"wifi": 1.0}), 3e8, False),  # the link binds, as the cells do
    (generated(500, 8, {"lte": 0.5, "5g": 0.5}), None, True),
    (generated(4000, 32, shared_media=False), None, True),  # private links only
    (generated(400, 32, shared_media=False), 1e8, True),
    (cell_scenario("wifi"), None, True),  # hand-built: a cell behind a backhaul
    (cell_scenario("cellular"), None, True),
    (cell_scenario("wifi", backhaul="60 Mbit/s"), None, False),
    (cell_scenario("cellular", backhaul="60 Mbit/s"), None, False),
    (cell_scenario("wifi", contention_onset_flows=4, contention_loss_per_flow=0.01),
     None, True),
    (cell_scenario("wifi", contention_onset_flows=3, contention_loss_per_flow=0.01),
     None, False),  # four stations could pass its onset
]


@pytest.mark.parametrize(("sc", "fibre_bps", "arrays"), FLEETS)
def test_the_decision_is_the_full_checks(sc, fibre_bps, arrays):
    world = world_of(sc, fibre_bps)
    assert can_play(world)
    want = reference_check(world)
    player = BufferedPlayer.of(world_of(sc, fibre_bps))
    assert (player is not None) is (want is not None) is arrays
    if player is not None and want is not None:
        np.testing.assert_array_equal(player._state.bind, want[0])
        np.testing.assert_array_equal(player._state.coef, want[1])
