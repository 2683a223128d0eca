"""rfl-ha's re-association (issue 56): ``reassociate_every`` associates devices with edges by
netsim's heuristic, as async-hfl does, re-solved every N cloud rounds from measured speeds."""

import numpy as np

import netsim
from netsim.policy.registry import make_policy
from netsim.scenario import load_scenario
from policies.hierarchical.asynchronous import associate_with_rounds
from tests.test_async_hfl_paper import _observation, _scenario


def test_without_it_every_device_trains_at_its_default_edge():
    obs = _observation(_scenario("nycmesh"))
    policy = make_policy("rfl-ha", {})
    policy.reset(load_scenario(_scenario("nycmesh")), np.random.default_rng(0))
    decision = policy.decide(obs)
    assert decision.association is None and policy.associations == 0


def test_with_it_the_devices_go_where_the_heuristic_sends_them():
    """The first decision's participants are every idle device the heuristic associates,
    those whose edge is not their default one named in the decision's association."""
    obs = _observation(_scenario("nycmesh"))
    edge, _, _ = associate_with_rounds(obs)
    policy = make_policy("rfl-ha", {"reassociate_every": 3})
    policy.reset(load_scenario(_scenario("nycmesh")), np.random.default_rng(0))
    decision = policy.decide(obs)
    ids, tiers = obs.devices.ids, obs.tiers
    moved = {ids[r]: tiers.ids[edge[r]] for r in range(len(ids))
             if ids[r] in decision.participants and edge[r] != tiers.default_edge[r]}
    assert moved and decision.association == moved
    assert policy.associations == 1


def test_it_is_solved_every_n_cloud_rounds_and_the_run_goes_through():
    data = _scenario("nycmesh", max_epochs=10)
    scenario = load_scenario(data)
    counts, status = [], []
    for params in ({}, {"reassociate_every": 4}):
        policy = make_policy("rfl-ha", params)
        res = netsim.simulate(scenario, policy=policy, seed=0, raise_errors=True)
        counts.append(policy.associations)
        status.append(res.runs.iloc[0]["status"])
        assert (res.epochs["energy_compute_j"] >= 0).all()
    assert counts == [0, 3] and status[1] != "failed"
