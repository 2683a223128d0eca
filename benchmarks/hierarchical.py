"""A synchronous hierarchical epoch's cost against a star epoch with the same participants,
measured in one process (issue 46, item 8; docs/hierarchical.md).

Run: python benchmarks/hierarchical.py [--quick]
     python benchmarks/hierarchical.py --million

First, the issue's measure (issue 56, item 6): hierfavg's marginal epoch on the built-in
city-edge against cloud-only's with the same 1,000 participants a round, in whole runs
through ``netsim.simulate`` (:func:`city_edge_marginal`). Then the epochs alone:

A generated fleet of 10,000 devices in cells of 100 with an edge aggregator per cell (100
edges; small-cnn, static, shared media). Each round draws 10 devices per edge (1,000
participants) and runs, on one World, the star epoch of those participants (every transfer
with the cloud, the edges relaying: the array path, nested water-filling where the cells can
fill the aggregator's link) and the hierarchical epoch of the same participants with
kappa_2 = 1 (the edge round on the device-edge routes in arrays, the backhaul phase, the
cloud's aggregation), alternating which goes first. The first rounds build each new
participant's routes to its edge (kept afterwards): reported apart ("first"). Then the
median over rounds of the ratio hierarchical / star, and its spread (min-max). A third row
times kappa_2 = 4 per edge round. Target: at most 1.5x. Twice: with every device's routes
to its edge built before the rounds (their one-off cost printed), and built as participants
first need them (a random 10 of 100 per edge each round: new ones keep coming).

Then the asynchronous tiers (issue 56 item 5): rfl-ha and async-hfl through
``netsim.simulate`` on a generated fleet with an edge per cell, whose routes the array path
can play (netsim.epochs.tiered_arrays), with ``fast_epochs`` on (arrays) and off (events),
alternating: the median wall ratio arrays / events (:func:`tiers_arrays_ratio`); then the
same in a changing world (Markov sessions, a compute spread with stragglers: the tiers' array
path under ``dynamics:``, tests/test_tiers_arrays_dynamics.py). ``--tiers``: only these.

``--million``: 1,000,000 generated devices in cells of 100, an edge per cell (10,000 edges),
hierfavg with one participant per edge (10,000 participants) for 3 cloud rounds through
``netsim.simulate``: wall time, the setup and per-epoch times, and peak memory (ru_maxrss).
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time

import numpy as np

import netsim
from netsim.engine import World, resolve_scenario
from netsim.policy import Decision
from netsim.scenario.loading import load_scenario


def fleet(n: int, per_cell: int = 100, epochs: int = 10**6) -> dict:
    return {"name": f"hier-bench-{n}", "seed": 0,
            "generate": {"n_devices": n, "devices_per_cell": per_cell, "seed": 1,
                         "edges": {"cells_per_edge": 1}},
            "model": "small-cnn",
            "training": {"target_loss": 1e-9, "deadline_s": 1e15, "max_epochs": epochs}}


def epoch_ratio(rounds: int, warm: int, prebuilt: bool) -> None:
    world = World(resolve_scenario(load_scenario(fleet(10_000)), 0), np.random.default_rng(0))
    tiers, routes = world.tiers, world.tier_routes
    assert tiers is not None and routes is not None
    if prebuilt:  # every device's routes to its edge, once, before the rounds
        t0 = time.perf_counter()
        routes.device_tables(world.devices.trainers, tiers.default_edge)
        print(f"routes prebuilt: every device's routes to and from its edge built in "
              f"{time.perf_counter() - t0:.2f} s")
    else:
        print("routes built as participants first need them (kept afterwards):")
    rng = np.random.default_rng(1)
    members = tiers.members(tiers.default_edge)
    ids, samples = world.devices.ids, world.devices.samples

    def decision(kappa: int | None) -> Decision:
        return Decision(participants={ids[i]: int(samples[i]) for i in rows}, edge_rounds=kappa)

    def timed(d: Decision) -> float:
        t0 = time.perf_counter()
        world.run_epoch(d)
        return time.perf_counter() - t0

    ratios, ratios4, first = [], [], []
    for k in range(warm + rounds):
        rows = np.concatenate([rng.choice(m, 10, replace=False) for m in members])
        gc.collect()
        if k % 2:
            hier, star = timed(decision(1)), timed(decision(None))
        else:
            star, hier = timed(decision(None)), timed(decision(1))
        if k < warm:
            first.append(hier / star)
            continue
        ratios.append(hier / star)
        if k % 4 == 0:
            ratios4.append(timed(decision(4)) / 4 / star)
    print(f"  10,000 devices, 100 edges, 1,000 participants; paths: {world.epochs_by_path}")
    print(f"  first {warm} rounds: hierarchical / star {min(first):.2f}-{max(first):.2f}x")
    print(f"  kappa_2 = 1, {rounds} rounds: median {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})   target <= 1.5x")
    print(f"  kappa_2 = 4, per edge round, {len(ratios4)} rounds: median "
          f"{statistics.median(ratios4):.2f}x")


def city_edge_marginal(epochs: int, repeats: int) -> None:
    """hierfavg (kappa_2 = 1, 5 participants per edge: 1,000 a round) against cloud-only
    (k = 1,000) on the built-in city-edge (10,000 devices, 200 edges): each epoch's wall
    time from the run's progress callback, the median over the epochs after the first half
    (every participant's routes mostly built by then), runs alternating."""
    import yaml

    from netsim.scenario.loading import builtin_scenarios

    data = yaml.safe_load(builtin_scenarios()["city-edge"].read_text(encoding="utf-8"))
    data["training"].update({"max_epochs": epochs, "target_accuracy": 0.9999})

    def marginal_s(policy: str, params: dict) -> float:
        stamps: list[float] = []
        netsim.simulate(data, policy, seed=0, params=params, raise_errors=True,
                        progress=lambda epoch, now: stamps.append(time.perf_counter()))
        gaps = np.diff(stamps)[epochs // 2:]
        return float(np.median(gaps))

    ratios, hier_ms, star_ms = [], [], []
    for k in range(repeats):
        gc.collect()
        runs = [("hierfavg", {"edge_rounds": 1, "participants_per_edge": 5}),
                ("cloud-only", {"k": 1000})]
        times = {name: marginal_s(name, params) for name, params in runs[::1 - 2 * (k % 2)]}
        ratios.append(times["hierfavg"] / times["cloud-only"])
        hier_ms.append(1e3 * times["hierfavg"])
        star_ms.append(1e3 * times["cloud-only"])
    print(f"city-edge, {epochs} epochs a run, {repeats} runs each, alternating: hierfavg "
          f"{statistics.median(hier_ms):.1f} ms, cloud-only {statistics.median(star_ms):.1f} ms "
          f"per marginal epoch")
    print(f"  hierfavg / cloud-only: median {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})   target <= 1.5x")


CHANGING = {"availability": {"model": "markov", "mean_online_s": 120, "mean_offline_s": 60},
            "compute": {"spread": 0.3, "straggler_probability": 0.05}}
"""The changing world of :func:`tiers_arrays_ratio`'s second variant."""


def tiers_arrays_ratio(n: int, epochs: int, repeats: int, changing: bool = False) -> None:
    """The asynchronous tiers in arrays against events (module docstring): ``n`` generated
    devices in cells of 50 with an edge per cell, ``epochs`` cloud aggregations a run,
    ``repeats`` runs a path, alternating; the tables are the same (tests/test_tiers_arrays.py;
    ``changing``: under :data:`CHANGING`, tests/test_tiers_arrays_dynamics.py)."""
    sc = fleet(n, per_cell=50, epochs=epochs)
    sc["generate"]["edges"].update(backhaul_bps=5e7, metro_bps=1e11)
    if changing:
        sc["dynamics"] = CHANGING
    cases = {"rfl-ha": {"edge_rounds": 2, "participants_per_edge": 20, "buffer_updates": 4},
             "async-hfl": {"edge_rounds": 3, "participants_per_edge": 20,
                           "edge_buffer_updates": 5, "buffer_updates": 4}}
    for policy, params in cases.items():
        netsim.simulate(sc, policy, seed=1, params=params)  # (warm: imports, first builds)
        walls: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeats):
            for fast in (True, False):
                t0 = time.perf_counter()
                netsim.simulate(sc, policy, seed=1, params=params, fast_epochs=fast)
                walls[fast].append(time.perf_counter() - t0)
        arrays, events = statistics.median(walls[True]), statistics.median(walls[False])
        world = "changing world" if changing else "static"
        print(f"asynchronous tiers ({world}), {policy}, {n:,} devices, {n // 50} edges, "
              f"{epochs} epochs: "
              f"arrays {arrays:.2f} s, events {events:.2f} s, arrays / events "
              f"{arrays / events:.2f}x")


def million() -> None:
    n_edges = 10_000
    sc = fleet(1_000_000, per_cell=100, epochs=3)
    stamps: list[float] = []
    t0 = time.perf_counter()
    res = netsim.simulate(sc, "hierfavg", seed=0, raise_errors=True,
                          params={"edge_rounds": 1, "participants_per_edge": 1},
                          progress=lambda epoch, now: stamps.append(time.perf_counter()))
    wall = time.perf_counter() - t0
    e = res.epochs
    per_epoch = np.diff([t0, *stamps])
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"1,000,000 devices, {n_edges:,} edges, hierfavg (1 participant per edge): "
          f"{len(e)} cloud rounds, status {res.runs.status.iloc[0]}")
    print(f"  wall {wall:.1f} s; until the first epoch's end {per_epoch[0]:.1f} s (setup "
          f"included), then {', '.join(f'{x:.2f}' for x in per_epoch[1:])} s per epoch; "
          f"peak memory {peak_gib:.1f} GiB")
    print(f"  edges per round {list(e.edges)}, participants {list(e.participants)}, "
          f"bytes_backhaul {e.bytes_backhaul.iloc[0]:.4g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--million", action="store_true", help="the 1,000,000-device fleet")
    parser.add_argument("--tiers", action="store_true",
                        help="only the asynchronous tiers' arrays / events ratios")
    args = parser.parse_args()
    if args.million:
        million()
    elif args.tiers:
        for changing in (False, True):
            tiers_arrays_ratio(n=5_000, epochs=20 if args.quick else 60,
                               repeats=2 if args.quick else 3, changing=changing)
    else:
        city_edge_marginal(epochs=60 if args.quick else 120, repeats=3 if args.quick else 5)
        for changing in (False, True):
            tiers_arrays_ratio(n=5_000, epochs=20 if args.quick else 60,
                               repeats=2 if args.quick else 3, changing=changing)
        for prebuilt in (True, False):
            epoch_ratio(rounds=12 if args.quick else 40, warm=4 if args.quick else 8,
                        prebuilt=prebuilt)


if __name__ == "__main__":
    main()
