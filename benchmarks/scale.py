"""Fleets of a million: setup per device, the cost of an epoch of 100 participants as the
fleet grows, with markov sessions, and peak memory (issue 26's targets).

Each measurement runs in a fresh process (its peak memory is its own): the built-in default
scenario's generator with ``n_devices`` devices, random-k with k = 100, the surrogate loss
(target out of reach, so every epoch runs). Setup is generating, validating and building the
world (topology, device table, meters); an epoch's cost is the median wall time between the
ends of consecutive epochs (the policy's choice included). Printed as ratios against the
10,000-device fleet measured in the same run (the machine is shared and noisy).

Also the whole ``netsim.simulate`` run (setup, epochs and the result tables) per epoch, and
(``--marginal``) what one more epoch costs the whole run, each against the 10,000-device
fleet's: the setup (fleet, routes, meters) and the closing tables (the devices table: a row
per device) are once per run; what grows with the epochs is the marginal cost, measured inside
one run as the mean time between the ends of its first and last epochs (the policy, the
epoch, its record), and the closing tables as the time from the last epoch's end to the run's
return. (Measured before 0.6.0 as the difference of two runs' wall times, E and E/10 epochs,
each in its own process: at 1M devices their setups alone differ by +-0.5 s, as much as 180
epochs cost, and repeated runs gave -0.2x to 2.3x.)

``--cli``: ``netsim run million`` as a user runs it, under ``/usr/bin/time -v`` (its maximum
resident set size and wall time; issue 47's target: at most 1.5 GiB), beside ``netsim run
two-phones`` in the same run (the interpreter, its imports and the tables' writing alone).

    python benchmarks/scale.py                  # 10k, 100k, 1M; about 3 minutes
    python benchmarks/scale.py --sizes 10000,100000
    python benchmarks/scale.py --sizes 10000,1000000 --epochs 200 --modes static --marginal
    python benchmarks/scale.py --cli            # netsim run million's peak memory; 30 s
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

EPOCHS = 30
K = 100


def scenario(n: int, markov: bool | str, epochs: int = EPOCHS) -> dict:
    """The default scenario with ``n`` generated devices: static, with markov sessions
    (``True``) or with log-normal bandwidth (``"bandwidth"``: sigma 0.3, pieces of 10 s)."""
    from netsim.scenario.loading import scenario_data

    sc = copy.deepcopy(scenario_data("default"))
    sc["generate"]["n_devices"] = n
    sc["generate"]["devices_per_cell"] = 32
    sc["training"].update(target_loss=0.01, max_epochs=epochs, deadline_s=1e9)
    if markov == "bandwidth":
        sc["dynamics"] = {"bandwidth": {"model": "lognormal", "sigma": 0.3,
                                        "correlation_s": 60, "step_s": 10}}
    elif markov:
        sc["dynamics"] = {"availability": {"model": "markov"}}
    return sc


def measure(n: int, markov: bool | str, epochs: int = EPOCHS) -> dict:
    """One fleet in this process: setup (s), per-epoch wall times (s), peak RSS (bytes)."""
    import netsim
    from netsim.engine import World, resolve_scenario
    from netsim.scenario.loading import load_scenario

    netsim.simulate(scenario(100, markov), "random-k", seed=0, params={"k": 10})  # warm up
    sc = scenario(n, markov, epochs)
    t0 = time.perf_counter()
    resolved = resolve_scenario(load_scenario(sc), 0)
    World(resolved, np.random.default_rng(0))
    setup_s = time.perf_counter() - t0
    del resolved
    gc.collect()  # (the world above holds reference cycles: not two worlds at the peak)
    stamps: list[float] = []
    t1 = time.perf_counter()
    res = netsim.simulate(sc, "random-k", seed=0, params={"k": K},
                          progress=lambda epoch, now: stamps.append(time.perf_counter()))
    total_s = time.perf_counter() - t1
    epochs = np.diff(np.array(stamps))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    run = res.runs.iloc[0]
    return {"n": n, "markov": markov, "setup_s": setup_s, "epoch_s": float(np.median(epochs)),
            "epochs": int(run["epochs"]), "run_s": total_s, "peak_bytes": int(peak),
            "epochs_span_s": stamps[-1] - stamps[0], "closing_s": t1 + total_s - stamps[-1],
            "status": str(run["status"]), "devices_rows": len(res.devices)}


def in_child(n: int, markov: bool | str, epochs: int = EPOCHS) -> dict:
    """:func:`measure` in a fresh interpreter (its own peak memory)."""
    mode = markov if isinstance(markov, str) else str(int(markov))
    out = subprocess.run([sys.executable, __file__, "--child", str(n), mode, str(epochs)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


#: ``netsim run million``'s peak memory, at most (bytes; issue 47).
CLI_TARGET_BYTES = 1.5 * 2**30


def cli_peak(scenario: str) -> tuple[int, float]:
    """``netsim run SCENARIO`` in a fresh folder under ``/usr/bin/time -v``: (its maximum
    resident set size (bytes), wall time (s))."""
    import re
    import shutil
    import tempfile

    netsim_cli = shutil.which("netsim") or str(Path(sys.executable).parent / "netsim")
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-v", netsim_cli, "run", scenario, "--out",
                               out], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    assert peak is not None, done.stderr[-2000:]
    return int(peak.group(1)) * 1024, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--epochs", type=int, default=EPOCHS, help="epochs per run")
    ap.add_argument("--modes", default="static,markov,bandwidth",
                    help="worlds to measure (static first)")
    ap.add_argument("--marginal", action="store_true",
                    help="also the whole run's cost of one more epoch (a run of epochs/10)")
    ap.add_argument("--cli", action="store_true",
                    help="only netsim run million's peak memory (/usr/bin/time -v)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cli:
        small, small_s = cli_peak("two-phones")
        big, big_s = cli_peak("million")
        print(f"  netsim run two-phones: peak {small / 2**30:.2f} GiB, {small_s:.1f} s "
              "(the interpreter, its imports, the tables)")
        print(f"  netsim run million: peak {big / 2**30:.2f} GiB, {big_s:.1f} s (target <= "
              f"{CLI_TARGET_BYTES / 2**30:g} GiB: "
              f"{'met' if big <= CLI_TARGET_BYTES else 'MISSED'}); "
              f"{big / small:.1f}x two-phones' peak")
        return
    if args.child:
        mode = args.child[1]
        print(json.dumps(measure(int(args.child[0]),
                                 mode if mode == "bandwidth" else bool(int(mode)),
                                 int(args.child[2]))))
        return
    sizes = [int(x) for x in args.sizes.split(",")]
    modes = {"static": False, "markov": True, "bandwidth": "bandwidth"}
    worlds = [modes[m] for m in args.modes.split(",")]
    rows = {}
    for n in sizes:
        for markov in worlds:
            rows[(n, markov)] = r = in_child(n, markov, args.epochs)
            name = markov if isinstance(markov, str) else "markov" if markov else "static"
            print(f"  {n:>9,} devices {name:9s}: setup "
                  f"{r['setup_s']:7.2f} s ({1e6 * r['setup_s'] / n:5.2f} us/device), epoch "
                  f"{1e3 * r['epoch_s']:7.2f} ms, peak {r['peak_bytes'] / 2**30:5.2f} GiB, "
                  f"{r['epochs']} epochs, run {r['run_s']:.1f} s", flush=True)
    ref = rows[(sizes[0], False)]
    big = sizes[-1]
    print(f"ratios against the {sizes[0]:,}-device static fleet (same run):")
    for n in sizes[1:]:
        r = rows[(n, False)]
        print(f"  epoch at {n:,} / at {sizes[0]:,}, static: "
              f"{r['epoch_s'] / ref['epoch_s']:.2f}x (target <= 2x at 1M)")
        whole, whole_ref = r["run_s"] / r["epochs"], ref["run_s"] / ref["epochs"]
        print(f"  netsim.simulate per epoch, whole run (its setup included): {1e3 * whole:.2f} "
              f"ms / {1e3 * whole_ref:.2f} ms = {whole / whole_ref:.2f}x")
    if args.marginal:  # what one more epoch costs the whole run, inside one run
        slopes = {n: rows[(n, False)]["epochs_span_s"] / (rows[(n, False)]["epochs"] - 1)
                  for n in (sizes[0], big)}
        print(f"  netsim.simulate, marginal cost of an epoch (mean from the first epoch's end "
              f"to the last's, {rows[(big, False)]['epochs'] - 1} epochs): "
              f"{1e3 * slopes[big]:.2f} ms at {big:,} / "
              f"{1e3 * slopes[sizes[0]]:.2f} ms at {sizes[0]:,} = "
              f"{slopes[big] / slopes[sizes[0]]:.2f}x (target <= 2x); once per run: setup "
              f"{rows[(big, False)]['setup_s']:.2f} s / {rows[(sizes[0], False)]['setup_s']:.2f}"
              f" s, closing tables {rows[(big, False)]['closing_s']:.2f} s / "
              f"{rows[(sizes[0], False)]['closing_s']:.2f} s")
    if (big, True) in rows:  # (item 5 of issue 47: churn at a million)
        print(f"  epoch with markov sessions / static at {big:,}: "
              f"{rows[(big, True)]['epoch_s'] / rows[(big, False)]['epoch_s']:.2f}x "
              "(target <= 3x)")
    if (big, True) not in rows or (big, "bandwidth") not in rows:
        return
    print(f"  epoch with log-normal bandwidth / static at {big:,}: "
          f"{rows[(big, 'bandwidth')]['epoch_s'] / rows[(big, False)]['epoch_s']:.2f}x")
    print(f"  setup at {big:,}: {1e6 * rows[(big, False)]['setup_s'] / big:.2f} us/device "
          f"(target <= 10); peak memory {rows[(big, False)]['peak_bytes'] / 2**30:.2f} GiB "
          f"static, {rows[(big, True)]['peak_bytes'] / 2**30:.2f} GiB markov (target <= 6)")


if __name__ == "__main__":
    main()
