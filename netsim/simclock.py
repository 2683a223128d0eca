"""Scheduling a callback or triggering an event at a delay with one SimPy event, no Timeout.

The engine's hot paths (netsim.network.flows, netsim.epoch, netsim.dynamics.epoch) schedule thousands
of these per epoch: one ``env.schedule`` each, without a Timeout object or a process resumption.
"""

from __future__ import annotations

from collections.abc import Callable

import simpy
from simpy.events import NORMAL


def trigger_after(env: simpy.Environment, event: simpy.Event, delay_s: float) -> None:
    """Trigger the pending ``event`` successfully ``delay_s`` (s) from now: one scheduled event,
    like a Timeout, without creating one."""
    event._ok = True
    event._value = None
    env.schedule(event, NORMAL, delay_s)


def fire_after(env: simpy.Environment, delay_s: float,
               callback: Callable[[simpy.Event], None]) -> simpy.Event:
    """Call ``callback`` ``delay_s`` seconds from now: one scheduled event, cheaper than a
    Timeout plus a process resumption."""
    event = simpy.Event(env)
    event.callbacks.append(callback)
    trigger_after(env, event, delay_s)
    return event
