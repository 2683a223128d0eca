"""Media benchmark: the cost of an epoch on a generated network with shared media, against the
same network with private links (``generate.shared_media: false``), measured in one run.

Run: python benchmarks/media.py [--devices N] [--epochs E]

Both runs: fedavg-all, the digits MLP, N generated devices (default 1,000), E epochs (default
40), setup excluded (the World is built first, then the epochs are timed). Target: media /
private <= 3x (docs/wireless.md). Also printed: how many epochs each path played in arrays.
Best of 3 runs each, wall clock (the machine is shared: other load only slows a run down).
"""

from __future__ import annotations

import argparse
import time

import netsim
from netsim.epochs import arrays as static_arrays


def scenario(n: int, epochs: int, shared: bool) -> dict:
    return {"name": f"media-{shared}", "seed": 0,
            "generate": {"n_devices": n, "devices_per_cell": 16, "seed": 1,
                         "shared_media": shared},
            "model": "mlp-digits",
            "training": {"target_loss": 1e-9, "deadline_s": 1e9, "max_epochs": epochs}}


def time_run(data: dict) -> tuple[float, int, int]:
    """(wall s of the run, epochs played in arrays, epochs run as events)."""
    counts = {"arrays": 0, "events": 0}
    real = static_arrays.play_plain_epoch

    def spy(*args, **kwargs):
        plan = real(*args, **kwargs)
        counts["arrays" if plan is not None else "events"] += 1
        return plan

    static_arrays.play_plain_epoch = spy
    try:
        t = time.perf_counter()
        netsim.simulate(data, "fedavg-all", seed=0, raise_errors=True)
        return time.perf_counter() - t, counts["arrays"], counts["events"]
    finally:
        static_arrays.play_plain_epoch = real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=40)
    args = parser.parse_args()
    rows = {}
    for shared in (False, True):
        # setup alone (one epoch) and the whole run: the difference is the epochs' cost
        setup = min(time_run(scenario(args.devices, 1, shared))[0] for _ in range(3))
        runs = [time_run(scenario(args.devices, args.epochs, shared)) for _ in range(3)]
        best = min(r[0] for r in runs)
        rows[shared] = ((best - setup) / (args.epochs - 1), runs[0][1], runs[0][2])
    for shared, (per_epoch, arrays, events) in rows.items():
        print(f"{'media' if shared else 'private':8s} {per_epoch * 1e3:8.2f} ms per epoch "
              f"({arrays} epochs in arrays, {events} as events)")
    ratio = rows[True][0] / rows[False][0]
    print(f"media / private: {ratio:.2f}x (target <= 3x): {'met' if ratio <= 3 else 'NOT met'}")


if __name__ == "__main__":
    main()
