"""netsim's transfers against the kernel's own TCP between network namespaces (issue 53).

Run (as root, with iproute2; Linux network namespaces, veth pairs and htb shaping, since this
kernel has no netem; nothing outside the namespaces this script creates is touched):

    sudo python benchmarks/tcp_netns.py [--quick] [--reps N] [--cc bbr|cubic]

What it builds: a server namespace, a router namespace and N client namespaces, each client
on a veth pair to the router, the router on one to the server. Each client's egress is
shaped with htb to its access rate, the router's egress to the server to the bottleneck
(100 Mbit/s by default). Every client uploads S bytes to the server over one TCP connection
(Python sockets), starting at its own offset; the server records when each upload's last
byte arrived. That is one round; it is repeated ``--reps`` times.

What it compares: the same network in netsim's fluid model (netsim.network.FlowNetwork:
max-min fair sharing, each flow at most its route's bottleneck), the same starts and sizes,
at goodput factor 1 (netsim's default: a bandwidth is a payload rate) and at
netsim.network.goodput.TCP_ETHERNET_GOODPUT (1448 / 1514: htb shapes whole Ethernet frames
of 1514 bytes carrying 1448 of payload). Per configuration it prints the measured round time
(the last upload's end, from the first start), netsim's at both factors and their errors,
and per client the largest error of its completion time; the last line is
``worst round error: X %`` (netsim at the TCP factor against the median measured round),
after the same over single uploads and clients of equal access rates alone.

Every loop and wait is bounded (socket timeouts, process timeouts); the namespaces are
deleted at exit, on an exception, on SIGINT or SIGTERM. ``--quick`` runs in under 3 minutes
on 2 cores (three single uploads, 2 and 8 clients sharing, one repetition). Not part of the tests.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PORT = 45353
CHUNK = 1 << 16
PREFIX = f"nsim{os.getpid() % 100000}-"
MBIT = 1e6
ACCESS_MBIT = (30.0, 60.0, 200.0, 1000.0)  # mixed access rates, client i takes i mod 4
STAGGER_S = 0.25  # client i starts i x STAGGER_S after the round's start
SOCKET_TIMEOUT_S = 120.0


# --- the two ends (run inside a namespace by this same file) ---------------------------------

def serve(n_clients: int, size_bytes: int, out_path: str) -> None:
    """Accept ``n_clients`` uploads of ``size_bytes``; write {client: last-byte time} (s)."""
    import selectors

    sel = selectors.DefaultSelector()
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", PORT))
    srv.listen(64)
    srv.setblocking(False)
    sel.register(srv, selectors.EVENT_READ, None)
    got: dict[socket.socket, list] = {}
    done: dict[str, float] = {}
    deadline = time.time() + SOCKET_TIMEOUT_S * 2
    Path(out_path + ".ready").write_text("1")
    while len(done) < n_clients:  # (bounded by the deadline)
        if time.time() > deadline:
            raise TimeoutError(f"server: {len(done)} of {n_clients} uploads after "
                               f"{SOCKET_TIMEOUT_S * 2:.0f} s")
        for key, _ in sel.select(timeout=1.0):
            if key.data is None:
                conn, addr = srv.accept()
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ, addr[0])
                got[conn] = [0]
                continue
            conn = key.fileobj
            data = conn.recv(CHUNK)  # type: ignore[union-attr]
            got[conn][0] += len(data)  # type: ignore[index]
            if got[conn][0] >= size_bytes or not data:  # type: ignore[index]
                done[key.data] = time.time()
                sel.unregister(conn)
                conn.close()  # type: ignore[union-attr]
    Path(out_path).write_text(json.dumps(done))


def upload(server: str, size_bytes: int, start_at: float) -> None:
    """Upload ``size_bytes`` to ``server`` from ``start_at`` (epoch s)."""
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    block = b"\0" * CHUNK
    with socket.create_connection((server, PORT), timeout=SOCKET_TIMEOUT_S) as conn:
        left = size_bytes
        while left > 0:  # (bounded: size_bytes / CHUNK sends, each under the timeout)
            n = conn.send(block[:min(CHUNK, left)])
            left -= n
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)  # (the server closes when it has every byte)


# --- the namespaces ----------------------------------------------------------------------------

def sh(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=60)


class Namespaces:
    """The server, the router and the clients, created here and deleted on exit."""

    def __init__(self, n_clients: int, access_mbit: list[float], bottleneck_mbit: float,
                 cc: str) -> None:
        self.srv, self.rtr = PREFIX + "srv", PREFIX + "rtr"
        self.clients = [f"{PREFIX}c{i}" for i in range(n_clients)]
        self.created: list[str] = []
        atexit.register(self.delete)
        for ns in [self.srv, self.rtr, *self.clients]:
            sh("ip", "netns", "add", ns)
            self.created.append(ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
            sh("sysctl", "-qw", f"net.ipv4.tcp_congestion_control={cc}", ns=ns, check=False)
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=self.rtr)
        self._pair(self.rtr, "rs", "10.53.250.1", self.srv, "sr", "10.53.250.2")
        sh("ip", "route", "add", "10.53.0.0/16", "via", "10.53.250.1", ns=self.srv)
        self._shape(self.rtr, "rs", bottleneck_mbit)
        for i, ns in enumerate(self.clients):
            self._pair(ns, "c", f"10.53.{i}.2", self.rtr, f"r{i}", f"10.53.{i}.1")
            sh("ip", "route", "add", "default", "via", f"10.53.{i}.1", ns=ns)
            self._shape(ns, "c", access_mbit[i])

    @staticmethod
    def _pair(ns_a: str, dev_a: str, ip_a: str, ns_b: str, dev_b: str, ip_b: str) -> None:
        tmp_a, tmp_b = f"{PREFIX}x{os.urandom(2).hex()}", f"{PREFIX}y{os.urandom(2).hex()}"
        sh("ip", "link", "add", tmp_a[:15], "type", "veth", "peer", "name", tmp_b[:15])
        for tmp, ns, dev, ip in ((tmp_a, ns_a, dev_a, ip_a), (tmp_b, ns_b, dev_b, ip_b)):
            sh("ip", "link", "set", tmp[:15], "netns", ns)
            sh("ip", "link", "set", tmp[:15], "name", dev, ns=ns)
            sh("ip", "addr", "add", f"{ip}/24", "dev", dev, ns=ns)
            sh("ip", "link", "set", dev, "up", ns=ns)
            # (GSO super-frames are charged by htb as the frames they become: the kernel's
            # qdisc_pkt_len_init counts every segment's headers)

    @staticmethod
    def _shape(ns: str, dev: str, mbit: float) -> None:
        sh("tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1",
           ns=ns)
        sh("tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate",
           f"{mbit}mbit", "ceil", f"{mbit}mbit", ns=ns)

    def delete(self) -> None:
        for ns in self.created:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.created = []


# --- one round, measured and simulated ------------------------------------------------------

@dataclass
class Round:
    """Uploads of ``size_bytes`` from the client namespaces ``which`` (their access rates:
    ``ACCESS_MBIT[i % 4]``), starting at ``starts_s`` (s after the round's start), through
    the router's ``bottleneck_mbit`` to the server."""

    which: list[int]
    size_bytes: int
    bottleneck_mbit: float
    starts_s: list[float]
    equal_access: bool = False
    """Every client at 1 Gbit/s access (the bottleneck binds alone), not the mixed rates."""

    @property
    def clients(self) -> int:
        return len(self.which)

    @property
    def access_mbit(self) -> list[float]:
        return [access_of(i, self.equal_access) for i in self.which]


def access_of(i: int, equal: bool) -> float:
    """Client namespace i's access rate (Mbit/s)."""
    return 1000.0 if equal else ACCESS_MBIT[i % len(ACCESS_MBIT)]


def measure(ns: Namespaces, r: Round, workdir: Path) -> list[float]:
    """Each client's upload end (s after the round's start), by the kernel's TCP."""
    out = workdir / f"done-{time.time_ns()}.json"
    me = str(Path(__file__).resolve())
    server = subprocess.Popen(["ip", "netns", "exec", ns.srv, sys.executable, me, "--_serve",
                               str(r.clients), str(r.size_bytes), str(out)])
    try:
        for _ in range(200):  # (at most 10 s for the server to listen)
            if Path(str(out) + ".ready").exists():
                break
            time.sleep(0.05)
        t0 = time.time() + 0.5
        procs = [subprocess.Popen(["ip", "netns", "exec", ns.clients[i], sys.executable, me,
                                   "--_upload", "10.53.250.2", str(r.size_bytes),
                                   repr(t0 + start)])
                 for i, start in zip(r.which, r.starts_s, strict=True)]
        for p in procs:
            p.wait(timeout=SOCKET_TIMEOUT_S * 2)
        server.wait(timeout=SOCKET_TIMEOUT_S * 2)
    finally:
        if server.poll() is None:
            server.kill()
    done = json.loads(out.read_text())
    return [done[f"10.53.{i}.2"] - t0 for i in r.which]


def simulate(r: Round, goodput: float) -> list[float]:
    """Each client's upload end (s) in netsim's fluid model of the same network."""
    from types import SimpleNamespace

    import simpy

    from netsim.energy import EnergyMeter
    from netsim.network import FlowNetwork, Topology

    nodes = [f"c{i}" for i in range(r.clients)] + ["srv", "rtr"]
    links = [SimpleNamespace(a=f"c{i}", b="rtr", bandwidth_bps=r.access_mbit[i] * MBIT,
                             latency_s=0.0, energy_j_per_bit=0.0, goodput_factor=None)
             for i in range(r.clients)]
    links.append(SimpleNamespace(a="rtr", b="srv", bandwidth_bps=r.bottleneck_mbit * MBIT,
                                 latency_s=0.0, energy_j_per_bit=0.0, goodput_factor=None))
    env = simpy.Environment()
    meter = EnergyMeter([0.0] * len(nodes), [0.0] * len(nodes))
    net = FlowNetwork(env, Topology(nodes, links, goodput_factor=goodput), meter)
    ends = [0.0] * r.clients

    def one(i: int):
        yield env.timeout(r.starts_s[i])
        yield net.transfer(f"c{i}", "srv", r.size_bytes)
        ends[i] = env.now

    for i in range(r.clients):
        env.process(one(i))
    env.run()
    return ends


def rounds(quick: bool) -> list[tuple[str, Round]]:
    """The configurations: single uploads of several sizes, then N clients sharing."""
    out = []
    for mb in ((1, 50) if quick else (1, 10, 50)):  # client 3: 1 Gbit/s access, 100 bottleneck
        out.append((f"single {mb} MB", Round([3], mb * 1_000_000, 100.0, [0.0])))
    for mb in ((10,) if quick else (1, 10)):  # client 0 alone: its 30 Mbit/s access binds
        out.append((f"single {mb} MB, 30 Mbit/s access", Round([0], mb * 1_000_000, 100.0,
                                                              [0.0])))
    for equal in (True, False):
        kind = "1 Gbit/s access" if equal else "mixed access"
        for n in ((2, 8) if quick else (2, 4, 8, 16)):
            out.append((f"{n} clients, 10 MB, {kind}, staggered",
                        Round(list(range(n)), 10_000_000, 100.0,
                              [i * STAGGER_S for i in range(n)], equal)))
            out.append((f"{n} clients, 10 MB, {kind}, together",
                        Round(list(range(n)), 10_000_000, 100.0, [0.0] * n, equal)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer configurations, one repetition")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 3; quick 1)")
    ap.add_argument("--cc", default="cubic", help="TCP congestion control (default cubic)")
    ap.add_argument("--_serve", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--_upload", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._serve:
        serve(int(a._serve[0]), int(a._serve[1]), a._serve[2])
        return 0
    if a._upload:
        upload(a._upload[0], int(a._upload[1]), float(a._upload[2]))
        return 0
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        print("tcp_netns: needs root and iproute2 (ip, tc)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from netsim.network.goodput import TCP_ETHERNET_GOODPUT

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    reps = a.reps or (1 if a.quick else 3)
    configs = rounds(a.quick)
    most = max(max(r.which) + 1 for _, r in configs)
    t_start = time.perf_counter()
    worst = 0.0
    workdir = Path(f"/tmp/{PREFIX}work")
    workdir.mkdir(exist_ok=True)
    ns = None
    print(f"kernel TCP ({a.cc}) between namespaces against netsim's fluid model; "
          f"{reps} repetition(s); goodput factor {TCP_ETHERNET_GOODPUT:.4f} = 1448/1514")
    print(f"{'configuration':44s} {'measured s':>11s} {'netsim g=1':>11s} {'err':>7s} "
          f"{'netsim g=.956':>13s} {'err':>7s} {'worst client':>12s}")
    worst_equal = 0.0
    built = None
    try:
        for name, r in configs:
            if built != r.equal_access:  # (the namespaces of this access profile)
                if ns is not None:
                    ns.delete()
                ns = Namespaces(most, [access_of(i, r.equal_access) for i in range(most)],
                                100.0, a.cc)
                built = r.equal_access
            measured = [measure(ns, r, workdir) for _ in range(reps)]
            rounds_s = [max(m) for m in measured]
            median = statistics.median(rounds_s)
            plain, tcp = simulate(r, 1.0), simulate(r, TCP_ETHERNET_GOODPUT)
            err_plain = (max(plain) - median) / median
            err_tcp = (max(tcp) - median) / median
            per_client = max(abs(tcp[i] - statistics.median(m[i] for m in measured))
                             / statistics.median(m[i] for m in measured)
                             for i in range(r.clients))
            worst = max(worst, abs(err_tcp))
            if r.equal_access or r.clients == 1:
                worst_equal = max(worst_equal, abs(err_tcp))
            spread = f" ({min(rounds_s):.3f}-{max(rounds_s):.3f})" if reps > 1 else ""
            print(f"{name:44s} {median:11.3f} {max(plain):11.3f} {100 * err_plain:+6.1f}% "
                  f"{max(tcp):13.3f} {100 * err_tcp:+6.1f}% {100 * per_client:11.1f}%{spread}")
    finally:
        if ns is not None:
            ns.delete()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"({time.perf_counter() - t_start:.0f} s)")
    print(f"worst round error, one client or equal access rates: {100 * worst_equal:.1f} %")
    print(f"worst round error: {100 * worst:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
