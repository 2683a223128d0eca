"""Trace files: online intervals and link capacities over time (CSV or Parquet).

INTERFACE (the engine codes against it; a helper fills in the reading, checks and writing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AvailabilityTrace:
    """Online intervals per device, from a trace file.

    intervals: device id -> (start_s, end_s) arrays, sorted, non-overlapping (s).
    span_s: the trace's length (s): its largest ``end_s``; the period when it repeats.
    """

    path: str
    intervals: dict[str, tuple[np.ndarray, np.ndarray]]
    span_s: float


@dataclass(frozen=True)
class BandwidthTrace:
    """Link capacities over time, from a trace file.

    links: (a, b) as written in the file -> (time_s, a_to_b_bps, b_to_a_bps), sorted by time.
    span_s: the trace's length (s), the period when it repeats.
    """

    path: str
    links: dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]]
    span_s: float
