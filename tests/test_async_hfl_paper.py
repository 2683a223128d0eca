"""Async-HFL as its paper compares itself (issue 56 item 2): its label-bias split in the
surrogate's histograms and the real backends' shards, async-hfl's baseline options (random
selection, association re-solved every N cloud rounds, the gateway throughput cap), and the
paper-settings scenario variant."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

import netsim
from netsim.api import run_id
from netsim.scenario import builtin_scenarios, load_scenario
from netsim.scenario.errors import ScenarioError
from netsim.training.labels import bias_fractions, label_histograms, normal_label_weights
from netsim.training.loss import skew_alpha
from netsim.training.shards import partition

BIAS = {"primary": 0.8, "secondary": 0.2}


def _scenario(name: str = "two-phones", **training) -> dict:
    data = yaml.safe_load(builtin_scenarios()[name].read_text())
    data["training"].update(training)
    return data


def test_bias_histograms_follow_the_rule():
    """Every device: 80 % of its samples from one label, 20 % from one other, none else;
    the secondary label never the primary; rows sum to the samples."""
    samples = np.array([600.0, 0.0, 300.0] * 20)
    h = label_histograms(samples, 10, None, None, np.random.default_rng(2), label_bias=BIAS)
    assert h is not None
    np.testing.assert_allclose(h.sum(axis=1), samples, rtol=1e-12)
    held = h[samples > 0]
    top = np.sort(held, axis=1)[:, ::-1] / held.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(top[:, 0], 0.8, rtol=1e-12)
    np.testing.assert_allclose(top[:, 1], 0.2, rtol=1e-12)
    assert (top[:, 2:] == 0).all()
    # no secondary: the 20 % spread evenly over the other nine labels (the paper's other rule)
    even = bias_fractions(50, 10, {"primary": 0.8}, np.random.default_rng(0))
    np.testing.assert_allclose(np.sort(even, axis=1)[:, :9], 0.2 / 9, rtol=1e-12)


def test_normal_primary_labels_follow_the_papers_weights():
    """``primary_labels: normal``: the primary labels' frequencies follow the logistic
    weights (0.238 at the middle two labels, 0.011 at the ends), in a random label order."""
    w = normal_label_weights(10)
    assert w.sum() == pytest.approx(1.0)
    assert w[4] == pytest.approx(0.238, abs=1e-3) and w[0] == pytest.approx(0.0111, abs=1e-3)
    mix = bias_fractions(20_000, 10, {**BIAS, "primary_labels": "normal"},
                         np.random.default_rng(5))
    freq = np.sort(np.bincount(mix.argmax(axis=1), minlength=10) / 20_000)
    np.testing.assert_allclose(freq, np.sort(w), atol=0.01)


def test_bias_partition_gives_each_shard_the_rule():
    """The real backends' shards under label bias: sizes by the weights, each 80 % one
    label and 20 % another (to rounding); with every class asked for no more than it has,
    disjoint."""
    labels = np.repeat(np.arange(10), 400)
    shards = partition(labels, [200.0] * 20, None, np.random.default_rng(3), label_bias=BIAS)
    assert [len(s) for s in shards] == [200] * 20
    for s in shards:
        counts = np.sort(np.bincount(labels[s], minlength=10))[::-1]
        assert counts[0] == 160 and counts[1] == 40 and counts[2:].sum() == 0
    together = np.concatenate(shards)
    demand = np.bincount(labels[together], minlength=10)
    if (demand <= 400).all():
        assert len(np.unique(together)) == len(together)


def test_bias_is_exclusive_and_checked_naming_the_field():
    for training, field in [
        ({"label_bias": BIAS, "dirichlet_alpha": 0.1}, "training"),
        ({"label_bias": BIAS, "shards_per_device": 2}, "training"),
        ({"label_bias": {"primary": 1.5}}, "training.label_bias.primary"),
        ({"label_bias": {"primary": 0.8, "secondary": 0.3}}, "training.label_bias"),
        ({"label_bias": {"primary": 0.8, "primary_labels": "zipf"}},
         "training.label_bias.primary_labels"),
    ]:
        with pytest.raises(ScenarioError) as err:
            load_scenario(_scenario(**training))
        assert field in str(err.value)
        assert "label_bias" in str(err.value)


def test_bias_absent_keeps_run_ids_and_the_surrogate_sees_it():
    """label_bias absent is "as before" (run ids unchanged: left out of the hash); given,
    the surrogate's devices table records 80/20 histograms and the skew's Dirichlet
    equivalence is 1 / (10 x 0.68)."""
    plain = load_scenario(_scenario())
    assert "label_bias" not in netsim.api.scenario_content(plain)["training"]
    biased = load_scenario(_scenario(label_bias=BIAS))
    assert run_id(plain, "fedavg-all", {}, 0) != run_id(biased, "fedavg-all", {}, 0)
    assert skew_alpha(biased.training, 10) == pytest.approx(1 / 6.8)
    devices = netsim.simulate(_scenario(label_bias=BIAS, max_epochs=2), policy="fedavg-all",
                              seed=0).devices
    rows = [np.asarray(r) for r, node in zip(devices.label_counts, devices.network_node,
                                               strict=True) if not node and sum(r) > 0]
    assert rows and all(sorted(r)[-2:] == [round(0.2 * r.sum()), round(0.8 * r.sum())]
                        for r in rows)


def test_real_backend_shards_follow_the_bias():
    data = {"name": "small", "seed": 0,
            "generate": {"n_devices": 6, "samples_mean": 100, "samples_spread": 0.0, "seed": 1},
            "model": "mlp-digits",
            "training": {"backend": "real", "target_loss": 0.3, "deadline_s": 3600,
                         "max_epochs": 1, "label_bias": BIAS}}
    devices = netsim.simulate(data, policy="fedavg-all", seed=0).devices
    rows = [np.asarray(r) for r, node in zip(devices.label_counts, devices.network_node,
                                               strict=True) if not node and sum(r) > 0]
    assert len(rows) == 6
    for r in rows:
        top = np.sort(r)[::-1]
        assert top[0] == round(0.8 * r.sum()) and top[2:].sum() == 0


def _observation(data: dict):
    """The first observation of a run of ``data``."""
    from netsim.results.recorder import Recorder
    from netsim.runloop import Run
    from netsim.scenario.loading import validate_scenario

    result = validate_scenario(data)
    assert result.scenario is not None, result.problems
    recorder = Recorder("x", "x", "async-hfl", 0, {}, 0.0, 1e9)
    return Run(result.scenario, 0, recorder).observe()


def _policy(**params):
    from netsim.policy.registry import make_policy

    return make_policy("async-hfl", params)


def _first_pick(params: dict, seed: int = 0) -> set[str]:
    data = _scenario("nycmesh", max_epochs=1)
    runs = netsim.simulate(data, policy="async-hfl", params=params, seed=seed)
    return set(runs.epochs.participant_ids.iloc[0])


def test_random_selection_is_not_the_utility_order():
    """selection: utility starts each edge's best-scored devices (the same every seed);
    selection: random a seed-dependent draw of each edge's devices, as many."""
    from policies.hierarchical.asynchronous import associate

    obs = _observation(_scenario("nycmesh"))
    edge, score = associate(obs)
    best = set()
    for k in np.unique(edge[edge >= 0]).tolist():
        mine = np.flatnonzero(edge == k)
        best |= {obs.devices.ids[r] for r in mine[np.argsort(-score[mine], kind="stable")[:10]]}
    assert _first_pick({}) == best == _first_pick({}, seed=1)
    one, two = _first_pick({"selection": "random"}), _first_pick({"selection": "random"}, 1)
    assert len(one) == len(two) == len(best) and one != best and one != two


def test_throughput_cap_bounds_each_edges_starts():
    """throughput_cap_bps: each edge's first starts sum at most the cap in model bits per
    second of estimated round time, and adding its next candidate would cross it."""
    from policies.hierarchical.asynchronous import associate_with_rounds

    obs = _observation(_scenario("nycmesh"))
    edge, _, rounds = associate_with_rounds(obs)
    thpt = 8.0 * obs.model.model_bytes(0) / rounds
    cap = 8e5
    policy = _policy(participants_per_edge=184, throughput_cap_bps=cap, selection="random")
    policy.reset(load_scenario(_scenario("nycmesh")), np.random.default_rng(0))
    index = {d: i for i, d in enumerate(obs.devices.ids)}
    rows = np.array(sorted(index[d] for d in policy.decide(obs).participants))
    for k in np.unique(edge[edge >= 0]).tolist():
        mine = rows[edge[rows] == k]
        assert thpt[mine].sum() <= cap
        assert len(mine) <= np.count_nonzero(edge == k)
    uncapped = _policy(participants_per_edge=184, selection="random")
    uncapped.reset(load_scenario(_scenario("nycmesh")), np.random.default_rng(0))
    assert len(uncapped.decide(obs).participants) > len(rows) > 0


def test_reassociation_is_solved_every_n_cloud_rounds():
    """reassociate_every 4: solved at cloud rounds 0, 4, 8 of 10 (once without it); in a
    static world the measured speeds are the declared ones, so the runs are the same."""
    from netsim.policy.registry import make_policy

    data = _scenario("nycmesh", max_epochs=10)
    scenario = load_scenario(data)
    counts = []
    tables = []
    for params in ({}, {"reassociate_every": 4}):
        policy = make_policy("async-hfl", params)
        tables.append(netsim.simulate(scenario, policy=policy, seed=0).epochs)
        counts.append(policy.associations)
    assert counts == [1, 3]
    np.testing.assert_array_equal(tables[0].end_s.to_numpy(), tables[1].end_s.to_numpy())


def test_paper_scenario_file_is_its_generator_and_the_papers_settings():
    """experiments/hierarchical/nycmesh-paper.yaml is what paper_scenario_text writes; it is
    nycmesh with a 1.6 MB model on cnn-mnist's curve, batch 100 and the 0.8 / 0.2 bias."""
    from experiments.hierarchical.run import PAPER_SCENARIO, paper_policies, paper_scenario_text

    assert PAPER_SCENARIO.read_text() == paper_scenario_text()
    from netsim.training.models import resolve_model

    paper, mesh = load_scenario(PAPER_SCENARIO), load_scenario("nycmesh")
    model, cnn = resolve_model(paper.model), resolve_model(mesh.model)
    assert model.model_bytes(0) == 1_600_000
    assert model.loss == cnn.loss and model.train_flop_per_sample == cnn.train_flop_per_sample
    assert paper.training.batch_size == 100 and paper.training.local_epochs == 5
    assert paper.training.label_bias is not None and paper.training.label_bias.primary == 0.8
    assert [d.id for d in paper.devices] == [d.id for d in mesh.devices]
    assert paper.links == mesh.links and paper.edges == mesh.edges
    labels = [p["label"] for p in paper_policies()]
    assert {"async-hfl-g5", "async-hfl-g20", "rfl-ha-g5", "fedasync-like-g20",
            "fedbuff-like-g5"} <= set(labels)


def test_rfl_ha_throughput_cap_bounds_each_edges_job():
    """rfl-ha's throughput_cap_bps: each default edge's job, drawn at random, sums at most
    the cap in model bits per second of estimated round time there; without it every idle
    device of the edge trains."""
    from netsim.policy.registry import make_policy
    from policies.hierarchical.asynchronous import default_round_s

    obs = _observation(_scenario("nycmesh"))
    edge = obs.tiers.default_edge
    thpt = 8.0 * obs.model.model_bytes(0) / default_round_s(obs)
    index = {d: i for i, d in enumerate(obs.devices.ids)}
    picks = []
    for params in ({"throughput_cap_bps": 8e5}, {}):
        policy = make_policy("rfl-ha", params)
        policy.reset(load_scenario(_scenario("nycmesh")), np.random.default_rng(0))
        picks.append(np.array(sorted(index[d] for d in policy.decide(obs).participants)))
    capped, every = picks
    for k in np.unique(edge[edge >= 0]).tolist():
        assert 0 < thpt[capped[edge[capped] == k]].sum() <= 8e5
    assert len(every) == len(obs.devices.trainers) > len(capped)


def test_new_options_at_their_defaults_keep_run_ids():
    """The options added for the paper's baselines are left out of the parameters' data at
    their defaults (so async-hfl's and rfl-ha's run ids stay what they were) and kept where
    given (so a random-selection run has an id of its own)."""
    from netsim.policy.registry import make_policy, policy_params

    plain = policy_params(make_policy("async-hfl", {}))
    assert set(plain) == {"edge_rounds", "participants_per_edge", "edge_buffer_updates",
                          "buffer_updates", "max_staleness"}
    assert policy_params(make_policy("async-hfl", {"selection": "random"}))["selection"] \
        == "random"
    assert "throughput_cap_bps" not in policy_params(make_policy("rfl-ha", {}))
    assert policy_params(make_policy("rfl-ha", {"throughput_cap_bps": 8e5}))[
        "throughput_cap_bps"] == 8e5
