"""PACT: candidates, plans, infeasibility, compression choices, online vs offline, baselines."""

import copy

import numpy as np
import pytest

import netsim
from netsim.costs import estimate_epoch
from netsim.policy import make_policy
from policies.pact.candidates import build_candidates
from policies.pact.instances import scenario_problem, small_instance
from policies.pact.planner import Planner

LOSS = {"initial_loss": 2.303, "floor_full": 0.05, "floor_prune": 0.2, "samples_half": 2000.0,
        "exponent": 0.7, "prune_progress_loss": 1.0}


def star(params: float = 2.0e6, bandwidth_bps: float = 1.0e7, floor_prune: float = 0.2,
         prune_progress_loss: float = 1.0, **training) -> dict:
    """An aggregator and four devices on direct links; noise-free surrogate loss."""
    devices = [{"id": "agg", "flop_per_s": 1e12, "memory_bytes": 6.4e10, "power_busy_w": 100.0,
                "power_idle_w": 10.0}]
    links = []
    for i, (flops, samples) in enumerate([(2e9, 400), (5e9, 600), (1e10, 300), (3e9, 500)]):
        devices.append({"id": f"d{i}", "flop_per_s": flops, "memory_bytes": 8e9,
                        "power_busy_w": 6.0, "power_idle_w": 1.0, "samples": samples})
        links.append({"a": "agg", "b": f"d{i}", "bandwidth_bps": bandwidth_bps,
                      "latency_s": 0.02, "energy_j_per_bit": 3e-7})
    return {
        "name": "pact-star", "devices": devices, "links": links, "aggregator": "agg",
        "model": {"name": "m", "params": params, "bytes_per_param": 4,
                  "train_flop_per_sample": 5e6,
                  "variants": [{"name": "full", "params_fraction": 1.0, "flop_fraction": 1.0},
                               {"name": "p50", "params_fraction": 0.5, "flop_fraction": 0.5},
                               {"name": "p75", "params_fraction": 0.25, "flop_fraction": 0.25}],
                  "loss": {**LOSS, "floor_prune": floor_prune,
                           "prune_progress_loss": prune_progress_loss}},
        "training": {"target_loss": 0.5, "deadline_s": 3600, "max_epochs": 60, **training},
    }


def test_candidate_costs_are_the_engine_formulas():
    problem = scenario_problem(small_instance(np.random.default_rng(3), n_devices=5))
    for v in range(3):
        cands = build_candidates(problem, v, 0.05)
        assert len(cands) > 0
        for c in np.random.default_rng(v).choice(len(cands), size=20):
            samples = np.zeros(problem.table.n)
            for i, s in cands.participants(int(c)).items():
                samples[i] = s
            assert samples.sum() == cands.samples[c]
            est = estimate_epoch(problem.table, problem.model, v, samples)
            assert est.energy_j == pytest.approx(cands.energy_j[c], rel=1e-9)
            assert est.time_s == pytest.approx(cands.time_s[c], rel=1e-9)


def _cell_star(kind: str) -> dict:
    """star() with its four devices as stations of one cell behind a 1 Gbit/s backhaul."""
    data = star(params=2.0e6, bandwidth_bps=2.0e7)
    for link in data["links"]:
        link.update(a="ap", medium="cell")
    data["links"].append({"a": "agg", "b": "ap", "bandwidth_bps": 1e9, "latency_s": 0.001})
    data["media"] = [{"id": "cell", "kind": kind}]
    return data


@pytest.mark.parametrize("kind", ["wifi", "cellular"])
def test_candidates_price_the_air_time_their_participants_share(kind):
    """On a cell, a candidate's time is at least the air time its participants' transfers
    take (netsim's bound, which the simulated epoch respects), and at most the simulated
    epoch; the bound lengthens candidates the contention-free form would underprice."""
    problem = scenario_problem(netsim.load_scenario(_cell_star(kind)))
    priced = 0
    for v in range(3):
        cands = build_candidates(problem, v, 0.05)
        coef = cands.coef
        for c in range(len(cands)):
            parts = cands.participants(c)
            samples = np.zeros(problem.table.n)
            for i, n in parts.items():
                samples[i] = n
            pos = np.isin(coef.idx[coef.shared_owner], list(parts))
            busy = np.bincount(coef.shared_hop[pos], weights=coef.shared_s[pos]).max(initial=0)
            agg = coef.agg_s * len(parts)
            est = estimate_epoch(problem.table, problem.model, v, samples)
            assert busy + agg <= cands.time_s[c] * (1 + 1e-9)
            assert cands.time_s[c] <= est.time_s * (1 + 1e-9)
            at = np.searchsorted(coef.idx, list(parts))
            free = np.max(coef.transfer_s[at] + coef.s_per_sample[at] * np.array(
                list(parts.values()))) + agg
            priced += cands.time_s[c] > free * (1 + 1e-6)
    assert priced > 0


def _check_plan(problem, plan):
    assert plan.feasible, plan.reason
    state = problem.start
    for ep in plan.epochs:
        state = problem.predictor.step(state, ep.samples, ep.variant,
                                           participants=len(ep.participants))
    assert problem.predictor.mean(state) <= problem.target_loss * (1 + 1e-9)
    assert plan.loss <= problem.target_loss * (1 + 1e-9)
    assert sum(ep.time_s for ep in plan.epochs) <= problem.time_left_s
    assert len(plan.epochs) <= problem.epochs_left


def test_plan_meets_target_and_deadline_under_its_predictor():
    from dataclasses import replace

    problem = scenario_problem(star(params=2e5, bandwidth_bps=5e7))   # compute-bound
    free = Planner(0.05).plan(problem)
    _check_plan(problem, free)
    assert free.mode == "untimed"
    tight = replace(problem, time_left_s=0.9 * free.time_s)          # the deadline binds
    plan = Planner(0.05).plan(tight)
    _check_plan(tight, plan)
    assert plan.mode == "timed" and plan.energy_j >= free.energy_j
    few = replace(problem, epochs_left=len(free.epochs) - 3)           # the epoch limit binds
    plan = Planner(0.05).plan(few)
    _check_plan(few, plan)
    assert plan.energy_j >= free.energy_j


def test_plan_replays_under_local_training():
    """With local exponents (cnn-mnist's are fitted) an epoch's gain is not linear in its
    samples: the slack removal must cut by the exact gain (it once cut by a per-sample gain
    of one sample's steps, and PACT found no plan at all)."""
    sc = star(params=2e5, bandwidth_bps=5e7, batch_size=10)
    sc["model"]["loss"].update({"local_step_exponent": 0.53, "local_epoch_exponent": -0.14})
    problem = scenario_problem(sc)
    plan = Planner(0.05).plan(problem)
    assert plan.feasible, plan.reason
    _check_plan(problem, plan)
    res = netsim.simulate(sc, "pact", seed=0, raise_errors=True)
    run = res.runs.iloc[0]
    assert run["target_reached"] and run["epochs"] == len(plan.epochs)


def test_unreachable_target_stops_with_a_reason_not_a_crash():
    res = netsim.simulate(star(deadline_s=1.0), "pact", seed=0)
    run = res.runs.iloc[0]
    assert run["status"] == "target_missed" and "no plan" in run["error"]
    assert len(res.epochs) == 0
    low = star(target_loss=0.01)   # below every variant's floor
    assert "no plan" in netsim.simulate(low, "pact", seed=0).runs.iloc[0]["error"]


def test_prunes_when_compression_pays():
    # big model on slow links: transfers dominate; pruned floors far below the target
    res = netsim.simulate(star(params=5e6, bandwidth_bps=5e6), "pact", seed=0)
    assert res.runs.iloc[0]["status"] == "ok"
    assert (res.epochs["variant"] > 0).mean() > 0.5
    full = netsim.simulate(star(params=5e6, bandwidth_bps=5e6), "pact-no-compression", seed=0)
    assert res.runs.iloc[0]["energy_j"] < full.runs.iloc[0]["energy_j"]


def test_keeps_the_full_model_when_the_floor_and_jump_cost_too_much():
    # pruned floors at or near the target, and pruning loses most progress
    sc = star(params=2e5, bandwidth_bps=5e7, floor_prune=1.2, prune_progress_loss=5.0)
    res = netsim.simulate(sc, "pact", seed=0)
    assert res.runs.iloc[0]["status"] == "ok"
    assert (res.epochs["variant"] == 0).all()


def test_online_replanning_recovers_when_truth_is_worse_than_predicted():
    sc = star(truth_sample_efficiency=0.7)
    online = netsim.simulate(sc, "pact", seed=0).runs.iloc[0]
    offline = netsim.simulate(sc, "pact", seed=0, params={"replan": False}).runs.iloc[0]
    assert online["status"] == "ok" and online["target_reached"]
    assert offline["status"] == "target_missed" and "used up" in offline["error"]
    assert not offline["target_reached"]


def test_params_come_from_the_scenario_block_and_simulate_overrides_them():
    sc = star()
    sc["policies"] = {"pact": {"epsilon": 0.1, "replan": False}}
    res = netsim.simulate(sc, "pact", seed=0)
    assert '"epsilon": 0.1' in res.runs.iloc[0]["policy_params"]
    res = netsim.simulate(sc, "pact", seed=0, params={"epsilon": 0.2})
    assert '"epsilon": 0.2' in res.runs.iloc[0]["policy_params"]
    with pytest.raises(Exception, match="epsilon"):
        make_policy("pact", {"epsilon": 0.0})


def test_baselines_and_ablations_do_what_their_names_say():
    sc = star(params=5e6, bandwidth_bps=5e6)
    cf = netsim.simulate(sc, "compress-first", seed=0).epochs
    assert (cf["variant"] == 2).all() and (cf["participants"] == 4).all()
    nc = netsim.simulate(sc, "pact-no-compression", seed=0).epochs
    assert (nc["variant"] == 0).all()
    an = netsim.simulate(sc, "pact-all-nodes", seed=0).epochs
    assert (an["participants"] == 4).all() and (an["samples"] == 1800).all()
    assert (an["variant"] > 0).any()


def test_unprune_option_and_deterministic_runs():
    sc = copy.deepcopy(star())
    a = netsim.simulate(sc, "pact", seed=1, params={"allow_unprune": True})
    b = netsim.simulate(sc, "pact", seed=1, params={"allow_unprune": True})
    assert a.runs.iloc[0]["status"] == "ok"
    assert a.epochs[["variant", "samples", "energy_compute_j"]].equals(
        b.epochs[["variant", "samples", "energy_compute_j"]])


@pytest.mark.soak  # (two runs of the experiment, 8 s: python -m pytest -m soak)
def test_online_pact_runs_close_to_its_first_plan_on_its_own_experiment():
    """experiments/pact/schedule.yaml with the simulator's noise on: online PACT reaches the
    target and spends within 25% of its first plan."""
    for seed in (0, 1):
        run = netsim.simulate("experiments/pact/schedule.yaml", "pact", seed=seed).runs.iloc[0]
        assert run.status == "ok", run.error
        assert abs(run.energy_j / run.planned_energy_j - 1.0) <= 0.25


def test_replanning_never_returns_a_plan_worse_than_the_incumbents_rest():
    """Each re-plan keeps the incumbent when its rest still reaches the target at no more
    energy than the fresh plan (spied on every re-plan of a noisy run)."""
    from policies.pact import policy as pact_policy

    checks = []

    class Spy(pact_policy.Pact):
        def _replan(self, obs, target):
            old, cursor = self._plan, self._cursor
            super()._replan(obs, target)
            fresh = self.plans[-1]
            if old is not None and old.feasible and cursor < len(old.epochs):
                self._cursor, keep = cursor, self._plan is old
                rest_ok = self._remaining_loss(old) <= target * (1 + 1e-9)
                self._cursor = cursor if keep else 0
                rest_j = sum(e.energy_j for e in old.epochs[cursor:])
                chosen_j = rest_j if keep else fresh.energy_j
                checks.append((rest_ok, rest_j, fresh.feasible, fresh.energy_j, chosen_j))

    pol = Spy(make_policy("pact").params)
    netsim.simulate("experiments/pact/schedule.yaml", pol, seed=1, raise_errors=True)
    assert checks
    for rest_ok, rest_j, fresh_ok, fresh_j, chosen_j in checks:
        if rest_ok:
            assert chosen_j <= (fresh_j if fresh_ok else np.inf) + 1e-9
            assert chosen_j <= rest_j + 1e-9
