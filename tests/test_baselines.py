"""Baseline policies and the registry."""

import numpy as np
import pytest

import netsim
from netsim.costs import device_epoch_times, estimate_epoch
from netsim.engine import World, resolve_scenario
from netsim.policy import make_policy, registered
from netsim.scenario import ScenarioError, load_scenario


def test_registry_lists_the_baselines_with_descriptions():
    entries = registered()
    for name in ("fedavg-all", "random-k", "fastest-k", "greedy-energy"):
        assert name in entries and entries[name].description


def test_unknown_policy_and_bad_params_name_the_field():
    with pytest.raises(ScenarioError, match="unknown policy"):
        make_policy("nope")
    with pytest.raises(ScenarioError) as err:
        make_policy("random-k", {"k": 0})
    assert err.value.problems[0].path == "policies.random-k.k"
    with pytest.raises(ScenarioError) as err:
        make_policy("random-k", {"kk": 3})
    assert err.value.problems[0].path == "policies.random-k.kk"


def test_fedavg_all_uses_every_device_and_all_samples(star):
    res = netsim.simulate(star, "fedavg-all", seed=0)
    assert (res.epochs["participants"] == 3).all() and (res.epochs["samples"] == 1600).all()
    assert (res.epochs["variant"] == 0).all()


def test_random_k_and_fastest_k(star):
    rk = netsim.simulate(star, "random-k", seed=0, params={"k": 2})
    assert (rk.epochs["participants"] == 2).all()
    assert len({tuple(sorted(x)) for x in rk.epochs["participant_ids"]}) > 1
    fk = netsim.simulate(star, "fastest-k", seed=0, params={"k": 1})
    sc = resolve_scenario(load_scenario(star), 0)
    table = World(sc, np.random.default_rng(0)).devices
    t, c, _ = device_epoch_times(table, sc.model, 0, table.samples)
    fastest = table.ids[int(np.argmin(np.where(table.samples > 0, t + c, np.inf)))]
    assert all(list(x) == [fastest] for x in fk.epochs["participant_ids"])


def test_greedy_energy_picks_the_lowest_energy_per_predicted_loss_drop():
    """Its own criterion at the first epoch: no worse than fedavg-all's choice (every device,
    full model) or than any single variant on all devices, and a variant able to reach L*."""
    from netsim.policy import Observation
    from netsim.training.loss import LossPredictor, LossState

    sc = resolve_scenario(load_scenario("default"), 0)
    world = World(sc, np.random.default_rng(0))
    table, pred = world.devices, LossPredictor(sc.model, sc.training)
    obs = Observation(0, 0.0, sc.training.deadline_s, 0.0, (pred.initial_loss,), None, table,
                      world.draw_availability(), sc.model, sc.training, sc)
    policy = make_policy("greedy-energy")
    policy.reset(sc, np.random.default_rng(0))
    decision = policy.decide(obs)

    def score(samples: np.ndarray, variant: int) -> float:
        est = estimate_epoch(table, sc.model, variant, samples)
        after = pred.step(LossState(), samples.sum(), variant,
                          participants=int(np.count_nonzero(samples)))
        return est.energy_j / (pred.initial_loss - pred.mean(after))

    chosen = np.zeros(table.n)
    for dev, n in decision.participants.items():
        chosen[table.index[dev]] = n
    everyone = np.where(np.arange(table.n) == table.aggregator, 0, table.samples).astype(float)
    assert pred.curves[decision.variant].floor < sc.training.target_loss
    reachable = [v for v in range(len(sc.model.variants))
                 if pred.curves[v].floor < sc.training.target_loss]
    assert score(chosen, decision.variant) <= min(score(everyone, v) for v in reachable) + 1e-9


def test_cost_estimate_matches_the_engine_without_contention(star):
    sc = resolve_scenario(load_scenario(star), 0)
    world = World(sc, np.random.default_rng(0))
    samples = np.array([0, 500, 300, 0])
    est = estimate_epoch(world.devices, sc.model, 1, samples)
    from netsim.policy import Decision

    out = world.run_epoch(Decision(participants={"d1": 500, "d2": 300}, variant=1))
    assert out.end_s - out.start_s == pytest.approx(est.time_s)
    assert out.energy.total_j == pytest.approx(est.energy_j)
    assert out.energy.communication_j == pytest.approx(est.energy_comm_j)


def test_greedy_energy_leaves_out_devices_too_small_and_stops_when_none_can_train(star):
    import netsim

    star["devices"][1]["memory_bytes"] = 1e3  # d1 cannot hold any variant (1 kB: plausible)
    res = netsim.simulate(star, "greedy-energy", seed=0, raise_errors=True)
    assert all("d1" not in ids for ids in res.epochs["participant_ids"])
    for d in star["devices"][1:]:
        d["availability"] = 0.01  # (validation rejects a fleet that can never train)
    run = netsim.simulate(star, "greedy-energy", seed=0, raise_errors=True).runs.iloc[0]
    assert run["status"] != "failed" and "no device can train" in run["error"]


def _observation(sc, available):
    """An Observation of the resolved scenario ``sc`` at its start with the given availability."""
    from netsim.policy import Observation
    from netsim.training.loss import LossPredictor

    table = World(sc, np.random.default_rng(0)).devices
    avail = np.array(available, dtype=bool)
    avail.setflags(write=False)
    loss = LossPredictor(sc.model, sc.training).initial_loss
    return Observation(0, 0.0, sc.training.deadline_s, 0.0, (loss,), None, table, avail,
                       sc.model, sc.training, sc)


def _fleet(n: int) -> dict:
    """A star of ``n`` trainers around a server (distinct speeds, direct links)."""
    import copy

    from tests.conftest import STAR

    sc = copy.deepcopy(STAR)
    server, proto = sc["devices"][0], sc["devices"][1]
    sc["devices"] = [server] + [{**proto, "id": f"d{i}", "flop_per_s": 1e9 * (1 + i)}
                                for i in range(n)]
    sc["links"] = [{"a": "server", "b": f"d{i}", "bandwidth_bps": 2e7, "latency_s": 0.01,
                    "energy_j_per_bit": 1e-7} for i in range(n)]
    return sc


def test_overselect_is_registered_with_ranged_params():
    from netsim.policy import policy_params

    entry = registered()["overselect"]
    assert entry.description and entry.params.__doc__
    p = make_policy("overselect").params
    assert (p.k, p.overselect, p.epoch_deadline_s) == (10, 0.3, None)
    for bad in ({"k": 0}, {"overselect": -0.1}, {"epoch_deadline_s": 0},
                {"epoch_deadline_s": float("inf")}):
        with pytest.raises(ScenarioError) as err:
            make_policy("overselect", bad)
        assert err.value.problems[0].path == f"policies.overselect.{next(iter(bad))}"
    assert policy_params(make_policy("overselect", {"k": 3})) == {
        "k": 3, "overselect": 0.3, "epoch_deadline_s": None}


@pytest.mark.parametrize("k,x,want", [(10, 0.3, 13), (4, 0.5, 6), (3, 0.0, 3), (5, 0.1, 6)])
def test_overselect_selects_ceil_of_one_plus_x_times_k(k, x, want):
    from netsim.policy import validate_decision

    sc = resolve_scenario(load_scenario(_fleet(20)), 0)
    obs = _observation(sc, np.ones(21, bool))
    policy = make_policy("overselect", {"k": k, "overselect": x, "epoch_deadline_s": 30.0})
    policy.reset(sc, np.random.default_rng(1))
    picks = set()
    for _ in range(5):
        d = policy.decide(obs)
        validate_decision(d, obs, "overselect")
        assert len(d.participants) == want and d.keep_updates == k
        assert d.epoch_deadline_s == 30.0 and "server" not in d.participants
        assert all(n == 500 for n in d.participants.values())
        picks.add(tuple(sorted(d.participants)))
    assert len(picks) > 1  # drawn at random each epoch


def test_overselect_takes_all_available_and_caps_keep_updates():
    from netsim.policy import validate_decision

    sc = resolve_scenario(load_scenario(_fleet(20)), 0)
    avail = np.zeros(21, bool)
    avail[[0, 3, 5, 8, 9, 12]] = True  # the server and five trainers
    obs = _observation(sc, avail)
    policy = make_policy("overselect", {"k": 4})
    policy.reset(sc, np.random.default_rng(0))
    d = policy.decide(obs)
    validate_decision(d, obs, "overselect")
    assert sorted(d.participants) == ["d11", "d2", "d4", "d7", "d8"]
    assert d.keep_updates == 4 and d.epoch_deadline_s is None
    avail[[5, 8, 9]] = False  # two trainers left: fewer than k, all kept
    d = policy.decide(_observation(sc, avail))
    assert sorted(d.participants) == ["d11", "d2"] and d.keep_updates == 2
    avail[[3, 12]] = False
    d = policy.decide(_observation(sc, avail))
    assert d.stop and "none of the 20" in d.reason


def test_overselect_is_seeded_by_the_run(star):
    a = netsim.simulate(star, "overselect", seed=3, params={"k": 1, "overselect": 1.0})
    b = netsim.simulate(star, "overselect", seed=3, params={"k": 1, "overselect": 1.0})
    assert list(a.epochs["participant_ids"].map(tuple)) == \
        list(b.epochs["participant_ids"].map(tuple))
    assert (a.epochs["participants"] == 2).all()


def _overselect_star(star, **training):
    """The star plus d4, a device so slow that it is always the last to report."""
    star["devices"].append({"id": "d4", "flop_per_s": 1.0e7, "memory_bytes": 4.0e9,
                            "power_busy_w": 3.0, "power_idle_w": 0.5, "samples": 500})
    star["links"].append({"a": "server", "b": "d4", "bandwidth_bps": 2.0e7, "latency_s": 0.01,
                          "energy_j_per_bit": 1e-7})
    star["training"].update({"max_epochs": 3, "target_loss": 0.01, **training})
    return star


def _arrivals(star) -> dict[str, float]:
    """Each trainer's update arrival (s after the epoch's start), alone on its link: model
    down, local training, update up (architecture spec, the analytic cases)."""
    model = star["model"]
    bits = 8.0 * model["params"] * model["bytes_per_param"]
    links = {link["b"]: link for link in star["links"]}
    return {d["id"]: 2 * (bits / links[d["id"]]["bandwidth_bps"] + links[d["id"]]["latency_s"])
            + d["samples"] * model["train_flop_per_sample"] / d["flop_per_s"]
            for d in star["devices"] if d.get("samples")}


def test_overselect_epoch_ends_at_the_kth_arrival_and_counts_the_late(star):
    star = _overselect_star(star)
    arrive = _arrivals(star)
    res = netsim.simulate(star, "overselect", seed=0, raise_errors=True,
                          params={"k": 3, "overselect": 0.3})  # ceil(3.9) = 4: all selected
    ep = res.epochs
    assert (ep["participants"] == 4).all() and len(ep) == 3
    third = sorted(arrive.values())[2]
    aggregate = 2 * star["model"]["params"] * 3 / star["devices"][0]["flop_per_s"]
    for row in ep.itertuples():
        assert row.end_s - row.start_s == pytest.approx(third + aggregate, abs=1e-5)
        assert row.late == 1 and list(row.late_ids) == ["d4"] and row.dropped == 0
        assert row.energy_wasted_j > 0
    assert ep["start_s"].iloc[1] == pytest.approx(ep["end_s"].iloc[0])
    dev = res.devices.set_index("device")
    assert dev.loc["d4", "energy_wasted_j"] == pytest.approx(ep["energy_wasted_j"].sum())


def test_overselect_epoch_deadline_ends_the_epoch_and_discards_later_updates(star):
    star = _overselect_star(star)
    arrive = _arrivals(star)
    deadline = 0.5 * (sorted(arrive.values())[2] + arrive["d4"])  # after d1-d3, before d4
    res = netsim.simulate(star, "overselect", seed=0, raise_errors=True,
                          params={"k": 4, "overselect": 0.0, "epoch_deadline_s": deadline})
    for row in res.epochs.itertuples():
        assert row.end_s - row.start_s == pytest.approx(deadline, abs=1e-5)  # (+ aggregation)
        assert row.late == 1 and list(row.late_ids) == ["d4"]
