"""Asynchronous epochs' cost: fedbuff against random-k with the same concurrency, in one process.

Run: python benchmarks/asynchronous.py [--quick]
     python benchmarks/asynchronous.py --check [SIZES]
     python benchmarks/asynchronous.py --trace [--quick]

Generated fleets (small-cnn, static; 100 and 1,000 devices), a fixed number of updates in
every run (random-k: rounds of k = concurrency; fedbuff: concurrency jobs, K = concurrency / 4,
as many aggregations as it takes to aggregate as many updates), best of 7 runs, setup
included. For each: wall time, updates (participant-epochs, the unit of work both do), time per
update, and the ratio of each row's time per update to random-k's in arrays (the reference).
Both play in arrays by default here: synchronous plain epochs (netsim.fastepoch) and buffered
ones (netsim.epochs.buffered_arrays: these fleets' routes each cross at most one constraint
that can bind). The "(events)" rows run every epoch as SimPy events (``fast_epochs=False``):
each kind of epoch on the reference path.

``--check``: what a run pays once for the check that decides whether its buffered epochs play
in arrays (:meth:`netsim.epochs.buffered_arrays.BufferedPlayer.of`: every route of the fleet,
both directions), on generated fleets of SIZES devices (default 1,000, 10,000, 100,000 and
1,000,000; 16 per cell, as above): the best of 3 fresh worlds (of 1 at a million: about 4 GB
and 20 s), the setup before it (generating and validating the fleet, building the world:
topology, device table, meters) for scale, and the decision.

``--trace``: fedbuff (concurrency 100, K 25, 80 aggregations) on the 1,000-device fleet under a
bandwidth trace (every station link of the fleet's cells scaled by 0.3-1.5 in turn, a row
every 0.25 s, repeated every 1.25 s: capacity changes while transfers move), in arrays
(netsim.epochs.buffered_arrays, played across the changes) and as events, best of 3 runs
(1 with ``--quick``), setup included; the capacity changes the arrays played.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

import netsim


def scenario(n: int, epochs: int) -> dict:
    return {"name": f"async-bench-{n}", "seed": 0,
            "generate": {"n_devices": n, "devices_per_cell": 16, "seed": 1},
            "model": "small-cnn",
            "training": {"target_loss": 1e-9, "deadline_s": 1e12, "max_epochs": epochs}}


def timed(sc: dict, policy: str, params: dict, fast: bool = True, repeat: int = 3):
    best, res = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = netsim.simulate(sc, policy, seed=0, params=params, raise_errors=True,
                              fast_epochs=fast)
        best = min(best, time.perf_counter() - t0)
    assert res is not None
    return best, int(res.epochs["updates_aggregated"].sum())


def trace_rows(n: int) -> list[tuple[str, str, float, float]]:
    """The ``--trace`` rows: every station link (a device to its cell) of the fleet of
    ``n`` devices, scaled by a factor that changes every 0.25 s, cells out of step."""
    from netsim.engine import resolve_scenario

    resolved = resolve_scenario(netsim.Scenario.model_validate(scenario(n, 1)), 0)
    factors = (1.0, 0.3, 0.7, 1.5, 0.5)
    rows = []
    for link in resolved.links:
        if link.b.startswith(("wifi-cell", "lte-cell")) and link.b != "core-router":
            shift = int(link.b.rsplit("-", 1)[1])
            rows += [(link.a, link.b, 0.25 * k, link.bandwidth_bps
                      * factors[(k + shift) % len(factors)]) for k in range(len(factors))]
    return rows


def traced(quick: bool) -> None:
    """fedbuff on 1,000 devices under a bandwidth trace, arrays against events (``--trace``)."""
    import tempfile
    from pathlib import Path

    import pandas as pd

    from netsim import engine
    from netsim.dynamics.traces import write_bandwidth_trace

    n, c, k, epochs = 1000, 100, 25, 80
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bw.csv"
        write_bandwidth_trace(pd.DataFrame(trace_rows(n), columns=["a", "b", "time_s",
                                                                   "bandwidth_bps"]), path)
        sc = scenario(n, epochs)
        sc["dynamics"] = {"bandwidth": {"model": "trace", "trace": str(path), "repeat": True}}
        built: list = []
        original = engine.World.__init__

        def keep(self, *args, **kwargs):  # (the player, for its capacity changes)
            original(self, *args, **kwargs)
            built.append(self)

        engine.World.__init__ = keep  # type: ignore[method-assign]
        try:
            params = {"concurrency": c, "buffer_updates": k}
            fast_s, updates = timed(sc, "fedbuff", params, repeat=1 if quick else 3)
            player = built[-1].buffered_player
            slow_s, _ = timed(sc, "fedbuff", params, fast=False, repeat=1 if quick else 3)
        finally:
            engine.World.__init__ = original  # type: ignore[method-assign]
    print(f"{'devices':>8} {'path':>7} {'wall s':>8} {'updates':>8} {'changes':>8}")
    print(f"{n:>8} {'arrays':>7} {fast_s:>8.3f} {updates:>8} {player.capacity_changes:>8}")
    print(f"{n:>8} {'events':>7} {slow_s:>8.3f} {updates:>8} {'':>8}")
    print(f"events / arrays: {slow_s / fast_s:.1f}x")


def check(sizes: list[int]) -> None:
    """The buffered arrays' per-run check on fresh worlds of each size (``--check``)."""
    from netsim.engine import World, resolve_scenario
    from netsim.epochs.buffered_arrays import BufferedPlayer

    print(f"{'devices':>9} {'setup ms':>9} {'check ms':>9} {'check/setup':>11} "
          f"{'plays in':>8}")
    for n in sizes:
        best, setup, where = float("inf"), float("inf"), ""
        for _ in range(1 if n >= 1_000_000 else 3):
            t0 = time.perf_counter()
            resolved = resolve_scenario(netsim.Scenario.model_validate(scenario(n, 1)), 0)
            world = World(resolved, np.random.default_rng(0))
            t1 = time.perf_counter()
            player = BufferedPlayer.of(world)
            best, setup = min(best, time.perf_counter() - t1), min(setup, t1 - t0)
            where = "events" if player is None else "arrays"
            del world, resolved, player
            gc.collect()  # (a world holds reference cycles: one at a time)
        print(f"{n:>9} {setup * 1e3:>9.0f} {best * 1e3:>9.1f} {best / setup:>11.3f} "
              f"{where:>8}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 devices only, one run each")
    ap.add_argument("--check", nargs="?", const="1000,10000,100000,1000000", default=None,
                    metavar="SIZES", help="the buffered arrays' per-run check only, on "
                    "generated fleets of SIZES devices (comma-separated)")
    ap.add_argument("--trace", action="store_true", help="fedbuff on 1,000 devices under a "
                    "bandwidth trace, arrays against events")
    a = ap.parse_args(argv)
    if a.trace:
        traced(a.quick)
        return
    if a.check is not None:
        check([int(x) for x in a.check.split(",")])
        return
    sizes = [(100, 20)] if a.quick else [(100, 20), (1000, 100)]
    rounds = 20
    print(f"{'devices':>8} {'concurrency':>11} {'policy':>24} {'wall s':>8} {'updates':>8} "
          f"{'us/update':>10} {'ratio':>7}")
    for n, c in sizes:
        k = max(1, c // 4)
        repeat = 1 if a.quick else 7  # (runs of 0.05-0.2 s: best of 7 steadies the ratio)
        sync_s, sync_u = timed(scenario(n, rounds), "random-k", {"k": c}, repeat=repeat)
        rows = [("random-k (arrays)", sync_s, sync_u)]
        ev_s, ev_u = timed(scenario(n, rounds), "random-k", {"k": c}, fast=False,
                           repeat=repeat)
        rows.append(("random-k (events)", ev_s, ev_u))
        buff_s, buff_u = timed(scenario(n, rounds * c // k), "fedbuff",
                               {"concurrency": c, "buffer_updates": k}, repeat=repeat)
        rows.append((f"fedbuff (K {k})", buff_s, buff_u))
        ev_s, ev_u = timed(scenario(n, rounds * c // k), "fedbuff",
                           {"concurrency": c, "buffer_updates": k}, fast=False, repeat=repeat)
        rows.append((f"fedbuff (K {k}, events)", ev_s, ev_u))
        ref = sync_s / sync_u
        for name, wall, updates in rows:
            per = wall / updates
            print(f"{n:>8} {c:>11} {name:>24} {wall:>8.3f} {updates:>8} {per * 1e6:>10.1f} "
                  f"{per / ref:>7.2f}")


if __name__ == "__main__":
    main()
