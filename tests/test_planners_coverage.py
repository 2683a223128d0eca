"""PACT and DepL under label skew: they plan with the classes their epochs train (issue 57,
item 3).

The world's truth under skew is the per-class state (netsim.training.coverage); PACT's planner
weights each candidate by the classes it trains and replays its plan through the same formula
(netsim.training.loss.PlanningCoverage). With the surrogate's noise off, the plan is a claim
about the simulator: its predicted losses are the simulated ones, epoch by epoch.
"""

import numpy as np
import pytest

import netsim
import policies.pact.policy as pact_policy
from netsim.training.loss import LossPredictor, PlanningCoverage

LOSS = {"initial_loss": 2.303, "floor_full": 0.05, "floor_prune": 0.2, "samples_half": 400.0,
        "exponent": 0.7, "prune_progress_loss": 1.0, "classes": 10,
        "class_interference": 0.5}


def skewed_star(n: int = 12, **training) -> dict:
    """An aggregator and ``n`` devices on direct links, 2-class shards; noise-free loss. The
    devices differ in speed and link energy, so the cheapest few hold few of the classes."""
    devices = [{"id": "agg", "flop_per_s": 1e12, "memory_bytes": 6.4e10, "power_busy_w": 100.0,
                "power_idle_w": 10.0}]
    links = []
    for i in range(n):
        devices.append({"id": f"d{i}", "flop_per_s": 2e9 * (1 + i), "memory_bytes": 8e9,
                        "power_busy_w": 6.0, "power_idle_w": 1.0, "samples": 150})
        links.append({"a": "agg", "b": f"d{i}", "bandwidth_bps": 2e7,
                      "latency_s": 0.02, "energy_j_per_bit": 3e-7 * (1 + 0.5 * i)})
    return {
        "name": "pact-skew", "devices": devices, "links": links, "aggregator": "agg",
        "model": {"name": "m", "params": 2e5, "bytes_per_param": 4,
                  "train_flop_per_sample": 5e6,
                  "variants": [{"name": "full", "params_fraction": 1.0, "flop_fraction": 1.0}],
                  "loss": dict(LOSS)},
        "training": {"target_loss": 0.6, "deadline_s": 3600, "max_epochs": 80,
                     "shards_per_device": 2, **training},
        "policies": {"pact": {"replan": False}},
    }


def test_offline_plan_is_the_simulators_loss_epoch_by_epoch():
    """Noise off: the plan's predicted mean loss after each epoch is the simulated loss."""
    sc = skewed_star()
    policy = netsim.policy.make_policy("pact", {"replan": False})
    res = netsim.simulate(sc, policy=policy, seed=0, raise_errors=True)
    run = res.runs.iloc[0]
    assert run["target_reached"], run["stop_reason"] if "stop_reason" in run else run
    plan = policy.plans[0]
    assert plan.feasible and plan.info.get("coverage_rounds", 0) >= 1
    losses = res.epochs["loss"].to_numpy()
    assert len(losses) == len(plan.epochs)
    np.testing.assert_allclose(losses, plan.losses, rtol=1e-9)


def test_the_scalar_plan_is_flattered_under_skew_and_the_class_aware_one_is_not(monkeypatch):
    """Ignoring which data trained (the scalar state), PACT's plan misses the target in the
    simulator although it predicted reaching it; planning with the classes, it reaches it,
    with more participants."""
    sc = skewed_star()
    aware = netsim.policy.make_policy("pact", {"replan": False})
    res_aware = netsim.simulate(sc, policy=aware, seed=0, raise_errors=True)
    monkeypatch.setattr(pact_policy.PlanningCoverage, "of",
                        classmethod(lambda cls, *a, **k: None))
    blind = netsim.policy.make_policy("pact", {"replan": False})
    res_blind = netsim.simulate(sc, policy=blind, seed=0, raise_errors=True)
    assert blind.plans[0].feasible and blind.plans[0].loss <= 0.6 * (1 + 1e-9)
    assert not res_blind.runs.iloc[0]["target_reached"]
    assert res_blind.epochs["loss"].iloc[-1] > 0.6 * 1.2
    assert res_aware.runs.iloc[0]["target_reached"]
    assert res_aware.epochs["participants"].mean() > res_blind.epochs["participants"].mean()


def test_iid_data_plans_exactly_as_before():
    """IID data: no per-class state, the scalar plan (the golden tables guard the rest)."""
    sc = skewed_star()
    del sc["training"]["shards_per_device"]
    policy = netsim.policy.make_policy("pact", {"replan": False})
    netsim.simulate(sc, policy=policy, seed=0, raise_errors=True)
    assert "coverage_rounds" not in policy.plans[0].info
    assert policy._tracker is not None and policy._tracker.coverage is None


def test_online_pact_under_skew_reaches_the_target_with_the_noise_on():
    sc = skewed_star()
    sc["model"]["loss"].update({"noise_run_sigma": 0.05, "noise_epoch_sigma": 0.02})
    sc["policies"] = {"pact": {}}
    for seed in (0, 1):
        run = netsim.simulate(sc, policy="pact", seed=seed, raise_errors=True).runs.iloc[0]
        assert run["target_reached"], (seed, run["final_loss"])


def test_coverage_weights_rate_fills_by_the_classes_they_train():
    """A fill of devices that hold the population's mix is worth about its scalar gain; a
    fill of one device holding two classes much less (its classes saturate, the rest lag)."""
    from policies.pact.candidates import coefficients, coverage_weights
    from policies.pact.instances import scenario_problem

    sc = skewed_star(n=10)  # (devices 1-5 hold the population's mix: classes 0-9, once)
    problem = scenario_problem(sc)
    pred = LossPredictor(problem.model, netsim.scenario.load_scenario(sc).training)
    n = problem.table.n
    hist = np.zeros((n, 10))
    for i in range(1, n):
        hist[i, [(2 * i) % 10, (2 * i + 1) % 10]] = 75.0  # 2 classes a device
    cov = PlanningCoverage(pred, problem.table.index, problem.table.samples, hist, None)
    from dataclasses import replace

    problem = replace(problem, coverage=cov, predictor=pred)
    coef = coefficients(problem, 0)
    order = np.arange(len(coef.idx))
    caps = coef.samples[order]
    one, five = coverage_weights(problem, 0, coef, [
        (order, caps, np.array([caps[0]]), np.array([1])),
        (order, caps, np.array([caps[:5].sum()]), np.array([5]))])
    assert one < 0.2 and 0.99 < five <= 1.0 + 1e-12


@pytest.mark.parametrize("alpha", [0.1, 1.0])
def test_the_plan_holds_under_dirichlet_skew_too(alpha):
    sc = skewed_star()
    del sc["training"]["shards_per_device"]
    sc["training"]["dirichlet_alpha"] = alpha
    policy = netsim.policy.make_policy("pact", {"replan": False})
    res = netsim.simulate(sc, policy=policy, seed=0, raise_errors=True)
    plan = policy.plans[0]
    assert plan.feasible
    np.testing.assert_allclose(res.epochs["loss"].to_numpy(), plan.losses, rtol=1e-9)


# -- DepL (its papers assume IID data; netsim's extension: policies/depl/planner.py) ---------

def _depl_scenario() -> dict:
    sc = skewed_star()
    sc["model"]["loss"].update({"noise_run_sigma": 0.05, "noise_epoch_sigma": 0.02})
    sc["training"]["target_probability"] = 0.8
    sc["policies"] = {"depl": {"replan": False}}
    return sc


def test_depl_plans_with_the_classes_and_keeps_its_promise_where_the_scalar_plan_does_not(
        monkeypatch):
    """Under 2-class shards DepL's clusters are weighted by the classes they train: its plan
    reaches the target in the simulator on most seeds, with more participants than the plan
    that ignores the classes, which planned to reach it and misses."""
    import policies.depl.policy as depl_policy

    sc = _depl_scenario()
    seeds = range(6)
    aware = [netsim.simulate(sc, policy="depl", seed=s, raise_errors=True) for s in seeds]
    monkeypatch.setattr(depl_policy.PlanningCoverage, "of",
                        classmethod(lambda cls, *a, **k: None))
    policy = netsim.policy.make_policy("depl", {"replan": False})
    blind = [netsim.simulate(sc, policy=policy, seed=s, raise_errors=True) for s in seeds]
    assert policy.plan.feasible and policy.plan.final_mean <= 0.6
    reached_aware = sum(bool(r.runs.iloc[0]["target_reached"]) for r in aware)
    reached_blind = sum(bool(r.runs.iloc[0]["target_reached"]) for r in blind)
    assert reached_aware >= 5 > 0 == reached_blind
    parts = [np.mean([r.epochs["participants"].mean() for r in x]) for x in (aware, blind)]
    assert parts[0] > parts[1]


def test_depl_cluster_weights_are_one_for_iid_data():
    from policies.depl.placement import Cluster
    from policies.depl.planner import cluster_gain

    sc = _depl_scenario()
    del sc["training"]["shards_per_device"]
    policy = netsim.policy.make_policy("depl", {"replan": False})
    netsim.simulate(sc, policy=policy, seed=0, raise_errors=True)
    assert policy._tracker.coverage is None
    assert all(c.gain_weight == 1.0 for c in policy.plan.clusters)
    pred = policy._pred.base
    c = policy.plan.clusters[0]
    assert cluster_gain(pred, c) == float(pred.gain(c.samples.sum(), len(c.members)))
    half = Cluster(c.variant, c.samples, c.time_s, c.energy_j, gain_weight=0.5)
    assert cluster_gain(pred, half) == 0.5 * cluster_gain(pred, c)


def test_a_plan_whose_replay_misses_is_extended_until_the_replay_reaches_the_target(
        monkeypatch):
    """Weights that rate every fill as fully worth its scalar gain (an optimistic rating) and
    no re-rating rounds: the plan's replay through the per-class state misses, and the plan
    is extended (its last epoch, or every device) until the replay reaches the target; the
    extended plan's predicted losses are the simulator's (noise off)."""
    import policies.pact.planner as planner

    monkeypatch.setattr(planner, "COVERAGE_ROUNDS", 1)
    monkeypatch.setattr(PlanningCoverage, "gain_weights",
                        lambda self, rows, takes, gains, *a, **k: np.ones(len(gains)))
    sc = skewed_star()
    policy = netsim.policy.make_policy("pact", {"replan": False})
    res = netsim.simulate(sc, policy=policy, seed=0, raise_errors=True)
    plan = policy.plans[0]
    assert plan.feasible and plan.info["extended_epochs"] > 0
    assert plan.losses[-1] <= 0.6 * (1 + 1e-9)
    np.testing.assert_allclose(res.epochs["loss"].to_numpy(), plan.losses, rtol=1e-9)
    assert res.runs.iloc[0]["target_reached"]
