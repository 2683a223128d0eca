"""PACT against its exact reference (pact-optimum) on random small instances."""

import numpy as np
import pytest

import netsim
from policies.pact.instances import scenario_problem, small_instance
from policies.pact.optimum import MIP_REL_GAP, check_size, solve_optimum
from policies.pact.planner import Planner

EPSILONS = (0.05, 0.025, 0.0125)   # each half the previous: nested grids
N_INSTANCES = 20


@pytest.fixture(scope="module")
def instances():
    """20 feasible random instances (3 devices, 3 variants, 5 epochs) with their optimum."""
    out, seed = [], 0
    while len(out) < N_INSTANCES:
        problem = scenario_problem(small_instance(np.random.default_rng(seed), n_devices=3,
                                                  n_variants=3, max_epochs=5))
        seed += 1
        opt = solve_optimum(problem)
        if opt.feasible:
            plans = {eps: Planner(eps).plan(problem) for eps in EPSILONS}
            out.append((problem, opt, plans))
    return out


def test_pact_is_never_below_the_optimum_and_within_2_percent_at_finest_eps(instances):
    for _, opt, plans in instances:
        for eps, plan in plans.items():
            assert plan.feasible, (eps, plan.reason)
            assert plan.energy_j >= opt.energy_j * (1 - 10 * MIP_REL_GAP), eps
        assert plans[EPSILONS[-1]].energy_j <= 1.02 * opt.energy_j


def test_gap_does_not_grow_as_eps_shrinks(instances):
    gaps = np.array([[plans[e].energy_j / opt.energy_j - 1 for e in EPSILONS]
                     for _, opt, plans in instances])
    # the graph's own best path: never worse on a refined grid (nested grids)
    graph = np.array([[plans[e].info["graph_energy_j"] for e in EPSILONS]
                      for _, _, plans in instances])
    assert np.all(np.diff(graph, axis=1) <= 1e-9 * graph[:, :1])
    # after removing the rounding slack: per instance at most 0.5 point worse, on average better
    assert np.all(np.diff(gaps, axis=1) <= 0.005)
    assert np.all(np.diff(gaps.mean(axis=0)) <= 0)


def test_plans_meet_target_deadline_and_epoch_limit_under_the_predictor(instances):
    for problem, opt, plans in instances:
        for plan in [opt, *plans.values()]:
            state = problem.start
            for ep in plan.epochs:
                state = problem.predictor.step(state, ep.samples, ep.variant,
                                           participants=len(ep.participants))
                assert all(1 <= s <= problem.table.samples[i] for i, s in ep.participants.items())
            assert problem.predictor.mean(state) <= problem.target_loss * (1 + 1e-9)
            assert sum(ep.time_s for ep in plan.epochs) <= problem.time_left_s
            assert len(plan.epochs) <= problem.epochs_left


def test_optimum_refuses_instances_too_large_with_the_reason():
    problem = scenario_problem("default")
    with pytest.raises(ValueError, match="too large"):
        check_size(problem)
    run = netsim.simulate("default", "pact-optimum", seed=0).runs.iloc[0]
    assert run["status"] == "failed" and "too large" in run["error"] and run["epochs"] == 0


def test_optimum_refuses_what_its_linear_milp_does_not_model(star):
    """A participant exponent makes an epoch's gain non-linear in its samples: refused."""
    star["model"]["loss"] = {"initial_loss": 2.3, "floor_full": 0.1, "samples_half": 2000.0,
                             "exponent": 1.0, "participant_exponent": 0.5}
    star["training"]["max_epochs"] = 5
    run = netsim.simulate(star, "pact-optimum", seed=0).runs.iloc[0]
    assert run["status"] == "failed" and "participant_exponent" in run["error"]
    star["model"]["loss"]["participant_exponent"] = 0.0
    run = netsim.simulate(star, "pact-optimum", seed=0).runs.iloc[0]
    assert run["status"] != "failed", run["error"]


def test_a_time_limit_gives_the_best_plan_with_its_bound_never_a_result(star):
    """HiGHS stopped early: the run follows the best plan found and records status
    time_limit with a proven bound <= its MILP energy; with time, the same instance is
    proven optimal (gap 0)."""
    star["training"].update(max_epochs=12, target_loss=1.7)
    quick = netsim.simulate(star, "pact-optimum", seed=0, params={"time_limit_s": 0.05})
    slow = netsim.simulate(star, "pact-optimum", seed=0, params={"time_limit_s": 60})
    run = slow.runs.iloc[0]
    assert run["plan_status"] == "optimal" and run["plan_gap"] <= 1e-6
    run = quick.runs.iloc[0]
    if run["status"] == "failed":  # no plan found at all: the error gives the bound
        assert "lower bound" in run["error"]
    else:
        assert run["plan_status"] in ("time_limit", "optimal")
        assert 0.0 <= run["plan_gap"] <= 1.0
        if run["plan_status"] == "optimal":
            assert run["planned_energy_j"] == pytest.approx(
                slow.runs.iloc[0]["planned_energy_j"], rel=1e-6)


def test_pacts_plan_as_incumbent_keeps_the_optimum_and_is_never_beaten(instances):
    """Seeded with PACT's plan, the reference proves the same optimum (the incumbent is a
    cutoff, never a constraint on the answer); its MILP energy is never above PACT's, and the
    incumbent's MILP energy is its plan's energy as netsim.costs re-evaluates it."""
    from policies.pact.optimum import milp_energy

    for problem, opt, plans in instances[:8]:
        pact = plans[0.025]
        assert milp_energy(problem, pact) == pytest.approx(pact.energy_j, rel=1e-6)
        seeded = solve_optimum(problem, incumbent=pact)
        assert seeded.info["status"] == "optimal"
        assert seeded.info["milp_j"] == pytest.approx(opt.info["milp_j"], rel=10 * MIP_REL_GAP)
        assert seeded.info["milp_j"] <= milp_energy(problem, pact) * (1 + 1e-9)


def test_a_reference_stopped_early_is_never_worse_than_pact():
    """6 devices x 3 variants x 40 epochs with 0.2 s per MILP: HiGHS cannot prove it, and the
    answer is PACT's plan or better, with the bound below it, status time_limit."""
    problem = scenario_problem(small_instance(np.random.default_rng(0), 6, 3, 40))
    pact = Planner(0.025).plan(problem)
    assert pact.feasible
    ref = solve_optimum(problem, time_limit_s=0.2, incumbent=pact)
    from policies.pact.optimum import milp_energy

    assert ref.info["milp_j"] <= milp_energy(problem, pact) * (1 + 1e-9)
    assert ref.info["status"] in ("time_limit", "optimal")
    assert ref.info["bound_j"] <= ref.info["milp_j"] * (1 + 1e-9)
    if ref.info["status"] == "time_limit":
        assert 0.0 <= ref.info["gap"] <= 1.0
