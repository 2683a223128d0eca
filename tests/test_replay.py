"""A planner's prediction is a claim about the simulator: with noise off and the predictor's
constants equal to the truth, each planner's executed run reproduces its first plan (epochs
+-1, energy within 3 %, the loss after every epoch within 1e-6 relative), over generated
scenarios (private links, and stations of one Wi-Fi or cellular cell), variants (un-pruning
allowed) and participant exponents."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
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
    _check_replay(res)
    info = [json.loads(x) for x in res.epochs["info"]]
    assert all(i["replans"] == 1 for i in info)  # on track: the first plan is never replaced


@SETTINGS
@given(scenarios())
def test_depl_runs_its_plan(scenario):
    res = netsim.simulate(scenario, "depl", seed=0, raise_errors=True)
    _check_replay(res)


@SETTINGS
@given(scenarios(media=True), st.booleans())
def test_pact_runs_its_plan_on_a_cell(scenario, unprune):
    """The same claim where the participants share a cell's air time and its backhaul."""
    res = netsim.simulate(scenario, "pact", seed=0, params={"allow_unprune": unprune},
                          raise_errors=True)
    _check_replay(res)


@SETTINGS
@given(scenarios(media=True))
def test_depl_runs_its_plan_on_a_cell(scenario):
    res = netsim.simulate(scenario, "depl", seed=0, raise_errors=True)
    _check_replay(res)
