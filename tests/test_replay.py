"""A planner's prediction is a claim about the simulator: with noise off and the predictor's
constants equal to the truth, each planner's executed run reproduces its first plan (epochs
+-1, energy within 3 %, the loss after every epoch within 1e-6 relative), over generated
scenarios (private links, and stations of one Wi-Fi or cellular cell), variants (un-pruning
allowed) and participant exponents."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import netsim


@st.composite
def scenarios(draw, media=False):
    """Devices on private links to the aggregator, or (``media``) stations of one Wi-Fi or
    cellular cell behind a backhaul that may bind."""
    n = draw(st.integers(3, 6))
    kind = draw(st.sampled_from(["wifi", "cellular"])) if media else None
    devices = [{"id": "agg", "flop_per_s": 1e12, "memory_bytes": 1e11, "power_busy_w": 100.0,
                "power_idle_w": 20.0}]
    links = []
    for i in range(n):
        devices.append({
            "id": f"d{i}", "flop_per_s": draw(st.floats(5e8, 2e10)), "memory_bytes": 4e9,
            "power_busy_w": draw(st.floats(2.0, 15.0)), "power_idle_w": draw(st.floats(0.1, 2.0)),
            "samples": draw(st.integers(100, 1500))})
        links.append({"a": "ap" if kind else "agg", "b": f"d{i}",
                      "bandwidth_bps": draw(st.floats(5e6, 1e8)),
                      "latency_s": draw(st.floats(0.001, 0.05)), "energy_j_per_bit": 1e-7,
                      **({"medium": "cell", "rx_energy_j_per_bit": 5e-8,
                          "radio_power_w": draw(st.floats(0.0, 1.5)), "tail_s": 1.0,
                          "tail_power_w": 0.5} if kind else {})})
    if kind:
        links.append({"a": "agg", "b": "ap", "bandwidth_bps": draw(st.floats(1e7, 1e9)),
                      "latency_s": 0.002, "energy_j_per_bit": 1e-8})
    n_var = draw(st.integers(1, 3))
    fractions = [1.0, 0.5, 0.25][:n_var]
    loss = {"initial_loss": 2.3, "floor_full": 0.1, "floor_prune": draw(st.floats(0.0, 0.4)),
            "samples_half": draw(st.floats(500.0, 5000.0)), "exponent": draw(st.floats(0.5, 1.5)),
            "prune_progress_loss": draw(st.floats(0.0, 2.0)),
            "participant_exponent": draw(st.sampled_from([0.0, 0.5, 0.93])),
            "noise_run_sigma": 0.0, "noise_epoch_sigma": 0.0}
    model = {"params": 2e5, "bytes_per_param": 4, "train_flop_per_sample": 2e7, "loss": loss,
             "variants": [{"name": f"v{k}", "params_fraction": f, "flop_fraction": f}
                          for k, f in enumerate(fractions)]}
    target = draw(st.floats(0.4, 0.9))
    return {"name": "replay", "seed": 0, "devices": devices, "links": links, "aggregator": "agg",
            "media": [{"id": "cell", "kind": kind}] if kind else [], "model": model, "training": {"target_loss": target, "deadline_s": 1e6,
                                         "max_epochs": 300}}


def _planned(scenario, result):
    """Whether the planner planned: where it found no plan, the goal must be out of reach of
    every device in every epoch at the full model (fedavg-all misses it too; then the draw is
    left out: hypothesis can draw goals nobody reaches in max_epochs), else the test fails."""
    run = result.runs.iloc[0]
    if run["status"] == "ok" or "no plan" not in run["error"] and "infeasible" not in run["error"]:
        return True
    everyone = netsim.simulate(scenario, "fedavg-all", seed=0, raise_errors=True).runs.iloc[0]
    assert everyone["status"] != "ok", (run["error"], "but fedavg-all reaches the target")
    assume(False)
    return False


def _check_replay(result):
    run, epochs = result.runs.iloc[0], result.epochs
    assert run["status"] == "ok", run["error"]
    info = [json.loads(x) for x in epochs["info"]]
    first = info[0]
    assert abs(run["epochs"] - first["planned_epochs"]) <= 1
    assert abs(run["energy_j"] / first["planned_energy_j"] - 1.0) <= 0.03
    np.testing.assert_allclose(epochs["loss"].to_numpy(), [i["planned_loss"] for i in info],
                               rtol=1e-6)


SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(scenarios(), st.booleans())
def test_pact_runs_its_plan(scenario, unprune):
    res = netsim.simulate(scenario, "pact", seed=0, params={"allow_unprune": unprune},
                          raise_errors=True)
    _planned(scenario, res)
    _check_replay(res)
    info = [json.loads(x) for x in res.epochs["info"]]
    assert all(i["replans"] == 1 for i in info)  # on track: the first plan is never replaced


@SETTINGS
@given(scenarios())
def test_depl_runs_its_plan(scenario):
    res = netsim.simulate(scenario, "depl", seed=0, raise_errors=True)
    _planned(scenario, res)
    _check_replay(res)


@SETTINGS
@given(scenarios(media=True), st.booleans())
def test_pact_runs_its_plan_on_a_cell(scenario, unprune):
    """The same claim where the participants share a cell's air time and its backhaul."""
    res = netsim.simulate(scenario, "pact", seed=0, params={"allow_unprune": unprune},
                          raise_errors=True)
    _planned(scenario, res)
    _check_replay(res)


@SETTINGS
@given(scenarios(media=True))
def test_depl_runs_its_plan_on_a_cell(scenario):
    res = netsim.simulate(scenario, "depl", seed=0, raise_errors=True)
    _planned(scenario, res)
    _check_replay(res)


# Found by hypothesis in CI: a one-epoch DepL plan on a Wi-Fi cell whose claim left out that the
# run's first epoch pays its radios' tails in full (the cluster's cost is that of an epoch after
# one like it): planned 30.12 J, ran 31.04 J (3.06 %). The claim is now the plan's epochs as
# the engine books them back to back.
ONE_EPOCH_ON_A_CELL = {'aggregator': 'agg',
     'devices': [{'flop_per_s': 1000000000000.0,
                  'id': 'agg',
                  'memory_bytes': 100000000000.0,
                  'power_busy_w': 100.0,
                  'power_idle_w': 20.0},
                 {'flop_per_s': 6767331792.810896,
                  'id': 'd0',
                  'memory_bytes': 4000000000.0,
                  'power_busy_w': 2.0,
                  'power_idle_w': 1.825124889366032,
                  'samples': 1328},
                 {'flop_per_s': 500000000.0,
                  'id': 'd1',
                  'memory_bytes': 4000000000.0,
                  'power_busy_w': 2.0,
                  'power_idle_w': 2.0,
                  'samples': 100},
                 {'flop_per_s': 870649288.0,
                  'id': 'd2',
                  'memory_bytes': 4000000000.0,
                  'power_busy_w': 2.0,
                  'power_idle_w': 1.0,
                  'samples': 100},
                 {'flop_per_s': 500000000.0,
                  'id': 'd3',
                  'memory_bytes': 4000000000.0,
                  'power_busy_w': 2.0,
                  'power_idle_w': 1.0,
                  'samples': 100}],
     'links': [{'a': 'ap',
                'b': 'd0',
                'bandwidth_bps': 86535060.19495568,
                'energy_j_per_bit': 1e-07,
                'latency_s': 0.012015658962865002,
                'medium': 'cell',
                'radio_power_w': 0.0,
                'rx_energy_j_per_bit': 5e-08,
                'tail_power_w': 0.5,
                'tail_s': 1.0},
               {'a': 'ap',
                'b': 'd1',
                'bandwidth_bps': 5000000.0,
                'energy_j_per_bit': 1e-07,
                'latency_s': 0.03125,
                'medium': 'cell',
                'radio_power_w': 0.0,
                'rx_energy_j_per_bit': 5e-08,
                'tail_power_w': 0.5,
                'tail_s': 1.0},
               {'a': 'ap',
                'b': 'd2',
                'bandwidth_bps': 5000000.0,
                'energy_j_per_bit': 1e-07,
                'latency_s': 0.046875,
                'medium': 'cell',
                'radio_power_w': 0.0,
                'rx_energy_j_per_bit': 5e-08,
                'tail_power_w': 0.5,
                'tail_s': 1.0},
               {'a': 'ap',
                'b': 'd3',
                'bandwidth_bps': 5000000.0,
                'energy_j_per_bit': 1e-07,
                'latency_s': 0.03125,
                'medium': 'cell',
                'radio_power_w': 0.0,
                'rx_energy_j_per_bit': 5e-08,
                'tail_power_w': 0.5,
                'tail_s': 1.0},
               {'a': 'agg',
                'b': 'ap',
                'bandwidth_bps': 10000000.0,
                'energy_j_per_bit': 1e-08,
                'latency_s': 0.002}],
     'media': [{'id': 'cell', 'kind': 'wifi'}],
     'model': {'bytes_per_param': 4,
               'loss': {'exponent': 1.5,
                        'floor_full': 0.1,
                        'floor_prune': 0.0,
                        'initial_loss': 2.3,
                        'noise_epoch_sigma': 0.0,
                        'noise_run_sigma': 0.0,
                        'participant_exponent': 0.0,
                        'prune_progress_loss': 0.0,
                        'samples_half': 500.0},
               'params': 200000.0,
               'train_flop_per_sample': 20000000.0,
               'variants': [{'flop_fraction': 1.0, 'name': 'v0', 'params_fraction': 1.0},
                            {'flop_fraction': 0.5, 'name': 'v1', 'params_fraction': 0.5},
                            {'flop_fraction': 0.25, 'name': 'v2', 'params_fraction': 0.25}]},
     'name': 'replay',
     'seed': 0,
     'training': {'deadline_s': 1000000.0, 'max_epochs': 300, 'target_loss': 0.75}}


def test_depl_claims_the_first_epochs_radio_start():
    res = netsim.simulate(ONE_EPOCH_ON_A_CELL, "depl", seed=0, raise_errors=True)
    first = json.loads(res.epochs["info"].iloc[0])
    assert first["planned_epochs"] == res.runs.iloc[0]["epochs"] == 1
    assert res.runs.iloc[0]["energy_j"] == pytest.approx(first["planned_energy_j"], rel=1e-9)
