"""Paper style for every netsim figure: one column wide, readable, colour-blind safe.

Colours are the Okabe-Ito palette (safe for the common colour-vision deficiencies) and five
more (:data:`PALETTE`, 12 in all). Each policy prefers one colour, line style and marker
(:data:`POLICY_STYLES`); :func:`style_for` keeps that where it is free and gives the series of
one figure, up to 12, each its own colour and its own marker; line style and marker keep
series apart in greyscale. Value axes are logarithmic where their values span more than a
decade (:func:`set_value_scale`), and intervals are drawn in a halo above their bars
(:func:`halo_error_bars`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from netsim.figures import save  # noqa: E402, F401  (plots save through netsim's one writer)

OKABE_ITO = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442",
             "#000000"]
LINESTYLES = ["-", "--", "-.", ":"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
ONE_COLUMN_IN = (3.5, 2.6)
TWO_COLUMN_IN = (7.2, 2.8)

RC = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "lines.linewidth": 1.3,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "savefig.bbox": "tight",
    "savefig.dpi": 200,
    "figure.dpi": 100,
}


# The colour, line style and marker each policy prefers (style_for keeps them where no other
# series of a figure took that colour or marker first; line style and marker keep series apart
# in greyscale and where lines overlap). A method and its optimum reference share a hue.
POLICY_STYLES: dict[str, dict[str, str]] = {
    "pact": {"color": "#0072B2", "linestyle": "-", "marker": "o"},
    "pact-optimum": {"color": "#0072B2", "linestyle": ":", "marker": "*"},
    "pact-no-compression": {"color": "#56B4E9", "linestyle": "--", "marker": "<"},
    "pact-all-nodes": {"color": "#332288", "linestyle": "-.", "marker": ">"},
    "compress-first": {"color": "#882255", "linestyle": ":", "marker": "X"},
    "depl": {"color": "#D55E00", "linestyle": "-", "marker": "s"},
    "depl-optimum": {"color": "#D55E00", "linestyle": ":", "marker": "*"},
    "depl-mean": {"color": "#E69F00", "linestyle": "--", "marker": "h"},
    "depl-margin": {"color": "#E69F00", "linestyle": "-.", "marker": "p"},
    "full-model": {"color": "#E69F00", "linestyle": ":", "marker": "d"},
    "never-switch": {"color": "#CC79A7", "linestyle": ":", "marker": "H"},
    "fedavg-all": {"color": "#000000", "linestyle": "--", "marker": "^"},
    "greedy-energy": {"color": "#009E73", "linestyle": "-.", "marker": "D"},
    "fastest-k": {"color": "#CC79A7", "linestyle": "--", "marker": "v"},
    "random-k": {"color": "#999933", "linestyle": ":", "marker": "P"},
    "overselect": {"color": "#999933", "linestyle": "--", "marker": "X"},  # random-k's family
    "fedbuff": {"color": "#CC79A7", "linestyle": "-", "marker": "o"},  # asynchronous family
    "fedasync": {"color": "#CC79A7", "linestyle": "-.", "marker": "s"},
    "hierfavg": {"color": "#56B4E9", "linestyle": "-", "marker": "D"},  # hierarchical family
    "rfl-ha": {"color": "#7F7F7F", "linestyle": "--", "marker": "o"},
    "async-hfl": {"color": "#56B4E9", "linestyle": "-.", "marker": "^"},
    "cloud-only": {"color": "#8C510A", "linestyle": "-", "marker": "s"},
    "baechi": {"color": "#000000", "linestyle": "-", "marker": "x"},
    "m-topo": {"color": "#0072B2", "linestyle": "-", "marker": "o"},
    "m-etf": {"color": "#E69F00", "linestyle": "--", "marker": "s"},
    "m-sct": {"color": "#009E73", "linestyle": "-.", "marker": "^"},
    "single": {"color": "#000000", "linestyle": "--", "marker": ""},
}
LINE_COLOURS = [c for c in OKABE_ITO if c != "#F0E442"]  # yellow is too pale for lines on white
PALETTE = LINE_COLOURS + ["#882255", "#999933", "#332288", "#7F7F7F", "#8C510A"]
"""Twelve colours a figure keeps apart: Okabe-Ito's seven line colours (colour-blind safe),
then Paul Tol's wine, olive and indigo, grey and brown; with :data:`SERIES_MARKERS`, up to 12
series of one figure differ in colour and marker both (:func:`style_for`)."""
SERIES_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p"]
COMBOS = [{"color": c, "linestyle": ls, "marker": m} for ls in LINESTYLES
          for m in SERIES_MARKERS for c in PALETTE]


def register_style(name: str, color: str, linestyle: str = "-", marker: str = "o") -> None:
    """Give a policy (or any series name) a preferred style in every netsim figure (kept
    wherever no other series of the figure took its colour or marker first)."""
    POLICY_STYLES[name] = {"color": color, "linestyle": linestyle, "marker": marker}


def _base_name(name: str) -> str:
    """The registered policy a label names: ``random-k {"k": 5}``, ``random-k(k=5)`` and
    ``random-k (k=5)`` -> ``random-k``; a label that names none is its own."""
    head = name.split(" ")[0].split("(")[0].split("{")[0]
    return head if head in POLICY_STYLES else name


def _digest(name: str) -> int:
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)


def policy_style(name: str) -> dict[str, str]:
    """The preferred style of a series name: registered (its policy's, for a label with
    parameters), else a combination picked by a stable hash of the name (the same in every
    figure and process). :func:`style_for` gives each series of one figure its own."""
    base = _base_name(name)
    if base in POLICY_STYLES:
        return dict(POLICY_STYLES[base])
    return dict(COMBOS[_digest(name) % len(COMBOS)])


def _first_free(preferred: str, options: list[str], used: set[str], start: int) -> str:
    """``preferred`` if no series took it yet, else the next free option after ``start``
    (all taken: ``preferred``)."""
    if preferred not in used:
        return preferred
    for k in range(len(options)):
        option = options[(start + k) % len(options)]
        if option not in used:
            return option
    return preferred


def style_for(names: Iterable[str]) -> dict[str, dict[str, str]]:
    """A style per series name of one figure, each with its own colour and its own marker
    for up to 12 series (:data:`PALETTE`, :data:`SERIES_MARKERS`); beyond, no two alike.

    Each series keeps its preferred style (:func:`policy_style`: a registered policy's, its
    family's for a label with parameters) where no series before it took that colour or
    marker; registered policies go first (in :data:`POLICY_STYLES`' order), then the other
    names sorted, so the same policies get the same styles in every figure."""
    order = {n: i for i, n in enumerate(POLICY_STYLES)}
    names = sorted(set(names), key=lambda n: (order.get(n, len(order)),
                                              order.get(_base_name(n), len(order)), n))
    out: dict[str, dict[str, str]] = {}
    colours: set[str] = set()
    markers: set[str] = set()
    combos: set[tuple[str, str, str]] = set()
    for name in names:
        pref = policy_style(name)
        start = _digest(name)
        if len(colours) < len(PALETTE) and len(markers) < len(SERIES_MARKERS):
            style = {"color": _first_free(pref["color"], PALETTE, colours, start),
                     "linestyle": pref["linestyle"],
                     "marker": _first_free(pref["marker"], SERIES_MARKERS, markers, start)}
        else:  # (more than 12: a combination no series of the figure has)
            style = next((c for c in (COMBOS[(start + k) % len(COMBOS)]
                                      for k in range(len(COMBOS)))
                          if tuple(c.values()) not in combos), COMBOS[start % len(COMBOS)])
        out[name] = dict(style)
        colours.add(style["color"])
        markers.add(style["marker"])
        combos.add((style["color"], style["linestyle"], style["marker"]))
    return out


def series_label(label: str) -> str:
    """A legend's text for a policy label, its parameters readable: ``random-k(k=5)`` and
    ``random-k {"k": 5}`` -> ``random-k (k=5)``; a label without parameters unchanged."""
    text = str(label)
    head, sep, rest = text.partition("{")
    if sep and rest.endswith("}"):
        import json

        try:
            params = json.loads("{" + rest)
        except ValueError:
            return text
        if isinstance(params, dict) and params:
            inner = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in params.items())
            return f"{head.strip()} ({inner})"
        return head.strip()
    head, sep, rest = text.partition("(")
    if sep and rest.endswith(")") and head and not head.endswith(" "):
        return f"{head} ({rest[:-1].replace(',', ', ')}"  + ")"
    return text


def line_style(style: dict[str, str]) -> dict[str, str]:
    """The colour and line style of a series (no marker), for dense curves."""
    return {"color": style["color"], "linestyle": style["linestyle"]}


def legend_outside(ax_or_fig, handles=None, labels=None, **kwargs):
    """A legend to the right of the axes (or figure), so it never hides data; left out of
    ``tight_layout`` (the axes keep their width), the saved file widens to hold it."""
    kw = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0,
          "frameon": False, **kwargs}
    legend = ax_or_fig.legend(**kw) if handles is None else ax_or_fig.legend(handles, labels, **kw)
    legend.set_in_layout(False)
    return legend


ERROR_COLOUR = "#000000"
ERROR_HALO = "#FFFFFF"


def error_bar_kw(linewidth: float = 0.7, capsize: float = 2.0) -> dict[str, Any]:
    """Keyword arguments of an interval's lines (``errorbar``, or ``error_kw`` of ``bar``):
    black, thin, with caps; :func:`halo_error_bars` then gives them a white halo and puts
    them above the bars, so they stay visible on any bar and on the white page."""
    return {"ecolor": ERROR_COLOUR, "elinewidth": linewidth, "capsize": capsize,
            "capthick": linewidth}


def halo_error_bars(container: Any) -> None:
    """Give an ``ErrorbarContainer``'s (or a ``BarContainer``'s) interval lines and caps a
    white halo and put them above the bars: black on a light bar or the page, white around
    it on a dark one (fedavg-all's black bar), so an interval is never lost in its bar."""
    from matplotlib import patheffects

    bars = getattr(container, "errorbar", None) or container
    _, caps, lines = bars.lines
    for artist in [*caps, *lines]:
        width = float(np.max(artist.get_linewidth())) if hasattr(artist, "get_linewidth") \
            else 0.7
        artist.set_path_effects([patheffects.withStroke(linewidth=width + 1.6,
                                                        foreground=ERROR_HALO),
                                 patheffects.Normal()])
        artist.set_zorder(3.5)


HATCHES = ["", "////", "\\\\", "....", "xxxx", "oo"]


def bar_hatches(styles: dict[str, dict[str, str]]) -> dict[str, str]:
    """A hatch per series for bar charts, so series that share a colour (a family) differ."""
    seen: dict[str, int] = {}
    out = {}
    for name in sorted(styles):
        k = seen.get(styles[name]["color"], 0)
        seen[styles[name]["color"]] = k + 1
        out[name] = HATCHES[k % len(HATCHES)]
    return out


DECADE = 10.0
"""Positive values whose largest is more than this many times their smallest get a log axis
(under ``auto``: :func:`set_value_scale`)."""


def spans_decade(values: Iterable[float] | np.ndarray) -> bool:
    """Whether the positive, finite ``values`` span more than a decade (max / min > 10)."""
    x = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    return bool(x.size > 1 and x.max() > DECADE * x.min())


def set_value_scale(ax: Any, axis: str, values: Iterable[float] | np.ndarray,
                    from_zero: bool = False) -> str:
    """Scale an axis of values (energy, time, loss) as the figures are drawn now
    (:func:`netsim.figures.value_scale`): ``log`` or ``linear`` as asked, else (``auto``)
    logarithmic where ``values`` span more than a decade (:func:`spans_decade`). Returns the
    scale set: ``log`` or ``linear``.

    ``values`` are what the decision reads: the means drawn (bar lengths, the series' final
    values), not their intervals. ``from_zero``: the series start at 0 (bars, cumulative
    curves); on a log axis they then rise from the decade below a tenth of the smallest
    value, so the shortest bar still shows its length.
    """
    import math

    from netsim.figures import value_scale

    x = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    positive = x[np.isfinite(x) & (x > 0)]
    mode = value_scale()
    log = bool(positive.size) and (mode == "log" or (mode == "auto" and spans_decade(positive)))
    setter = ax.set_xscale if axis == "x" else ax.set_yscale
    if not log:
        setter("linear")
        return "linear"
    setter("log")
    lo = 10.0 ** math.floor(math.log10(float(positive.min()) / 10)) if from_zero \
        else float(positive.min()) / 1.5
    hi = float(positive.max()) * (1.25 if from_zero else 1.5)
    current = ax.get_xlim() if axis == "x" else ax.get_ylim()
    # (the values' range with a margin: an interval reaching 0 would stretch a log axis over
    # decades nothing is drawn in; it runs off the axis instead)
    limits = (lo, max(hi, min(float(max(current)), hi * 10)))
    (ax.set_xlim if axis == "x" else ax.set_ylim)(limits)
    return "log"


def figure(ncols: int = 1, nrows: int = 1, wide: bool = False, **kwargs):
    """A styled figure and its axes (``plt.subplots`` with netsim's paper defaults)."""
    plt.rcParams.update(RC)  # type: ignore[arg-type]  # matplotlib's stubs take only literal rc names
    size = TWO_COLUMN_IN if wide or ncols > 1 else ONE_COLUMN_IN
    return plt.subplots(nrows, ncols, figsize=(size[0], size[1] * nrows), **kwargs)
