"""What a bandwidth means (issue 53, item 1; netsim.network.goodput): a link carries payload at
``bandwidth_bps x goodput_factor``, the link's own factor or else the scenario's, on explicit
links, generated fleets and bandwidth traces alike; the default (1) leaves every table as it
was."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import netsim
from netsim.cli import main
from netsim.network.goodput import TCP_ETHERNET_GOODPUT, link_goodput, payload_bps
from netsim.scenario.loading import validate_scenario

S_BYTES = 1e6 * 4  # the model: 1e6 parameters of 4 bytes


def one_link(goodput: float | None = None, link_goodput_factor: float | None = None) -> dict:
    """One phone on one link to the aggregator; S bytes each way, 1e9 FLOP of training."""
    link = {"a": "phone", "b": "server", "bandwidth_bps": 2e7, "latency_s": 0.01}
    if link_goodput_factor is not None:
        link["goodput_factor"] = link_goodput_factor
    data = {"name": "one-link", "aggregator": "server",
            "devices": [{"id": "server", "flop_per_s": 1e13, "memory_bytes": 8e10,
                         "power_busy_w": 100, "power_idle_w": 10},
                        {"id": "phone", "flop_per_s": 1e9, "memory_bytes": 4e9,
                         "power_busy_w": 5, "power_idle_w": 1, "samples": 100}],
            "links": [link],
            "model": {"params": 1e6, "bytes_per_param": 4, "train_flop_per_sample": 1e7},
            "training": {"target_loss": 0.01, "deadline_s": 1e6, "max_epochs": 1}}
    if goodput is not None:
        data["goodput_factor"] = goodput
    return data


def epoch_s(data: dict) -> float:
    e = netsim.simulate(data, policy="fedavg-all").epochs.iloc[0]
    return float(e.end_s - e.start_s)


def test_a_transfer_takes_its_bytes_at_the_payload_rate_plus_latency():
    aggregation = 2 * 1e6 / 1e13
    compute = 100 * 1e7 / 1e9
    for g in (1.0, TCP_ETHERNET_GOODPUT, 0.5):
        expected = 2 * (8 * S_BYTES / (2e7 * g) + 0.01) + compute + aggregation
        assert epoch_s(one_link(goodput=g)) == pytest.approx(expected, rel=1e-12)


def test_a_links_own_factor_wins_over_the_scenarios():
    assert epoch_s(one_link(goodput=0.5, link_goodput_factor=0.8)) == pytest.approx(
        epoch_s(one_link(goodput=1.0, link_goodput_factor=0.8)), rel=1e-12)
    assert epoch_s(one_link(goodput=0.8)) == pytest.approx(
        epoch_s(one_link(link_goodput_factor=0.8)), rel=1e-12)
    assert link_goodput(type("L", (), {"goodput_factor": None})(), 0.7) == 0.7
    assert payload_bps(np.array([1e9, 1e8]), 0.5).tolist() == [5e8, 5e7]


def test_the_default_changes_nothing_and_keeps_the_run_id():
    plain = netsim.simulate(one_link(), policy="fedavg-all")
    said = netsim.simulate(one_link(goodput=1.0), policy="fedavg-all")
    assert plain.runs.run_id.iloc[0] == said.runs.run_id.iloc[0]
    assert plain.epochs.end_s.tolist() == said.epochs.end_s.tolist()
    other = netsim.simulate(one_link(goodput=0.9), policy="fedavg-all")
    assert other.runs.run_id.iloc[0] != plain.runs.run_id.iloc[0]


def test_a_generated_fleet_takes_the_scenarios_factor_on_every_link():
    from netsim.engine import World, resolve_scenario

    base = {"name": "gen", "seed": 0,
            "generate": {"n_devices": 60, "devices_per_cell": 20, "seed": 3},
            "model": "small-cnn",
            "training": {"target_loss": 0.01, "deadline_s": 1e6, "max_epochs": 2}}
    worlds = []
    for g in (None, 0.9):
        data = copy.deepcopy(base)
        if g is not None:
            data["goodput_factor"] = g
        sc = validate_scenario(data).scenario
        worlds.append(World(resolve_scenario(sc, 0), np.random.default_rng(0)))
    ratio = np.asarray(worlds[1].topology.capacity_bps) / np.asarray(
        worlds[0].topology.capacity_bps)
    np.testing.assert_allclose(ratio, 0.9, rtol=1e-12)
    trainers = worlds[0].devices.trainers
    np.testing.assert_allclose(worlds[1].devices.down_bps[trainers]
                               / worlds[0].devices.down_bps[trainers], 0.9, rtol=1e-12)


def test_a_bandwidth_trace_is_read_as_bandwidths_are(tmp_path):
    trace = tmp_path / "bw.csv"
    trace.write_text("a,b,time_s,bandwidth_bps\nphone,server,0,1e7\nphone,server,100,4e7\n",
                     encoding="utf-8")
    out = []
    for g in (1.0, 0.5):
        data = one_link(goodput=g)
        data["dynamics"] = {"bandwidth": {"model": "trace", "trace": str(trace)}}
        data["training"]["max_epochs"] = 1
        out.append(epoch_s(data))
    transfer = 2 * 8 * S_BYTES / 1e7  # both transfers inside the trace's first 100 s at g = 1
    assert out[0] == pytest.approx(transfer + 0.02 + 1.0 + 2e-7, rel=1e-9)
    assert out[1] - out[0] == pytest.approx(transfer, rel=1e-6)  # half the rate: twice as long


@pytest.mark.parametrize("value", [0, 1.5, -0.1])
def test_a_factor_outside_0_1_is_refused_naming_the_field(value, tmp_path, capsys):
    import yaml

    data = one_link(goodput=value)
    data["links"][0]["goodput_factor"] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "goodput_factor" in err and "links[0].goodput_factor" in err
