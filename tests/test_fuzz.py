"""Mutation fuzzing (tests/scenario_fuzz.py): valid scenarios and sweep files with one or two
fields replaced by junk, deleted or joined by unknown keys either are rejected with a problem
naming a related path, or run to a recorded status; a baseline never fails on a scenario that
validates. Bounded here (derandomized under CI, see conftest.py); benchmarks/fuzz.py runs
10,000 examples.
"""

from __future__ import annotations

import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenario_fuzz import (
    BASELINES,
    JUNK,
    SWEEP_BASE,
    Mutation,
    bases,
    paths,
    related,
    scenario_outcome,
    sweep_outcome,
)

KINDS = st.sampled_from(["replace"] * 8 + ["delete", "add"])


def mutate(data: dict, draw) -> list[str]:
    """Apply one or two drawn mutations to ``data``; returns the mutated paths."""
    mutated = []
    for _ in range(draw(st.integers(1, 2))):
        candidates = paths(data)
        if not candidates:
            break
        path = draw(st.sampled_from(candidates))
        mutated.append(Mutation(draw(KINDS), path, draw(st.sampled_from(JUNK))).apply(data))
    return mutated


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_scenarios_are_rejected_with_their_path_or_run(data):
    base = data.draw(st.sampled_from(range(3)))
    scenario = bases()[base]
    mutated = mutate(scenario, data.draw)
    policy = data.draw(st.sampled_from(BASELINES))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scenario_outcome(scenario, mutated, policy, seed=data.draw(st.integers(0, 3)))


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_sweep_files_are_rejected_with_their_path_or_run(tmp_path, data):
    import copy

    sweep = copy.deepcopy(SWEEP_BASE)
    mutated = mutate(sweep, data.draw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweep_outcome(sweep, mutated, tmp_path)


def test_related_paths_can_fail():
    """The property's path check is not vacuous."""
    assert related("devices[1].flop_per_s", "devices[1].flop_per_s")
    assert related("devices[1]", "devices[1].flop_per_s")
    assert related("aggregator", "devices[0].id")
    assert related("point 2 (k=1) training.deadline_s", "training.deadline_s")
    assert not related("training.deadline_s", "devices[1].flop_per_s")
    assert not related("policies.random-k.k", "links[0].latency_s")


def test_an_unhashable_device_id_beside_media_is_a_problem_not_a_crash():
    """Found by the fuzz in CI: a device id replaced by a list, in a scenario with a medium."""
    from netsim.scenario.loading import validate_data

    data = {"name": "cell", "devices": [
        {"id": [], "flop_per_s": 1e9, "memory_bytes": 1e9, "power_busy_w": 1, "power_idle_w": 0.1},
        {"id": "server", "flop_per_s": 1e9, "memory_bytes": 1e9, "power_busy_w": 1,
         "power_idle_w": 0.1}],
        "media": [{"id": "ap", "kind": "wifi"}],
        "links": [{"a": "server", "b": "ap-node", "bandwidth_bps": 1e8},
                  {"a": "x", "b": "ap-node", "bandwidth_bps": 1e7, "medium": "ap"}],
        "aggregator": "server", "model": "mlp-digits",
        "training": {"target_loss": 0.5, "deadline_s": 60, "max_epochs": 3}}
    problems = [p.path for p in validate_data(data).problems]
    assert "devices[0].id" in problems
