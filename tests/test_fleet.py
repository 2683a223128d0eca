"""A generated fleet in arrays (netsim.scenario.fleet, netsim.network.tree) is the network its
specs describe: the same routes, device table and figures as the graph topology built from
the materialised devices and links; every spec it hands out is a valid one."""

import copy

import numpy as np
import pytest

from netsim.devices import build_device_table
from netsim.engine import resolve_scenario
from netsim.network import Topology
from netsim.network.tree import TreeTopology
from netsim.scenario.fleet import FleetDevices, FleetLinks
from netsim.scenario.loading import load_scenario, scenario_data
from netsim.scenario.schema import DeviceSpec, LinkSpec


def _generated(n: int, shared_media: bool = True, dynamics: bool = False, per_cell: int = 8):
    sc = copy.deepcopy(scenario_data("default"))
    sc["generate"].update(n_devices=n, shared_media=shared_media, devices_per_cell=per_cell)
    if dynamics:
        sc["dynamics"] = {"availability": {"model": "markov"}}
    return resolve_scenario(load_scenario(sc), 0)


@pytest.mark.parametrize("media", [True, False])
def test_tree_routes_are_the_graph_topologys(media):
    resolved = _generated(200, shared_media=media)
    assert isinstance(resolved.devices, FleetDevices) and isinstance(resolved.links, FleetLinks)
    devices, links = list(resolved.devices), list(resolved.links)
    from netsim.devices import scenario_topology

    tree = scenario_topology(resolved)
    assert isinstance(tree, TreeTopology)
    graph = Topology(tree.node_ids, links, list(resolved.media), n_devices=len(devices))
    assert tree.capacity_bps == graph.capacity_bps
    assert tree.constraint_capacity == graph.constraint_capacity
    assert list(tree.constraint_medium) == list(graph.constraint_medium)
    assert list(tree.direction_medium) == list(graph.direction_medium)
    assert list(tree.radios) == list(graph.radios)
    agg = resolved.aggregator
    pairs = [(agg, d.id) for d in devices] + [(d.id, agg) for d in devices] \
        + [(devices[5].id, devices[150].id), (devices[150].id, devices[5].id)]
    fields = ("nodes", "hops", "senders", "energy_j_per_bit", "bottleneck_bps", "latency_s",
              "receiver", "charges", "rate_refs", "airtime", "radios")
    for src, dst in pairs:
        a, b = tree.route(src, dst), graph.route(src, dst)
        for f in fields:
            assert getattr(a, f) == getattr(b, f), (src, dst, f)
    down = tree.route(agg, devices[7].id)
    assert down.id == 14 and tree.routes[14] is down


@pytest.mark.parametrize("media", [True, False])
def test_fleet_device_table_is_the_route_by_route_table(media):
    resolved = _generated(300, shared_media=media)
    fast = build_device_table(resolved)
    explicit = resolved.model_copy(update={"devices": tuple(resolved.devices),
                                           "links": tuple(resolved.links)})
    slow = build_device_table(explicit)
    assert fast.ids == slow.ids and fast.aggregator == slow.aggregator
    for f in ("flop_per_s", "memory_bytes", "power_busy_w", "power_idle_w", "samples",
              "availability", "down_bps", "down_latency_s", "down_j_per_bit", "up_bps",
              "up_latency_s", "up_j_per_bit", "capacity_bps"):
        np.testing.assert_array_equal(getattr(fast, f), getattr(slow, f), err_msg=f)
    for name in ("down_routes", "up_routes"):
        a, b = getattr(fast, name), getattr(slow, name)
        for f in ("cap_bps", "latency_s", "hop_start", "hops", "rate_ref", "radio_start",
                  "radio_ids"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=(name, f))
    assert list(fast.radios) == list(slow.radios)


def test_every_spec_a_fleet_hands_out_is_valid_and_its_arrays_agree():
    resolved = _generated(120, dynamics=True)
    fleet = resolved.devices.fleet
    for i, d in enumerate(resolved.devices):
        assert DeviceSpec.model_validate(d.model_dump()) == d
        assert d.flop_per_s == fleet.flop_per_s[i] and d.samples == fleet.samples[i]
    assert any(d.battery_j is not None for d in resolved.devices)  # power states drawn
    for link in resolved.links:
        assert LinkSpec.model_validate(link.model_dump()) == link
    assert resolved.devices[-1] == list(resolved.devices)[-1]
    with pytest.raises(IndexError):
        resolved.devices[len(resolved.devices)]
    dumped = resolved.model_dump()  # a resolved fleet serialises as the specs it stands for
    assert len(dumped["devices"]) == 121 and dumped["devices"][3]["id"] == resolved.devices[3].id


def test_a_million_device_fleet_is_arrays_with_the_bytes_per_device_stated():
    from netsim.scenario.generator import generate_fleet
    from netsim.scenario.schema import GenerateSpec

    fleet = generate_fleet(GenerateSpec(n_devices=1_000_000), np.random.default_rng(0))
    assert fleet.n_devices == 1_000_001 and len(set(fleet.ids[:1000])) == 1000
    assert fleet.nbytes / fleet.n_devices < 300
    assert len(FleetLinks(fleet)) == 1 + 1_000_000 + len(fleet.cell_ids)
    assert int((fleet.link_owner > 0).sum()) == 1_000_000


@pytest.mark.parametrize(("media", "kept"), [(True, True), (False, True), (True, False)])
def test_tree_route_books_are_the_routes_books(monkeypatch, media, kept):
    """The ledger's books of a fleet's routes, gathered for the routes asked for (down and up
    mixed, repeated, in any order), are those the route objects give: kept for every route
    (a fleet up to BOOKS_KEPT_UP_TO devices) or built for those asked for (above)."""
    from netsim.network import tree as tree_module
    from netsim.network.tree import route_books_of

    if not kept:
        monkeypatch.setattr(tree_module, "BOOKS_KEPT_UP_TO", 0)

    resolved = _generated(200, shared_media=media)
    from netsim.devices import scenario_topology

    tree = scenario_topology(resolved)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 2 * 201, size=60).tolist() + [7, 7, 8]
    agg = tree.node_ids[tree.root]
    ids = [i for i in ids if i // 2 != tree.root]
    got = tree.route_books(ids)
    want = route_books_of([tree.route(agg, tree.node_ids[i // 2]) if i % 2 == 0
                           else tree.route(tree.node_ids[i // 2], agg) for i in ids])
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    only_up = [i for i in ids if i % 2 == 1]
    for k, v in tree.route_books(only_up).items():
        np.testing.assert_array_equal(v, route_books_of([tree.routes[i] for i in only_up])[k])
