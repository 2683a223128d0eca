"""SimGrid benchmark: netsim's sharing core against SimGrid 3.32 on random cells and stars.

Run: python benchmarks/simgrid_media.py [--cases N] [--seed S]
Needs SimGrid's Python binding for the system interpreter (Debian: ``apt-get install -y
python3-simgrid``); SimGrid runs in ``/usr/bin/python3`` (override: ``--simgrid-python``), a
child process fed the cases as JSON, and netsim in this interpreter. Tests never need it.

Two families of random cases, each a set of transfers (a size in bytes and a start time) from
or to the stations of one cell behind a backhaul to a server:

- ``wifi``: a SimGrid ``Wifi`` zone whose access point's link has the ``WIFI`` sharing policy,
  one bandwidth level per distinct station rate (``Link.set_host_wifi_rate``), joined to the
  server by a split-duplex backhaul; in netsim a ``wifi`` medium whose member links have the
  stations' rates, and the same backhaul;
- ``wired``: the same stations on private split-duplex links (SimGrid's CM02 model against
  netsim's plain max-min; no medium).

Backhauls are drawn so that about half the cases bind on them (below the stations' rates
summed), and transfers go both ways, overlapping, with random starts.

SimGrid's corrections are neutralised so that both simulate the same fluid model:
``network/model:CM02`` (no bandwidth or latency factors, no latency weighting of shares:
``weight-S`` is 0 in CM02), ``network/crosstraffic:0`` (no reverse acknowledgement flow),
``maxmin/precision:1e-15`` (see :data:`MAXMIN_PRECISION`), and
every latency 0 (so TCP's window bound gamma / (2 x latency) never applies; netsim adds a
route's latency after the last bit, SimGrid before the first, which the comparison leaves
out). Printed: per family, the number of transfers and the largest relative difference of
completion times; the target is 1e-9 (docs/wireless.md quotes the figures).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET = 1e-9
MAXMIN_PRECISION = 1e-15
"""SimGrid's ``maxmin/precision`` for the comparison (its default, 1e-5, is an *absolute*
threshold under which a constraint's usage counts as zero; a Wi-Fi constraint's usage is a sum
of 1/rate in s/byte, about 1e-7, so with the default SimGrid drops the air-time constraint once
one of its flows is fixed, and gives rates whose air time sums past 1: 18% slower completions
than its own model on some cases with a binding backhaul)."""
RATES_BPS = (6e6, 12e6, 24e6, 36e6, 54e6, 80e6, 150e6)


# -- the cases (plain data: both interpreters read them) ------------------------------------

def random_cases(n: int, seed: int) -> list[dict]:
    import numpy as np

    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n):
        k = int(rng.integers(1, 9))
        rates = [float(r) for r in rng.choice(RATES_BPS, size=k)]
        binding = rng.random() < 0.5
        backhaul = float(rng.uniform(0.2, 1.0) * sum(rates) / (k if i % 2 == 0 else 1)) \
            if binding else 1e10
        transfers = []
        for s in range(k):
            for _ in range(int(rng.integers(1, 4))):
                transfers.append({"station": s, "up": bool(rng.random() < 0.5),
                                  "bytes": int(rng.integers(100_000, 5_000_000)),
                                  "start_s": float(rng.uniform(0.0, 1.0))})
        cases.append({"kind": "wifi" if i % 2 == 0 else "wired", "rates_bps": rates,
                      "backhaul_bps": backhaul, "transfers": transfers})
    return cases


# -- netsim ---------------------------------------------------------------------------------

def netsim_times(case: dict) -> list[float]:
    """Each transfer's completion time (s) in netsim's flow network (the event path); the
    case's optional ``onset_flows`` and ``loss_per_flow`` give the Wi-Fi medium contention."""
    import simpy

    from netsim.energy import EnergyMeter
    from netsim.network import FlowNetwork, Topology
    from netsim.scenario.schema import LinkSpec, MediumSpec

    rates = case["rates_bps"]
    stations = [f"s{i}" for i in range(len(rates))]
    wifi = case["kind"] == "wifi"
    links = [LinkSpec(a="server", b="ap", bandwidth_bps=case["backhaul_bps"], latency_s=0.0,
                      energy_j_per_bit=0.0)]
    links += [LinkSpec(a=s, b="ap", bandwidth_bps=r, latency_s=0.0, energy_j_per_bit=0.0,
                       medium="cell" if wifi else None) for s, r in zip(stations, rates, strict=True)]
    media = [MediumSpec(id="cell", kind="wifi",
                        contention_onset_flows=case.get("onset_flows"),
                        contention_loss_per_flow=case.get("loss_per_flow", 0.0))] if wifi else []
    nodes = ["server", *stations, "ap"]
    env = simpy.Environment()
    meter = EnergyMeter([0.0] * len(nodes), [0.0] * len(nodes))
    net = FlowNetwork(env, Topology(nodes, links, media, n_devices=len(nodes) - 1), meter)
    out = [0.0] * len(case["transfers"])

    def one(k: int, t: dict):
        yield env.timeout(t["start_s"])
        s = stations[t["station"]]
        src, dst = (s, "server") if t["up"] else ("server", s)
        yield net.transfer(src, dst, float(t["bytes"]))
        out[k] = env.now

    for k, t in enumerate(case["transfers"]):
        env.process(one(k, t))
    env.run()
    return out


# -- SimGrid (runs in the system interpreter: no netsim import below) ----------------------

def _platform_xml(case: dict) -> str:
    rates = case["rates_bps"]
    levels = sorted(set(rates), reverse=True)
    hosts = "\n".join(f'    <host id="s{i}" speed="1Gf"/>' for i in range(len(rates)))
    backhaul = (f'  <link id="backhaul" bandwidth="{case["backhaul_bps"]!r}bps" latency="0s" '
                f'sharing_policy="SPLITDUPLEX"/>')
    if case["kind"] == "wifi":
        bw = ",".join(f"{r!r}bps" for r in levels)
        cell = (f'  <zone id="cell" routing="Wifi">\n    <prop id="access_point" value="ap"/>\n'
                f'{hosts}\n    <link id="air" sharing_policy="WIFI" bandwidth="{bw}" '
                f'latency="0s"/>\n    <router id="ap"/>\n  </zone>')
    else:
        own = "\n".join(f'    <link id="l{i}" bandwidth="{r!r}bps" latency="0s" '
                        f'sharing_policy="SPLITDUPLEX"/>' for i, r in enumerate(rates))
        routes = "\n".join(
            f'    <route src="s{i}" dst="ap" symmetrical="NO"><link_ctn id="l{i}" '
            f'direction="UP"/></route>\n    <route src="ap" dst="s{i}" symmetrical="NO">'
            f'<link_ctn id="l{i}" direction="DOWN"/></route>' for i in range(len(rates)))
        cell = (f'  <zone id="cell" routing="Full">\n{hosts}\n    <router id="ap"/>\n{own}\n'
                f'{routes}\n  </zone>')
    return f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
<zone id="world" routing="Full">
{cell}
  <zone id="wired" routing="Full"><host id="server" speed="1Gf"/></zone>
{backhaul}
  <zoneRoute src="cell" dst="wired" gw_src="ap" gw_dst="server" symmetrical="NO">
    <link_ctn id="backhaul" direction="UP"/></zoneRoute>
  <zoneRoute src="wired" dst="cell" gw_src="server" gw_dst="ap" symmetrical="NO">
    <link_ctn id="backhaul" direction="DOWN"/></zoneRoute>
</zone>
</platform>
"""


def simgrid_worker() -> None:
    """Read cases (JSON, stdin), print each case's completion times (JSON, stdout)."""
    cases = json.load(sys.stdin)
    results = []
    for case in cases:
        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
            f.write(_platform_xml(case))
        # one SimGrid engine per process: run each case in its own child
        out = subprocess.run(
            [sys.executable, __file__, "--simgrid-one", f.name],
            input=json.dumps(case), capture_output=True, text=True, check=True)
        Path(f.name).unlink()
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(json.dumps(results))


def simgrid_one(platform: str) -> None:
    """One case in one SimGrid engine (stdin: the case; stdout: its completion times)."""
    from simgrid import Actor, Comm, Engine, Host, Link, this_actor

    case = json.load(sys.stdin)
    engine = Engine([sys.argv[0], "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                     f"--cfg=maxmin/precision:{MAXMIN_PRECISION}", "--log=root.thres:critical"])
    engine.load_platform(platform)
    if case["kind"] == "wifi":
        levels = sorted(set(case["rates_bps"]), reverse=True)
        air = Link.by_name("air")
        for i, r in enumerate(case["rates_bps"]):
            air.set_host_wifi_rate(Host.by_name(f"s{i}"), levels.index(r))
    out = [0.0] * len(case["transfers"])
    server = Host.by_name("server")

    def one(k: int, src: Host, dst: Host, nbytes: int, start_s: float) -> None:
        this_actor.sleep_for(start_s)
        Comm.sendto(src, dst, nbytes)
        out[k] = Engine.clock

    for k, t in enumerate(case["transfers"]):
        station = Host.by_name(f"s{t['station']}")
        src, dst = (station, server) if t["up"] else (server, station)
        Actor.create(f"t{k}", server, one, k, src, dst, t["bytes"], t["start_s"])
    engine.run()
    print(json.dumps(out))


# -- the comparison -------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--simgrid-python", default="/usr/bin/python3")
    parser.add_argument("--simgrid-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--simgrid-one", metavar="PLATFORM", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.simgrid_worker:
        return simgrid_worker()
    if args.simgrid_one:
        return simgrid_one(args.simgrid_one)

    cases = random_cases(args.cases, args.seed)
    try:
        done = subprocess.run([args.simgrid_python, __file__, "--simgrid-worker"],
                              input=json.dumps(cases), capture_output=True, text=True,
                              check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        sys.exit(f"SimGrid did not run ({exc}); install it: apt-get install -y python3-simgrid")
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    worst: dict[str, tuple[float, int]] = {}
    for case, sg in zip(cases, theirs, strict=True):
        ours = netsim_times(case)
        rel = max(abs(a - b) / b for a, b in zip(ours, sg, strict=True))
        bound, n = worst.get(case["kind"], (0.0, 0))
        worst[case["kind"]] = (max(bound, rel), n + len(ours))
    ok = True
    for kind, (rel, n) in worst.items():
        count = sum(c["kind"] == kind for c in cases)
        print(f"{kind:6s} {count:4d} cases, {n:5d} transfers: largest relative difference of "
              f"completion times netsim vs SimGrid {rel:.1e} (target {TARGET:.0e})")
        ok &= rel <= TARGET
    print("met" if ok else "NOT met")


if __name__ == "__main__":
    main()
