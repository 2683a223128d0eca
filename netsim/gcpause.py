"""Relaxed garbage collection while a run executes (a speed measure; results do not change).

A run allocates a few container objects per transfer and process (SimPy events, flows,
generators) and frees nearly all of them by reference counting. CPython's cyclic collector
still runs a young-generation pass every 700 net allocations and, as the heap of long-lived
objects (devices, routes, tables) grows with the network, the older passes that traverse all of
it: at 10,000 devices that was a third of the run's wall time (benchmarks/engine.py). Baechi's
list scheduling is alike (a fifth of m-ETF's time on 10,000 operators, benchmarks/placement.py).
Inside a run or a placement the first threshold is raised so collections are rare; the previous
thresholds come back when it ends, also on error. Nested or concurrent uses are safe: only the
thresholds move.

A run's world, once built, lives as long as the run; the full collections its epochs still
trigger would traverse all of it (one full pass at 1,000,000 devices took 0.19 s, a 1M run's
mean epoch 3.6 ms instead of its median 2.7 ms, benchmarks/scale.py). :func:`frozen_heap`
moves what is alive when the epochs begin to the collector's permanent generation
(``gc.freeze``) and back when the run ends (``gc.unfreeze``; cyclic garbage among it is
collected after). Only the collector's timing moves: nested or concurrent runs stay correct
(an inner run's end unfreezes the outer's heap too, which is then traversed again).

A run that asks its policy each epoch freezes once more after its first epoch (the callable
:func:`frozen_heap` yields; a driver, which steps the run itself, does not):
what that epoch built for its participants lives as long as the run too (an event epoch's
routes, plans and radio states: about 150,000 objects at 3,000 devices), and a collection in
a later epoch would traverse it; at most one epoch's cyclic garbage is frozen with it, until
the run ends. With the first threshold at 300,000 net allocations, the event path's run at
3,000 devices collected nothing worth measuring (0.1 ms, from 21 ms in two passes: 4 % of the
run; benchmarks/nested_events.py). The price is memory: up to that many young container
objects of garbage before a pass.

When a run ends, a large world (:data:`LARGE_WORLD_DEVICES` devices or more) is collected at
once (:func:`collect_large_world`): otherwise it would outlive the run until the next full
pass, and the result tables built after it (the devices table has a row per device) would
add to it: `netsim run million` peaked at 2.75 GiB so.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

RUN_GEN0_THRESHOLD = 300_000
"""Net container allocations between young-generation collections during a run."""
LARGE_WORLD_DEVICES = 100_000
"""A run's world of at least this many devices is collected as soon as the run has read it
(:func:`collect_large_world`)."""


@contextmanager
def relaxed_gc(gen0_threshold: int = RUN_GEN0_THRESHOLD) -> Iterator[None]:
    """Raise the collector's first threshold to ``gen0_threshold`` (never lower it) meanwhile.

    A context manager, or a function decorator as ``@relaxed_gc()`` (contextlib's)."""
    old = gc.get_threshold()
    if old[0] == 0 or old[0] >= gen0_threshold:  # disabled-by-threshold or already relaxed
        yield
        return
    gc.set_threshold(gen0_threshold, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


@contextmanager
def frozen_heap() -> Iterator[Callable[[], None]]:
    """Freeze every object alive now out of the cyclic collector's passes meanwhile
    (``gc.freeze``), unfrozen when the block ends, also on error (module docstring). Yields
    a callable that freezes what is alive when it is called too (valid inside the block: the
    block's end unfreezes everything)."""
    gc.freeze()
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


def collect_large_world(n_devices: int) -> None:
    """A run that has read its world's last figures drops it: a world of ``n_devices`` devices
    or more is collected now (its objects refer to each other, so reference counting alone
    leaves them to the next full pass, which may come long after: the caller's result tables
    would be built beside it, netsim run million's peak memory); a smaller one costs little
    and is left to the collector (a full pass costs tens of ms: a sweep's runs would each pay
    it)."""
    if n_devices >= LARGE_WORLD_DEVICES:
        gc.collect()
