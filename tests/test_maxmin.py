"""The max-min rules (netsim.network.sharing): progressive filling against the definition, and the
one-link water-filling against progressive filling where max-min decomposes."""

import numpy as np
import pytest

from netsim.network.sharing import progressive_filling, water_filling
from tests.test_network import _reference_max_min


@pytest.mark.parametrize("seed", range(20))
def test_progressive_filling_matches_the_definition(seed):
    rng = np.random.default_rng(seed)
    n_links, n_flows = int(rng.integers(2, 8)), int(rng.integers(1, 15))
    caps = rng.uniform(1e6, 1e8, n_links)
    flows = [tuple(sorted(set(rng.choice(n_links, int(rng.integers(1, n_links + 1)),
                                         replace=False).tolist()))) for _ in range(n_flows)]
    got = progressive_filling(flows, caps.tolist())
    want = _reference_max_min(dict(enumerate(flows)), dict(enumerate(caps.tolist())))
    assert got == pytest.approx([want[f] for f in range(n_flows)], rel=1e-12)
    for h in range(n_links):  # no link over its capacity
        assert sum(r for r, hops in zip(got, flows, strict=True) if h in hops) <= caps[h] * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_water_filling_is_progressive_filling_on_one_shared_link(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 40))
    access = rng.uniform(1e6, 5e7, m)          # each flow's own link: its cap
    shared = float(rng.uniform(1e7, 5e8))
    hops = [(i, m) for i in range(m)]           # own link i, then the shared link m
    want = progressive_filling(hops, access.tolist() + [shared])
    assert water_filling(access, shared) == pytest.approx(want, rel=1e-12)


def test_water_filling_analytic():
    # capacity 10 among caps 1, 2, 100, 100: 1 and 2 capped, the others share 7 -> 3.5 each
    assert water_filling(np.array([100.0, 1.0, 100.0, 2.0]), 10.0).tolist() == [3.5, 1.0, 3.5, 2.0]
    assert water_filling(np.array([1.0, 2.0]), 10.0).tolist() == [1.0, 2.0]  # caps fit
