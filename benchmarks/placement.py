"""Placement benchmark: placement time of m-TOPO / m-ETF / m-SCT on synthetic graphs, the LP's
share of m-SCT, and step times on GNMT relative to one device.

Run: ``python benchmarks/placement.py [--against REV]``. Targets at 10,000 operators, 4 devices
with 0.3 of the total operator memory each: m-ETF < 0.5 s, m-SCT < 2 s (LP included). Placement
here runs on the raw graph (no grouping); times are wall clock, best of ``REPEATS``.
``--against REV`` also times the same placements with the code of git revision REV (extracted
to a temporary folder with ``git archive``, run in a subprocess) and prints new / old per row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from netsim.opgraph import identical_devices, layered_dag, load_graph, total_memory_bytes
from policies.baechi.place import place, simulate

SIZES = (1_000, 10_000)
N_DEVICES = 4
FRACTION = 0.3
REPEATS = 5
GNMT_FRACTIONS = (1.0, 0.5, 0.3)
ALGORITHMS = ("m-topo", "m-etf", "m-sct")
GNMT_MEMORY_BYTES = 8e9


TIMING_SNIPPET = """
import json, numpy as np
from netsim.opgraph import identical_devices, layered_dag, load_graph, total_memory_bytes
from policies.baechi.place import place
out = {}
cases = [(str(n), layered_dag(n, np.random.default_rng(n)), None, False) for n in %(sizes)r]
cases.append(("gnmt", load_graph("gnmt"), %(gnmt_bytes)r, True))
for label, g, memory, group in cases:
    devices = identical_devices(%(n_dev)d, memory or %(fraction)r * total_memory_bytes(g))
    for a in %(algorithms)r:
        res = place(g, devices, a, group=group)
        out[f"{label} {a}"] = [res.placement_time_s, res.planned_step_s]
print(json.dumps(out))
"""


def _time_once(cwd: str | None) -> dict:
    """Per benchmark row, ``[placement time (s), planned step (s)]`` by the code under ``cwd``
    (None: this one)."""
    code = TIMING_SNIPPET % {"sizes": SIZES, "n_dev": N_DEVICES, "fraction": FRACTION,
                             "algorithms": ALGORITHMS, "gnmt_bytes": GNMT_MEMORY_BYTES}
    cwd = cwd or str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": cwd}
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def placement_times(against: str | None = None) -> None:
    """Best of ``REPEATS`` per row; with ``against``, rounds alternate between the two codes (each
    in a fresh subprocess) so that both see the same machine load, and the planned steps of
    both are printed (GNMT grouped at 8 GB per device included)."""
    new: dict = {}
    old: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        if against:
            archive = subprocess.run(["git", "archive", against], check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        for _ in range(REPEATS):
            for code_dir, best in ((None, new), (tmp, old)) if against else ((None, new),):
                for key, (t, step) in _time_once(code_dir).items():
                    best[key] = (min(best.get(key, (t,))[0], t), step)
    print(f"placement time, layered random DAGs, {N_DEVICES} devices at {FRACTION} of total memory each"
          + (f"; against {against}, rounds alternated" if against else ""))
    for n in SIZES:
        g = layered_dag(n, np.random.default_rng(n))
        devices = identical_devices(N_DEVICES, FRACTION * total_memory_bytes(g))
        for a in ALGORITHMS:
            t = new[f"{n} {a}"][0]
            extra = ""
            if a == "m-sct":
                lp = min(place(g, devices, a, group=False).lp_time_s for _ in range(REPEATS))
                extra = f"  LP {lp:.3f} s"
            if against:
                was = old[f"{n} {a}"][0]
                extra += f"  {against}: {was:.3f} s, ratio {t / was:.2f}"
            print(f"  {n:>6} ops  {a:<7} {t:7.3f} s{extra}")
        t0 = time.perf_counter()
        res = place(g, devices, "m-etf", group=True)
        print(f"  {n:>6} ops  m-etf with grouping+fusion ({res.graph.number_of_nodes()} nodes) "
              f"{time.perf_counter() - t0:.3f} s")
    if against:
        print(f"planned step (ms), this code vs {against} (GNMT: grouped, {GNMT_MEMORY_BYTES:.0e} bytes per device)")
        for key in new:
            print(f"  {key:<14} {new[key][1] * 1e3:9.1f}  {old[key][1] * 1e3:9.1f}")


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
    args = sys.argv[1:]
    placement_times(args[args.index("--against") + 1] if "--against" in args else None)
    gnmt_steps()
