"""Work on the engine's internals changes no table: the built-in and experiment scenarios
(static, shared media, private links, churn) give the tables recorded in
tests/data/golden_tables.json (digests; tests/golden_tables.py regenerates them for a change
meant to change results)."""

import json

import pytest

from tests.golden_tables import GOLDEN, _cases, digests


def test_small_fleets_give_the_recorded_tables():
    expected = json.loads(GOLDEN.read_text())
    assert set(expected) == set(_cases())
    got = digests()
    changed = {name: [t for t in got[name] if got[name][t] != expected[name][t]]
               for name in got if got[name] != expected[name]}
    assert not changed, f"tables changed: {changed}"


@pytest.mark.parametrize("name", ["default/random-k/0"])
def test_the_digest_sees_a_changed_value(name):
    import netsim
    from tests.golden_tables import table_digest

    sc, pol, seed, params = _cases()[name]
    res = netsim.simulate(sc, pol, seed=seed, params=params)
    before = table_digest(res.devices)
    res.devices.loc[0, "energy_idle_j"] *= 1 + 1e-9  # (digests compare 12 digits)
    assert table_digest(res.devices) != before
