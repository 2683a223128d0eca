"""Differential fuzzing of the array players against the flow network, short (issue 44):
hypothesis draws cases that break fluid players (tests/player_fuzz.py) and each player's
last-bit times must be the flow network's; the cases that broke them, and the input on which
0.6.0.dev0 hung, as regression tests. The long run (a million cases) is
benchmarks/fuzz_players.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.network.fluid import replay
from netsim.network.playback import last_bit_times_until
from tests import player_fuzz as pf

DATA = Path(__file__).parent / "data"
CASES = json.loads((DATA / "player_cases.json").read_text())["cases"]
FUZZ = settings(max_examples=120, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("player", pf.PLAYERS)
@FUZZ
@given(data=st.data())
def test_every_player_gives_the_flow_networks_last_bits(player, data):
    outcome = pf.check(pf.DataDraws(data), player)
    assert outcome.agrees, pf.describe(outcome)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("player", ["piece", "online"])
def test_cases_found_by_fuzzing_agree_everywhere(name, player):
    """Each case found once (tests/data/player_cases.json says what broke): the flow network,
    the players and the fluid replay (progressive filling at every event) agree."""
    case = pf.case_from_json(CASES[name])
    case.player = player
    reference = pf.reference_times(case)
    played = pf.played_times(case)
    assert played is not None
    assert pf.disagreement(case, reference, played) <= 1.0
    assert pf.disagreement(case, reference, pf.fluid_times(case)) <= 1.0


def test_the_reported_hang_returns_the_fluid_replays_times():
    """The three flows of one Wi-Fi cell on which 0.6.0.dev0's playback looped forever
    (the issue's reproducer): they return, as the fluid replay has them."""
    d = json.loads((DATA / "playback-hang.json").read_text())

    def floats(key):
        return np.array([float.fromhex(x) for x in d[key + "_hex"]])

    start, cap = floats("start_s"), floats("cap_bps")
    bits, coef = np.array(d["bits"]), np.array(d["coef"])
    done, left = last_bit_times_until(start, cap, bits, d["capacity_bps"], coef)
    want = replay([[0], [0], [0]], [[c] for c in coef], bits, start,
                  np.array([d["capacity_bps"]]))
    np.testing.assert_allclose(done - start.min(), want - start.min(), rtol=1e-9)
    assert np.all(left == 0.0) and np.all(done > start)
