"""The city round (issue 47, item 2): 32,000 generated stations in 1,000 cells of 32, every
device training every round, measured against a smaller city in the same run.

Run: python benchmarks/city.py [--epochs E] [--repeat R] [--no-check]    # about 1 minute

The built-in default scenario's generator (phones, boards, Jetson-class boxes and laptops
behind Wi-Fi, LTE and 5G cells; the aggregator behind a 10 Gbit/s link) with ``n_devices``
devices in cells of 32, small-cnn, fedavg-all, the target loss out of reach so every epoch
runs. Every epoch plays in arrays: the downloads start together (one water-filling over the
cells), the uploads start as training ends and cross their cell and the aggregator's link,
which binds for most of the round (the nested playback, netsim.network.nested).

Printed:

- the cost of an epoch, the median wall time between the ends of consecutive epochs (the
  policy's choice, its validation, the epoch and its record), at 32,000 devices and at 1,000
  (the reference, interleaved in the same run), per epoch and per device-epoch, best of
  ``--repeat`` runs; target: at most 0.3 s an epoch at 32,000 devices on a quiet 2-core
  machine (about 10 us per device-epoch), and the ratio of the two per device-epoch;
- where an epoch's time goes at 32,000 devices (a separate run with timers around the parts);
- (unless ``--no-check``) the same city's first two epochs on the event path
  (``fast_epochs=False``, the reference model): the largest relative difference of the epochs'
  and devices' tables (target 1e-9).
"""

from __future__ import annotations

import argparse
import copy
import functools
import time
from collections import Counter
from collections.abc import Callable

import numpy as np

import netsim

#: The city: stations, stations per cell; the reference city's stations.
N_DEVICES = 32_000
PER_CELL = 32
N_REFERENCE = 1_000
EPOCHS = 8
REPEAT = 3
#: Target: seconds per epoch at N_DEVICES.
TARGET_S = 0.3
#: Columns compared with the event path (relative difference).
EPOCH_COLUMNS = ("start_s", "end_s", "energy_compute_j", "energy_comm_j", "energy_idle_j",
                 "loss")
DEVICE_COLUMNS = ("energy_compute_j", "energy_comm_j", "energy_idle_j", "bytes_sent",
                  "bytes_received")


def city(n: int, epochs: int) -> dict:
    """``n`` generated stations in cells of :data:`PER_CELL`, small-cnn, fedavg-all's round."""
    from netsim.scenario.loading import scenario_data

    sc = copy.deepcopy(scenario_data("default"))
    sc["name"] = f"city-{n}"
    sc["generate"].update(n_devices=n, devices_per_cell=PER_CELL)
    sc["model"] = "small-cnn"
    sc["training"].update(target_loss=1e-9, max_epochs=epochs, deadline_s=1e12)
    return sc


def timed(n: int, epochs: int) -> dict:
    """One run: the median epoch (s) and the run's wall time (s)."""
    stamps: list[float] = []
    t0 = time.perf_counter()
    res = netsim.simulate(city(n, epochs), "fedavg-all", seed=0, raise_errors=True,
                          progress=lambda epoch, now: stamps.append(time.perf_counter()))
    wall = time.perf_counter() - t0
    assert int(res.runs["epochs"].iloc[0]) == epochs == len(stamps)
    assert (res.epochs["participants"] == n).all()
    return {"epoch_s": float(np.median(np.diff(np.array(stamps)))), "wall_s": wall}


PARTS: dict[str, tuple[str, str]] = {
    # what is timed: (module, attribute), a function or "Class.method"
    "epoch (World.run_epoch)": ("netsim.engine", "World.run_epoch"),
    "  the plain epoch's timeline (play_plain_epoch)": ("netsim.epochs.arrays",
                                                       "play_plain_epoch"),
    "    of which the nested playback (uploads)": ("netsim.fastepoch",
                                                   "nested_last_bit_times_until"),
    "    of which which constraints bind (can_bind)": ("netsim.fastepoch", "can_bind"),
    "    of which the nesting's groups (_nested)": ("netsim.fastepoch", "_nested"),
    "  books: radio energy (RadioMeter.play)": ("netsim.network.radio", "RadioMeter.play"),
    "  books: bytes, energy, air time (TransferLedger.settle)": (
        "netsim.network.ledger", "TransferLedger.settle"),
    "  books: busy time (EnergyMeter.add_busy_many)": ("netsim.energy",
                                                        "EnergyMeter.add_busy_many"),
    "the decision's validation (validate_decision)": ("netsim.runloop", "validate_decision"),
    "the policy's decision (FedAvgAll.decide)": ("policies.baselines", "FedAvgAll.decide"),
    "the epoch's record (Recorder.epoch)": ("netsim.results.recorder", "Recorder.epoch"),
}


def breakdown(epochs: int) -> tuple[dict[str, float], float]:
    """Seconds per epoch in each of :data:`PARTS` (a run with timers around them; the first
    epoch left out: it builds routes and books), and the run's median epoch (s)."""
    import importlib

    spent: Counter[str] = Counter()
    live = {"on": False}
    undo: list[Callable[[], None]] = []
    for label, (module_name, attr) in PARTS.items():
        module = importlib.import_module(module_name)
        owner, name = (module, attr) if "." not in attr else \
            (getattr(module, attr.split(".")[0]), attr.split(".")[1])
        if not hasattr(owner, name):
            continue
        real = getattr(owner, name)

        def timer(*args, _real=real, _label=label, **kwargs):
            t = time.perf_counter()
            try:
                return _real(*args, **kwargs)
            finally:
                if live["on"]:
                    spent[_label] += time.perf_counter() - t

        setattr(owner, name, functools.wraps(real)(timer))
        undo.append(functools.partial(setattr, owner, name, real))
    stamps: list[float] = []

    def progress(epoch: int, now: float) -> None:
        stamps.append(time.perf_counter())
        live["on"] = True

    try:
        netsim.simulate(city(N_DEVICES, epochs + 1), "fedavg-all", seed=0, raise_errors=True,
                        progress=progress)
    finally:
        for step in undo:
            step()
    return ({label: spent[label] / epochs for label in PARTS},
            float(np.median(np.diff(np.array(stamps)))))


def check_events(epochs: int) -> float:
    """The largest relative difference between the arrays' tables and the event path's
    (``fast_epochs=False``) over the city's first ``epochs`` epochs."""
    fast, slow = (netsim.simulate(city(N_DEVICES, epochs), "fedavg-all", seed=0,
                                  raise_errors=True, fast_epochs=f) for f in (True, False))
    worst = 0.0
    for table, columns in ((fast.epochs, EPOCH_COLUMNS), (fast.devices, DEVICE_COLUMNS)):
        other = slow.epochs if table is fast.epochs else slow.devices
        for col in columns:
            a, b = table[col].to_numpy(float), other[col].to_numpy(float)
            scale = np.maximum(np.abs(b), 1e-300)
            worst = max(worst, float(np.max(np.abs(a - b) / scale)))
    return worst


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--repeat", type=int, default=REPEAT)
    ap.add_argument("--no-check", action="store_true", help="skip the event path's check")
    a = ap.parse_args(argv)
    netsim.simulate(city(200, 2), "fedavg-all", seed=0)  # (warm up: imports, registry)
    runs: dict[int, list[dict]] = {N_DEVICES: [], N_REFERENCE: []}
    for _ in range(a.repeat):  # (interleaved: a burst of load hits both alike)
        for n in runs:
            runs[n].append(timed(n, a.epochs))
    best = {n: min(r["epoch_s"] for r in rs) for n, rs in runs.items()}
    per = {n: 1e6 * best[n] / n for n in best}
    print(f"city: {N_DEVICES:,} stations in {N_DEVICES // PER_CELL:,} cells of {PER_CELL}, "
          f"small-cnn, fedavg-all, {a.epochs} epochs (best of {a.repeat}, median epoch)")
    for n in runs:
        print(f"  {n:>7,} devices: {best[n]:7.3f} s per epoch, {per[n]:6.2f} us per "
              f"device-epoch" + ("  (reference)" if n == N_REFERENCE else ""))
    ratio = per[N_DEVICES] / per[N_REFERENCE]
    verdict = "met" if best[N_DEVICES] <= TARGET_S else "MISSED"
    print(f"  {N_DEVICES:,} devices: {best[N_DEVICES]:.3f} s per epoch (target <= {TARGET_S} "
          f"s on a quiet machine: {verdict}); per device-epoch {ratio:.2f}x the "
          f"{N_REFERENCE:,}-device city's")
    parts, median = breakdown(min(a.epochs, 5))
    print(f"where an epoch's {median:.3f} s go at {N_DEVICES:,} devices (timers around the "
          f"parts, ms per epoch):")
    for label, seconds in parts.items():
        print(f"  {label:58s} {1e3 * seconds:8.1f}")
    if not a.no_check:
        worst = check_events(2)
        print(f"the first 2 epochs against the event path (fast_epochs=False): largest "
              f"relative difference {worst:.1e} (target <= 1e-9: "
              f"{'met' if worst <= 1e-9 else 'MISSED'})")


if __name__ == "__main__":
    main()
