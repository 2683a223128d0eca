"""The plain epoch in arrays (netsim.fastepoch): participants only, on an idle network, each
transfer crossing at most one link that can saturate, played forward to the last update's
arrival with no SimPy event per participant; booked (bytes, energy, busy time, radios) and
measured as the event path books and measures them (tests/test_fastepoch.py). Entry point
:func:`play`; :func:`book` and :func:`measure` serve the changing world's array path too."""

from __future__ import annotations

import math
from typing import Any

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
from netsim.workload import Workload


def play(world: EpochWorld, decision: Decision, work: Workload,
         deadline_s: float = math.inf) -> bool:
    """The plain epoch played forward in arrays up to the last update's arrival
    (netsim.fastepoch): bytes, energy and busy time booked as the event path books them.
    ``work``: what each participant moves and computes (its own figures where the workload
    has them: each flow its own size). False, with nothing changed, when it needs the event
    path, or when an update would arrive after ``deadline_s`` (s: the epoch's deadline, which
    then cuts it: the guarded events')."""
    down, up, capacity, flops = world.static_tables()
    n, index = len(decision.participants), world.devices.index
    rows = np.fromiter(map(index.__getitem__, decision.participants), dtype=np.intp, count=n)
    down_bytes, up_bytes, flop = participant_work(work, decision)
    compute_s = flop / flops[rows]
    now = world.env.now
    plan = play_plain_epoch(now, rows, compute_s, 8.0 * down_bytes, down, up, capacity,
                            onset_flows=world.devices.onset_flows, up_bits=8.0 * up_bytes)
    if plan is None or float(plan.upload_arrival_s.max()) > deadline_s:
        return False
    book(world, plan, rows, down_bytes, up_bytes=up_bytes)
    measure(world, plan, rows, flops[rows], down_bytes, now, up_bytes=up_bytes)
    if world.keeps_phase_times:
        world.phase_times = (rows, np.stack([np.full(len(rows), float(now)),
                                             plan.download_arrival_s, plan.trained_s,
                                             plan.upload_arrival_s], axis=1))
    end = float(plan.upload_arrival_s.max())
    if end > now:
        world.env.run(until=end)
    return True


def participant_work(work: Workload, decision: Decision
                     ) -> tuple[float | np.ndarray, float | np.ndarray, np.ndarray]:
    """Each participant's download and upload (bytes: one figure for all, or each one's) and
    compute (FLOP), in the decision's order, as the event path reads them from ``work``."""
    n = len(decision.participants)
    if work.by_device is None:
        samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
        return work.download_bytes, work.upload_bytes, samples * work.flop_per_sample
    own = list(map(work.by_device.__getitem__, decision.participants))
    return (np.fromiter((w.download_bytes for w in own), dtype=float, count=n),
            np.fromiter((w.upload_bytes for w in own), dtype=float, count=n),
            np.fromiter((w.flop for w in own), dtype=float, count=n))


def book(world: EpochWorld, plan: PlainEpoch, rows: np.ndarray,
         model_bytes: float | np.ndarray, pieces: CapacityPieces | None = None,
         tables: tuple[RouteTable, RouteTable] | None = None,
         up_bytes: float | np.ndarray | None = None,
         start_s: np.ndarray | None = None) -> None:
    """Book a plain epoch's bytes, communication energy and busy time as the event path
    books them (downloads in participant order, uploads in the order training ends).
    ``model_bytes``: what each download moves (B; one figure for all, or each participant's);
    ``up_bytes``: what each upload moves (B; None: as its download).

    ``pieces`` (a changing world's capacities over time): each upload's air time at the
    station rates in force when it starts (it may start after a change): the downloads are
    booked at the rates in force now, the uploads piece by piece at each piece's rates.
    ``tables``: the routes played (row j: participant j; a hierarchical phase's routes to
    the edges, netsim.epochs.hierarchy), else the device table's (row: device row).
    ``start_s``: each download's start (s; None: now, the clock's)."""
    if tables is None:
        down, up = world.devices.down_routes, world.devices.up_routes  # (ids, hops: any caps)
        table_rows = rows
    else:
        (down, up), table_rows = tables, np.arange(len(rows))
    assert down is not None and up is not None
    order = np.argsort(plan.trained_s, kind="stable")
    network = world.network
    n = len(rows)
    sizes_down = np.broadcast_to(np.asarray(model_bytes, dtype=float), (n,))
    sizes_up = sizes_down if up_bytes is None else \
        np.broadcast_to(np.asarray(up_bytes, dtype=float), (n,))
    for table, booked, start, size in ((down, table_rows, None, sizes_down),
                                       (up, table_rows[order], plan.trained_s[order],
                                        sizes_up[order])):
        book_moving(network, table, booked, size, None if pieces is None else start, pieces)
    world.meter.add_busy_many(rows, plan.trained_s - plan.download_arrival_s)
    moves = (sizes_down > 0.0, sizes_up > 0.0)  # (a transfer of no bytes wakes no radio)
    if moves[0].any() or moves[1].any():
        book_radios(world.network.radio, float(world.env.now) if start_s is None else start_s,
                    table_rows, down, up, plan,
                    moving=None if moves[0].all() and moves[1].all() else moves)


def book_moving(network: Any, table: RouteTable, booked: np.ndarray, size_bytes: np.ndarray,
                start_s: np.ndarray | None, pieces: CapacityPieces | None) -> None:
    """Book transfers of ``size_bytes`` (B; negative: un-book bits not sent) on the routes
    ``booked`` of ``table`` that cross something, in order; ``start_s`` (s, ascending, with
    ``pieces``): each transfer's air time at the station rates of the piece of its start,
    else at the rates in force now."""
    has_hops = table.hop_start[booked + 1] > table.hop_start[booked]
    ids = table.route_id[booked[has_hops]]
    sizes = size_bytes[has_hops]
    if pieces is None or start_s is None:
        network.book(ids.tolist(), sizes.tolist())
        return
    start = start_s[has_hops]
    k = 0
    while k < len(ids):  # the transfers starting in the piece of transfer k's start
        at = float(start[k])
        j = max(int(np.searchsorted(start, pieces.next_change_s(at), side="left")), k + 1)
        network.book(ids[k:j].tolist(), sizes[k:j].tolist(), pieces.capacity_at(at))
        k = j


def measure(world: EpochWorld, plan: PlainEpoch, rows: np.ndarray, flop_per_s: np.ndarray,
            nbytes: float | np.ndarray, start_s: float | np.ndarray,
            latency_s: tuple[np.ndarray, np.ndarray] | None = None,
            up_bytes: float | np.ndarray | None = None) -> None:
    """What the participants of an array epoch achieved: their speed and the throughput
    of their download and upload (bits over the time the bits took, latency excluded).
    ``nbytes``, ``up_bytes``: what each download and upload moved (B; one figure for all or
    each one's; None: as the download). ``latency_s``: each participant's download and
    upload latency (s) where its routes are not the device table's (a hierarchical phase's,
    to its edge)."""
    t = world.devices
    down_lat, up_lat = (t.down_latency_s[rows], t.up_latency_s[rows]) if latency_s is None \
        else latency_s
    took = (plan.download_arrival_s - down_lat - start_s,
            plan.upload_arrival_s - up_lat - plan.trained_s)
    with np.errstate(divide="ignore", invalid="ignore"):  # (no bits to move: NaN)
        rates = [np.where(d > 0.0, 8.0 * b / d, np.nan)
                 for d, b in zip(took, (nbytes, nbytes if up_bytes is None else up_bytes),
                                 strict=True)]
    world.measure(rows, flop_per_s, rates[0], rates[1])
