"""DepL as a policy: the probability promise over seeds, infeasibility, and model switching."""

import json
import math

import numpy as np
import pytest

import netsim
from netsim.policy import make_policy
from netsim.scenario.loading import load_scenario

SMALL = "experiments/depl/scenarios/small.yaml"
N_SEEDS = 200


@pytest.fixture(scope="module")
def small():
    return load_scenario(SMALL)


def success_rate(scenario, name, pi, n_seeds=N_SEEDS):
    """Share of seeds whose run reached the target (one policy object: planned once)."""
    policy = make_policy(name, {**scenario.policies[name], "target_probability": pi})
    hits = [bool(netsim.simulate(scenario, policy=policy, seed=s).runs.target_reached.iloc[0])
            for s in range(n_seeds)]
    return float(np.mean(hits)), policy


@pytest.fixture(scope="module")
def mean_rate(small):
    return success_rate(small, "depl-mean", 0.9)[0]


# Issue 54 (the default suite's time): pi 0.9 in the default suite, 0.8 and 0.95 (the same
# check over another 200 seeds each, 3.4 s apiece) under soak: python -m pytest -m soak
@pytest.mark.parametrize("pi", [pytest.param(0.8, marks=pytest.mark.soak), 0.9,
                                pytest.param(0.95, marks=pytest.mark.soak)])
def test_depl_keeps_its_probability_promise(small, mean_rate, pi):
    """Online DepL (the default) reaches L* in pi of the runs, within 2 standard errors over
    200 seeds both ways: it keeps the promise and does not buy certainty instead."""
    rate, policy = success_rate(small, "depl", pi)
    se = math.sqrt(pi * (1 - pi) / N_SEEDS)
    assert pi - 2 * se <= rate <= pi + 2 * se, \
        f"DepL reached L* in {rate:.3f} of runs, promised {pi}"
    assert policy.plan.final_level <= small.training.target_loss
    # the expectation-driven plan ignores the spread: it misses the target far more often
    assert mean_rate < pi - 3 * se
    assert mean_rate < rate - 0.15


def test_unreachable_goal_is_reported_before_training(small):
    sc = small.model_copy(update={"training": small.training.model_copy(
        update={"target_loss": 0.06})})  # floor 0.05 x the 0.9-quantile factor > 0.06
    res = netsim.simulate(sc, policy="depl", seed=0)
    run = res.runs.iloc[0]
    assert run.status == "target_missed" and run.epochs == 0 and len(res.epochs) == 0
    assert "infeasible before training" in run.error
    assert "0.9-quantile" in run.error and "0.06" in run.error


def test_deadline_too_short_is_infeasible(small):
    sc = small.model_copy(update={"training": small.training.model_copy(
        update={"deadline_s": 1.0})})
    run = netsim.simulate(sc, policy="depl", seed=0).runs.iloc[0]
    assert run.status == "target_missed" and "infeasible before training" in run.error


def test_reachable_for_the_mean_but_not_for_pi_095(small):
    """A goal the mean meets but the 0.95-quantile cannot: depl refuses, depl-mean trains."""
    sc = small.model_copy(update={"training": small.training.model_copy(
        update={"max_epochs": 4})})
    depl = netsim.simulate(sc, policy="depl", seed=0, params={"target_probability": 0.95})
    mean = netsim.simulate(sc, policy="depl-mean", seed=0)
    assert "infeasible" in depl.runs.error.iloc[0]
    assert mean.runs.epochs.iloc[0] > 0


def test_switching_is_chosen_when_cheaper_than_any_single_model(small):
    depl = make_policy("depl", small.policies["depl"])
    single = make_policy("never-switch", small.policies["never-switch"])
    res = netsim.simulate(small, policy=depl, seed=1)
    netsim.simulate(small, policy=single, seed=1)
    assert depl.plan.switches >= 1
    assert depl.plan.cost_j < single.plan.cost_j  # cheaper than the best single model
    variants = res.epochs.variant.tolist()
    assert any(a != b for a, b in zip(variants, variants[1:], strict=False))


def test_no_switch_when_switching_destroys_progress(small):
    """Control: if a switch loses all progress the cheapest plan is a single model."""
    model = small.model.model_copy(update={"loss": small.model.loss.model_copy(
        update={"prune_progress_loss": 50.0})})
    sc = small.model_copy(update={"model": model})
    depl = make_policy("depl", sc.policies["depl"])
    netsim.simulate(sc, policy=depl, seed=0)
    assert depl.plan.feasible and depl.plan.switches == 0


def test_plan_is_followed_and_stops_when_spent(small):
    depl = make_policy("depl", {**small.policies["depl"], "replan": False})
    runs = [netsim.simulate(small, policy=depl, seed=s) for s in range(40)]
    planned = len(depl.plan.variants)
    for res in runs:
        run = res.runs.iloc[0]
        assert run.epochs <= planned
        assert res.epochs.variant.tolist() == list(depl.plan.variants[: run.epochs])
        if not run.target_reached:
            assert run.status == "target_missed" and "plan complete" in run.error
    # the predicted cost is what the engine charges for the whole plan (no contention here)
    full = [r.runs.energy_j.iloc[0] for r in runs if r.runs.epochs.iloc[0] == planned]
    assert full and full[0] == pytest.approx(depl.plan.cost_j, rel=1e-6)


def _replans(run) -> int:
    return max(int(json.loads(i).get("replans", 0)) for i in run.epochs["info"])


@pytest.mark.soak  # (a study over 60-200 seeds: python -m pytest -m soak)
def test_online_depl_follows_its_plan_while_the_world_follows_the_model(small):
    """With the model right, online DepL re-plans only where a run's losses are implausibly
    bad for the model (band_sigmas), and spends less than re-planning whenever losses come
    out worse than planned (band_sigmas 0, the rule before 0.4), which reaches the target in
    every run: certainty the promise does not ask for."""
    params = {**small.policies["depl"], "target_probability": 0.9}
    online = make_policy("depl", params)
    eager = make_policy("depl", {**params, "band_sigmas": 0.0})
    seeds = range(N_SEEDS)
    runs = [netsim.simulate(small, policy=online, seed=s) for s in seeds]
    eager_runs = [netsim.simulate(small, policy=eager, seed=s) for s in seeds]
    assert sum(_replans(r) > 0 for r in runs) <= 0.02 * N_SEEDS  # band 3: rare false alarms
    assert sum(_replans(r) > 0 for r in eager_runs) > 0.1 * N_SEEDS
    eager_rate = np.mean([bool(r.runs.iloc[0].target_reached) for r in eager_runs])
    assert eager_rate > 0.9 + 2 * math.sqrt(0.09 / N_SEEDS)  # overshoots pi
    energy = np.mean([r.runs.iloc[0].energy_j for r in runs])
    eager_energy = np.mean([r.runs.iloc[0].energy_j for r in eager_runs])
    assert energy < eager_energy
    assert all(r.runs.iloc[0].epochs <= small.training.max_epochs for r in runs + eager_runs)


@pytest.mark.soak  # (a study over 60-200 seeds: python -m pytest -m soak)
def test_online_depl_replans_when_the_world_departs_from_its_model(small):
    """Ground truth learning at 70 % of the model's pace: the offline plan misses the target
    in every run; online DepL sees its losses depart from the model (the run's offset beyond
    the band), re-plans from the tracked state and reaches it in most runs (0.80 over these
    seeds at band 3: the departure is seen late; docs/depl.md)."""
    slow = small.model_copy(update={"training": small.training.model_copy(
        update={"truth_sample_efficiency": 0.7})})
    params = {**small.policies["depl"], "target_probability": 0.9}
    online = make_policy("depl", params)
    offline = make_policy("depl", {**params, "replan": False})
    n = 60
    runs = [netsim.simulate(slow, policy=online, seed=s) for s in range(n)]
    offline_rate = np.mean([bool(netsim.simulate(slow, policy=offline, seed=s)
                                 .runs.iloc[0].target_reached) for s in range(n)])
    rate = np.mean([bool(r.runs.iloc[0].target_reached) for r in runs])
    assert offline_rate < 0.2
    assert rate > offline_rate + 0.5
    assert sum(_replans(r) > 0 for r in runs) > n / 2
    why = [json.loads(i).get("replanned", "") for r in runs for i in r.epochs["info"]]
    assert any(w.startswith("re-planned: losses worse than the model") for w in why)


def test_a_plan_whose_final_level_meets_the_target_is_kept_whole():
    """The graph's final-loss level is a sufficient condition for pi: a plan meeting it is
    never dropped because the first-passage quadrature lands a hair under pi (seen on the
    default network, 3 of mlp-digits' variants, at 25 and 100 devices before the fix)."""
    from netsim.engine import resolve_scenario
    from netsim.training.models import resolve_model

    base = load_scenario("default")
    full = resolve_model(base.model)
    model = full.model_copy(update={"variants": tuple(full.variants[i] for i in (0, 1, 3))})
    for n in (25, 100):
        sc = resolve_scenario(base.model_copy(update={
            "generate": base.generate.model_copy(update={"n_devices": n}), "model": model,
            "training": base.training.model_copy(update={"max_epochs": 200})}), 0)
        depl = make_policy("depl", {"target_probability": 0.9})
        depl.reset(sc, None)
        assert depl.plan.feasible, depl.plan.reason
