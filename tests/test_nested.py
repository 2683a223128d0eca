"""Nested sharing played forward (netsim.network.nested) against the fluid replay
(progressive filling at every event): cells under one shared outer link, flows alone on it."""

import numpy as np
import pytest

from netsim.network.fluid import replay
from netsim.network.nested import nested_last_bit_times, nested_together


def _case(rng, together):
    """Cells (air-time budget 1, stations of rates r: coefficient 1/r, cap r) and direct
    flows (a group of one at its cap) under an outer link of random capacity."""
    n_cells = int(rng.integers(1, 6))
    group, coef, gcap, caps = [], [], [], []
    for c in range(n_cells):
        gcap.append(float(rng.choice([1.0, 0.9])))
        for r in rng.choice([6e6, 24e6, 54e6, 80e6], size=int(rng.integers(1, 6))):
            group.append(c)
            coef.append(1.0 / r)
            caps.append(gcap[c] * r)
    for _ in range(int(rng.integers(0, 4))):  # flows on the outer link only
        group.append(len(gcap))
        coef.append(1.0)
        caps.append(float(rng.uniform(5e6, 1e8)))
        gcap.append(caps[-1])
    m = len(group)
    group, coef, gcap, caps = map(np.array, (group, coef, gcap, caps))
    outer = float(rng.uniform(0.2, 1.5)) * sum(
        float(gcap[g] / coef[group == g].min()) for g in range(len(gcap)) if (group == g).any())
    if together:
        start, bits = np.zeros(m), np.full(m, 8e6)
    else:
        start = rng.uniform(0.0, 0.5, m) * (rng.random(m) < 0.8)
        bits = rng.uniform(1e6, 2e7, m)
    # the same flows for the replay: constraint g per group, the outer one last
    hops = [[int(g), len(gcap)] for g in group]
    coefs = [[float(a), 1.0] for a in coef]
    capacity = np.append(gcap, outer)
    return start, bits, group, coef, gcap, outer, hops, coefs, capacity


@pytest.mark.parametrize("seed", range(60))
def test_nested_playback_is_the_fluid_replay(seed):
    rng = np.random.default_rng(seed)
    start, bits, group, coef, gcap, outer, hops, coefs, capacity = _case(rng, seed % 4 == 0)
    got = nested_last_bit_times(start, bits, group, coef, gcap, outer)
    want = replay(hops, coefs, bits, start, capacity)
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_downloads_together_wait_for_the_outer_link_or_their_cell():
    """Two cells of 2 stations at 54 Mbit/s (level 27 Mbit/s each) and one of 1 station at
    24 Mbit/s. Under 60 Mbit/s the outer link binds first: 5 flows x 12 Mbit/s, below every
    cell's level. Under 200 Mbit/s the cells bind: 27 and 24 Mbit/s."""
    group = np.array([0, 0, 1, 1, 2])
    coef = np.array([1 / 54e6] * 4 + [1 / 24e6])
    secs = nested_together(8e6, group, coef, np.ones(3), 60e6)
    np.testing.assert_allclose(secs, 8e6 / 12e6)  # 5 flows x 12 Mbit/s = 60 Mbit/s
    secs = nested_together(8e6, group, coef, np.ones(3), 200e6)  # the cells bind
    np.testing.assert_allclose(secs, 8e6 / np.array([27e6] * 4 + [24e6]))


@pytest.mark.parametrize("seed", range(3))
def test_crowded_cells_under_a_binding_outer_link_are_the_fluid_replay(seed):
    """The city's regime (benchmarks/city.py): many members per cell starting one by one, the
    outer link binding most of the time, so members join and leave groups that keep sharing
    it (the player's in-place steps, and its level heap rebuilt), some cells dropping below
    the share and back."""
    rng = np.random.default_rng(100 + seed)
    n_cells, per_cell = 8, 30
    group = np.repeat(np.arange(n_cells), per_cell)
    rates = rng.choice([6e6, 24e6, 54e6, 80e6], size=len(group))
    coef = 1.0 / rates
    gcap = rng.choice([1.0, 0.9, 0.5], size=n_cells)
    start = np.sort(rng.uniform(0.0, 2.0, len(group)))
    bits = np.full(len(group), 2e6) if seed < 2 else rng.uniform(1e6, 3e6, len(group))
    outer = float(rng.uniform(0.05, 0.3)) * float(gcap @ np.bincount(group, weights=rates)
                                                     / per_cell)
    got = nested_last_bit_times(start, bits, group, coef, gcap, outer)
    hops = [[int(g), n_cells] for g in group]
    coefs = [[float(a), 1.0] for a in coef]
    want = replay(hops, coefs, bits, start, np.append(gcap, outer))
    np.testing.assert_allclose(got, want, rtol=1e-9)
