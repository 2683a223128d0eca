"""The edge tier of the world (netsim.tiers, netsim.scenario.edge_checks; issue 46 items 1
and 10): edges as scenario entities that meter energy, each device's reachable edges and its
default, and bad input named with its field path (CLI exit 2, nothing simulated)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

import netsim
from netsim.cli import main
from netsim.engine import World, resolve_scenario
from netsim.scenario.errors import ScenarioError
from netsim.scenario.loading import load_scenario
from tests.test_hierarchy import tiny


def test_default_edges_follow_routes_and_listed_edges_come_first():
    sc = tiny()
    sc["links"].append({"a": "d0", "b": "gw2", "bandwidth_bps": 1e6, "latency_s": 0.5})
    sc["devices"][1]["edges"] = ["gw2", "gw1"]  # d0 reaches both, gw2 its default
    world = World(resolve_scenario(load_scenario(sc), 0), np.random.default_rng(0))
    t = world.tiers
    assert t is not None and t.ids == ("gw1", "gw2")
    rows = {d: world.devices.index[d] for d in ("cloud", "d0", "d1", "d3")}
    assert t.default_edge[rows["cloud"]] == -1
    assert [t.ids[k] for k in t.reachable(rows["d0"])] == ["gw2", "gw1"]
    assert t.default_edge[rows["d1"]] == 0 and t.default_edge[rows["d3"]] == 1
    assert not t.can_reach(rows["d1"], 1)
    with pytest.raises(ValueError):  # read-only, as everything a policy is given
        t.default_edge[1] = 0
    # an edge meters energy like a device, on the node it sits on
    node = world.topology.index["gw1"]
    assert world.meter.power_idle_w[node] == 20 and world.meter.power_busy_w[node] == 50


def test_a_star_policy_still_runs_with_edges_relaying():
    r = netsim.simulate(tiny(2e6), policy="fedavg-all", seed=0)
    assert r.runs.status.iloc[0] != "failed"
    dev = r.devices.set_index("device")
    assert dev.loc["gw1", "busy_s"] == 0 and dev.loc["gw1", "energy_idle_j"] > 0
    assert dev.loc["gw1", "bytes_sent"] == 0  # relays: it forwards, it sends nothing its own


BAD = [
    (lambda s: s["edges"].append({"id": "gw9", "node": "nowhere", "flop_per_s": 1e9,
                                  "power_busy_w": 1, "power_idle_w": 1}),
     "edges[2].node", "'nowhere' is not a node of the network"),
    (lambda s: s["edges"].append({"id": "gw9", "node": "d1", "flop_per_s": 1e9,
                                  "power_busy_w": 1, "power_idle_w": 1}),
     "edges[2].node", "'d1' is a device"),
    (lambda s: s["devices"][1].update(edges=["gw7"]), "devices[1].edges[0]",
     "unknown edge 'gw7'"),
    (lambda s: (s["links"].extend([{"a": "x1", "b": "x2", "bandwidth_bps": 1e6},
                                   {"a": "x2", "b": "x3", "bandwidth_bps": 1e6}]),
                s["edges"].append({"id": "x2", "flop_per_s": 1e9, "power_busy_w": 1,
                                   "power_idle_w": 1}),
                s["devices"][2].update(edges=["x2"])),
     "devices[2].edges[0]", "no path from 'd1' to edge 'x2'"),
    (lambda s: (s["devices"].append({"id": "d9", "flop_per_s": 1e9, "memory_bytes": 4e9,
                                     "power_busy_w": 1, "power_idle_w": 1, "samples": 5}),
                s["links"].append({"a": "d9", "b": "cloud", "bandwidth_bps": 1e6})),
     "devices[6].edges", "route to the aggregator crosses no edge aggregator"),
    (lambda s: s["edges"].append({"id": "gw1", "node": "gw2", "flop_per_s": 1e9,
                                  "power_busy_w": 1, "power_idle_w": 1}),
     "edges[2].id", "duplicate edge id 'gw1'"),
]


@pytest.mark.parametrize("spoil, path, message", BAD)
def test_bad_edges_are_named_with_their_path(spoil, path, message):
    sc = copy.deepcopy(tiny())
    spoil(sc)
    with pytest.raises(ScenarioError) as err:
        load_scenario(sc)
    found = [str(p) for p in err.value.problems]
    assert any(p.startswith(f"{path}: ") and message in p for p in found), found


def test_the_cli_exits_2_on_bad_edges_and_simulates_nothing(tmp_path, capsys):
    sc = copy.deepcopy(tiny())
    sc["edges"][0]["node"] = "nowhere"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "edges[0].node" in err and "Traceback" not in err
    assert not out.exists()
    assert main(["validate", str(path)]) == 2


def test_kappa_below_one_is_refused_with_exit_2(tmp_path):
    sc = copy.deepcopy(tiny())
    sc["policies"] = {"hierfavg": {"edge_rounds": 0}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    assert main(["run", str(path), "--policy", "hierfavg", "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()


def test_generated_edge_class_must_be_in_the_catalog():
    sc = {"name": "g", "generate": {"n_devices": 10, "edges": {"edge_class": "mainframe"}},
          "model": "small-cnn", "training": {"target_loss": 0.1, "deadline_s": 10}}
    with pytest.raises(ScenarioError, match=r"generate\.edges\.edge_class"):
        load_scenario(sc)


@pytest.mark.parametrize("policy", ["pact", "depl", "greedy-energy", "fedbuff"])
def test_star_planners_and_asynchronous_stars_run_on_a_world_with_edges(policy):
    sc = tiny(2e6)
    sc["training"].update(target_loss=1.5, max_epochs=60)
    params = {"concurrency": 3, "buffer_updates": 2} if policy == "fedbuff" else None
    r = netsim.simulate(sc, policy=policy, seed=0, params=params)
    assert r.runs.status.iloc[0] == "ok", r.runs.error.iloc[0]
    assert (r.epochs.bytes_backhaul > 0).all() and (r.epochs.edge_rounds == 0).all()
