"""The event path where cells and the aggregator's link both bind (issue 35, item 2).

Run: python benchmarks/nested_events.py [--devices N] [--epochs E] [--repeats R]

A generated fleet of 3,000 devices (32 to a cell, fibre backhauls, an edge-server aggregator
on a 10 Gbit/s fibre link) training ResNet-18 (44.7 MB a transfer): every transfer crosses its
cell's air time and the aggregator's link, and both bind (the cells together can fill the
aggregator's link). The array path plays that nested case forward without events
(netsim.network.nested); the event path (``fast_epochs=False``) keeps the same rates in the
flow network (netsim.network.flows: nested groups, no progressive filling while the structure
holds). Prints the cost per device-epoch of both paths, setup included (best of R runs, wall
clock), their ratio (target <= 4x) and, from one more event run, the flow network's counters:
how often it re-rated every flow by progressive filling and how often it built and updated
its nested groups (the nested case really occurs when the latter are non-zero).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager

import netsim
from netsim.network import flows
from netsim.scenario.loading import load_scenario


def nested_fleet(n: int, epochs: int) -> dict:
    """A generated fleet whose cells and aggregator link both bind (above ~3,000 devices)."""
    return {"name": f"nested-{n}", "seed": 0,
            "generate": {"n_devices": n, "devices_per_cell": 32, "seed": 1},
            "model": "resnet18",
            "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": epochs}}


def seconds_per_device_epoch(scenario: dict, fast_epochs: bool) -> float:
    """Wall time of one simulate() (validation and setup included) per device-epoch (s)."""
    sc = load_scenario(scenario)
    t0 = time.perf_counter()
    res = netsim.simulate(sc, "fedavg-all", seed=0, raise_errors=True, fast_epochs=fast_epochs)
    return (time.perf_counter() - t0) / int(res.epochs["participants"].sum())


@contextmanager
def networks_made() -> Iterator[list[flows.FlowNetwork]]:
    """The flow networks built inside the block (to read their counters afterwards)."""
    made: list[flows.FlowNetwork] = []
    init = flows.FlowNetwork.__init__

    def recording(self: flows.FlowNetwork, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(self)

    flows.FlowNetwork.__init__ = recording  # type: ignore[method-assign]
    try:
        yield made
    finally:
        flows.FlowNetwork.__init__ = init  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=3000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    netsim.simulate("two-phones", "fedavg-all")  # warm imports and pint
    scenario = nested_fleet(args.devices, args.epochs)
    arrays = min(seconds_per_device_epoch(scenario, True) for _ in range(args.repeats))
    events = min(seconds_per_device_epoch(scenario, False) for _ in range(args.repeats))
    with networks_made() as made:
        seconds_per_device_epoch(scenario, False)
    net = made[-1]
    counters = {name: getattr(net, name, "n/a")
                for name in ("full_recomputations", "reshares", "nested_updates")}
    print(f"{args.devices} devices x {args.epochs} epochs, resnet18: array path "
          f"{arrays * 1e6:.1f} us/device-epoch, event path {events * 1e6:.1f} us/device-epoch, "
          f"ratio {events / arrays:.1f}x (target <= 4x)")
    print("event path's flow network: " + ", ".join(f"{k} {v}" for k, v in counters.items()))


if __name__ == "__main__":
    main()
