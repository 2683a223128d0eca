"""Parsing trace files: a CSV or Parquet file's table, checked row by row, into a trace.

Reads a file's table (:func:`read_table`, data rows counted from 1), checks its columns and
every cell (empty, non-numeric, non-finite, negative; capacities in bit/s, times in s), the
order of each device's intervals or each link's rows, and builds the
:class:`~netsim.dynamics.trace_types.AvailabilityTrace` or
:class:`~netsim.dynamics.trace_types.BandwidthTrace` with each device's or link's rows
(:func:`parse_availability`, :func:`parse_bandwidth`), or raises
:class:`~netsim.dynamics.trace_types.TraceError` with every problem at once. The formats and
their rules: :mod:`netsim.dynamics.traces` (the public API, which reads through this module).
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from netsim.dynamics.trace_types import (
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

# ----------------------------------------------------------------------------- reading tables


def suffix_of(path: Path, label: str) -> str:
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise TraceError([trace_problem(label, None, None, f"unknown format {path.suffix!r}: "
                                        "a trace file ends in .csv or .parquet")])
    return suffix


def _read_csv_by_line(path: Path) -> tuple[pd.DataFrame, list[tuple[int, str | None, str]]]:
    """A CSV file row by row (the slow path, for files whose rows do not all have the
    header's number of fields): rows with more fields are problems, shorter ones padded."""
    import csv

    out: list[tuple[int, str | None, str]] = []
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh, skipinitialspace=True)
        header = [h.strip() for h in next(reader, [])]
        width = len(header)
        data: list[list[str]] = []
        for i, fields in enumerate(reader, start=1):
            if len(fields) > width:
                out.append((i, None, f"{len(fields)} fields, the header has {width}"))
                fields = [""] * width
            data.append(fields + [""] * (width - len(fields)))
    return pd.DataFrame(data, columns=header, dtype=object), out


def read_table(path: Path, label: str) -> tuple[pd.DataFrame, list[tuple[int, str | None, str]]]:
    """The file's table (index: 1-based data row) and rows that could not be split."""
    suffix = suffix_of(path, label)
    if not path.exists():
        raise TraceError([trace_problem(label, None, None, "no such file")])
    if not path.is_file():
        raise TraceError([trace_problem(label, None, None, "not a file")])
    if path.stat().st_size == 0:
        raise TraceError([trace_problem(label, None, None, "empty file (expected a header "
                                        "line naming the columns, then one row per line)")])
    width_rows: list[tuple[int, str | None, str]] = []
    try:
        if suffix == ".csv":
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    df = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False,
                                     skip_blank_lines=False, skipinitialspace=True,
                                     index_col=False, encoding="utf-8-sig")
                uneven = any("Length of header" in str(w.message) for w in caught)
            except pd.errors.ParserError as exc:
                if "Expected" not in str(exc):
                    raise
                uneven = True
            if uneven:
                df, width_rows = _read_csv_by_line(path)
            blank = (df.astype(str).apply(lambda c: c.str.strip()) == "").all(axis=1)
            df = df[~blank.to_numpy()]
        else:
            df = pd.read_parquet(path)
            df = df.reset_index(drop=True)
    except pd.errors.EmptyDataError:
        raise TraceError([trace_problem(label, None, None, "empty file (expected a header line "
                                        "naming the columns)")]) from None
    except UnicodeDecodeError as exc:
        raise TraceError([trace_problem(label, None, None, f"not UTF-8 text ({exc.reason} at "
                                        f"byte {exc.start})")]) from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        kind = "CSV" if suffix == ".csv" else "Parquet"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceError([trace_problem(label, None, None,
                                        f"cannot be read as {kind}: {first}")]) from None
    except Exception as exc:  # pyarrow's own errors (ArrowInvalid, ...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceError([trace_problem(label, None, None,
                                        f"cannot be read: {first}")]) from None
    df = df.rename(columns=lambda c: str(c).strip())
    df.index = df.index + 1
    return df, width_rows


def _column_problems(df: pd.DataFrame, label: str, required: Sequence[str],
                     known: Sequence[str]) -> list[Problem]:
    out = [trace_problem(label, None, c, "missing column (the header names "
                         f"{', '.join(map(str, df.columns)) or 'no columns'}; "
                         f"expected {', '.join(known)})")
           for c in required if c not in df.columns]
    for c in df.columns:
        if c not in known:
            close = difflib.get_close_matches(str(c), list(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})"
            out.append(trace_problem(label, None, str(c), "unknown column" + hint))
    dups = [c for c in pd.Index(df.columns)[pd.Index(df.columns).duplicated()]]
    out += [trace_problem(label, None, str(c), "column given twice") for c in dict.fromkeys(dups)]
    return out


@dataclass
class _Numbers:
    values: np.ndarray  # float, NaN where missing or not a number
    text: np.ndarray    # the cell as text (for messages)
    missing: np.ndarray
    bad: np.ndarray     # not a number, or not finite


def _texts(col: pd.Series) -> np.ndarray:
    if col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
        return col.fillna("").astype(str).str.strip().to_numpy(dtype=object)
    return col.astype(str).to_numpy(dtype=object)


def _numbers(col: pd.Series) -> _Numbers:
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        values = np.array(col.to_numpy(dtype=float, na_value=np.nan), dtype=float)
        missing = np.asarray(col.isna().to_numpy(), dtype=bool)
        text = col.astype(str).to_numpy(dtype=object)
        bad = ~missing & ~np.isfinite(values)
        return _Numbers(values, text, missing, bad)
    text = _texts(col)
    missing = text == ""
    values = np.array(pd.to_numeric(pd.Series(np.where(missing, "0", text)),
                                    errors="coerce"), dtype=float)
    values[missing] = np.nan
    bad = ~missing & ~np.isfinite(values)
    return _Numbers(values, text, missing, bad)


def _ids(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Ids as text and where they are missing."""
    if pd.api.types.is_numeric_dtype(col.dtype):
        missing = np.asarray(col.isna().to_numpy(), dtype=bool)
        text = np.array([("" if m else str(v)) for v, m in zip(col.to_list(), missing,
                                                                strict=True)], dtype=object)
        return text, missing
    text = _texts(col)
    return text, text == ""


def _number_errors(rows: np.ndarray, column: str, num: _Numbers, allow_missing: bool = False,
                   positive: float | None = None) -> list[tuple[int, str | None, str]]:
    """Missing, non-numeric, non-finite and negative (or below ``positive``) cells."""
    out: list[tuple[int, str | None, str]] = []
    if not allow_missing:
        out += [(int(r), column, "empty (a number is required)") for r in rows[num.missing]]
    for r, t, v in zip(rows[num.bad], num.text[num.bad], num.values[num.bad], strict=True):
        what = "not a finite number" if np.isinf(v) or str(t).strip().lower().lstrip("+-") \
            in ("nan", "inf", "infinity") else "not a number"
        out.append((int(r), column, f"{t!r} is {what}"))
    ok = ~num.missing & ~num.bad
    neg = ok & (num.values < 0)
    floor = f"{positive:g}" if positive is not None else "0"
    out += [(int(r), column, f"{v:g} is negative (allowed: >= {floor})")
            for r, v in zip(rows[neg], num.values[neg], strict=True)]
    if positive is not None:
        small = ok & (num.values >= 0) & (num.values < positive)
        out += [(int(r), column, f"{v:g} is not a positive capacity (allowed: >= {positive:g} "
                                 "bit/s)") for r, v in zip(rows[small], num.values[small],
                                                             strict=True)]
    return out


def _raise_if(label: str, frame_problems: list[Problem],
              row_errors: list[tuple[int, str | None, str]], order: Sequence[str],
              keys: dict[Any, np.ndarray] | None = None) -> None:
    """Raise :class:`TraceError` with every problem (rows in file order), if there are any."""
    if not frame_problems and not row_errors:
        return
    rank = {c: i for i, c in enumerate(order)}
    rows = sorted(dict.fromkeys(row_errors), key=lambda e: (e[0], rank.get(e[1] or "", -1)))
    problems = list(frame_problems) + [trace_problem(label, r, c, m) for r, c, m in rows]
    if len(problems) > MAX_REPORTED:
        more = len(problems) - MAX_REPORTED
        problems = problems[:MAX_REPORTED] + [trace_problem(
            label, None, None, f"and {more} more problem(s) (the first {MAX_REPORTED} shown)")]
    raise TraceError(problems, keys=keys, path=label)


def _rows_by(names: Sequence[Any], rows: np.ndarray) -> dict[Any, np.ndarray]:
    """Each name's rows (names[i] is row rows[i]'s), in order of first appearance."""
    codes, uniques = pd.factorize(pd.Series(list(names), dtype=object), sort=False)
    (parts,) = _split(np.asarray(codes), len(uniques), rows)
    return dict(zip(list(uniques), parts, strict=True))


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _split(codes: np.ndarray, n: int, *arrays: np.ndarray) -> list[list[np.ndarray]]:
    """Per group code 0..n-1, the rows of each array in file order."""
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(1, n))
    return [[_readonly(np.ascontiguousarray(p)) for p in np.split(a[order], bounds)]
            for a in arrays]


# ------------------------------------------------------------------------------- availability


def _raise_unreadable(df: pd.DataFrame, label: str, frame: list[Problem],
                      width_rows: list[tuple[int, str | None, str]], columns: Sequence[str],
                      needs: str) -> None:
    """Raise TraceError when the table cannot be read row by row: a column missing or given
    twice, or no data rows (``needs`` says what a trace must list)."""
    if any(p.message.startswith("missing column") or "given twice" in p.message for p in frame):
        _raise_if(label, frame, width_rows, columns)
    if len(df) == 0:
        frame.append(trace_problem(label, None, None, f"no data rows ({needs})"))
        _raise_if(label, frame, width_rows, columns)


def parse_availability(df: pd.DataFrame, label: str, width_rows: list[tuple[int, str | None, str]]
                  ) -> tuple[AvailabilityTrace, dict[str, np.ndarray]]:
    """The trace from a table (index = 1-based row) and each device's rows; raises TraceError."""
    frame = _column_problems(df, label, AVAILABILITY_COLUMNS, AVAILABILITY_COLUMNS)
    _raise_unreadable(df, label, frame, width_rows, AVAILABILITY_COLUMNS,
                      "an availability trace lists at least one online interval")
    rows = df.index.to_numpy(dtype=np.int64)
    dev, dev_missing = _ids(df["device"])
    start, end = _numbers(df["start_s"]), _numbers(df["end_s"])
    errors = list(width_rows)
    errors += [(int(r), "device", "empty (a device id is required)") for r in rows[dev_missing]]
    errors += _number_errors(rows, "start_s", start) + _number_errors(rows, "end_s", end)
    ok_num = (~start.missing & ~start.bad & (start.values >= 0)
              & ~end.missing & ~end.bad & (end.values >= 0))
    empty = ok_num & (end.values < start.values)
    errors += [(int(r), "end_s", f"{e:g} is before start_s {s:g} (an interval needs "
                                 "end_s >= start_s)")
               for r, s, e in zip(rows[empty], start.values[empty], end.values[empty],
                                  strict=True)]
    valid = ok_num & ~empty & ~dev_missing
    sub = pd.DataFrame({"device": dev[valid], "start": start.values[valid],
                        "end": end.values[valid], "row": rows[valid]})
    prev = sub.groupby("device", sort=False)[["start", "end", "row"]].shift(1)
    has_prev = prev["row"].notna().to_numpy()
    p_start, p_end = prev["start"].to_numpy(dtype=float), prev["end"].to_numpy(dtype=float)
    s_arr, e_arr = sub["start"].to_numpy(), sub["end"].to_numpy()
    unsorted = has_prev & (s_arr < p_start)
    overlap = has_prev & ~unsorted & (s_arr < p_end)
    p_row = prev["row"].to_numpy(dtype=float)
    d_arr, r_arr = sub["device"].to_numpy(), sub["row"].to_numpy()
    for i in np.flatnonzero(unsorted | overlap):
        what = ("starts before the device's previous interval" if unsorted[i]
                else "overlaps the device's previous interval")
        errors.append((int(r_arr[i]), "start_s",
                       f"interval {s_arr[i]:g} to {e_arr[i]:g} of device {d_arr[i]!r} {what} "
                       f"(row {int(p_row[i])}: {p_start[i]:g} to {p_end[i]:g}); the intervals "
                       "of one device are sorted by start_s and do not overlap"))
    if frame or errors:
        named = ~dev_missing
        _raise_if(label, frame, errors, AVAILABILITY_COLUMNS,
                  _rows_by([str(d) for d in dev[named]], rows[named]))
    codes, names = pd.factorize(pd.Series(dev, dtype=object), sort=False)
    starts, ends, row_lists = _split(np.asarray(codes), len(names), start.values, end.values,
                                     rows)
    intervals = {str(n): (s, e) for n, s, e in zip(names, starts, ends, strict=True)}
    span = float(end.values.max())
    rows_of = {str(n): r for n, r in zip(names, row_lists, strict=True)}
    return AvailabilityTrace(label, intervals, span), rows_of


# ---------------------------------------------------------------------------------- bandwidth


def parse_bandwidth(df: pd.DataFrame, label: str, width_rows: list[tuple[int, str | None, str]]
               ) -> tuple[BandwidthTrace, dict[tuple[str, str], np.ndarray]]:
    """The trace from a table (index = 1-based row) and each link's rows; raises TraceError."""
    cols = set(df.columns)
    required = ["a", "b", "time_s"]
    if "bandwidth_bps" not in cols:
        pair = [c for c in ("bandwidth_up_bps", "bandwidth_down_bps") if c not in cols]
        required += pair if len(pair) == 1 else []
    frame = _column_problems(df, label, required, BANDWIDTH_COLUMNS)
    if "bandwidth_bps" not in cols and "bandwidth_up_bps" not in cols \
            and "bandwidth_down_bps" not in cols:
        frame.append(trace_problem(label, None, "bandwidth_bps", "missing column (give "
                                   "bandwidth_bps, or the pair bandwidth_up_bps and "
                                   "bandwidth_down_bps)"))
    _raise_unreadable(df, label, frame, width_rows, BANDWIDTH_COLUMNS,
                      "a bandwidth trace lists at least one capacity")
    rows = df.index.to_numpy(dtype=np.int64)
    n = len(df)
    a, a_missing = _ids(df["a"])
    b, b_missing = _ids(df["b"])
    time = _numbers(df["time_s"])
    errors = list(width_rows)
    errors += [(int(r), "a", "empty (a node id is required)") for r in rows[a_missing]]
    errors += [(int(r), "b", "empty (a node id is required)") for r in rows[b_missing]]
    same = ~a_missing & ~b_missing & (a == b)
    errors += [(int(r), "b", f"a link joins two different nodes (both {x!r})")
               for r, x in zip(rows[same], a[same], strict=True)]
    errors += _number_errors(rows, "time_s", time)
    given: dict[str, _Numbers] = {}
    for c in ("bandwidth_bps", "bandwidth_up_bps", "bandwidth_down_bps"):
        if c in cols:
            given[c] = _numbers(df[c])
            errors += _number_errors(rows, c, given[c], allow_missing=True,
                                     positive=MIN_BANDWIDTH_BPS)
    nan = np.full(n, np.nan)
    both = given["bandwidth_bps"].values if "bandwidth_bps" in given else nan
    up_col = given["bandwidth_up_bps"].values if "bandwidth_up_bps" in given else nan
    down_col = given["bandwidth_down_bps"].values if "bandwidth_down_bps" in given else nan
    up = np.where(np.isnan(up_col), both, up_col)
    down = np.where(np.isnan(down_col), both, down_col)
    cell_bad = np.zeros(n, dtype=bool)
    for num in given.values():
        cell_bad |= num.bad
    lack_up, lack_down = np.isnan(up) & ~cell_bad, np.isnan(down) & ~cell_bad
    for lack, other, direction, col in ((lack_up, lack_down, "a -> b", "bandwidth_up_bps"),
                                        (lack_down, lack_up, "b -> a", "bandwidth_down_bps")):
        only = lack & ~other
        where = col if col in cols else "bandwidth_bps"
        errors += [(int(r), where, f"empty: no capacity for direction {direction} (give "
                                   f"{col} or bandwidth_bps)") for r in rows[only]]
    lack_both = lack_up & lack_down
    errors += [(int(r), "bandwidth_bps" if "bandwidth_bps" in cols else "bandwidth_up_bps",
                "empty (give bandwidth_bps, or bandwidth_up_bps and bandwidth_down_bps)")
               for r in rows[lack_both]]
    ids_ok = ~a_missing & ~b_missing & ~same
    key = np.array([f"{x}\x00{y}" for x, y in zip(a, b, strict=True)], dtype=object)
    canon = np.array([f"{x}\x00{y}" if x <= y else f"{y}\x00{x}" for x, y in
                      zip(a, b, strict=True)], dtype=object)
    sub = pd.DataFrame({"canon": canon[ids_ok], "key": key[ids_ok], "row": rows[ids_ok],
                        "a": a[ids_ok], "b": b[ids_ok]})
    first = sub.groupby("canon", sort=False)[["key", "row"]].transform("first")
    flipped = (sub["key"] != first["key"]).to_numpy()
    for r, x, y, r0 in zip(sub["row"].to_numpy()[flipped], sub["a"].to_numpy()[flipped],
                           sub["b"].to_numpy()[flipped], first["row"].to_numpy()[flipped],
                           strict=True):
        errors.append((int(r), "a", f"link {x}–{y} is listed as {y}–{x} from row {int(r0)} "
                                    "on: list each link in one orientation"))
    t_ok = ids_ok & ~time.missing & ~time.bad & (time.values >= 0)
    ordered = pd.DataFrame({"canon": canon[t_ok], "t": time.values[t_ok], "row": rows[t_ok]})
    prev = ordered.groupby("canon", sort=False)[["t", "row"]].shift(1)
    has_prev = prev["row"].notna().to_numpy()
    t_arr, p_t = ordered["t"].to_numpy(), prev["t"].to_numpy(dtype=float)
    late = has_prev & (t_arr <= p_t)
    p_row, o_rows, o_canon = prev["row"].to_numpy(dtype=float), ordered["row"].to_numpy(), \
        ordered["canon"].to_numpy()
    for i in np.flatnonzero(late):
        x, y = str(o_canon[i]).split("\x00")
        errors.append((int(o_rows[i]), "time_s",
                       f"{t_arr[i]:g} is not after the link's previous row (row "
                       f"{int(p_row[i])}, time_s {p_t[i]:g}); the rows of link {x}–{y} need "
                       "increasing time_s"))
    if frame or errors:
        _raise_if(label, frame, errors, BANDWIDTH_COLUMNS,
                  _rows_by(list(zip(sub["a"], sub["b"], strict=True)), sub["row"].to_numpy()))
    gaps = t_arr[has_prev] - p_t[has_prev]
    gaps = gaps[gaps > 0]
    span = float(time.values.max()) + (float(gaps.min()) if gaps.size else 0.0)
    codes, names = pd.factorize(pd.Series(key, dtype=object), sort=False)
    times, ups, downs, row_lists = _split(np.asarray(codes), len(names), time.values, up, down,
                                          rows)
    links: dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    rows_of: dict[tuple[str, str], np.ndarray] = {}
    for name, t, u, d, r in zip(names, times, ups, downs, row_lists, strict=True):
        x, y = str(name).split("\x00")
        links[(x, y)] = (t, u, d)
        rows_of[(x, y)] = r
    return BandwidthTrace(label, links, span), rows_of
