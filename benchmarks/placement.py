"""Placement benchmark: placement time of m-TOPO / m-ETF / m-SCT on synthetic graphs, the LP's
share of m-SCT, and step times on GNMT relative to one device.

Run: ``python benchmarks/placement.py``. Targets at 10,000 operators, 4 devices with 0.3 of the
total operator memory each: m-ETF < 0.5 s, m-SCT < 2 s (LP included). Placement here runs on the
raw graph (no grouping); times are wall clock, best of ``REPEATS``.
"""

from __future__ import annotations

import time

import numpy as np

from netsim.opgraph import identical_devices, layered_dag, load_graph, total_memory_bytes
from policies.baechi.place import place, simulate

SIZES = (1_000, 10_000)
N_DEVICES = 4
FRACTION = 0.3
REPEATS = 5
GNMT_FRACTIONS = (1.0, 0.5, 0.3)
ALGORITHMS = ("m-topo", "m-etf", "m-sct")


def placement_times() -> None:
    print(f"placement time, layered random DAGs, {N_DEVICES} devices at {FRACTION} of total memory each")
    for n in SIZES:
        g = layered_dag(n, np.random.default_rng(n))
        devices = identical_devices(N_DEVICES, FRACTION * total_memory_bytes(g))
        for a in ALGORITHMS:
            runs = [place(g, devices, a, group=False) for _ in range(REPEATS)]
            best = min(runs, key=lambda r: r.placement_time_s)
            extra = ""
            if a == "m-sct":
                extra = f"  LP {best.lp_time_s:.3f} s ({best.lp_time_s / best.placement_time_s:.0%} of m-SCT)"
            print(f"  {n:>6} ops  {a:<7} {best.placement_time_s:7.3f} s  {best.status}{extra}")
        t0 = time.perf_counter()
        res = place(g, devices, "m-etf", group=True)
        print(f"  {n:>6} ops  m-etf with grouping+fusion ({res.graph.number_of_nodes()} nodes) "
              f"{time.perf_counter() - t0:.3f} s")


def gnmt_steps() -> None:
    g = load_graph("gnmt")
    total = total_memory_bytes(g)
    single = simulate(place(g, identical_devices(1, total), "single", group=False), identical_devices(1, total))
    print(f"GNMT forward ({g.number_of_nodes()} ops), single device step {single.step_time_s * 1e3:.2f} ms; "
          f"ratios to it, {N_DEVICES} devices (faithful mode)")
    for f in GNMT_FRACTIONS:
        devices = identical_devices(N_DEVICES, f * total)
        cells = []
        for a in ALGORITHMS:
            res = place(g, devices, a)
            step = simulate(res, devices) if res.ok else None
            ok = step is not None and step.status == "ok"
            cells.append(f"{a} {step.step_time_s / single.step_time_s:.3f}" if ok else f"{a} {res.status}")
        print(f"  memory {f:.1f}: " + "  ".join(cells))


if __name__ == "__main__":
    placement_times()
    gnmt_steps()
