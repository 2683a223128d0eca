"""Synchronous hierarchical rounds (docs/hierarchical.md, netsim.epochs.hierarchy).

What must hold (issue 46, item 5; issue 56, item 5): a cloud round on private links equals its
closed form to 1e-9 (each edge at its own pace: max over edges (kappa_2 x (max over its
devices (down + compute + up) + its aggregation) + its backhaul up, max-min at a shared
cloud link from each edge's own end) + cloud aggregation + backhaul down);
backhaul bytes per cloud round are edges x model x 2 (the star's: devices x model x 2); with
kappa_2 = 1 and every device the real backend's hierarchical average is fedavg-all's model to
1e-12; the arrays and the events give the same tables; energy adds up.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import netsim
from netsim.epochs.outcome import EdgeUpdate, RoundUpdates
from netsim.policy import Decision
from netsim.training.real import RealBackend

MODEL = {"params": 2e5, "bytes_per_param": 4, "train_flop_per_sample": 3e7,
         "loss": {"initial_loss": 2.3, "floor_full": 0.05, "samples_half": 3000.0,
                  "exponent": 0.9, "participant_exponent": 0.5}}
DEVICES = [  # id, FLOP/s, samples, link bit/s, latency s, edge
    ("d0", 1e9, 100, 1e7, 0.01, "gw1"), ("d1", 2e9, 300, 2e7, 0.012, "gw1"),
    ("d2", 3e9, 200, 1e7, 0.02, "gw1"), ("d3", 5e8, 50, 3e7, 0.005, "gw2"),
    ("d4", 4e9, 400, 2.5e7, 0.015, "gw2")]
EDGES = {"gw1": 1e10, "gw2": 2e10}  # FLOP/s
CLOUD_FLOPS = 1e12


def tiny(shared_cloud_bps: float | None = None, model: object = MODEL) -> dict:
    """Two edges, five devices on private links; each edge on its own link to the cloud, or
    (``shared_cloud_bps``) both behind a router whose link to the cloud they share."""
    devices = [{"id": "cloud", "flop_per_s": CLOUD_FLOPS, "memory_bytes": 1e11,
                "power_busy_w": 100, "power_idle_w": 10}]
    links = []
    for dev, flops, samples, bps, lat, edge in DEVICES:
        devices.append({"id": dev, "flop_per_s": flops, "memory_bytes": 4e9,
                        "power_busy_w": 5, "power_idle_w": 1, "samples": samples})
        links.append({"a": dev, "b": edge, "bandwidth_bps": bps, "latency_s": lat,
                      "energy_j_per_bit": 1e-8})
    if shared_cloud_bps is None:
        links += [{"a": "gw1", "b": "cloud", "bandwidth_bps": 5e7, "latency_s": 0.05},
                  {"a": "gw2", "b": "cloud", "bandwidth_bps": 4e7, "latency_s": 0.04}]
    else:
        links += [{"a": "gw1", "b": "router", "bandwidth_bps": 1e9, "latency_s": 0.001},
                  {"a": "gw2", "b": "router", "bandwidth_bps": 1e9, "latency_s": 0.001},
                  {"a": "router", "b": "cloud", "bandwidth_bps": shared_cloud_bps,
                   "latency_s": 0.03, "energy_j_per_bit": 2e-9}]
    return {"name": "tiny-tiers", "devices": devices, "links": links,
            "edges": [{"id": e, "flop_per_s": f, "power_busy_w": 50, "power_idle_w": 20}
                      for e, f in EDGES.items()],
            "aggregator": "cloud", "model": model,
            "training": {"target_loss": 0.01, "deadline_s": 1e6, "max_epochs": 2}}


class Every:
    """Every device with samples, all of them, ``kappa`` edge rounds (None: a star epoch)."""

    name = "every"

    def __init__(self, kappa: int | None) -> None:
        self.kappa = kappa

    def reset(self, scenario, rng) -> None:
        pass

    def decide(self, obs) -> Decision:
        t = obs.devices
        return Decision(participants={d: int(t.samples[i]) for i, d in enumerate(t.ids)
                                      if t.samples[i] > 0}, edge_rounds=self.kappa)


def _sharing_two(starts: list[float], bits: float, capacity_bps: float) -> list[float]:
    """When each of two flows of ``bits`` bits starting at ``starts`` leaves its last bit on
    one link of ``capacity_bps`` shared max-min (alone: all of it; together: half each)."""
    (a, ka), (b, kb) = sorted(zip(starts, range(2), strict=True))
    alone_end = a + bits / capacity_bps
    out = [0.0, 0.0]
    if alone_end <= b:  # the first is done before the second starts
        out[ka], out[kb] = alone_end, b + bits / capacity_bps
        return out
    left_a = bits - (b - a) * capacity_bps  # bits the first has left when the second starts
    t = b + 2 * left_a / capacity_bps        # both at half until the first is done
    out[ka] = t
    out[kb] = t + (bits - left_a) / capacity_bps
    return out


def closed_form(kappa: int, shared_cloud_bps: float | None = None) -> float:
    """The cloud round of the module docstring, by hand: each edge at its own pace, its
    backhaul upload from the end of its last round, the cloud when both have arrived."""
    nbytes = MODEL["params"] * MODEL["bytes_per_param"]
    bits = 8 * nbytes
    per_edge: dict[str, list[float]] = {e: [] for e in EDGES}
    for _, flops, samples, bps, lat, edge in DEVICES:
        transfer = bits / bps + lat
        per_edge[edge].append(2 * transfer + samples * MODEL["train_flop_per_sample"] / flops)
    done = {e: kappa * (max(t) + 2 * MODEL["params"] * len(t) / EDGES[e])
            for e, t in per_edge.items()}
    if shared_cloud_bps is None:  # each edge alone on its link
        up = max(done["gw1"] + bits / 5e7 + 0.05, done["gw2"] + bits / 4e7 + 0.04)
        down = max(bits / 5e7 + 0.05, bits / 4e7 + 0.04)
    else:  # both share the router's link (their own links are faster), from their own ends
        up = max(_sharing_two([done["gw1"], done["gw2"]], bits, shared_cloud_bps)) + 0.031
        down = 2 * bits / shared_cloud_bps + 0.031
    cloud = 2 * MODEL["params"] * len(EDGES) / CLOUD_FLOPS
    return up + cloud + down


@pytest.mark.parametrize("shared", [None, 2e6])
@pytest.mark.parametrize("kappa", [1, 3])
def test_a_cloud_round_is_its_closed_form(kappa, shared):
    r = netsim.simulate(tiny(shared), policy=Every(kappa), seed=0)
    e = r.epochs
    assert list(e.edge_rounds) == [kappa, kappa] and list(e.edges) == [2, 2]
    took = (e.end_s - e.start_s).to_numpy()
    assert took == pytest.approx([closed_form(kappa, shared)] * 2, rel=1e-9, abs=0)


def test_backhaul_bytes_are_edges_by_model_by_two_against_the_stars_devices():
    nbytes = MODEL["params"] * MODEL["bytes_per_param"]
    hier = netsim.simulate(tiny(2e6), policy=Every(2), seed=0).epochs
    star = netsim.simulate(tiny(2e6), policy=Every(None), seed=0).epochs
    assert list(hier.bytes_backhaul) == [len(EDGES) * nbytes * 2] * 2
    assert list(star.bytes_backhaul) == [len(DEVICES) * nbytes * 2] * 2
    # the backhaul's per-bit energy: the router's link (2e-9 J/bit) each way
    assert hier.energy_backhaul_j.iloc[0] == pytest.approx(len(EDGES) * 2 * 8 * nbytes * 2e-9)
    assert star.energy_backhaul_j.iloc[0] == pytest.approx(len(DEVICES) * 2 * 8 * nbytes * 2e-9)


def test_phases_name_their_tier_and_energy_adds_up():
    r = netsim.simulate(tiny(2e6), policy=Every(2), seed=0)
    e, dev = r.epochs, r.devices
    import json
    phases = json.loads(e.phases.iloc[0])
    assert [p["type"] for p in phases] == ["edge-round", "edge-round", "backhaul-up",
                                           "cloud-aggregation", "backhaul-down"]
    assert [p["tier"] for p in phases] == ["device-edge"] * 2 + ["edge-cloud", "cloud",
                                                                 "edge-cloud"]
    assert phases[0]["start_s"] == e.start_s.iloc[0] and phases[-1]["end_s"] == e.end_s.iloc[0]
    # the edges computed (aggregation: 2 x params per update, kappa_2 times) and idled
    gw1 = dev.set_index("device").loc["gw1"]
    n1 = sum(1 for d in DEVICES if d[5] == "gw1")
    assert gw1.busy_s == pytest.approx(2 * 2 * 2 * MODEL["params"] * n1 / EDGES["gw1"])
    assert gw1.energy_idle_j > 0
    edges_j = dev.set_index("device").loc[["gw1", "gw2"]][
        ["energy_compute_j", "energy_comm_j", "energy_idle_j"]].to_numpy().sum()
    assert e.energy_edges_j.sum() == pytest.approx(edges_j, rel=1e-12)
    total = e[["energy_compute_j", "energy_comm_j", "energy_idle_j"]].to_numpy().sum()
    assert total == pytest.approx(r.runs.energy_j.iloc[0], rel=1e-12)
    assert e.energy_cloud_j.iloc[0] > 0


def test_a_star_run_without_edges_records_an_empty_tier():
    r = netsim.simulate("two-phones", policy="fedavg-all", seed=0).epochs
    assert (r.bytes_backhaul == 0).all() and (r.edge_rounds == 0).all()
    assert (r.edges == 0).all() and (r.phases == "[]").all()


def test_kappa_one_with_every_device_is_fedavg_on_the_surrogate():
    hier = netsim.simulate(tiny(), policy=Every(1), seed=0).epochs
    star = netsim.simulate(tiny(), policy=Every(None), seed=0).epochs
    assert hier.loss.to_numpy() == pytest.approx(star.loss.to_numpy(), rel=1e-12, abs=0)
    assert list(hier.samples) == list(star.samples)


def _digits(kappa: int | None) -> dict:
    sc = tiny(model="mlp-digits")
    sc["training"].update({"backend": "real", "max_epochs": 3, "target_loss": 1e-3})
    return sc


def test_kappa_one_with_every_device_is_fedavg_on_the_real_backend():
    hier = netsim.simulate(_digits(1), policy=Every(1), seed=4).epochs
    star = netsim.simulate(_digits(None), policy="fedavg-all", seed=4).epochs
    assert hier.loss.to_numpy() == pytest.approx(star.loss.to_numpy(), rel=1e-12, abs=0)


def test_the_real_backends_tiers_average_the_edge_averages_to_1e_12():
    from netsim.scenario.schema import TrainingSpec
    from netsim.training.models import resolve_model

    model = resolve_model("mlp-digits")
    ids, samples = ["a", "b", "c", "d"], [120, 80, 200, 60]
    training = TrainingSpec(target_loss=0.1, deadline_s=1, dirichlet_alpha=0.5)
    star = RealBackend(model, ids, samples, training, np.random.default_rng(7))
    tier = RealBackend(model, ids, samples, training, np.random.default_rng(7))
    star.advance(dict(zip(ids, samples, strict=True)), 0)
    groups = (("a", "c"), ("b", "d"))
    tier.advance_tiers([EdgeUpdate(f"e{k}", (RoundUpdates(
        g, np.array([samples[ids.index(d)] for d in g]), np.zeros(len(g), dtype=int)),))
        for k, g in enumerate(groups)], 0)
    for a, b in zip(star.params, tier.params, strict=True):
        assert np.max(np.abs(a - b)) <= 1e-12
    # two edge rounds move the model further than one (it is not a copy of the first)
    again = RealBackend(model, ids, samples, training, np.random.default_rng(7))
    again.advance_tiers([EdgeUpdate(f"e{k}", (RoundUpdates(
        g, np.array([samples[ids.index(d)] for d in g]), np.zeros(len(g), dtype=int)),) * 2)
        for k, g in enumerate(groups)], 0)
    assert max(np.max(np.abs(a - b)) for a, b in zip(star.params, again.params,
                                                     strict=True)) > 1e-3


def _fleet(n: int = 120) -> dict:
    return {"name": "fleet-tiers", "seed": 0,
            "generate": {"n_devices": n, "devices_per_cell": 12, "seed": 5,
                         "access": {"wifi": 0.6, "lte": 0.4},
                         "edges": {"cells_per_edge": 2, "backhaul_bps": 5e7, "metro_bps": 2e8}},
            "model": "small-cnn",
            "training": {"target_loss": 0.01, "deadline_s": 1e6, "max_epochs": 3}}


def test_arrays_and_events_give_the_same_tables():
    policy = {"hierfavg": {"edge_rounds": 2, "participants_per_edge": 5}}
    fast = netsim.simulate(_fleet(), policy="hierfavg", seed=1, params=policy["hierfavg"])
    slow = netsim.simulate(_fleet(), policy="hierfavg", seed=1,
                           params=policy["hierfavg"], fast_epochs=False)
    for col in ("start_s", "end_s", "energy_compute_j", "energy_comm_j", "energy_idle_j",
                "loss", "bytes_backhaul", "energy_edges_j"):
        assert fast.epochs[col].to_numpy() == pytest.approx(slow.epochs[col].to_numpy(),
                                                            rel=1e-9, abs=1e-12), col
    for col in ("bytes_sent", "bytes_received", "busy_s", "energy_comm_j"):
        assert fast.devices[col].to_numpy() == pytest.approx(slow.devices[col].to_numpy(),
                                                             rel=1e-9, abs=1e-12), col


def test_generated_edges_serve_their_cells():
    from netsim.engine import World, resolve_scenario
    from netsim.scenario.loading import load_scenario

    world = World(resolve_scenario(load_scenario(_fleet()), 0), np.random.default_rng(0))
    tiers = world.tiers
    assert tiers is not None
    default = tiers.default_edge
    assert default[world.devices.aggregator] == -1 and (np.delete(default, 0) >= 0).all()
    # two cells per edge: each edge on the node of the first of its two cells (in order of
    # opening), serving the devices of both
    cells = world.scenario.devices.fleet.cell_ids
    assert list(tiers.node_ids) == cells[::2]
    for row in range(1, world.devices.n):
        route_cell = world.topology.route(world.devices.ids[row], world.aggregator_id).nodes[1]
        assert cells.index(route_cell) // 2 == default[row]
    # a device reaches its edge's node over the tree: its edge round's routes exist
    route = world.tier_routes.device_route(5, int(default[5]), False)
    assert route.nodes[0] == world.devices.ids[5] and route.nodes[-1] == tiers.node_ids[default[5]]
    star = netsim.simulate(_fleet(), policy="cloud-only", seed=0, params={"k": 10})
    assert (star.epochs.bytes_backhaul > 0).all() and (star.epochs.edge_rounds == 0).all()


def test_hierfavg_draws_participants_per_edge():
    r = netsim.simulate(_fleet(), policy="hierfavg", seed=2,
                        params={"edge_rounds": 1, "participants_per_edge": 3})
    e = r.epochs
    n_edges = int(e.edges.iloc[0])
    assert list(e.participants) == [3 * n_edges] * len(e)
    assert (e.updates_aggregated == n_edges).all()


def test_a_hierarchical_decision_is_checked():
    sc = tiny()
    sc["devices"][1]["edges"] = ["gw1"]

    class Bad:
        name = "bad"

        def __init__(self, **fields) -> None:
            self.fields = fields

        def reset(self, scenario, rng) -> None:
            pass

        def decide(self, obs) -> Decision:
            return Decision(participants={"d0": 100}, **self.fields)

    for fields, message in (({"edge_rounds": 0}, "edge_rounds: 0 is not an integer >= 1"),
                            ({"edge_rounds": 1, "association": {"d0": "gw2"}},
                             "association['d0']: edge 'gw2' is not one the device can reach"),
                            ({"edge_rounds": 1, "association": {"d0": "nope"}},
                             "association['d0']: unknown edge 'nope'"),
                            ({"association": {"d0": "gw1"}},
                             "association: given without edge_rounds")):
        r = netsim.simulate(sc, policy=Bad(**fields), seed=0)
        assert r.runs.status.iloc[0] == "failed"
        assert message in r.runs.error.iloc[0]
        assert r.runs.epochs.iloc[0] == 0
    no_edges = copy.deepcopy(tiny())
    del no_edges["edges"]
    no_edges["links"] = [x for x in no_edges["links"]]
    r = netsim.simulate(no_edges, policy=Bad(edge_rounds=1), seed=0)
    assert "the world has no edge aggregators" in r.runs.error.iloc[0]
