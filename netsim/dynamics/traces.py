"""Trace files: online intervals and link capacities over time (CSV or Parquet).

Two formats (docs/traces.md shows an example of each), told apart by the file's suffix
(``.csv`` or ``.parquet``); units are in the column names, values in SI units, times in
seconds of simulated time:

- **Availability**: columns ``device, start_s, end_s``, one row per interval in which the
  device is online. Devices not listed are always online. Each ``end_s >= start_s`` (a
  zero-length interval lists a device without putting it online: a device offline throughout
  is listed with one, ``start_s = end_s``); the intervals of one device are sorted by
  ``start_s`` and do not overlap (touching is allowed: the device stays online across).
- **Bandwidth**: columns ``a, b, time_s`` and ``bandwidth_bps`` (both directions), or the pair
  ``bandwidth_up_bps`` (direction a -> b) and ``bandwidth_down_bps`` (direction b -> a). A row
  sets the capacity of link a–b from ``time_s`` until that link's next row. A row may give
  ``bandwidth_bps`` for both directions, or the up/down pair, or ``bandwidth_bps`` and one of
  the pair (which then overrides it for its direction). The rows of one link have increasing
  ``time_s``; a link is listed in one orientation (a, b) throughout.

Span (the period when a trace shorter than the run repeats; netsim's formalization): an
availability trace's span is its largest ``end_s``; a bandwidth trace's is its largest
``time_s`` plus the smallest positive gap between consecutive rows of one link, so that a
regularly sampled trace repeats seamlessly (the last sample holds one sampling step). If no
link has two rows, the span is the largest ``time_s`` (0 when every row is at 0).

Errors: every bad row of a file is reported at once (:class:`TraceError`, a
:class:`~netsim.scenario.errors.ScenarioError`, so the CLI exits 2), each problem naming the
file, the row and the column. Rows are counted as in the file: row 1 is the first data row
after the header (line 2 of a CSV file; blank lines count, as they do in the file). At most
:data:`MAX_REPORTED` problems are listed, then how many more there are. Unknown devices and
links need the scenario: :func:`availability_problems`, :func:`bandwidth_problems`.

Reads are cached by (resolved path, modification time, size), so a sweep reading one trace
in many runs parses it once; the arrays of a cached trace are read-only.

This module is the public API (reading with the cache, conversion to and from DataFrames,
checks against a scenario, writing); the trace types, columns and :class:`TraceError` live in
:mod:`netsim.dynamics.trace_types` and the parsing and row checks in
:mod:`netsim.dynamics.trace_parsing`, and every public name is importable from here.
"""

from __future__ import annotations

import difflib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from netsim.dynamics.trace_parsing import parse_availability, parse_bandwidth, read_table, suffix_of
from netsim.dynamics.trace_types import (  # noqa: F401  (re-exported: their old home)
    AVAILABILITY_COLUMNS,
    BANDWIDTH_COLUMNS,
    MAX_REPORTED,
    MIN_BANDWIDTH_BPS,
    SUFFIXES,
    AvailabilityTrace,
    BandwidthTrace,
    TraceError,
    trace_problem,
)
from netsim.scenario.errors import Problem

_CACHE_SIZE = 16


class _Link(Protocol):
    a: str
    b: str


# ------------------------------------------------------------------------------------ caching

_CACHE: OrderedDict[tuple[str, str, int, int], tuple[Any, dict[Any, np.ndarray]]] = OrderedDict()
_LOCK = threading.Lock()


def _cached(path: str | Path, kind: str) -> tuple[Any, dict[Any, np.ndarray]]:
    p = Path(path).expanduser()
    label = str(path)
    suffix_of(p, label)
    try:
        resolved = p.resolve()
        st = resolved.stat()
    except OSError:
        st = None
    if st is None:
        read_table(p, label)  # raises the right TraceError (no such file, not a file, ...)
        raise TraceError([trace_problem(label, None, None, "cannot be read")])
    key = (str(resolved), kind, st.st_mtime_ns, st.st_size)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    df, width_rows = read_table(p, label)
    entry = (parse_availability if kind == "availability" else parse_bandwidth)(df, label, width_rows)
    with _LOCK:
        _CACHE[key] = entry
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return entry


def clear_cache() -> None:
    """Forget every cached trace (the next read parses its file again)."""
    with _LOCK:
        _CACHE.clear()


def _rows_of(trace: AvailabilityTrace | BandwidthTrace) -> dict[Any, np.ndarray]:
    """Each device's or link's rows in the file, if ``trace`` came from the cache."""
    with _LOCK:
        for entry, rows in _CACHE.values():
            if entry is trace:
                return rows
    return {}


def trace_kind(path: str | Path) -> str:
    """``"availability"`` or ``"bandwidth"``, told by the file's columns (``device``; or
    ``a`` and ``b``), reading only its header (CSV) or schema (Parquet).

    Raises
    ------
    TraceError
        If the file is missing, unreadable, empty, or has neither set of columns.
    """
    p = Path(path).expanduser()
    label = str(path)
    suffix = suffix_of(p, label)
    if not p.is_file():
        raise TraceError([trace_problem(label, None, None,
                                        "no such file" if not p.exists() else "not a file")])
    try:
        if suffix == ".csv":
            header = pd.read_csv(p, nrows=0, encoding="utf-8-sig")
            columns = [str(c).strip() for c in header.columns]
        else:
            import pyarrow.parquet as pq

            columns = list(pq.read_schema(p).names)
    except pd.errors.EmptyDataError:
        raise TraceError([trace_problem(label, None, None, "empty file (expected a header "
                                        "line naming the columns)")]) from None
    except Exception as exc:  # unreadable: pandas', pyarrow's and the OS's own errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceError([trace_problem(label, None, None, f"cannot be read: {first}")]
                         ) from None
    if "device" in columns:
        return "availability"
    if "a" in columns and "b" in columns:
        return "bandwidth"
    raise TraceError([trace_problem(label, None, None, "neither an availability trace "
                                    "(columns device, start_s, end_s) nor a bandwidth trace "
                                    "(columns a, b, time_s, bandwidth_bps); its columns: "
                                    f"{', '.join(columns) or 'none'}")])


def read_availability_trace(path: str | Path) -> AvailabilityTrace:
    """The online intervals of a trace file (CSV or Parquet by suffix; see the module doc).

    Columns ``device, start_s, end_s`` (s): the intervals in which a device is online; devices
    not listed are always online. ``span_s`` is the largest ``end_s`` (netsim's formalization
    of a trace's length: the period when it repeats).

    Raises
    ------
    TraceError
        With every problem: missing or unknown column, empty file, and each bad row (empty,
        non-numeric, non-finite or negative value, ``end_s < start_s``, intervals of one device
        unsorted or overlapping), naming file, row (1-based data row) and column.
    """
    return _cached(path, "availability")[0]


def read_bandwidth_trace(path: str | Path) -> BandwidthTrace:
    """Link capacities over time from a trace file (CSV or Parquet by suffix; module doc).

    Columns ``a, b, time_s`` (s) and ``bandwidth_bps`` (bit/s, both directions), or the pair
    ``bandwidth_up_bps`` (a -> b) and ``bandwidth_down_bps`` (b -> a); where both kinds are
    given, up/down override ``bandwidth_bps`` for their direction. ``span_s`` is the largest
    ``time_s`` plus the smallest positive gap between consecutive rows of one link (netsim's
    formalization: a regularly sampled trace repeats seamlessly); the largest ``time_s`` when
    no link has two rows.

    Raises
    ------
    TraceError
        With every problem: missing or unknown column, empty file, and each bad row (empty,
        non-numeric, non-finite or negative value, a capacity below 1e-9 bit/s, a link from a
        node to itself, a link listed in both orientations, ``time_s`` not increasing within a
        link), naming file, row (1-based data row) and column.
    """
    return _cached(path, "bandwidth")[0]


def availability_trace_from_frame(df: pd.DataFrame, name: str = "<DataFrame>"
                                  ) -> AvailabilityTrace:
    """An availability trace from a DataFrame in the file's format (rows counted from 1)."""
    frame = df.reset_index(drop=True)
    frame.index = frame.index + 1
    return parse_availability(frame, name, [])[0]


def bandwidth_trace_from_frame(df: pd.DataFrame, name: str = "<DataFrame>") -> BandwidthTrace:
    """A bandwidth trace from a DataFrame in the file's format (rows counted from 1)."""
    frame = df.reset_index(drop=True)
    frame.index = frame.index + 1
    return parse_bandwidth(frame, name, [])[0]


def availability_frame(trace: AvailabilityTrace) -> pd.DataFrame:
    """The trace as a DataFrame in the file's format (device, start_s, end_s)."""
    devices = [d for d, (s, _) in trace.intervals.items() for _ in range(len(s))]
    starts = [s for s, _ in trace.intervals.values()]
    ends = [e for _, e in trace.intervals.values()]
    return pd.DataFrame({"device": pd.Series(devices, dtype=object),
                         "start_s": np.concatenate(starts) if starts else np.zeros(0),
                         "end_s": np.concatenate(ends) if ends else np.zeros(0)})


def bandwidth_frame(trace: BandwidthTrace) -> pd.DataFrame:
    """The trace as a DataFrame in the file's format (a, b, time_s, bandwidth_up_bps,
    bandwidth_down_bps), link by link."""
    parts = [pd.DataFrame({"a": a, "b": b, "time_s": t, "bandwidth_up_bps": u,
                           "bandwidth_down_bps": d})
             for (a, b), (t, u, d) in trace.links.items()]
    if not parts:
        return pd.DataFrame({c: [] for c in ("a", "b", "time_s", "bandwidth_up_bps",
                                             "bandwidth_down_bps")})
    return pd.concat(parts, ignore_index=True)


# ----------------------------------------------------------------------- checks with a scenario


def _first_rows(rows: np.ndarray | None) -> tuple[int | None, str]:
    if rows is None or not len(rows):
        return None, ""
    more = f" (also rows {', '.join(str(int(r)) for r in rows[1:6])}" \
        + (f" and {len(rows) - 6} more" if len(rows) > 6 else "") + ")" if len(rows) > 1 else ""
    return int(rows[0]), more


def _hint(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _keys(trace: AvailabilityTrace | BandwidthTrace | TraceError
          ) -> tuple[str, list[Any], dict[Any, np.ndarray]]:
    if isinstance(trace, TraceError):
        keys = trace.keys or {}
        return trace.path, list(keys), keys
    rows = _rows_of(trace)
    names = list(trace.intervals) if isinstance(trace, AvailabilityTrace) else list(trace.links)
    return trace.path, names, rows


def availability_problems(trace: AvailabilityTrace | TraceError,
                          device_ids: Iterable[str]) -> list[Problem]:
    """Devices of the trace that are not devices of the scenario (file, first row, column
    device). ``trace`` may be the :class:`TraceError` of a file with bad rows: the devices
    of its readable rows are checked then."""
    known = list(device_ids)
    ids = set(known)
    path, names, rows = _keys(trace)
    out = []
    for dev in names:
        if dev not in ids:
            row, more = _first_rows(rows.get(dev))
            out.append(trace_problem(path, row, "device", f"unknown device {dev!r}"
                                     + _hint(dev, known) + more))
    return out


def bandwidth_problems(trace: BandwidthTrace | TraceError,
                       links: Iterable[_Link | tuple[str, str]]) -> list[Problem]:
    """Links of the trace that are not links of the scenario (a, b match in either order;
    file, first row, column a). ``trace`` may be the :class:`TraceError` of a file with bad
    rows: the links of its readable rows are checked then."""
    pairs = [(x.a, x.b) if not isinstance(x, tuple) else x for x in links]
    known = {frozenset(p) for p in pairs}
    names = [f"{x}–{y}" for x, y in pairs]
    path, keys, rows = _keys(trace)
    out = []
    for a, b in keys:
        if frozenset((a, b)) not in known:
            row, more = _first_rows(rows.get((a, b)))
            out.append(trace_problem(path, row, "a", f"unknown link {a}–{b} (no link of "
                                     "the scenario joins these nodes)"
                                     + _hint(f"{a}–{b}", names) + more))
    return out


def link_series(trace: BandwidthTrace, links: Sequence[_Link]
                ) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each scenario link's capacities in the trace: index in ``links`` -> (time_s,
    a_to_b_bps, b_to_a_bps), oriented like the scenario's link (swapped where the file lists
    it as b, a). Links the trace does not list are left out."""
    out: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for i, link in enumerate(links):
        series = trace.links.get((link.a, link.b))
        if series is not None:
            out[i] = series
            continue
        series = trace.links.get((link.b, link.a))
        if series is not None:
            t, ab, ba = series
            out[i] = (t, ba, ab)
    return out


# ------------------------------------------------------------------------------------ writing


def _write(df: pd.DataFrame, path: str | Path, columns: Sequence[str]) -> Path:
    from netsim.outputs import write_atomic

    p = Path(path)
    suffix = suffix_of(p, str(path))
    frame = df[[c for c in columns if c in df.columns]].reset_index(drop=True)

    def write(tmp: str) -> None:
        if suffix == ".csv":
            frame.to_csv(tmp, index=False)
        else:
            frame.to_parquet(tmp, index=False)

    write_atomic(p, write)
    return p


def write_availability_trace(df: pd.DataFrame, path: str | Path) -> Path:
    """Write an availability trace (columns device, start_s, end_s; s) as CSV or Parquet by
    the suffix, atomically; checked first (:class:`TraceError` naming the DataFrame's rows,
    counted from 1), so a file written here reads back. Returns the path."""
    availability_trace_from_frame(df, f"{path} (DataFrame to write)")
    return _write(df, path, AVAILABILITY_COLUMNS)


def write_bandwidth_trace(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a bandwidth trace (columns a, b, time_s and bandwidth_bps and/or bandwidth_up_bps
    (a -> b), bandwidth_down_bps (b -> a); s, bit/s) as CSV or Parquet by the suffix,
    atomically; checked first like :func:`write_availability_trace`. Returns the path."""
    bandwidth_trace_from_frame(df, f"{path} (DataFrame to write)")
    return _write(df, path, BANDWIDTH_COLUMNS)
