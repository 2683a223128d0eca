"""PACT and DepL under dynamics: planned devices that go offline and participants that drop
out between epochs. Policy-level (fake Observation sequences, no engine): every decision stays
valid and ``info["replanned"]`` says why the plan changed."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from netsim.engine import World, resolve_scenario
from netsim.policy import Decision, Observation, make_policy, validate_decision
from netsim.scenario import load_scenario
from netsim.training.loss import LossPredictor

N_PHONES = 8


@pytest.fixture(scope="module")
def scenario():
    """DepL's small instance with eight phones (two copies of each), resolved."""
    with open("experiments/depl/scenarios/small.yaml") as f:
        raw = yaml.safe_load(f)
    phones, links = raw["devices"][1:], raw["links"]
    raw["devices"] = raw["devices"][:1] + [
        {**copy.deepcopy(d), "id": f"{d['id']}-{c}"} for c in "ab" for d in phones]
    raw["links"] = [{**link, "b": f"{link['b']}-{c}"} for c in "ab" for link in links]
    raw["training"]["max_epochs"] = 12
    raw.pop("policies")
    sc = resolve_scenario(load_scenario(raw), 0)
    return sc, World(sc, np.random.default_rng(0)).devices


def observe(sc, table, epoch: int, losses: list[float], variant, available) -> Observation:
    avail = np.array(available, dtype=bool)
    avail.setflags(write=False)
    return Observation(epoch, 30.0 * epoch, sc.training.deadline_s, 100.0 * epoch,
                       tuple(losses), variant, table, avail, sc.model, sc.training, sc)


def run(policy_name: str, sc, table, availability, epochs: int = 8, params=None):
    """Drive the policy through ``epochs`` fake epochs: ``availability(epoch, last)`` gives
    the availability mask from the last decision; the observed loss is the policy's own
    predicted loss (so re-plans come from availability alone). Every decision is validated."""
    if policy_name not in ("pact", "pact-all-nodes"):  # DepL's planners: a coarser grid
        params = {"data_fractions": [0.5, 1.0], **(params or {})}
    policy = make_policy(policy_name, params or {})
    policy.reset(sc, np.random.default_rng(0))
    pred = LossPredictor(sc.model, sc.training)
    losses, variant, last = [pred.initial_loss], None, None
    decisions: list[Decision] = []
    for epoch in range(epochs):
        obs = observe(sc, table, epoch, losses, variant, availability(epoch, last, policy))
        d = policy.decide(obs)
        validate_decision(d, obs, policy_name)
        decisions.append(d)
        if d.stop:
            break
        last, variant = d, d.variant
        losses.append(max(float(d.info.get("planned_loss", losses[-1])), 0.31))
    return decisions, policy


@pytest.mark.parametrize("name", ["pact", "depl"])
def test_planned_devices_going_offline_are_replanned_and_recorded(scenario, name):
    sc, table = scenario
    hits = []

    def availability(epoch, last, policy):
        mask = np.ones(table.n, bool)
        if epoch == 2:  # the devices of the next planned epoch go offline (not the last one's)
            planned = _planned(policy, epoch)
            drop = [i for i in planned if last is None or table.ids[i] not in last.participants]
            drop = drop or planned[:1]
            mask[drop] = False
            hits.append(drop)
        return mask

    decisions, _ = run(name, sc, table, availability)
    assert hits and len(decisions) > 2 and not decisions[2].stop
    assert "offline" in decisions[2].info["replanned"]
    assert not set(decisions[2].participants) & {table.ids[i] for i in hits[0]}
    assert "replanned" not in decisions[0].info


@pytest.mark.parametrize("name", ["pact", "depl"])
def test_participants_dropping_out_are_seen_and_the_run_goes_on(scenario, name):
    sc, table = scenario

    def availability(epoch, last, policy):
        mask = np.ones(table.n, bool)
        if epoch == 3 and last is not None:  # half of the last epoch's participants are gone
            gone = sorted(last.participants)[: max(1, len(last.participants) // 2)]
            mask[[table.index[d] for d in gone]] = False
        return mask

    decisions, _ = run(name, sc, table, availability)
    assert len(decisions) > 3 and not decisions[3].stop
    assert "dropped out" in decisions[3].info["replanned"]


@pytest.mark.parametrize("name", ["pact", "depl", "pact-all-nodes", "never-switch"])
def test_decisions_stay_valid_under_arbitrary_availability(scenario, name):
    sc, table = scenario
    rng = np.random.default_rng(7)

    def availability(epoch, last, policy):
        mask = rng.random(table.n) < 0.5
        mask[table.aggregator] = True
        return mask

    decisions, _ = run(name, sc, table, availability, epochs=10)
    assert decisions
    assert all(d.stop or d.participants for d in decisions)


def test_offline_pact_leaves_offline_devices_out_and_says_so(scenario):
    sc, table = scenario

    def availability(epoch, last, policy):
        mask = np.ones(table.n, bool)
        if epoch == 1:
            mask[_planned(policy, epoch)[:1]] = False
        return mask

    decisions, _ = run("pact", sc, table, availability, params={"replan": False})
    assert "left out" in decisions[1].info["replanned"]


def _planned(policy, epoch: int) -> list[int]:
    """The next planned epoch's devices (policy internals: PACT's cursor, DepL's plan)."""
    if hasattr(policy, "_cursor"):
        plan = policy._plan
        return list(plan.epochs[policy._cursor].participants) \
            if plan is not None and policy._cursor < len(plan.epochs) else []
    k = epoch - policy._k0
    plan = policy._run_plan
    return [int(i) for i in plan.clusters[k].members] if k < len(plan.clusters) else []


@pytest.mark.parametrize("name", ["pact", "depl"])
def test_end_to_end_under_churn_no_failure_and_replans_recorded(name):
    """In the engine, under markov churn short enough to interrupt epochs: the run never fails
    (every decision valid), and the re-plans for dynamics are in the epochs' info."""
    import json

    import netsim

    with open("experiments/depl/scenarios/small.yaml") as f:
        raw = yaml.safe_load(f)
    raw["training"].update({"max_epochs": 10})
    raw["dynamics"] = {"availability": {"model": "markov", "mean_online_s": 3.0,
                                        "mean_offline_s": 2.0},
                       "compute": {"spread": 0.3, "straggler_probability": 0.2}}
    reasons, dropped = [], 0
    for seed in range(3):
        res = netsim.simulate(raw, name, seed=seed, raise_errors=True,
                              params={"data_fractions": [0.5, 1.0]} if name == "depl" else None)
        run = res.runs.iloc[0]
        assert run["status"] != "failed", run["error"]
        dropped += int(res.epochs["dropped"].sum())
        reasons += [json.loads(i).get("replanned", "") for i in res.epochs["info"]]
    assert dropped > 0 and any(reasons)
