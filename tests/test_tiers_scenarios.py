"""The hierarchical built-in scenarios (issue 46, item 6): ``nycmesh`` from Async-HFL's
shipped delays (netsim/data/nycmesh/SOURCE.md) and the generated ``city-edge``."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

import netsim
from netsim.scenario.loading import builtin_scenarios, validate_scenario
from netsim.scenario.nycmesh import PAPER_MODEL_BYTES, nycmesh_text


def test_the_nycmesh_file_is_what_its_builder_writes():
    assert builtin_scenarios()["nycmesh"].read_text(encoding="utf-8") == nycmesh_text()


def test_nycmesh_is_the_papers_mesh_with_each_device_reaching_its_gateways():
    text = resources.files("netsim").joinpath("data", "nycmesh",
                                                "delay_client_to_gateway.csv").read_text()
    delays = np.loadtxt(text.splitlines(), delimiter=",")
    sc = validate_scenario("nycmesh").scenario
    assert sc is not None
    devices = [d for d in sc.devices if d.id != "server"]
    assert len(devices) == 184 and len(sc.edges) == 6
    links = {(x.a, x.b): x for x in sc.links}
    for i, d in enumerate(devices):
        reach = np.flatnonzero(delays[i] > 0)
        assert sorted(d.edges) == sorted(f"gateway-{k + 1}" for k in reach)
        fastest = f"gateway-{int(reach[np.argmin(delays[i][reach])]) + 1}"
        assert d.edges[0] == fastest
        for k in reach:  # the model down and up in the recorded delay
            link = links[(d.id, f"gateway-{k + 1}")]
            assert 2 * 8 * PAPER_MODEL_BYTES / link.bandwidth_bps == pytest.approx(
                delays[i, k], rel=1e-5)
    # a device's default edge (the first on its route) is its fastest gateway
    r = netsim.simulate("nycmesh", policy="hierfavg", seed=0, params={"edge_rounds": 1})
    assert r.runs.status.iloc[0] == "ok" and (r.epochs.edges == 6).all()


def test_city_edge_is_a_generated_city_with_an_edge_per_site():
    sc = validate_scenario("city-edge").scenario
    assert sc is not None and sc.generate is not None and sc.generate.edges is not None
    assert sc.generate.n_devices == 10_000 and sc.generate.edges.cells_per_edge == 1
    r = netsim.simulate("city-edge", policy="hierfavg", seed=0,
                        params={"edge_rounds": 2, "participants_per_edge": 1})
    e = r.epochs
    assert (e.edges == 200).all() and (e.participants == 200).all()
    assert e.bytes_backhaul.iloc[0] == 200 * 2 * 1663370 * 4


def test_the_experiments_policies_are_valid_at_equal_local_work():
    from experiments.hierarchical.run import PER_ROUND, SCENARIOS, policies
    from netsim.policy import make_policy

    for name in SCENARIOS:
        entries = policies(name)
        for e in entries:
            make_policy(e["name"], e.get("params"))
        by = {e.get("label", e["name"]): e.get("params", {}) for e in entries}
        assert by["cloud-only"]["k"] == PER_ROUND[name] == by["fedbuff"]["concurrency"]
        assert [by[f"hierfavg-k{k}"]["edge_rounds"] for k in (1, 2, 4, 8)] == [1, 2, 4, 8]
