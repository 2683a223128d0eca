"""Figures of trace files (``netsim traces plot``): who is online when, or link capacities.

Drawn with matplotlib's object interface on the Agg canvas (no pyplot, no global backend
change), so it works without a display and never touches plots/ (netsim/ does not import it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from netsim.dynamics.traces import (
    AvailabilityTrace,
    BandwidthTrace,
    read_availability_trace,
    read_bandwidth_trace,
    trace_kind,
)

#: Most devices drawn in an availability figure, most links in a bandwidth figure.
MAX_DEVICES = 60
MAX_LINKS = 20


def _time_unit(span_s: float) -> tuple[float, str]:
    """(seconds per unit, name) for a time axis of this length (s)."""
    for scale, name, above in ((86400.0, "days", 3 * 86400.0), (3600.0, "h", 3 * 3600.0),
                               (60.0, "min", 3 * 60.0)):
        if span_s >= above:
            return scale, name
    return 1.0, "s"


def availability_figure(trace: AvailabilityTrace) -> Figure:
    """Devices x time: each device's online intervals as bars (the first devices listed)."""
    devices = list(trace.intervals)[:MAX_DEVICES]
    scale, unit = _time_unit(trace.span_s)
    fig = Figure(figsize=(10, max(2.5, 0.8 + 0.22 * len(devices))), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for y, dev in enumerate(devices):
        start, end = trace.intervals[dev]
        bars = list(zip(start / scale, (end - start) / scale, strict=True))
        ax.broken_barh(bars, (y - 0.4, 0.8), color="tab:green")
    ax.set_yticks(range(len(devices)), devices, fontsize=7 if len(devices) > 20 else 9)
    ax.set_ylim(len(devices) - 0.5, -0.5)
    ax.set_xlim(0, trace.span_s / scale if trace.span_s > 0 else 1)
    ax.set_xlabel(f"time ({unit})")
    shown = len(devices)
    more = f" (first {shown} of {len(trace.intervals)} devices)" \
        if len(trace.intervals) > shown else ""
    ax.set_title(f"Online intervals: {Path(trace.path).name}{more}; devices not listed are "
                 "always online", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return fig


def bandwidth_figure(trace: BandwidthTrace) -> Figure:
    """Capacity over time per link (Mbit/s; a -> b solid, b -> a dashed where it differs)."""
    links = list(trace.links)[:MAX_LINKS]
    scale, unit = _time_unit(trace.span_s)
    fig = Figure(figsize=(10, 5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    values = []
    for i, (a, b) in enumerate(links):
        t, up, down = trace.links[(a, b)]
        end = max(trace.span_s, float(t[-1]))
        tt = np.append(t, end) / scale
        color = f"C{i % 10}"
        ax.step(tt, np.append(up, up[-1]) / 1e6, where="post", color=color, lw=1.2,
                label=f"{a}–{b}")
        if not np.array_equal(up, down):
            ax.step(tt, np.append(down, down[-1]) / 1e6, where="post", color=color, lw=1.0,
                    ls="--")
        values += [up, down]
    if values:
        allv = np.concatenate(values)
        if allv.min() > 0 and allv.max() / allv.min() > 100:
            ax.set_yscale("log")
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("capacity (Mbit/s)")
    more = f" (first {len(links)} of {len(trace.links)} links)" \
        if len(trace.links) > len(links) else ""
    ax.set_title(f"Link capacity: {Path(trace.path).name}{more}; solid a→b, dashed b→a",
                 fontsize=10)
    ax.grid(alpha=0.3)
    if links:
        ax.legend(fontsize=7, ncol=2 if len(links) > 10 else 1, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_trace(path: str | Path, out: str | Path) -> tuple[str, Path]:
    """Draw a trace file (its kind told by its columns) to ``out`` (format by suffix, e.g.
    .png, .pdf, .svg), atomically. Returns the kind and the path written.

    Raises
    ------
    TraceError
        If the file cannot be read, its kind cannot be told, or it has bad rows.
    """
    from netsim.outputs import write_atomic

    kind = trace_kind(path)
    fig = availability_figure(read_availability_trace(path)) if kind == "availability" \
        else bandwidth_figure(read_bandwidth_trace(path))
    target = Path(out)
    fmt = target.suffix.lstrip(".").lower() or "png"
    write_atomic(target, lambda tmp: fig.savefig(tmp, format=fmt, dpi=150))
    return kind, target
