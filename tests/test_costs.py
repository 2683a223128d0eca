"""netsim.costs.estimate_epoch: the planners' epoch estimate is the engine's epoch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import netsim
from netsim.costs import estimate_epoch
from netsim.devices import build_device_table
from netsim.engine import resolve_scenario
from netsim.policy import Decision
from netsim.training.models import resolve_model


class _Fixed:
    """Runs one epoch with a fixed participant set; records what it estimated beforehand."""

    name = "fixed"

    def __init__(self, pick):
        self.pick, self.estimates = pick, []

    def reset(self, scenario, rng):
        pass

    def decide(self, obs):
        t = obs.devices
        chosen = self.pick(t)
        samples = np.zeros(t.n)
        samples[chosen] = t.samples[chosen]
        self.estimates.append(estimate_epoch(t, obs.model, 0, samples))
        return Decision(participants={t.ids[i]: int(t.samples[i]) for i in chosen})


def _one_epoch(scenario, pick):
    policy = _Fixed(pick)
    res = netsim.simulate(scenario, policy, seed=0, raise_errors=True)
    ep = res.epochs.iloc[0]
    energy = ep["energy_compute_j"] + ep["energy_comm_j"] + ep["energy_idle_j"]
    return policy.estimates[0], ep["end_s"] - ep["start_s"], energy


def test_alone_on_its_route_an_epoch_takes_the_analytic_time(star):
    """One device on its own link: download 8S/B + latency, compute F/flops, upload, average."""
    est, time_s, energy_j = _one_epoch(star, lambda t: [1])
    bits, flop = 8 * 4e6, 500 * 6e6
    agg_s = 2 * 1e6 / 1e12
    expected = 2 * (bits / 2e7 + 0.01) + flop / 2e9 + agg_s
    assert est.time_s == pytest.approx(expected, rel=1e-12)
    assert time_s == pytest.approx(expected, rel=1e-12)
    assert est.energy_j == pytest.approx(energy_j, rel=1e-12)


def _contended(n=120, fibre_bps=2e8):
    sc = netsim.load_scenario({
        "name": "gen", "seed": 3, "generate": {"n_devices": n, "devices_per_cell": 40, "seed": 3,
                                               "shared_media": False},  # (a wired bottleneck)
        "model": "small-cnn",
        "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": 1}})
    resolved = resolve_scenario(sc, 0)
    links = tuple(link.model_copy(update={"bandwidth_bps": fibre_bps})
                  if "aggregator" in (link.a, link.b) else link for link in resolved.links)
    return resolved.model_copy(update={"links": links})


@pytest.mark.parametrize("share", [0.25, 1.0])
def test_under_contention_the_estimate_is_the_simulated_epoch(share):
    """The aggregator's link saturates: the estimate plays the transfers forward with the
    engine's max-min sharing, so it matches the simulated epoch to rounding; timing each
    transfer alone would be far too short."""
    def pick(t):
        trainers = t.trainers
        return trainers[: max(2, int(share * len(trainers)))]

    est, time_s, energy_j = _one_epoch(_contended(), pick)
    assert est.time_s == pytest.approx(time_s, rel=1e-9)
    assert est.energy_j == pytest.approx(energy_j, rel=1e-9)
    # without routes the estimate is the contention-free lower bound, measurably shorter
    scenario = _contended()
    bare = dataclasses.replace(build_device_table(scenario), down_routes=None, up_routes=None,
                               capacity_bps=None)
    samples = np.zeros(bare.n)
    chosen = pick(bare)
    samples[chosen] = bare.samples[chosen]
    alone = estimate_epoch(bare, resolve_model(scenario.model), 0, samples)
    assert alone.time_s < 0.9 * time_s
