"""Cross-field checks of a scenario's edge aggregators (docs/hierarchical.md), on the raw
mapping like :mod:`netsim.scenario.checks` (which calls :func:`edge_problems`): an edge on a
node that does not exist or is a device, two edges on one node, duplicate ids, a generated
edge class the catalog lacks; a device's ``edges`` naming an unknown edge or one it has no
path to; a device holding samples that reaches no edge at all. Each problem names its field
path; nothing is simulated on a scenario that has one.
"""

from __future__ import annotations

from typing import Any

from netsim.scenario.checks import _as_list, _field, _valid, name_hint
from netsim.scenario.errors import Problem
from netsim.scenario.schema import DeviceSpec, EdgeSpec, LinkSpec, MediumSpec


def edge_problems(data: dict[str, Any]) -> list[Problem]:
    """Every problem of the scenario's edges (module docstring)."""
    generate = data.get("generate")
    raw_edges = _as_list(data.get("edges"))
    if generate is not None:
        found = _generated_problems(generate)
        if raw_edges:
            found.append(Problem("edges", "a generated network builds its own edges "
                                          "(generate.edges); give edges with explicit links"))
        return found
    if data.get("devices") is None and data.get("links") is None:
        return []
    raw_devices, raw_links = _as_list(data.get("devices")), _as_list(data.get("links"))
    device_ids = [i for i in (_field(d, "id") for d in raw_devices) if isinstance(i, str)]
    devices = set(device_ids)
    ends = [e for link in raw_links for e in (_field(link, "a"), _field(link, "b"))
            if isinstance(e, str) and e]
    network_nodes = sorted(set(ends) - devices)
    out: list[Problem] = []
    edge_nodes: dict[str, str] = {}  # edge id -> node
    taken: dict[str, int] = {}
    for i, raw in enumerate(raw_edges):
        eid = _field(raw, "id")
        if not isinstance(eid, str) or not eid:
            continue
        if eid in edge_nodes:
            out.append(Problem(f"edges[{i}].id", f"duplicate edge id {eid!r}"))
            continue
        node = _field(raw, "node")
        node = eid if node is None else node
        if not isinstance(node, str) or not node:
            continue
        field = f"edges[{i}].node" if _field(raw, "node") is not None else f"edges[{i}].id"
        if node in devices:
            out.append(Problem(field, f"{node!r} is a device; an edge aggregator sits on a "
                                      "network node (a link end that is not a device)"))
            continue
        if node not in network_nodes:
            out.append(Problem(field, f"{node!r} is not a node of the network (a link end "
                                      "that is not a device)"
                               + name_hint(node, network_nodes, "the links name no network "
                                                                "node")))
            continue
        if node in taken:
            out.append(Problem(field, f"node {node!r} already holds edges[{taken[node]}] "
                                      "(one edge aggregator per node)"))
            continue
        taken[node] = i
        edge_nodes[eid] = node
        spec = _valid(EdgeSpec, raw)
        if spec is not None and spec.power_idle_w > spec.power_busy_w:
            out.append(Problem(f"edges[{i}].power_idle_w",
                               f"must be <= power_busy_w ({spec.power_busy_w} W)"))
    out += _device_problems(data, raw_devices, raw_links, edge_nodes, bool(raw_edges))
    return out


def _generated_problems(generate: Any) -> list[Problem]:
    """A generated network's edges: the catalog has the edge class."""
    from netsim.scenario.generator import edge_catalog

    edges = _field(generate, "edges")
    kind = _field(edges, "edge_class") if edges is not None else None
    classes = edge_catalog()["device_classes"]
    if isinstance(kind, str) and kind not in classes:
        return [Problem("generate.edges.edge_class", f"unknown device class {kind!r}"
                        + name_hint(kind, list(classes)))]
    return []


def _device_problems(data: dict[str, Any], raw_devices: list[Any], raw_links: list[Any],
                     edge_nodes: dict[str, str], any_edges: bool) -> list[Problem]:
    """Each device's ``edges``: known, each reachable; a device with samples and no edges
    given must cross one on its route to the aggregator."""
    import networkx as nx

    graph = nx.Graph()
    for link in raw_links:
        a, b = _field(link, "a"), _field(link, "b")
        if isinstance(a, str) and isinstance(b, str) and a and b:
            graph.add_edge(a, b)
    out: list[Problem] = []
    unlisted: list[tuple[int, str]] = []
    agg = data.get("aggregator")
    for i, raw in enumerate(raw_devices):
        dev, listed = _field(raw, "id"), _field(raw, "edges")
        if not isinstance(dev, str) or not dev:
            continue
        if listed is None:
            samples = _field(raw, "samples")
            if any_edges and dev != agg and isinstance(samples, int) and samples > 0:
                unlisted.append((i, dev))
            continue
        if not any_edges:
            out.append(Problem(f"devices[{i}].edges", "the scenario has no edge aggregators "
                                                      "(a top-level edges: block)"))
            continue
        for j, eid in enumerate(_as_list(listed)):
            if not isinstance(eid, str):
                continue
            node = edge_nodes.get(eid)
            if node is None:
                out.append(Problem(f"devices[{i}].edges[{j}]", f"unknown edge {eid!r}"
                                   + name_hint(eid, list(edge_nodes))))
            elif dev not in graph or node not in graph or not nx.has_path(graph, dev, node):
                out.append(Problem(f"devices[{i}].edges[{j}]", f"no path from {dev!r} to edge "
                                   f"{eid!r} (on node {node!r}): an edge a device lists must "
                                   "be reachable"))
    if unlisted and edge_nodes:
        out += _route_problems(data, raw_devices, raw_links, edge_nodes, unlisted)
    return out


def _route_problems(data: dict[str, Any], raw_devices: list[Any], raw_links: list[Any],
                    edge_nodes: dict[str, str], unlisted: list[tuple[int, str]]
                    ) -> list[Problem]:
    """Devices that list no edge: the first edge on their route to the aggregator (the
    engine's route, netsim.network.Topology) is their default; none on it is a problem.
    Judged only where every device, link and medium is valid on its own."""
    from netsim.network import Topology

    devices = [_valid(DeviceSpec, d) for d in raw_devices]
    links = [_valid(LinkSpec, x) for x in raw_links]
    media = [_valid(MediumSpec, m) for m in _as_list(data.get("media"))]
    agg = data.get("aggregator")
    if any(x is None for x in [*devices, *links, *media]) or not isinstance(agg, str):
        return []
    ids = [d.id for d in devices if d is not None]
    nodes = list(ids)
    known = set(ids)
    for link in links:
        for end in (link.a, link.b):  # type: ignore[union-attr]
            if end not in known:
                known.add(end)
                nodes.append(end)
    try:
        topology = Topology(nodes, links, media, n_devices=len(ids))
        on = set(edge_nodes.values())
        out = []
        for i, dev in unlisted:
            if not topology.connected(dev, agg):
                continue  # (reported by the explicit checks: no route to the aggregator)
            route = topology.route(dev, agg)
            if not any(v in on for v in route.nodes[1:]):
                out.append(Problem(f"devices[{i}].edges", f"{dev!r} holds samples but its "
                                   "route to the aggregator crosses no edge aggregator; list "
                                   "the edges it can reach (devices[].edges)"))
        return out
    except (KeyError, ValueError):
        return []
