"""Loops that advance a clock stop at their bounds (netsim.loopguard, issue 44): forced past
its bound, each player raises StuckLoopError naming itself and a report whose inputs replay
the call; a finish rule broken on purpose makes the players and the flow network stop with a
report instead of spinning."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from netsim import fastepoch, loopguard
from netsim.fastepoch import CapacityPieces, RouteTable, play_phase
from netsim.loopguard import StuckLoopError, forced_bound, load_report
from netsim.network import fluid, nested, nesting, playback, wakeups
from netsim.network.nested import nested_last_bit_times_until
from netsim.network.online import SharedConstraint
from netsim.network.playback import last_bit_times_until
from tests import player_fuzz as pf

DATA = Path(__file__).parent / "data"
# five flows on one link: starts, finishes and rebalances (more than one pass each)
START = np.array([0.0, 0.1, 0.1, 0.3, 0.5])
CAP = np.array([1e6, 4e6, 2e6, 8e6, 8e6])
BITS = np.array([2e6, 1e6, 3e6, 5e5, 2e6])


@pytest.fixture(autouse=True)
def reports(tmp_path, monkeypatch):
    """Reports go to this test's folder."""
    monkeypatch.setenv("NETSIM_REPORT_DIR", str(tmp_path))
    return tmp_path


def _stuck(call) -> tuple[StuckLoopError, dict]:
    with forced_bound(1), pytest.raises(StuckLoopError) as caught:
        call()
    err = caught.value
    assert err.report is not None and err.report.exists()
    assert err.function in str(err) and str(err.report) in str(err)
    name, inputs = load_report(err.report)
    assert name == err.function and err.bound == 1
    return err, inputs


def test_playback_past_its_bound_reports_inputs_that_replay_the_call():
    want = last_bit_times_until(START, CAP, BITS, 5e6)
    err, inputs = _stuck(lambda: last_bit_times_until(START, CAP, BITS, 5e6))
    assert err.function.startswith("netsim.network.playback.last_bit_times_until")
    again = last_bit_times_until(inputs["start_s"], inputs["cap_bps"], inputs["bits"],
                                 inputs["capacity_bps"], inputs["coef"], inputs["until_s"])
    np.testing.assert_array_equal(again[0], want[0])


def test_nested_playback_past_its_bound_reports_its_inputs():
    group, coef = np.array([0, 0, 1, 1, 2]), 1.0 / np.array([54e6, 24e6, 54e6, 6e6, 1.0])
    gcap = np.array([1.0, 1.0, 2e7])
    want = nested_last_bit_times_until(START, BITS, group, coef, gcap, 3e7)
    err, inputs = _stuck(lambda: nested_last_bit_times_until(START, BITS, group, coef, gcap,
                                                             3e7))
    assert err.function.startswith("netsim.network.nested.")
    again = nested_last_bit_times_until(inputs["start_s"], inputs["bits"], inputs["group"],
                                        inputs["coef"], inputs["group_capacity"],
                                        inputs["outer_capacity"], inputs["until_s"])
    np.testing.assert_array_equal(again[0], want[0])


def test_fluid_replay_past_its_bound_reports_its_inputs():
    hops, coefs = [[0]] * 5, [[1.0]] * 5
    want = fluid.replay(hops, coefs, BITS, START, np.array([5e6]))
    err, inputs = _stuck(lambda: fluid.replay(hops, coefs, BITS, START, np.array([5e6])))
    assert err.function == "netsim.network.fluid.replay"
    again = fluid.replay(inputs["hops"], inputs["coefs"], inputs["bits"], inputs["start_s"],
                         inputs["capacity"])
    np.testing.assert_array_equal(again, want)


def test_a_phase_across_more_pieces_than_its_bound_stops(monkeypatch):
    case = pf.case_from_json(json.loads((DATA / "player_cases.json").read_text())
                             ["cases"]["early"])
    topo = case.topology()
    table = RouteTable.of([topo.route(s, r) for s, r in zip(case.senders, case.receivers,
                                                            strict=True)])
    rows = np.arange(len(rows_ := case.senders))
    capacity = np.array(topo.constraint_capacity, dtype=float)
    step = 1e-4  # (a change every 0.1 ms: the transfers cross many)
    def next_change_s(t):  # (as netsim.dynamics.bandwidth's pieces: robust to rounding)
        k = math.floor(t / step)
        return (k + 2 if (k + 1) * step <= t else k + 1) * step

    pieces = CapacityPieces(lambda t: capacity, next_change_s)
    start = case.start_s - case.start_s.min()
    played = play_phase(start, rows, table, 1e4, capacity, table.hops_of(rows), None, pieces)
    assert played is not None and played[1] > 2 and len(rows_) == 2
    monkeypatch.setattr(fastepoch, "MAX_PIECES_PER_PHASE", 2)
    with pytest.raises(StuckLoopError, match="play_phase did not finish within 2") as caught:
        play_phase(start, rows, table, 1e4, capacity, table.hops_of(rows), None, pieces)
    assert caught.value.report is not None
    assert load_report(caught.value.report)[1]["pieces_crossed"] == 2


def test_a_phase_whose_pieces_do_not_move_on_stops():
    """A CapacityPieces whose next change is not after its argument (a broken schedule)
    stops at once with a report instead of looping."""
    case = pf.case_from_json(json.loads((DATA / "player_cases.json").read_text())
                             ["cases"]["early"])
    topo = case.topology()
    table = RouteTable.of([topo.route(s, r) for s, r in zip(case.senders, case.receivers,
                                                            strict=True)])
    rows = np.arange(2)
    capacity = np.array(topo.constraint_capacity, dtype=float)
    pieces = CapacityPieces(lambda t: capacity, lambda t: t)
    with pytest.raises(StuckLoopError, match="play_phase was told the capacities change"):
        play_phase(case.start_s, rows, table, 8.0, capacity, table.hops_of(rows), None, pieces)


def test_a_shared_constraint_asked_for_finishes_too_early_again_and_again_stops():
    c = SharedConstraint(1e7)
    c.add("a", 8e6, 1e7, 1.0, 0.0)
    for _ in range(loopguard.bound(16)):
        assert c.finish_due(0.5) == []  # (nothing is done at half time)
    with pytest.raises(StuckLoopError, match="SharedConstraint.finish_due"):
        c.finish_due(0.5)
    assert c.finish_due(0.8 + 1e-12) == ["a"]  # (and once due, it ends)


def _never_reached(clock, rate, now):
    return -math.inf


def test_a_broken_finish_rule_stops_the_playback_with_a_report(monkeypatch):
    """The issue's reproducer under a finish rule that never counts a sharing flow done:
    0.6.0.dev0 looped forever on it; the bound stops it."""
    d = json.loads((DATA / "playback-hang.json").read_text())
    args = [np.array([float.fromhex(x) for x in d[k + "_hex"]]) for k in ("start_s", "cap_bps")]
    monkeypatch.setattr(playback, "clock_reached", _never_reached)
    with pytest.raises(StuckLoopError, match="last_bit_times_until") as caught:
        last_bit_times_until(args[0], args[1], np.array(d["bits"]), d["capacity_bps"],
                             np.array(d["coef"]))
    assert caught.value.report is not None


def test_a_broken_finish_rule_stops_the_nested_playback(monkeypatch):
    monkeypatch.setattr(nested, "clock_reached", _never_reached)
    group, coef = np.array([0, 0, 0]), 1.0 / np.array([54e6, 24e6, 54e6])
    with pytest.raises(StuckLoopError, match="nested_last_bit_times_until"):
        nested_last_bit_times_until(np.array([0.0, 0.1, 0.2]), np.full(3, 1e6), group, coef,
                                    np.array([1.0]), 1e7)


def test_a_broken_finish_rule_stops_the_flow_network(monkeypatch):
    """The flow network's wake-ups find no finish due again and again at one instant: they
    stop with a report instead of spinning."""
    monkeypatch.setattr(wakeups, "clock_reached", _never_reached)
    monkeypatch.setattr(nesting, "clock_reached", _never_reached)
    case = pf.case_from_json(json.loads((DATA / "player_cases.json").read_text())
                             ["cases"]["hang"])
    with pytest.raises(StuckLoopError, match="FlowNetwork"):
        pf.reference_times(case)


def test_reports_keep_floats_exactly(reports):
    x = np.array([0.1, 1e-300, 3.15e7 + 2 ** -28])
    with pytest.raises(StuckLoopError) as caught:
        loopguard.stuck("some.function", 7, {"x": x, "y": 0.1, "n": 3, "s": "text",
                                              "nothing": None, "list": [1.5, 2]})
    assert caught.value.report is not None and caught.value.report.parent == reports
    name, inputs = load_report(caught.value.report)
    assert name == "some.function"
    np.testing.assert_array_equal(inputs["x"], x)
    assert inputs["y"] == 0.1 and inputs["n"] == 3 and inputs["s"] == "text"
    assert inputs["nothing"] is None and inputs["list"] == [1.5, 2]
