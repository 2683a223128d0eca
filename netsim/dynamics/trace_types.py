"""What a trace file holds: the two trace types, the file's columns and limits, and the error.

The data types every part of trace handling shares (:class:`AvailabilityTrace`,
:class:`BandwidthTrace`; times in s, capacities in bit/s), the columns of the two formats, the
reporting limit and the smallest capacity, and :class:`TraceError` with its problems
(:func:`trace_problem`). The formats themselves, spans, errors and caching are described in
:mod:`netsim.dynamics.traces`, which re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netsim.scenario.errors import Problem, ScenarioError

#: Suffixes of trace files (case-insensitive).
SUFFIXES = (".csv", ".parquet")
AVAILABILITY_COLUMNS = ("device", "start_s", "end_s")
BANDWIDTH_COLUMNS = ("a", "b", "time_s", "bandwidth_bps", "bandwidth_up_bps",
                     "bandwidth_down_bps")
#: Most problems listed for one file; beyond, one more problem says how many were left out.
MAX_REPORTED = 100
#: Smallest capacity a trace may give (bit/s), as for a link's ``bandwidth_bps``.
MIN_BANDWIDTH_BPS = 1e-9


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


class TraceError(ScenarioError):
    """A trace file that cannot be used: every bad row, each naming file, row and column.

    ``keys``: where the rows could be read, the devices (availability) or links (a, b)
    (bandwidth) the file names, each with its rows, so that :func:`availability_problems`
    and :func:`bandwidth_problems` can report unknown ones alongside the bad rows."""

    def __init__(self, problems: Sequence[Problem], source: str = "trace file",
                 keys: dict[Any, np.ndarray] | None = None, path: str = "") -> None:
        super().__init__(problems, source)
        self.keys = keys
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (process pools) with its problems
        return (type(self), (self.problems, self.source, self.keys, self.path))


def trace_problem(file: str, row: int | None, column: str | None, message: str) -> Problem:
    """A problem of a trace file: path ``FILE, row N, column C`` (parts left out when None)."""
    where = [file] + ([f"row {row}"] if row is not None else []) \
        + ([f"column {column}"] if column else [])
    return Problem(", ".join(where), message)
