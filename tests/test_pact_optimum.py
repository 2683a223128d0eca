"""PACT against its exact reference (pact-optimum) on random small instances."""

import numpy as np
import pytest

import netsim
from policies.pact.instances import scenario_problem, small_instance
from policies.pact.optimum import MIP_REL_GAP, check_size, solve_optimum
from policies.pact.planner import Planner

EPSILONS = (0.05, 0.025, 0.0125)   # each half the previous: nested grids
# Issue 54 (the default suite's time): the three properties over the first 10 random
# instances in the default suite (7 s), over all 20 (13-21 s: each instance's MILP and three
# PACT plans) in the soak suite (test_the_three_properties_over_20_instances below); the 10
# are the first 10 of the 20 (the same seeds). The gap's mean over eps holds over the first
# 4-6 and 10-20 instances, not 7-9 (instance 7's coarse gap is 12 %): 10, not fewer.
N_INSTANCES = 10
N_INSTANCES_SOAK = 20


def _instances(n: int) -> list:
    """``n`` feasible random instances (3 devices, 3 variants, 5 epochs) with their optimum."""
    out, seed = [], 0
    while len(out) < n:
        problem = scenario_problem(small_instance(np.random.default_rng(seed), n_devices=3,
                                                  n_variants=3, max_epochs=5))
        seed += 1
        opt = solve_optimum(problem)
        if opt.feasible:
            plans = {eps: Planner(eps).plan(problem) for eps in EPSILONS}
            out.append((problem, opt, plans))
    return out


@pytest.fixture(scope="module")
def instances():
    """10 feasible random instances with their optimum (20 under soak: see N_INSTANCES)."""
    return _instances(N_INSTANCES)


def test_pact_is_never_below_the_optimum_and_within_2_percent_at_finest_eps(instances):
    _never_below_the_optimum_and_within_2_percent(instances)


def _never_below_the_optimum_and_within_2_percent(instances) -> None:
    for _, opt, plans in instances:
        for eps, plan in plans.items():
            assert plan.feasible, (eps, plan.reason)
            assert plan.energy_j >= opt.energy_j * (1 - MIP_REL_GAP), eps
        assert plans[EPSILONS[-1]].energy_j <= 1.02 * opt.energy_j


def test_gap_does_not_grow_as_eps_shrinks(instances):
    _gap_does_not_grow_as_eps_shrinks(instances)


def _gap_does_not_grow_as_eps_shrinks(instances) -> None:
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
    _plans_meet_target_deadline_and_epoch_limit(instances)


def _plans_meet_target_deadline_and_epoch_limit(instances) -> None:
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


@pytest.mark.soak  # (the three properties above over 20 instances, 13-21 s: -m soak)
def test_the_three_properties_over_20_instances():
    """The default suite checks them over 8 instances (N_INSTANCES); here over all 20."""
    instances = _instances(N_INSTANCES_SOAK)
    _never_below_the_optimum_and_within_2_percent(instances)
    _gap_does_not_grow_as_eps_shrinks(instances)
    _plans_meet_target_deadline_and_epoch_limit(instances)


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
    # local steps that follow the samples (a batch size and a step exponent): refused too;
    # without a batch size the steps are E whatever the samples, and the gain stays linear
    star["model"]["loss"]["local_step_exponent"] = 0.5
    star["training"]["batch_size"] = 10
    run = netsim.simulate(star, "pact-optimum", seed=0).runs.iloc[0]
    assert run["status"] == "failed" and "local_step_exponent" in run["error"]
    del star["training"]["batch_size"]
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
    assert run["plan_status"] == "optimal" and run["plan_gap"] <= MIP_REL_GAP
    run = quick.runs.iloc[0]
    if run["status"] == "failed":  # no plan found at all: the error gives the bound
        assert "lower bound" in run["error"]
    else:
        assert run["plan_status"] in ("time_limit", "optimal")
        assert 0.0 <= run["plan_gap"] <= 1.0
        if run["plan_status"] == "optimal":
            assert run["planned_energy_j"] == pytest.approx(
                slow.runs.iloc[0]["planned_energy_j"], rel=MIP_REL_GAP)


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
        assert seeded.info["milp_j"] == pytest.approx(opt.info["milp_j"], rel=MIP_REL_GAP)
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


def _tiny(seed: int, factor: float, deadline_factor: float) -> dict:
    """A 2-device, 2-variant, 2-epoch star with 1-4 samples per device: small enough to
    enumerate every plan."""
    rng = np.random.default_rng(seed)
    sc = small_instance(rng, n_devices=2, n_variants=2, max_epochs=2)
    total = 0
    for dev in sc["devices"][1:]:
        dev["samples"] = int(rng.integers(1, 5))
        total += dev["samples"]
    loss = sc["model"]["loss"]
    loss["samples_half"] = total * rng.uniform(0.5, 2.0)
    from netsim.training.loss import CurveParams

    curve = CurveParams(loss["initial_loss"], loss["floor_full"], loss["samples_half"],
                        loss["exponent"])
    sc["training"]["target_loss"] = float(curve.mean(total * factor))
    sc["training"]["deadline_s"] *= deadline_factor
    return sc


def _brute_force(problem) -> float:
    """The least MILP energy over every plan of at most two epochs (any variant order
    forward, any samples), its loss from the progress model's own replay (inf if none)."""
    from itertools import combinations_with_replacement, product

    from policies.pact.optimum import milp_energy
    from policies.pact.planner import Plan, PlannedEpoch

    dev = np.flatnonzero(problem.usable)
    options = []
    for u in problem.variants:
        for d in product(*(range(int(problem.table.samples[i]) + 1) for i in dev)):
            if any(d):
                options.append((u, {int(i): s for i, s in zip(dev, d, strict=True) if s}))
    best = np.inf
    for k in (1, 2):
        for combo in combinations_with_replacement(range(len(options)), k):
            epochs = sorted((options[c] for c in combo), key=lambda e: e[0])
            plan = Plan(tuple(PlannedEpoch(u, p, 0.0, 0.0) for u, p in epochs))
            state = problem.predictor.replay(problem.start, [
                (e.variant, e.samples, len(e.participants)) for e in plan.epochs])[-1]
            if problem.predictor.mean(state) > problem.target_loss * (1 + 1e-12):
                continue
            from policies.pact.optimum import plan_of

            timed = plan_of(problem, epochs)
            if timed.time_s > problem.time_left_s * (1 + 1e-12):
                continue
            best = min(best, milp_energy(problem, plan))
    return best


def test_the_optimum_is_the_least_energy_over_every_plan_enumerated():
    """On tiny instances every plan (<= 2 epochs, any variants forward, any samples) is
    enumerated and its loss replayed by the progress model: the configuration MILP's plan is
    the cheapest, proven optimal, or it says none exists where none does."""
    # Issue 54 (the default suite's time): 6 seeds here (3.5 s), all 12 under soak (below)
    _least_energy_over_every_plan_enumerated(range(6))


@pytest.mark.soak  # (12 seeds x 3 cases, 7 s: python -m pytest -m soak)
def test_the_optimum_is_the_least_energy_over_every_plan_enumerated_over_12_seeds():
    _least_energy_over_every_plan_enumerated(range(12))


def _least_energy_over_every_plan_enumerated(seeds) -> None:
    checked = feasible = 0
    for seed in seeds:
        for factor, deadline in ((0.6, 1.0), (1.3, 1.0), (1.3, 0.4)):
            problem = scenario_problem(_tiny(seed, factor, deadline))
            truth = _brute_force(problem)
            opt = solve_optimum(problem)
            checked += 1
            if not np.isfinite(truth):
                assert not opt.feasible, (seed, factor, deadline)
                continue
            feasible += 1
            assert opt.feasible and opt.info["status"] == "optimal"
            # a real plan: never below the enumerated optimum, and within the proven gap of it
            assert truth * (1 - 1e-9) <= opt.info["milp_j"] <= truth * (1 + MIP_REL_GAP), \
                (seed, factor, deadline)
    assert feasible >= checked // 3 and feasible < checked  # both kinds of case occur


def test_the_held_out_sized_instance_is_proven_within_60_s_and_never_worse_than_pact():
    """6 devices x 3 variants x 40 epochs (issue 25's size): proven optimal within 60 s,
    seeded with PACT's plan and never above it; the plan meets the target, the deadline and
    the epoch limit under the progress model."""
    from policies.pact.optimum import milp_energy

    problem = scenario_problem(small_instance(np.random.default_rng(0), 6, 3, 40))
    pact = Planner(0.025).plan(problem)
    opt = solve_optimum(problem, time_limit_s=60.0, incumbent=pact)
    assert opt.info["status"] == "optimal" and opt.info["gap"] <= MIP_REL_GAP
    assert opt.planning_s < 60.0
    assert opt.info["milp_j"] <= milp_energy(problem, pact) * (1 + 1e-9)
    assert opt.info["bound_j"] <= opt.info["milp_j"] * (1 + 1e-9)
    assert opt.loss <= problem.target_loss * (1 + 1e-9)
    assert opt.time_s <= problem.time_left_s and len(opt.epochs) <= problem.epochs_left


def test_optimum_refuses_a_network_whose_costs_its_linear_model_does_not_reproduce():
    """Four phones in a generated Wi-Fi/LTE cell (shared media, radio energy): the linear cost
    differs from the simulator's, so the reference refuses with the figures; the same fleet on
    private links (shared_media false, nothing binding) is taken and proven."""
    sc = netsim.scenario.loading.scenario_data("default")
    # Issue 54 (the default suite's time): 4 phones, not 6: refused on the shared cell the same
    # way (the linear cost 45 % off, 39 % at 6), and the private fleet's MILP is proven in
    # 0.5 s instead of 14 s.
    # small-cnn's curve with participation left out: the MILP is linear in the samples only
    # with participant_exponent 0 (its fitted 0.96 is refused before the costs are compared)
    from netsim.training.models import builtin_models

    model = builtin_models()["small-cnn"].model_dump(mode="json")
    model["loss"]["participant_exponent"] = 0.0
    sc = {**sc, "model": model,
          "training": {**sc["training"], "target_loss": 0.8, "max_epochs": 40,
                       "deadline_s": "10 hours"},
          "generate": {**sc["generate"], "n_devices": 4, "mix": {"phone": 1.0}}}
    with pytest.raises(ValueError, match="linear cost differs from the simulator's"):
        check_size(scenario_problem(sc))
    private = {**sc, "generate": {**sc["generate"], "shared_media": False}}
    problem = scenario_problem(private)
    check_size(problem)
    opt = solve_optimum(problem, time_limit_s=60.0, incumbent=Planner(0.025).plan(problem))
    assert opt.info["status"] == "optimal"
    assert opt.energy_j == pytest.approx(opt.info["milp_j"], rel=1e-6)


def test_online_the_reference_follows_its_plan_and_replans_only_when_the_world_departs():
    """On the small star with the run's noise: while the world follows the plan no epoch
    re-solves (the plan's first epoch count is kept); when the noise leaves the plan used up
    above the target, it re-plans from the observed loss and still reaches the target."""
    import json

    replanned = followed = 0
    for seed in range(8):
        res = netsim.simulate("experiments/pact/small.yaml", "pact-optimum", seed=seed)
        run = res.runs.iloc[0]
        assert run["status"] == "ok", run["error"]
        infos = [json.loads(i) for i in res.epochs["info"]]
        first_plan = infos[0]["planned_epochs"]
        replans = [i["replans"] for i in infos]
        assert replans == sorted(replans)  # counted, never reset
        if replans[-1] == 0:
            followed += 1
            assert run["epochs"] == first_plan
            planned = [i["planned_energy_j"] for i in infos]
            assert max(planned) - min(planned) <= 1e-9 * max(planned)  # one plan throughout
        else:
            replanned += 1
            assert run["epochs"] > first_plan
            assert replans.index(1) == first_plan  # only once the plan was used up
    assert followed and replanned
