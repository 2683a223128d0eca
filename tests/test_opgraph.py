"""Operator graphs: loading, generators, backward pass, grouping and fusion."""

import networkx as nx
import numpy as np
import pytest

from netsim.opgraph import (
    LayerSpec,
    add_backward,
    chain_graph,
    coplacement_groups,
    graph_from_layers,
    group_and_fuse,
    inception_graph,
    layered_dag,
    load_graph,
    save_profile,
    total_memory_bytes,
)
from netsim.opgraph.profile import profile_from_dict
from netsim.opgraph.zoo import MODEL_LAYERS, model_layers
from netsim.training.models import builtin_models


@pytest.fixture(scope="module")
def gnmt():
    return load_graph("gnmt")


def test_gnmt_profile_loads_with_units(gnmt):
    assert gnmt.number_of_nodes() == 2494
    assert gnmt.number_of_edges() == 4150
    assert nx.is_directed_acyclic_graph(gnmt)
    total_s = sum(a["time_s"] for _, a in gnmt.nodes(data=True))
    assert total_s == pytest.approx(116762e-6)  # compute_us summed in the file, in seconds
    assert sum(a["memory_bytes"] for _, a in gnmt.nodes(data=True)) == 292806656


def test_gnmt_grouping_and_fusion_under_600(gnmt):
    fused = group_and_fuse(gnmt)
    assert fused.graph.number_of_nodes() < 600
    assert nx.is_directed_acyclic_graph(fused.graph)
    members = [op for ops in fused.members.values() for op in ops]
    assert sorted(members) == sorted(gnmt.nodes)  # a partition of the operators
    # fusion conserves work and persistent memory
    assert sum(a["time_s"] for _, a in fused.graph.nodes(data=True)) == pytest.approx(116762e-6)
    assert sum(a["memory_bytes"] for _, a in fused.graph.nodes(data=True)) == 292806656


def test_colocation_respected_by_groups(gnmt):
    groups = coplacement_groups(gnmt)
    by_key = {}
    for n, a in gnmt.nodes(data=True):
        if "colocation" in a:
            by_key.setdefault(a["colocation"], set()).add(groups[n])
    assert by_key and all(len(g) == 1 for g in by_key.values())


def test_single_consumer_joins_consumer_group_unless_capped():
    g = chain_graph(5, np.random.default_rng(0))
    assert len(set(coplacement_groups(g).values())) == 1
    assert group_and_fuse(g).graph.number_of_nodes() == 1
    size = {n: a["memory_bytes"] + a["temporary_bytes"] + a["output_bytes"] for n, a in g.nodes(data=True)}
    cap = 1.01 * max(size.values())
    groups = coplacement_groups(g, max_group_bytes=cap)
    totals = {}
    for n, r in groups.items():
        totals[r] = totals.get(r, 0.0) + size[n]
    assert len(totals) > 1 and max(totals.values()) <= cap


def test_generators_are_seeded_and_acyclic():
    for make in (lambda r: layered_dag(300, r), lambda r: inception_graph(5, r), lambda r: chain_graph(20, r)):
        a, b = make(np.random.default_rng(3)), make(np.random.default_rng(3))
        assert nx.is_directed_acyclic_graph(a)
        assert list(a.nodes(data="time_s")) == list(b.nodes(data="time_s"))
        assert list(a.edges) == list(b.edges)
    assert layered_dag(300, np.random.default_rng(1)).number_of_nodes() == 300
    assert layered_dag(300, np.random.default_rng(1)).edges != layered_dag(300, np.random.default_rng(2)).edges


def test_layers_and_backward_make_a_training_step():
    layers = [LayerSpec("a", 1e9, 1000, 4096), LayerSpec("b", 2e9, 0, 2048), LayerSpec("c", 1e9, 10, 64)]
    fwd = graph_from_layers(layers)
    assert fwd.nodes["a"]["memory_bytes"] == 4000 and fwd.edges["a", "b"]["bytes"] == 4096
    train = add_backward(fwd)
    assert nx.is_directed_acyclic_graph(train)
    # forward, one grad per layer, one update per layer with weights (a, c)
    assert train.number_of_nodes() == 3 + 3 + 2
    assert train.nodes["grad:b"]["flop"] == 4e9
    assert train.edges["grad:b", "grad:a"]["bytes"] == 4096  # gradient of a's output
    assert train.has_edge("a", "grad:a") and train.has_edge("grad:a", "update:a")
    assert nx.shortest_path_length(train, "a", "update:a") >= 2
    assert "update:b" not in train
    keys = {train.nodes[n]["colocation"] for n in ("a", "grad:a", "update:a")}
    assert len(keys) == 1
    # the step does forward + backward + update work
    work = sum(train.nodes[n]["flop"] for n in train)
    assert work == pytest.approx(3 * 4e9 + 2 * (4000 + 40) / 4)


def test_profile_round_trip(tmp_path):
    g = layered_dag(50, np.random.default_rng(0))
    save_profile(g, tmp_path / "g.json")
    h = load_graph(str(tmp_path / "g.json"))
    assert h.number_of_nodes() == 50 and h.number_of_edges() == g.number_of_edges()
    assert total_memory_bytes(h) == pytest.approx(total_memory_bytes(g))


def test_unknown_graph_name_is_an_error():
    with pytest.raises(ValueError, match="unknown graph"):
        load_graph("no-such-graph")


@pytest.mark.parametrize("name", sorted(MODEL_LAYERS))
def test_builtin_model_layers_add_up_to_their_spec(name):
    spec = builtin_models()[name]
    layers = model_layers(name, batch_samples=1)
    assert sum(layer.params for layer in layers) == spec.params
    assert 3 * sum(layer.flop for layer in layers) == pytest.approx(spec.train_flop_per_sample, rel=0.01)
    batch = model_layers(name, batch_samples=8)
    assert [b.flop for b in batch] == pytest.approx([8 * layer.flop for layer in layers])
    assert [b.params for b in batch] == [layer.params for layer in layers]
    g = load_graph(name)
    assert nx.is_directed_acyclic_graph(g) and g.number_of_nodes() == len(layers)


def test_profile_outputs_hold_persistent_bytes_once():
    # a variable's output is its weights: persistent once, no transient output on top
    data = {"nodes": [{"id": 0, "name": "w", "op": "VariableV2", "compute_us": 1, "persistent_bytes": 100,
                       "output_bytes": [100]},
                      {"id": 1, "name": "mm", "op": "MatMul", "compute_us": 5, "persistent_bytes": 0,
                       "output_bytes": [40], "temporary_bytes": 8}],
            "edges": [{"src": 0, "dst": 1, "bytes": 100}]}
    g = profile_from_dict(data)
    assert g.nodes[0]["memory_bytes"] == 100 and g.nodes[0]["output_bytes"] == 0
    assert g.nodes[1]["output_bytes"] == 40
    assert total_memory_bytes(g) == 100 + 40 + 8


def test_fused_edge_carries_a_producer_tensor_once():
    # p feeds a and b, which fuse into one node: the fused edge moves p's tensor once
    g = nx.DiGraph()
    for n in ("p", "a", "b"):
        g.add_node(n, time_s=1e-3, memory_bytes=0.0, temporary_bytes=0.0, output_bytes=10.0)
    g.add_edge("p", "a", bytes=10.0)
    g.add_edge("p", "b", bytes=10.0)
    g.add_edge("a", "b", bytes=10.0)
    g.nodes["a"]["colocation"] = g.nodes["b"]["colocation"] = "ab"
    g.nodes["p"]["colocation"] = "p"
    fused = group_and_fuse(g).graph
    assert fused.number_of_nodes() == 2
    ((u, v, nbytes),) = fused.edges(data="bytes")
    assert nbytes == 10.0


def test_grouping_options_follow_baechis_groupers_and_fusion_rule():
    # a and d colocated, a -> d; a also feeds x, and y (two consumers) also feeds d: both ends
    # have other edges but no other path joins them, so only the other-path check fuses them
    g = nx.DiGraph()
    for n in "adxyz":
        g.add_node(n, time_s=1e-3, memory_bytes=0.0, temporary_bytes=0.0, output_bytes=1.0)
    g.nodes["a"]["colocation"] = g.nodes["d"]["colocation"] = "k"
    g.add_edges_from([("a", "d"), ("a", "x"), ("y", "d"), ("y", "z")], bytes=1.0)
    assert group_and_fuse(g).graph.number_of_nodes() == 4
    assert group_and_fuse(g, disjoint_paths=False).graph.number_of_nodes() == 5
    # without colocation keys, only the single-consumer rule groups a chain
    chain = chain_graph(4, np.random.default_rng(0))
    assert group_and_fuse(chain).graph.number_of_nodes() == 1
    assert group_and_fuse(chain, single_consumer=False).graph.number_of_nodes() == 4


def test_fusing_a_profiled_graph_keeps_the_measured_times():
    """Every operator with both its FLOP and a measured time (netsim models graph --profile):
    a fused node carries both sums, so its reference time is the members' measured times."""
    g = chain_graph(5, np.random.default_rng(0))
    for i, n in enumerate(g.nodes):
        g.nodes[n]["time_s"] = 1e-3 * (i + 1)
        g.nodes[n]["flop"] = 1e6 * (i + 2)
    fused = group_and_fuse(g).graph
    assert fused.number_of_nodes() == 1
    ((_, a),) = fused.nodes(data=True)
    assert a["time_s"] == pytest.approx(sum(1e-3 * (i + 1) for i in range(5)), rel=1e-12)
    assert a["flop"] == pytest.approx(sum(x["flop"] for _, x in g.nodes(data=True)), rel=1e-12)
