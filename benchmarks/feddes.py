"""FedDES beside netsim on FedDES's own FedAsync case: 10,239 clients all training at once.

Run: python benchmarks/feddes.py [--feddes PATH] [--repeats N] [--cold] [--concurrency C]

The case (``benchmarks/data/feddes-fedasync-10239.json.gz``, its source in
``benchmarks/data/README.md``): FedDES's ``config/fedasync_config.json`` scaled to 160 nodes
of 64 clients (less one: 10,239 clients), each node's switch on a 1.6 Tbit/s, 5 us link to the
server, a 305 MB model each way, the server's fixed per-update overheads folded into its
aggregation time (0.2113 s an update): the aggregator is the bottleneck and every client is in
flight. netsim runs policy ``fedasync`` with the scenario's concurrency (10,239) for 10,239
aggregations of one update each; FedDES's server loop takes 10,239 updates (``epochs`` 1).

netsim's side: ``netsim.simulate`` in this process, after a small run that imports what a run
imports (netsim and the policies' modules), so the figure is the simulation's cost (reading and
validating the scenario, building the world, the run, the tables). ``--cold`` also times a
fresh ``python -c`` process doing the same from ``import netsim`` (what a user waits for).

FedDES's side, only with ``--feddes PATH`` (a checkout of padsys/FedDES; nothing of it is kept
in this repository) and SimGrid's development files (Debian: ``apt-get install -y
libsimgrid-dev``): its ``simulation/algorithm/FedAsync.cpp`` built into a temporary folder with
its README's command, the platform written in the form of its ``resources/delta_platform.xml``
for 160 nodes (hosts of 2,445 MFLOP/s and 128 cores, a 200 GB/s 5 us link per pair of nodes, a
loopback), its config with ``num_nodes`` 160 and ``epochs`` 1; the binary's wall time, its log
to a file. Without it, netsim is timed alone.

The runs alternate (FedDES, netsim, FedDES, ...); printed: each run's wall time, the median of
each side and netsim's median over FedDES's (the machine is shared: compare only within a run).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "benchmarks" / "data" / "feddes-fedasync-10239.json.gz"
NODES = 160
"""FedDES's nodes in the case (64 clients each; the server's node one fewer)."""


def load_case() -> dict:
    """The case's netsim scenario (a mapping)."""
    with gzip.open(CASE, "rt") as f:
        return json.load(f)


def netsim_run(scenario: dict, concurrency: int | None) -> tuple[float, dict]:
    """Wall time (s) of one ``netsim.simulate`` of ``scenario`` with fedasync, and what the
    run did (aggregations, jobs started, simulated time)."""
    import netsim

    params = {} if concurrency is None else {"concurrency": concurrency}
    t = time.perf_counter()
    res = netsim.simulate(scenario, "fedasync", seed=0, params=params, raise_errors=True)
    wall = time.perf_counter() - t
    ep = res.epochs
    return wall, {"aggregations": len(ep), "updates": int(ep["updates_aggregated"].sum()),
                  "started": int(ep["started"].sum()),
                  "sim_time_s": float(res.runs["time_s"].iloc[0]),
                  "staleness_max": int(ep["staleness_max"].max())}


def warm_up() -> None:
    """Import what a run imports (netsim, the registered policies' modules)."""
    import netsim

    netsim.simulate("two-phones", "fedasync", seed=0, params={"concurrency": 2})


def cold_run(concurrency: int | None) -> float:
    """Wall time (s) of a fresh interpreter importing netsim and running the case."""
    params = "{}" if concurrency is None else f"{{'concurrency': {concurrency}}}"
    code = ("import gzip, json, netsim; "
            f"sc = json.load(gzip.open({str(CASE)!r}, 'rt')); "
            f"netsim.simulate(sc, 'fedasync', seed=0, params={params})")
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return time.perf_counter() - t


def platform_xml(nodes: int) -> str:
    """A SimGrid platform in the form of FedDES's ``resources/delta_platform.xml`` for
    ``nodes`` nodes (its generator's layout: one link per pair of nodes, a loopback)."""
    lines = ["<?xml version='1.0' encoding='utf-8'?>",
             '<!DOCTYPE platform SYSTEM "http://simgrid.gforge.inria.fr/simgrid/simgrid.dtd">',
             '<platform version="4.1">', '<zone id="zone0" routing="Full">']
    lines += [f'<host id="Node-{i}" speed="2445Mf" core="128" />' for i in range(1, nodes + 1)]
    lines += [f'<link id="{i}" bandwidth="200GBps" latency="5us" />'
              for i in range(1, nodes * (nodes + 1))]
    lines.append('<link id="loopback" bandwidth="200GBps" latency="1us" '
                 'sharing_policy="FATPIPE" />')
    lines += [f'<route src="Node-{i}" dst="Node-{i}"><link_ctn id="loopback" /></route>'
              for i in range(1, nodes + 1)]
    link = 1
    for i in range(1, nodes + 1):
        for j in range(i + 1, nodes + 1):
            lines.append(f'<route src="Node-{i}" dst="Node-{j}"><link_ctn id="{link}" />'
                         '</route>')
            link += 1
    return "\n".join(lines + ["</zone>", "</platform>", ""])


def build_feddes(checkout: Path, folder: Path) -> tuple[Path, Path, Path] | None:
    """FedDES's FedAsync binary built into ``folder`` (its README's command), the platform and
    the config; None (with the reason printed) where it cannot be built here."""
    source = checkout / "simulation" / "algorithm" / "FedAsync.cpp"
    config = checkout / "config" / "fedasync_config.json"
    if not source.exists() or not config.exists():
        print(f"FedDES: no {source.relative_to(checkout)} or config under {checkout}")
        return None
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None or shutil.which("pkg-config") is None:
        print("FedDES: needs a C++ compiler and pkg-config")
        return None
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "simgrid"], capture_output=True,
                           text=True)
    if flags.returncode != 0:
        print("FedDES: SimGrid not found (apt-get install -y libsimgrid-dev)")
        return None
    binary = folder / "des_fedasync"
    subprocess.run([compiler, "-std=c++17", str(source), f"-I{checkout / 'third_party'}",
                    *flags.stdout.split(), "-o", str(binary)], check=True)
    platform = folder / f"platform-{NODES}.xml"
    platform.write_text(platform_xml(NODES))
    settings = json.loads(config.read_text())
    settings.update(num_nodes=NODES, epochs=1)
    cfg = folder / "fedasync-10239.json"
    cfg.write_text(json.dumps(settings))
    return binary, platform, cfg


def feddes_run(binary: Path, platform: Path, config: Path, log: Path) -> tuple[float, int]:
    """Wall time (s) of one FedDES run, and the updates its server received."""
    t = time.perf_counter()
    with open(log, "w") as out:
        subprocess.run([str(binary), str(platform), str(config)], stdout=out,
                       stderr=subprocess.STDOUT, check=True)
    wall = time.perf_counter() - t
    received = sum(1 for line in open(log) if "Received model from client" in line)
    return wall, received


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--feddes", type=Path, default=None,
                    help="a checkout of padsys/FedDES (built and run beside netsim)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cold", action="store_true",
                    help="also time a fresh interpreter (import netsim + the run)")
    ap.add_argument("--concurrency", type=int, default=None,
                    help="fedasync's concurrency (default: the scenario's, every client)")
    args = ap.parse_args()
    scenario = load_case()
    warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        built = build_feddes(args.feddes, Path(tmp)) if args.feddes is not None else None
        ours: list[float] = []
        theirs: list[float] = []
        for r in range(args.repeats):
            if built is not None:
                wall, received = feddes_run(*built, Path(tmp) / "feddes.log")
                theirs.append(wall)
                print(f"run {r}: FedDES {wall:.2f} s ({received:,} updates received)",
                      flush=True)
            wall, did = netsim_run(scenario, args.concurrency)
            ours.append(wall)
            print(f"run {r}: netsim {wall:.2f} s ({did['aggregations']:,} aggregations, "
                  f"{did['updates']:,} updates, {did['started']:,} jobs started, "
                  f"{did['sim_time_s']:,.1f} s simulated, staleness up to "
                  f"{did['staleness_max']:,})", flush=True)
        cold = cold_run(args.concurrency) if args.cold else None
    line = f"netsim median {statistics.median(ours):.2f} s"
    if theirs:
        ratio = statistics.median(ours) / statistics.median(theirs)
        line += (f"; FedDES median {statistics.median(theirs):.2f} s; netsim / FedDES "
                 f"{ratio:.2f}x (target <= 1x: {'met' if ratio <= 1.0 else 'missed'})")
    print(line)
    if cold is not None:
        print(f"netsim in a fresh interpreter (import netsim, then the run): {cold:.2f} s")


if __name__ == "__main__":
    main()
