"""DepL against the exact reference (depl-optimum), and the reference's search against the
enumeration of every plan."""

import math

import numpy as np
import pytest

import netsim
from netsim.devices import build_device_table
from netsim.engine import resolve_scenario
from netsim.policy import make_policy
from netsim.scenario.loading import load_scenario
from netsim.training.loss import LossPredictor
from policies.depl import plan_search, plan_success
from policies.depl.optimum import (
    EpochOption,
    dominance_slack,
    enumerate_plans,
    search_plans,
)
from policies.depl.planner import epoch_gains, epoch_options

SMALL = "experiments/depl/scenarios/small.yaml"
FRACTIONS = [0.25, 0.5, 0.75, 1.0]


def instance(target_loss, pi, max_epochs=8, prune_progress_loss=1.0, **loss):
    sc = load_scenario(SMALL)
    model = sc.model.model_copy(update={"loss": sc.model.loss.model_copy(
        update={"prune_progress_loss": prune_progress_loss, **loss})})
    training = sc.training.model_copy(update={"target_loss": target_loss,
                                              "target_probability": pi,
                                              "max_epochs": max_epochs})
    return resolve_scenario(sc.model_copy(update={"model": model, "training": training}), 0)


def large_instance(target_loss=0.3, pi=0.9, max_epochs=40, samples=1000):
    """6 devices (a server and five phones), 3 variants, a 40-epoch horizon: 3^40 sequences."""
    sc = load_scenario(SMALL)
    phones = [d.model_copy(update={"samples": samples}) for d in sc.devices if d.samples]
    devices = [sc.devices[0], *phones, phones[0].model_copy(update={"id": "phone-5"})]
    links = [*sc.links, sc.links[0].model_copy(update={"b": "phone-5"})]
    training = sc.training.model_copy(update={"target_loss": target_loss,
                                              "target_probability": pi,
                                              "max_epochs": max_epochs})
    return resolve_scenario(sc.model_copy(update={"devices": devices, "links": links,
                                                  "training": training}), 0)


def options_of(sc, fractions=FRACTIONS):
    """The search's epoch options of a resolved scenario, and its predictor."""
    base = LossPredictor(sc.model, sc.training)
    table = build_device_table(sc)
    budget = sc.training.deadline_s / sc.training.max_epochs
    out = []
    for phi in fractions:
        _, clusters = epoch_options(table, sc.model, sc.training, phi,
                                    range(len(sc.model.variants)), budget)
        out.append(EpochOption(np.array([c.energy_j if c else np.inf for c in clusters]),
                               np.array(epoch_gains(base, clusters))))
    return base, out


class _Pred:
    def __init__(self, base):
        self.base = base


def enumerated(base, options, horizon, target, pi):
    """The cheapest plan meeting pi by enumerating every sequence: (cost, success) or None."""
    best = None
    for o in options:
        for _, _, cost, prob in enumerate_plans(_Pred(base), o.cost_j, o.gain, horizon,
                                                10**7, target):
            ok = np.flatnonzero(prob >= pi)
            if len(ok):
                j = ok[np.argmin(cost[ok])]
                if best is None or cost[j] < best[0]:
                    best = (float(cost[j]), float(prob[j]))
    return best


def success_of(base, option, variants, target):
    """A sequence's success probability, recomputed by the enumeration of that sequence."""
    prob = None
    for seqs, _, _, p in enumerate_plans(_Pred(base), option.cost_j, option.gain,
                                         len(variants), 10**7, target):
        if seqs.shape[0] == len(variants):
            prob = p[np.flatnonzero((seqs.T == np.asarray(variants)).all(axis=1))[0]]
    return float(prob)


def check_search(base, options, horizon, target, pi):
    ref = enumerated(base, options, horizon, target, pi)
    res = search_plans(base, options, horizon, target, pi, time_limit_s=60)
    assert res.status == "optimal" and res.gap == 0.0
    if ref is None:
        assert res.option == -1 and not math.isfinite(res.cost_j)
        return
    assert res.cost_j == pytest.approx(ref[0], rel=1e-12)
    assert res.success >= pi
    assert sum(options[res.option].cost_j[v] for v in res.variants) == pytest.approx(res.cost_j)
    assert success_of(base, options[res.option], res.variants, target) == \
        pytest.approx(res.success, abs=1e-12)
    if res.variants:  # a tie in cost may pick another plan; the same one otherwise
        assert res.success == pytest.approx(ref[1], abs=1e-12) or res.cost_j == ref[0]


CASES = [(0.3, 0.8, 1.0), (0.3, 0.9, 1.0), (0.3, 0.95, 1.0), (0.35, 0.9, 0.3),
         (0.4, 0.9, 1.0), (0.25, 0.8, 0.5), (0.3, 0.9, 3.0)]


@pytest.mark.parametrize(("target", "pi", "rho"), CASES)
def test_search_equals_the_enumeration_on_the_tested_instances(target, pi, rho):
    sc = instance(target, pi, prune_progress_loss=rho)
    base, options = options_of(sc)
    check_search(base, options, 8, target, pi)


@pytest.mark.parametrize("seed", range(20))
def test_search_equals_the_enumeration_on_random_instances(seed):
    rng = np.random.default_rng(seed)
    # a third of them with a level-dependent spread (as fitted to real runs: the noise level
    # exponent, the pruned variants' spread), a third with a stronger one
    loss = [{}, {"noise_level_exponent": 0.4, "noise_prune": -0.2},
            {"noise_level_exponent": 1.0, "noise_run_sigma": 0.1}][seed % 3]
    horizon = int(rng.integers(5, 8))
    sc = instance(float(rng.uniform(0.3, 0.5)), float(rng.choice([0.7, 0.8, 0.9, 0.95])),
                  horizon, float(rng.uniform(0.0, 3.0)), **loss)
    fractions = sorted(rng.choice(FRACTIONS, size=2, replace=False).tolist())
    base, options = options_of(sc, fractions)
    check_search(base, options, horizon, sc.training.target_loss,
                 sc.training.target_probability)


@pytest.mark.parametrize(("exponent", "sigma", "target", "pi"), [
    (1.0, 0.1, 0.5, 0.8), (1.0, 0.1, 0.6, 0.7), (1.2, 0.08, 0.5, 0.7), (1.0, 0.15, 0.7, 0.7)])
def test_search_equals_the_enumeration_where_more_samples_can_fail_more(exponent, sigma,
                                                                        target, pi):
    """A spread that grows steeply as the loss falls: at large quadrature nodes a lower mean
    can fail more, and dominance takes the slack of dominance_slack."""
    sc = instance(target, pi, 7, noise_level_exponent=exponent, noise_run_sigma=sigma)
    base, options = options_of(sc)
    x, _ = plan_success.quadrature()
    assert dominance_slack(base, x, options, 7, target).max() > 0
    check_search(base, options, 7, target, pi)


def test_search_on_a_large_instance_bound_and_optimum():
    """6 devices x 3 variants x 40 epochs (3^40 sequences): stopped early, the search returns
    a plan meeting pi with a bound at most the optimum it proves when let run."""
    sc = large_instance()
    base, options = options_of(sc)
    full = search_plans(base, options, 40, 0.3, 0.9, time_limit_s=60)
    assert full.status == "optimal" and full.gap == 0.0 and full.success >= 0.9
    assert full.cost_j <= search_plans(base, options, 40, 0.3, 0.9, max_states=1).cost_j
    for kwargs in ({"max_states": 300}, {"time_limit_s": 0.3}):
        res = search_plans(base, options, 40, 0.3, 0.9, **kwargs)
        assert res.status in ("state_limit", "time_limit", "optimal")
        assert res.bound_j <= full.cost_j * (1 + 1e-12) <= res.cost_j * (1 + 1e-12)
        assert 0.0 <= res.gap < 1.0 and res.success >= 0.9 and len(res.variants) <= 40
        assert res.elapsed_s < 5.0


@pytest.mark.parametrize(("target", "pi", "rho"), CASES)
def test_depl_is_never_below_and_within_10_percent_of_the_optimum(target, pi, rho):
    sc = instance(target, pi, prune_progress_loss=rho)
    # Both judge success from the same Monte Carlo draws of the loss spread: with different
    # spreads (analytic vs sampled) a plan right at the pi boundary can pass one and not the other.
    same = {"data_fractions": FRACTIONS, "spread": "montecarlo", "mc_draws": 200_000}
    depl = make_policy("depl", same)
    opt = make_policy("depl-optimum", same)
    depl.reset(sc, None)
    opt.reset(sc, None)
    assert depl.plan.feasible == opt.plan.feasible
    if not opt.plan.feasible:
        return
    assert opt.plan.info["status"] == "optimal" and opt.plan.info["gap"] == 0.0
    assert depl.plan.cost_j >= opt.plan.cost_j * (1 - 1e-9)
    assert depl.plan.cost_j <= opt.plan.cost_j * 1.10
    # and the optimum's plan really meets pi under DepL's own (analytic) predictor
    assert opt.plan.final_level <= target * 1.001


def test_optimum_on_a_large_instance_records_status_and_gap():
    """6 devices x 3 variants x 40 epochs (the enumeration's 3^40 sequences): the run follows
    the best plan found within the time limit and records what was proven."""
    sc = large_instance()
    for limit, status in ((0.01, "time_limit"), (30.0, "optimal")):
        opt = make_policy("depl-optimum", {"data_fractions": FRACTIONS, "time_limit_s": limit,
                                           "replan": False})
        run = netsim.simulate(sc, policy=opt, seed=0).runs.iloc[0]
        assert run["status"] != "failed" and run["plan_status"] == status
        assert 0.0 <= run["plan_gap"] < 1.0 and (run["plan_gap"] == 0.0) == (status == "optimal")
        assert opt.plan.planning_s < 10.0 and opt.plan.info["bound_j"] <= opt.plan.cost_j


def test_optimum_without_a_plan_at_its_limit_fails_with_the_bound(monkeypatch):
    # without its first incumbent (the best plan of one variant or one switch), the search
    # stopped after a few states has no plan: the run fails with the bound, never a result
    monkeypatch.setattr(plan_search, "_two_phase", lambda *args: None)
    sc = large_instance()
    opt = make_policy("depl-optimum", {"data_fractions": [1.0], "time_limit_s": 0.2,
                                       "max_states": 50})
    with pytest.raises(ValueError, match="proven lower bound"):
        opt.reset(sc, None)
