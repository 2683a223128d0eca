"""The static epoch as SimPy events, up to the last update's arrival: the reference path (any
decision, any network state). A participant is a chain of callbacks (netsim.epoch), not a
process: the network reports each transfer's arrival as soon as its last bit leaves, so the
end of training is scheduled directly. Model-parallel clusters run as processes
(netsim.epochs.clusters). Entry point :func:`run`."""

from __future__ import annotations

import numpy as np

from netsim.epoch import EpochBarrier, EpochContext, Participant
from netsim.epochs import clusters
from netsim.epochs.shared import EpochWorld
from netsim.policy import Decision
from netsim.workload import Workload


def run(world: EpochWorld, decision: Decision, work: Workload) -> None:
    """The epoch's transfers and training as SimPy events, up to the last update's
    arrival (the reference path: any decision, any network state)."""
    env, fps, nbytes = world.env, work.flop_per_sample, work.download_bytes
    barrier = EpochBarrier(env, len(decision.participants) + len(decision.clusters))
    times: dict[int, list[float]] | None = {} if world.keeps_phase_times else None
    ctx = EpochContext(env, world.network, world.meter, nbytes, barrier, work.upload_bytes,
                       times)
    index, flops = world.devices.index, world.flops
    rows = [index[dev] for dev in decision.participants]
    down, up = world.routes_down.of_rows(rows), world.routes_up.of_rows(rows)
    own = work.by_device  # (each participant's own bytes and FLOP: its own context)
    with world.network.batch():  # every download starts now: one rebalance per shared link
        for dev, i, samples, route_down, route_up in zip(
                decision.participants, rows, decision.participants.values(), down, up,
                strict=True):
            if own is None:
                Participant(ctx, i, samples * fps / flops[i], route_down, route_up)
                continue
            mine = EpochContext(env, world.network, world.meter, own[dev].download_bytes,
                                barrier, own[dev].upload_bytes, times)
            Participant(mine, i, own[dev].flop / flops[i], route_down, route_up)
    for cluster in decision.clusters:
        env.process(clusters.cluster(world, cluster, fps, nbytes, barrier))
    env.run(until=barrier.event)
    if times is not None:
        world.phase_times = (np.array(rows, dtype=np.intp),
                             np.array([times[i] for i in rows], dtype=float).reshape(-1, 4))
