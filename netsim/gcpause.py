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
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

RUN_GEN0_THRESHOLD = 100_000
"""Net container allocations between young-generation collections during a run."""


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

