"""Executing placements in SimPy: step time, memory, transfers, energy, out of memory."""

from dataclasses import dataclass

import networkx as nx
import pytest

from netsim.network import Topology
from netsim.opgraph import PlacementDevice, identical_devices
from netsim.opgraph.costs import FAITHFUL_LATENCY_S, FAITHFUL_S_PER_BYTE
from netsim.opgraph.execution import execute_placement
from policies.baechi.etf import m_etf


@dataclass
class Link:
    a: str
    b: str
    bandwidth_bps: float
    latency_s: float
    energy_j_per_bit: float


def two_ops(out_bytes=1e6, flop=None):
    g = nx.DiGraph()
    for n, t in (("a", 1e-3), ("b", 2e-3)):
        attrs = {"flop": flop} if flop else {"time_s": t}
        g.add_node(n, memory_bytes=100.0, temporary_bytes=10.0, output_bytes=out_bytes, **attrs)
    g.add_edge("a", "b", bytes=out_bytes)
    return g


def test_faithful_split_adds_one_linear_transfer():
    g = two_ops()
    step = execute_placement(g, {"a": 0, "b": 1}, identical_devices(2, 1e9))
    transfer_s = round((FAITHFUL_S_PER_BYTE * 1e6 + FAITHFUL_LATENCY_S) * 1e6) * 1e-6  # whole us, as Baechi
    assert step.status == "ok"
    assert step.step_time_s == pytest.approx(1e-3 + transfer_s + 2e-3)
    assert step.bytes_moved == 1e6
    # device 0: persistent + temp + output (held until the transfer ends)
    assert step.peak_memory_bytes[0] == pytest.approx(100 + 10 + 1e6)
    # device 1: persistent + received copy + own temp and output
    assert step.peak_memory_bytes[1] == pytest.approx(100 + 1e6 + 10 + 1e6)


def test_same_device_has_no_transfer_and_frees_between_ops():
    g = two_ops()
    step = execute_placement(g, {"a": "gpu0", "b": "gpu0"}, identical_devices(2, 1e9))
    assert step.step_time_s == pytest.approx(3e-3)
    assert step.bytes_moved == 0
    # a's temp freed when b starts; a's output live until b ends, b's output too
    assert step.peak_memory_bytes[0] == pytest.approx(200 + 1e6 + 10 + 1e6)


def test_out_of_memory_is_an_outcome_with_device_and_amount():
    g = two_ops()
    step = execute_placement(g, {"a": 0, "b": 1}, identical_devices(2, 1.5e6))
    assert step.status == "oom"
    assert step.oom.device == "gpu1"
    assert step.oom.required_bytes == pytest.approx(100 + 1e6 + 10 + 1e6)
    assert step.oom.limit_bytes == 1.5e6
    assert "gpu1" in step.reason


def test_heterogeneous_uses_flop_rates_links_and_energy():
    g = two_ops(out_bytes=1e6, flop=1e9)
    devices = [PlacementDevice("fast", 1e9, 1e12, power_busy_w=10, power_idle_w=1),
               PlacementDevice("slow", 1e9, 1e11, power_busy_w=5, power_idle_w=0.5)]
    topo = Topology(["fast", "slow", "ap"], [Link("fast", "ap", 1e8, 0.01, 1e-7), Link("ap", "slow", 5e7, 0.02, 2e-7)])
    step = execute_placement(g, {"a": 0, "b": 1}, devices, topo, "heterogeneous")
    expect = 1e9 / 1e12 + 8e6 / 5e7 + 0.03 + 1e9 / 1e11
    assert step.status == "ok"
    assert step.step_time_s == pytest.approx(expect)
    assert step.busy_s == pytest.approx([1e-3, 1e-2])
    assert step.energy_compute_j == pytest.approx([10 * 1e-3, 5 * 1e-2])
    assert step.energy_idle_j == pytest.approx([1 * (expect - 1e-3), 0.5 * (expect - 1e-2)])
    assert step.energy_comm_j[0] == pytest.approx(8e6 * 1e-7)  # fast sends on its first hop


def test_planned_and_ready_list_orders_agree_on_a_chain():
    g = nx.path_graph(6, create_using=nx.DiGraph)
    for n in g:
        g.nodes[n].update(time_s=1e-3 * (n + 1), memory_bytes=1.0, output_bytes=8.0)
    for u, v in g.edges:
        g.edges[u, v]["bytes"] = 8.0
    devices = identical_devices(2, 1e6)
    res = m_etf(g, devices)
    planned = execute_placement(g, res.placement, devices, order=res.order, transfer_order=res.transfer_order)
    ready = execute_placement(g, res.placement, devices)
    assert planned.step_time_s == pytest.approx(ready.step_time_s) == pytest.approx(0.021)


def test_invalid_placement_raises_value_error():
    g = two_ops()
    with pytest.raises(ValueError, match="'b'"):
        execute_placement(g, {"a": 0}, identical_devices(2, 1e9))
    with pytest.raises(ValueError, match=r"placement\['a'\]"):
        execute_placement(g, {"a": 5, "b": 0}, identical_devices(2, 1e9))


def test_cli_place_json_and_invalid_input(capsys):
    import json

    from netsim.cli import main

    assert main(["place", "layered-60", "--devices", "3", "--memory", "0.5", "--algorithm", "m-sct", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "ok" and out["step_time_s"] > 0 and out["placement_time_s"] > 0
    assert len(out["peak_memory_bytes"]) == 3
    assert max(out["peak_memory_bytes"]) <= out["memory_per_device_bytes"]
    for argv, name in ((["--devices", "0"], "--devices"), (["--memory", "-1"], "--memory"),
                       (["--algorithm", "x"], "--algorithm"), (["--mode", "y"], "--mode")):
        assert main(["place", "chain-5", *argv]) == 2
        assert name in capsys.readouterr().err
    assert main(["place", "nope"]) == 2
    assert "GRAPH" in capsys.readouterr().err
