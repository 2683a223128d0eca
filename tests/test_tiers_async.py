"""Asynchronous tiers (netsim.epochs.tiered; docs/hierarchical.md): rfl-ha (synchronous
edges, asynchronous cloud) and async-hfl (asynchronous at both), on netsim's FedBuff
machinery one level up.

What must hold: with the cloud waiting for every edge and one edge round, rfl-ha's epochs
make the synchronous hierarchy's progress (staleness 0 everywhere) and last its closed form
(each edge's job: backhaul down, its round, backhaul up; then the cloud's aggregation);
every asynchronous epoch's loss is the one progress model stepped with the edge updates it
aggregated (noise off); staleness is counted at both tiers; energy adds up; bad decisions
are named.
"""

from __future__ import annotations

import numpy as np
import pytest

import netsim
import netsim.training.loss as loss_module
from netsim.epochs.outcome import EdgeUpdate, RoundUpdates
from netsim.policy import Decision
from netsim.scenario.schema import ModelSpec, TrainingSpec
from netsim.training.loss import LossPredictor, LossState
from tests.test_hierarchy import CLOUD_FLOPS, DEVICES, EDGES, MODEL, Every, _fleet, tiny


def test_rfl_ha_waiting_for_every_edge_is_the_synchronous_hierarchy():
    sync = netsim.simulate(tiny(), policy=Every(1), seed=0).epochs
    r = netsim.simulate(tiny(), policy="rfl-ha", seed=0,
                        params={"edge_rounds": 1, "buffer_updates": 2})
    e = r.epochs
    assert e.loss.to_numpy() == pytest.approx(sync.loss.to_numpy(), rel=1e-12, abs=0)
    assert list(e.staleness_max) == [0, 0] and list(e.edge_staleness_max) == [0, 0]
    # each edge on its own: down, its edge round, up; the cloud aggregates both models
    bits = 8 * MODEL["params"] * MODEL["bytes_per_param"]
    backhaul = {"gw1": bits / 5e7 + 0.05, "gw2": bits / 4e7 + 0.04}
    job = {}
    for edge in EDGES:
        rounds = [2 * (bits / bps + lat) + s * MODEL["train_flop_per_sample"] / f
                  for _, f, s, bps, lat, x in DEVICES if x == edge]
        job[edge] = 2 * backhaul[edge] + max(rounds) \
            + 2 * MODEL["params"] * len(rounds) / EDGES[edge]
    took = (e.end_s - e.start_s).to_numpy()
    expect = max(job.values()) + 2 * MODEL["params"] * 2 / CLOUD_FLOPS
    assert took == pytest.approx([expect] * 2, rel=1e-9, abs=0)
    assert list(e.bytes_backhaul) == [2 * 2 * bits / 8] * 2


def _capture(monkeypatch) -> list:
    """The edge updates each cloud aggregation of the surrogate's truth took."""
    seen: list = []
    real = loss_module.SurrogateLoss.advance_tiers

    def spy(self, edge_updates, variant_index):
        seen.append(tuple(edge_updates))
        return real(self, edge_updates, variant_index)

    monkeypatch.setattr(loss_module.SurrogateLoss, "advance_tiers", spy)
    return seen


@pytest.mark.parametrize("policy, params", [
    ("rfl-ha", {"edge_rounds": 2, "participants_per_edge": 4, "buffer_updates": 2}),
    ("async-hfl", {"edge_rounds": 3, "participants_per_edge": 5, "edge_buffer_updates": 2,
                   "buffer_updates": 2})])
def test_asynchronous_tiers_follow_the_progress_model(monkeypatch, policy, params):
    seen = _capture(monkeypatch)
    sc = _fleet()
    sc["model"] = {**MODEL, "name": "m"}
    sc["training"]["max_epochs"] = 12
    r = netsim.simulate(sc, policy=policy, seed=3, params=params)
    e = r.epochs
    assert r.runs.status.iloc[0] == "target_missed" and len(e) == 12
    model = ModelSpec.model_validate(sc["model"])
    predictor = LossPredictor(model, TrainingSpec.model_validate(sc["training"]))
    state, losses = LossState(), []
    for updates in seen:
        state = predictor.step_gain(state, predictor.tiers_gain(updates), 0)
        losses.append(predictor.mean(state))
    assert e.loss.to_numpy() == pytest.approx(losses, rel=1e-9)
    assert (e.staleness_max > 0).any()  # the cloud took stale edge models
    if policy == "async-hfl":
        assert (e.edge_staleness_max > 0).any()  # and the edges stale device updates
    else:
        assert (e.edge_staleness_max == 0).all()
    total = e[["energy_compute_j", "energy_comm_j", "energy_idle_j"]].to_numpy().sum()
    assert total == pytest.approx(r.runs.energy_j.iloc[0], rel=1e-9)
    assert (e.bytes_backhaul > 0).all() and (e.energy_edges_j > 0).all()


def test_the_tier_gain_discounts_each_tier_and_weighs_later_edge_rounds():
    p = LossPredictor.from_curves([loss_module.CurveParams(2.3, 0.05, 3000.0, 0.9)], [1.0],
                                  1.0, 0.0, 0.5, staleness_exponent=0.5)
    p.edge_round_weight = 0.6

    def edge(samples, stale, cloud_stale=0, rounds=1):
        r = RoundUpdates(tuple(f"d{i}" for i in range(len(samples))), np.array(samples),
                         np.array(stale))
        return EdgeUpdate("e", (r,) * rounds, cloud_stale)

    fresh = p.tiers_gain([edge([100, 300], [0, 0])])
    assert fresh == pytest.approx(p.gain(400, 2))
    assert p.tiers_gain([edge([100, 300], [0, 0], rounds=3)]) \
        == pytest.approx(p.gain(400 * (1 + 2 * 0.6), 2, samples_per_participant=200))
    assert p.tiers_gain([edge([100, 300], [3, 0])]) == pytest.approx(
        p.gain(100 * 4 ** -0.5 + 300, 2, samples_per_participant=200))
    assert p.tiers_gain([edge([100, 300], [0, 0], cloud_stale=1)]) == pytest.approx(
        fresh * 2 ** -0.5)


def test_asynchronous_tier_decisions_are_checked():
    class Twice:
        name = "twice"

        def reset(self, scenario, rng) -> None:
            self.epoch = 0

        def decide(self, obs) -> Decision:
            self.epoch += 1
            # the second decision starts d0 again while its edge still works
            return Decision(participants={"d0": 100} if self.epoch > 1 else
                            {"d0": 100, "d3": 50}, edge_rounds=1, buffer_updates=1)

    r = netsim.simulate(tiny(), policy=Twice(), seed=0)
    assert "its edge 'gw1' still works on its earlier job" in r.runs.error.iloc[0] \
        or "device is busy" in r.runs.error.iloc[0]

    class TooMany:
        name = "too-many"

        def reset(self, scenario, rng) -> None:
            pass

        def decide(self, obs) -> Decision:
            return Decision(participants={"d0": 100}, edge_rounds=1, buffer_updates=3)

    r = netsim.simulate(tiny(), policy=TooMany(), seed=0)
    assert "buffer_updates: 3 outside 1..1" in r.runs.error.iloc[0]
    real = tiny(model="mlp-digits")
    real["training"]["backend"] = "real"
    r = netsim.simulate(real, policy="rfl-ha", seed=0)
    assert "asynchronous tiers run on the surrogate only" in r.runs.error.iloc[0]
