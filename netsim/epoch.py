"""One synchronous epoch's participants as callback chains (the engine's hottest path).

A participant downloads the variant from the aggregator, trains, and uploads its update. It is
not a SimPy process: the network tells it each transfer's arrival time as soon as the last bit
leaves (:meth:`netsim.network.flows.FlowNetwork.send_on`), so the end of training is scheduled directly
and neither arrival needs an event. SimPy events per participant-epoch: the end of its training,
plus the network's shared wake-ups. One small object per participant (its callbacks are bound
methods), not a closure per step, keeps allocations per participant-epoch low: at 10,000
devices that matters as much as the event count (benchmarks/engine.py).
"""

from __future__ import annotations

import math

import simpy

from netsim.energy import EnergyMeter
from netsim.network import Route
from netsim.network.flows import FlowNetwork
from netsim.simclock import fire_after, trigger_after


class EpochBarrier:
    """Counts participants' updates in; fires ``event`` at the latest arrival after the last."""

    __slots__ = ("env", "event", "pending", "latest_s")

    def __init__(self, env: simpy.Environment, participants: int) -> None:
        self.env, self.event = env, simpy.Event(env)
        self.pending, self.latest_s = participants, env.now

    def arrived(self, arrival_s: float) -> None:
        """One update arrives at ``arrival_s`` (s, now or later)."""
        self.pending -= 1
        if arrival_s > self.latest_s:
            self.latest_s = arrival_s
        if self.pending == 0:
            now = self.env.now
            trigger_after(self.env, self.event, self.latest_s - now if self.latest_s > now else 0.0)


class EpochContext:
    """What every participant of one epoch shares."""

    __slots__ = ("env", "network", "meter", "nbytes", "up_bytes", "barrier", "times")

    def __init__(self, env: simpy.Environment, network: FlowNetwork, meter: EnergyMeter,
                 nbytes: float, barrier: EpochBarrier, up_bytes: float | None = None,
                 times: dict[int, list[float]] | None = None) -> None:
        """``nbytes``: what each download moves (B); ``up_bytes``: each upload (B; default
        ``nbytes``); ``times``: where each participant's phase times go, by meter node
        (download start and end, upload start and end, s; None: not kept)."""
        self.env, self.network, self.meter = env, network, meter
        self.nbytes, self.barrier = nbytes, barrier
        self.up_bytes = nbytes if up_bytes is None else up_bytes
        self.times = times


class Participant:
    """Download (route ``down``), train ``compute_s`` seconds on meter node ``node``, upload
    (route ``up``), report to the barrier."""

    __slots__ = ("ctx", "node", "compute_s", "up")

    def __init__(self, ctx: EpochContext, node: int, compute_s: float, down: Route,
                 up: Route) -> None:
        self.ctx, self.node, self.compute_s, self.up = ctx, node, compute_s, up
        if ctx.times is not None:
            ctx.times[node] = [float(ctx.env.now), math.nan, math.nan, math.nan]
        ctx.network.send_on(down, ctx.nbytes, self.downloaded)

    def downloaded(self, arrival_s: float) -> None:
        ctx = self.ctx
        ctx.meter.set_busy(self.node, arrival_s)
        if ctx.times is not None:
            ctx.times[self.node][1] = arrival_s
        fire_after(ctx.env, arrival_s + self.compute_s - ctx.env.now, self.trained)

    def trained(self, _event: simpy.Event) -> None:
        ctx = self.ctx
        ctx.meter.set_idle(self.node, ctx.env.now)
        if ctx.times is not None:
            ctx.times[self.node][2] = float(ctx.env.now)
        ctx.network.send_on(self.up, ctx.up_bytes, self.uploaded)

    def uploaded(self, arrival_s: float) -> None:
        if self.ctx.times is not None:
            self.ctx.times[self.node][3] = arrival_s
        self.ctx.barrier.arrived(arrival_s)
