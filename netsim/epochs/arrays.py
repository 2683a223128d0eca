"""The plain epoch in arrays (netsim.fastepoch): participants only, on an idle network, each
transfer crossing at most one link that can saturate, played forward to the last update's
arrival with no SimPy event per participant; booked (bytes, energy, busy time, radios) and
measured as the event path books and measures them (tests/test_fastepoch.py). Entry point
:func:`play`; :func:`book` and :func:`measure` serve the changing world's array path too."""

from __future__ import annotations

import numpy as np

from netsim.epochs.shared import EpochWorld
from netsim.fastepoch import (
    CapacityPieces,
    PlainEpoch,
    RouteTable,
    book_radios,
    play_plain_epoch,
)
from netsim.policy import Decision


def play(world: EpochWorld, decision: Decision, model_bytes: float,
         flop_per_sample: float) -> bool:
    """The plain epoch played forward in arrays up to the last update's arrival
    (netsim.fastepoch): bytes, energy and busy time booked as the event path books them.
    False, with nothing changed, when it needs the event path."""
    down, up, capacity, flops = world.static_tables()
    n, index = len(decision.participants), world.devices.index
    rows = np.fromiter(map(index.__getitem__, decision.participants), dtype=np.intp, count=n)
    samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
    compute_s = samples * flop_per_sample / flops[rows]
    now = world.env.now
    plan = play_plain_epoch(now, rows, compute_s, 8.0 * model_bytes, down, up, capacity,
                            onset_flows=world.devices.onset_flows)
    if plan is None:
        return False
    book(world, plan, rows, model_bytes)
    measure(world, plan, rows, flops[rows], model_bytes, now)
    end = float(plan.upload_arrival_s.max())
    if end > now:
        world.env.run(until=end)
    return True


def book(world: EpochWorld, plan: PlainEpoch, rows: np.ndarray, model_bytes: float,
         pieces: CapacityPieces | None = None,
         tables: tuple[RouteTable, RouteTable] | None = None) -> None:
    """Book a plain epoch's bytes, communication energy and busy time as the event path
    books them (downloads in participant order, uploads in the order training ends).

    ``pieces`` (a changing world's capacities over time): each upload's air time at the
    station rates in force when it starts (it may start after a change): the downloads are
    booked at the rates in force now, the uploads piece by piece at each piece's rates.
    ``tables``: the routes played (row j: participant j; a hierarchical phase's routes to
    the edges, netsim.epochs.hierarchy), else the device table's (row: device row)."""
    if tables is None:
        down, up = world.devices.down_routes, world.devices.up_routes  # (ids, hops: any caps)
        table_rows = rows
    else:
        (down, up), table_rows = tables, np.arange(len(rows))
    assert down is not None and up is not None
    order = np.argsort(plan.trained_s, kind="stable")
    network = world.network
    for table, booked, start in ((down, table_rows, None),
                                 (up, table_rows[order], plan.trained_s[order])):
        has_hops = table.hop_start[booked + 1] > table.hop_start[booked]
        moving = booked[has_hops]
        ids = table.route_id[moving]
        if pieces is None or start is None:
            network.book(ids.tolist(), [model_bytes] * len(moving))
            continue
        start = start[has_hops]  # (ascending)
        k = 0
        while k < len(moving):  # the uploads starting in the piece of upload k's start
            at = float(start[k])
            j = max(int(np.searchsorted(start, pieces.next_change_s(at), side="left")), k + 1)
            network.book(ids[k:j].tolist(), [model_bytes] * (j - k), pieces.capacity_at(at))
            k = j
    world.meter.add_busy_many(rows, plan.trained_s - plan.download_arrival_s)
    if model_bytes > 0.0:
        book_radios(world.network.radio, float(world.env.now), table_rows, down, up, plan)


def measure(world: EpochWorld, plan: PlainEpoch, rows: np.ndarray, flop_per_s: np.ndarray,
            nbytes: float, start_s: float,
            latency_s: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """What the participants of an array epoch achieved: their speed and the throughput
    of their download and upload (bits over the time the bits took, latency excluded).
    ``latency_s``: each participant's download and upload latency (s) where its routes are
    not the device table's (a hierarchical phase's, to its edge)."""
    t = world.devices
    down_lat, up_lat = (t.down_latency_s[rows], t.up_latency_s[rows]) if latency_s is None \
        else latency_s
    took = (plan.download_arrival_s - down_lat - start_s,
            plan.upload_arrival_s - up_lat - plan.trained_s)
    with np.errstate(divide="ignore", invalid="ignore"):  # (no bits to move: NaN)
        rates = [np.where(d > 0.0, 8.0 * nbytes / d, np.nan) for d in took]
    world.measure(rows, flop_per_s, rates[0], rates[1])
