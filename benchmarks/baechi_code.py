"""Baechi's public code next to netsim's faithful mode: the same graphs, placements and step times.

Run: ``python benchmarks/baechi_code.py --baechi PATH [--sizes 1000,10000] [--no-gnmt]``, PATH a
checkout of Baechi's repository (github.com/beomyeol/baechi; the figures in
experiments/baechi/README.md are from commit afe7278:
``git archive afe7278 | tar -x -C PATH``). Nothing of Baechi's is vendored here: the script
imports ``placer`` from PATH, with ``benchmarks/baechi_stubs`` standing in for the packages it
imports but this comparison does not use (TensorFlow's flags and modules, ``future``, and
``cvxopt``, whose LP it solves with scipy's HiGHS instead of MOSEK).

For each graph it builds Baechi's placement graph from netsim's graph, runs Baechi's ``m_topo``,
``m_etf`` and ``m_sct`` (``colocation=True``, m-SCT ``threshold=0.1``) and measures each placement
with Baechi's ``VirtualScheduler`` on the unfused graph (the figure Baechi's code prints); then it
places the same graph with netsim's faithful mode (``policies.baechi.place.place``) and measures
it with Baechi's measure as netsim implements it (``policies.baechi.virtual.baechi_step_s``). One
row per (graph, algorithm): Baechi's code (ms), netsim (ms), netsim / code, the share of
operators on the same device, and both placement wall times (s, measured in this run; Baechi's
includes its grouping and fusion, netsim's its own) with netsim / code. Where the setup is one of
experiments/baechi/README.md's, the code's figure is checked against the quoted one (to 1e-3 ms).

Setups:

- GNMT: ``load_graph("gnmt")`` (netsim's shipped forward profile with its per-edge tensors,
  netsim/data/opgraphs/gnmt_v2_forward_ports.json), 4 devices of 8 GB, Baechi's ``coplace``
  grouper and fused-op graph (``FusedOpPlacer._generate_fused_op_graph``, no disjoint-path check,
  no cycles), netsim ``group=True``.
- Synthetic: ``layered_dag(n, numpy.random.default_rng(n))``, 4 devices of
  ``0.3 * total_memory_bytes(g)``, ungrouped on both sides.

Translation netsim graph -> Baechi graph (``networkx.DiGraph`` as Baechi's placer_lib builds it
from a TensorFlow graph and its profile):

- nodes in netsim's node order, ``id`` = position (then Baechi's ``prune_dangling_ops`` and
  ``assign_topo_order``), ``name`` the operator's name (GNMT) or ``str(node)`` (synthetic);
- ``weight`` (us): ``time_s * 1e6``, GNMT as Baechi's integer profile (rounded, at least 1),
  synthetic as netsim's measure and LP use it (``round(time_s * 1e6, 6)``);
- ``temporary_memory`` = ``temporary_bytes``; ``persistent_memory`` = ``memory_bytes``;
- ``output_memory``: Baechi's outputs hold the persistent bytes (netsim's loader removes them from
  ``output_bytes``), so they sum to ``output_bytes + memory_bytes``. GNMT: one entry per output
  port named by the node's out-edges' ``tensors`` (their bytes), the rest of the sum as a last
  entry (Baechi only ever uses the sum and, after fusion, the out-edges' tensors). Synthetic: one
  entry;
- ``colocation_group``: ``["loc:@" + colocation]`` where netsim has a colocation target, else
  ``["loc:@" + name]`` (TensorFlow's default, the operator's own group); the synthetic graphs,
  ungrouped, get the string ``"loc:@" + name`` (the form Baechi's grouper leaves);
- edges inserted consumer by consumer (netsim's node order), each consumer's producers in netsim's
  in-edge order (GNMT: the GraphDef's input order, from the ports file's ``pred_order``), so both
  Baechi's successor and predecessor orders are netsim's;
- an edge's ``tensor`` list: GNMT, one entry per distinct output ``(port, bytes)`` in the edge's
  ``tensors``, named ``"PRODUCER:port"`` (as TensorFlow names tensors; Baechi sends each once per
  device); synthetic, one tensor per producer named ``str(producer)`` of the producer's largest
  out-edge ``bytes`` (netsim's send size); each tensor's ``weight`` is Baechi's
  ``get_comm_cost(num_bytes, coef=0.0001754, intercept=134)`` (its fitted GPU-to-GPU cost, the
  profile's ``comm_model``) and the edge's ``weight`` their sum.
"""

from __future__ import annotations

import argparse
import copy
import functools
import logging
import sys
import time
from pathlib import Path

import networkx as nx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STUBS = Path(__file__).resolve().parent / "baechi_stubs"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.baechi_compare import BAECHI_CODE_MS  # noqa: E402
from netsim.opgraph import identical_devices, layered_dag, load_graph, total_memory_bytes  # noqa: E402
from netsim.opgraph.grouping import FusedGraph  # noqa: E402
from policies.baechi.place import place  # noqa: E402
from policies.baechi.virtual import baechi_step_s  # noqa: E402

N_DEVICES = 4
GNMT_MEMORY_BYTES = 8e9
SYNTHETIC_FRACTION = 0.3
SCT_THRESHOLD = 0.1
COMM_COEF, COMM_INTERCEPT = 0.0001754, 134
ALGORITHMS = ("m-topo", "m-etf", "m-sct")

#: Baechi's code at afe7278 (its VirtualScheduler, ms) as experiments/baechi/README.md quotes it:
#: baechi_compare's figures, under this script's graph labels.
_LABELS = {"gnmt": "gnmt", "1k": "1000", "10k": "10000"}
QUOTED_CODE_MS = {(_LABELS[g], a): ms for (g, a), ms in BAECHI_CODE_MS.items() if g in _LABELS and a in ALGORITHMS}


def import_baechi(path: Path):
    """Baechi's modules from the checkout at ``path`` (stubs first on sys.path)."""
    for p in (str(path), str(STUBS)):
        if p in sys.path:
            sys.path.remove(p)
        sys.path.insert(0, p)
    from placer import grouper, placer_lib, placer_utils
    from placer.m_etf import m_etf
    from placer.m_sct import m_sct
    from placer.m_topo import m_topo
    from placer.virtual_scheduler import VirtualScheduler

    methods = {
        "m-topo": functools.partial(m_topo, colocation=True),
        "m-etf": functools.partial(m_etf, colocation=True),
        "m-sct": functools.partial(m_sct, threshold=SCT_THRESHOLD, colocation=True),
    }
    return {"grouper": grouper, "placer_lib": placer_lib, "placer_utils": placer_utils,
            "methods": methods, "VirtualScheduler": VirtualScheduler}


def gnmt_to_baechi(g: nx.DiGraph, bc) -> nx.DiGraph:
    """netsim's loaded GNMT profile -> Baechi's placement graph (module docstring)."""
    cost = functools.partial(bc["placer_lib"].get_comm_cost, coef=COMM_COEF, intercept=COMM_INTERCEPT)
    bg = nx.DiGraph()
    index = {n: i for i, n in enumerate(g.nodes)}
    for n, a in g.nodes(data=True):
        ports: dict[int, float] = {}
        for _, _, ts in g.out_edges(n, data="tensors"):
            for p, b in ts:
                ports[int(p)] = float(b)
        outs = [ports.get(p, 0.0) for p in range(max(ports) + 1)] if ports else []
        rest = float(a.get("output_bytes", 0.0)) + float(a.get("memory_bytes", 0.0)) - sum(outs)
        if rest > 0 or not outs:
            outs.append(max(rest, 0.0))
        name = a.get("name", str(n))
        bg.add_node(index[n], id=index[n], name=name,
                    weight=max(1, int(round(a["time_s"] * 1e6))),
                    temporary_memory=int(a.get("temporary_bytes", 0)),
                    persistent_memory=int(a.get("memory_bytes", 0)),
                    output_memory=[int(round(x)) for x in outs],
                    colocation_group=["loc:@" + a.get("colocation", name)])
    for v in g.nodes:
        for u in g.pred[v]:
            tensors, seen = [], set()
            for p, b in g.edges[u, v].get("tensors") or [(0, g.edges[u, v].get("bytes", 0.0))]:
                tname = f"{g.nodes[u].get('name', u)}:{int(p)}"
                if tname in seen:
                    continue
                seen.add(tname)
                tensors.append({"name": tname, "weight": cost(int(b)), "num_bytes": int(b)})
            bg.add_edge(index[u], index[v], weight=sum(t["weight"] for t in tensors), tensor=tensors)
    for k, (u, v) in enumerate(bg.edges):
        bg.edges[u, v]["id"] = k
    bg, _ = bc["placer_utils"].prune_dangling_ops(bg)
    bc["placer_utils"].assign_topo_order(bg)
    return bg


def synthetic_to_baechi(g: nx.DiGraph, bc) -> nx.DiGraph:
    """netsim's synthetic graph -> Baechi's placement graph (module docstring)."""
    cost = functools.partial(bc["placer_lib"].get_comm_cost, coef=COMM_COEF, intercept=COMM_INTERCEPT)
    bg = nx.DiGraph()
    index = {n: i for i, n in enumerate(g.nodes)}
    for n, a in g.nodes(data=True):
        mem = float(a.get("memory_bytes", 0.0))
        bg.add_node(index[n], id=index[n], name=str(n), weight=round(a["time_s"] * 1e6, 6),
                    temporary_memory=float(a.get("temporary_bytes", 0.0)), persistent_memory=mem,
                    output_memory=[float(a.get("output_bytes", 0.0)) + mem],
                    colocation_group="loc:@" + str(n))
    send = {u: max((float(b) for _, _, b in g.out_edges(u, data="bytes", default=0.0)), default=0.0)
            for u in g.nodes}
    for v in g.nodes:
        for u in g.pred[v]:
            w = cost(send[u])
            bg.add_edge(index[u], index[v], weight=w, tensor=[{"name": str(u), "weight": w, "num_bytes": send[u]}])
    for k, (u, v) in enumerate(bg.edges):  # edge ids by producer in node order (as prune_dangling_ops)
        bg.edges[u, v]["id"] = k
    bc["placer_utils"].assign_topo_order(bg)
    return bg


def device_graph(bc, memory_bytes: float):
    return bc["placer_lib"].create_device_graph(
        {i: {"name": f"/gpu:{i}", "memory_size": memory_bytes} for i in range(N_DEVICES)})


def run_baechi(bc, base: nx.DiGraph, memory_bytes: float, algorithm: str, fuse: bool):
    """(placement {Baechi node id: device index}, VirtualScheduler makespan ms, wall s)."""
    og = copy.deepcopy(base)
    t0 = time.perf_counter()
    if fuse:
        bc["grouper"].get_grouper("coplace")(og)
        pg = bc["placer_lib"].FusedOpPlacer._generate_fused_op_graph(og, False, False)
    else:
        pg = og
    pg = bc["methods"][algorithm](pg, device_graph(bc, memory_bytes))
    wall = time.perf_counter() - t0
    placement = {}
    for _, d in pg.nodes.items():
        placement[d.get("old_id", d["id"])] = d["p"]
        for f in d.get("fused_ops", []):
            placement[f["id"]] = d["p"]
    measured = copy.deepcopy(og)
    for n, p in placement.items():
        measured.nodes[n]["p"] = p
    vs = bc["VirtualScheduler"](measured, device_graph(bc, memory_bytes))
    vs.initialize()
    return placement, vs.run() / 1e3, wall


def compare(bc, label: str, g: nx.DiGraph, base: nx.DiGraph, devices, fuse: bool) -> list[bool]:
    """Print one row per algorithm; True per row whose code figure matches the quoted one."""
    by_name = {str(a.get("name", n)) if fuse else str(n): n for n, a in g.nodes(data=True)}
    to_netsim = {i: by_name[d["name"]] for i, d in base.nodes(data=True)}
    ids = {d.id: i for i, d in enumerate(devices)}
    ok = []
    for alg in ALGORITHMS:
        placement, code_ms, code_wall = run_baechi(bc, base, devices[0].memory_bytes, alg, fuse)
        t0 = time.perf_counter()
        res = place(g, devices, alg, group=fuse)
        ns_wall = time.perf_counter() - t0
        if not res.ok:
            print(f"{label:6} {alg:7} {code_ms:12.6f}  netsim infeasible: {res.reason[:100]}", flush=True)
            continue
        ns_ms = baechi_step_s(res, g, devices) * 1e3
        ns_place = res.fused.expand(res.placement) if isinstance(res.fused, FusedGraph) else res.placement
        same = np.mean([ids.get(ns_place[to_netsim[i]], ns_place[to_netsim[i]]) == p for i, p in placement.items()])
        quoted = QUOTED_CODE_MS.get((label, alg))
        check = ""
        if quoted is not None:
            ok.append(abs(code_ms - quoted) <= 1e-3)
            check = "yes" if ok[-1] else f"NO ({quoted})"
        print(f"{label:6} {alg:7} {code_ms:12.6f} {ns_ms:12.6f} {ns_ms / code_ms:8.5f} {same:9.4f} "
              f"{code_wall:9.2f} {ns_wall:9.2f} {ns_wall / code_wall:7.3f}  {check}", flush=True)
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baechi", required=True, type=Path, help="checkout of beomyeol/baechi (e.g. at afe7278)")
    ap.add_argument("--sizes", default="1000,10000", help="synthetic graph sizes, comma-separated ('' for none)")
    ap.add_argument("--no-gnmt", action="store_true", help="skip GNMT")
    args = ap.parse_args(argv)
    path = args.baechi.resolve()
    if not (path / "placer" / "m_sct.py").is_file():
        print(f"error: {path} is not a checkout of beomyeol/baechi (no placer/m_sct.py)", file=sys.stderr)
        return 2
    bc = import_baechi(path)
    logging.disable(logging.INFO)
    print(f"Baechi's code from {path}; stubs {STUBS.relative_to(ROOT)} (cvxopt LP on scipy HiGHS)")
    print(f"{'graph':6} {'alg':7} {'code ms':>12} {'netsim ms':>12} {'ns/code':>8} {'same dev':>9} "
          f"{'code s':>9} {'netsim s':>9} {'ns/code':>7}  quoted code ms reproduced")
    ok = []
    if not args.no_gnmt:
        g = load_graph("gnmt")
        ok += compare(bc, "gnmt", g, gnmt_to_baechi(g, bc), identical_devices(N_DEVICES, GNMT_MEMORY_BYTES), True)
    for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
        g = layered_dag(n, np.random.default_rng(n))
        devices = identical_devices(N_DEVICES, SYNTHETIC_FRACTION * total_memory_bytes(g))
        ok += compare(bc, str(n), g, synthetic_to_baechi(g, bc), devices, False)
    if ok:
        print(f"quoted figures of Baechi's code reproduced: {sum(ok)} of {len(ok)}")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
