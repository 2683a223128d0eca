"""Model-parallel clusters (DepL): a group of devices that trains one replica, the head
exchanging the model with the aggregator and each member's activations with the head, as SimPy
processes. Entry point :func:`cluster` (a process, in a static or a guarded epoch)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from netsim.dynamics.epoch import GuardedBarrier
from netsim.epoch import EpochBarrier
from netsim.epochs.shared import EpochWorld
from netsim.policy import ClusterDecision


def cluster(world: EpochWorld, cluster: ClusterDecision, flop_per_sample: float, nbytes: float,
             barrier: EpochBarrier | GuardedBarrier,
             key: Any = None) -> Generator[simpy.Event, Any, None]:
    env, head = world.env, cluster.devices[0]
    yield world.network.transfer(world.aggregator_id, head, nbytes)
    flop = cluster.samples * flop_per_sample
    act = cluster.samples * cluster.activation_bytes_per_sample / 2.0
    members = [env.process(_member(world, dev, share * flop, act, head))
               for dev, share in zip(cluster.devices, cluster.flop_share, strict=True)]
    yield env.all_of(members)
    yield world.network.transfer(head, world.aggregator_id, nbytes)
    if isinstance(barrier, GuardedBarrier):
        barrier.arrived(env.now, key)
    else:
        barrier.arrived(env.now)


def _member(world: EpochWorld, dev: str, flop: float, act_bytes: float,
            head: str) -> Generator[simpy.Event, Any, None]:
    env, i = world.env, world.devices.index[dev]
    if dev != head and act_bytes > 0:
        yield world.network.transfer(head, dev, act_bytes)
    world.meter.set_busy(i, env.now)
    yield env.timeout(flop / world.flops[i])
    world.meter.set_idle(i, env.now)
    if dev != head and act_bytes > 0:
        yield world.network.transfer(dev, head, act_bytes)
