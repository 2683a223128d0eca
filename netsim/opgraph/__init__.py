"""Operator graphs: loading, generation, backward pass, grouping and execution of placements."""

from netsim.opgraph.backward import add_backward
from netsim.opgraph.costs import CostModel, IndexedGraph, PlacementDevice, identical_devices
from netsim.opgraph.graph import node_time_s, total_memory_bytes, validate_graph
from netsim.opgraph.grouping import FusedGraph, coplacement_groups, group_and_fuse
from netsim.opgraph.layers import LayerSpec, graph_from_layers, transformer_layers
from netsim.opgraph.profile import load_graph, load_profile, save_profile
from netsim.opgraph.synthetic import chain_graph, inception_graph, layered_dag

__all__ = [
    "CostModel",
    "FusedGraph",
    "IndexedGraph",
    "LayerSpec",
    "PlacementDevice",
    "add_backward",
    "chain_graph",
    "coplacement_groups",
    "graph_from_layers",
    "group_and_fuse",
    "identical_devices",
    "inception_graph",
    "layered_dag",
    "load_graph",
    "load_profile",
    "node_time_s",
    "save_profile",
    "total_memory_bytes",
    "transformer_layers",
    "validate_graph",
]
