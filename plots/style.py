"""Paper style for every netsim figure: one column wide, readable, colour-blind safe.

Colours are the Okabe-Ito palette (safe for the common colour-vision deficiencies). Each policy
has one colour, line style and marker in every figure (:data:`POLICY_STYLES`,
:func:`style_for`); line style and marker keep series apart in greyscale.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import matplotlib

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


# One colour, line style and marker per policy, the same in every figure (Okabe-Ito colours;
# line style and marker keep series apart in greyscale and where lines overlap). A family shares
# a hue: a method and its optimum reference differ by line style and marker.
POLICY_STYLES: dict[str, dict[str, str]] = {
    "pact": {"color": "#0072B2", "linestyle": "-", "marker": "o"},
    "pact-optimum": {"color": "#0072B2", "linestyle": ":", "marker": "*"},
    "pact-no-compression": {"color": "#56B4E9", "linestyle": "--", "marker": "<"},
    "pact-all-nodes": {"color": "#56B4E9", "linestyle": "-.", "marker": ">"},
    "compress-first": {"color": "#56B4E9", "linestyle": ":", "marker": "X"},
    "depl": {"color": "#D55E00", "linestyle": "-", "marker": "s"},
    "depl-optimum": {"color": "#D55E00", "linestyle": ":", "marker": "*"},
    "depl-mean": {"color": "#E69F00", "linestyle": "--", "marker": "h"},
    "depl-margin": {"color": "#E69F00", "linestyle": "-.", "marker": "p"},
    "full-model": {"color": "#E69F00", "linestyle": ":", "marker": "d"},
    "never-switch": {"color": "#CC79A7", "linestyle": ":", "marker": "H"},
    "fedavg-all": {"color": "#000000", "linestyle": "--", "marker": "^"},
    "greedy-energy": {"color": "#009E73", "linestyle": "-.", "marker": "D"},
    "fastest-k": {"color": "#CC79A7", "linestyle": "--", "marker": "v"},
    "random-k": {"color": "#009E73", "linestyle": ":", "marker": "P"},
    "overselect": {"color": "#009E73", "linestyle": "--", "marker": "X"},  # random-k's family
    "fedbuff": {"color": "#CC79A7", "linestyle": "-", "marker": "o"},  # asynchronous family
    "fedasync": {"color": "#CC79A7", "linestyle": "-.", "marker": "s"},
    "hierfavg": {"color": "#56B4E9", "linestyle": "-", "marker": "D"},  # hierarchical family
    "rfl-ha": {"color": "#56B4E9", "linestyle": "--", "marker": "o"},
    "async-hfl": {"color": "#56B4E9", "linestyle": "-.", "marker": "^"},
    "cloud-only": {"color": "#009E73", "linestyle": "-", "marker": "s"},  # random-k's family
    "baechi": {"color": "#000000", "linestyle": "-", "marker": "x"},
    "m-topo": {"color": "#0072B2", "linestyle": "-", "marker": "o"},
    "m-etf": {"color": "#E69F00", "linestyle": "--", "marker": "s"},
    "m-sct": {"color": "#009E73", "linestyle": "-.", "marker": "^"},
    "single": {"color": "#000000", "linestyle": "--", "marker": ""},
}
LINE_COLOURS = [c for c in OKABE_ITO if c != "#F0E442"]  # yellow is too pale for lines on white
COMBOS = [{"color": c, "linestyle": ls, "marker": m} for ls in LINESTYLES for m in MARKERS
          for c in LINE_COLOURS]


def register_style(name: str, color: str, linestyle: str = "-", marker: str = "o") -> None:
    """Give a policy (or any series name) a fixed style in every netsim figure."""
    POLICY_STYLES[name] = {"color": color, "linestyle": linestyle, "marker": marker}


def _base_name(name: str) -> str:
    """The registered policy a label names: ``random-k {"k": 5}`` and ``random-k(k=5)`` ->
    ``random-k``; a label that names none is its own."""
    head = name.split(" ")[0].split("(")[0].split("{")[0]
    return head if head in POLICY_STYLES else name


def policy_style(name: str) -> dict[str, str]:
    """The style of a series name: registered, else a combination picked by a stable hash of
    the name (the same in every figure and process)."""
    if name in POLICY_STYLES:
        return dict(POLICY_STYLES[name])
    digest = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
    return dict(COMBOS[digest % len(COMBOS)])


def style_for(names: Iterable[str]) -> dict[str, dict[str, str]]:
    """A style per series name, the same in every figure: registered names keep theirs; a
    label of a registered policy with parameters keeps its hue with another line style and
    marker; other names get :func:`policy_style`'s, moved to the next free combination if two
    series of one figure would otherwise look alike."""
    names = sorted(set(names))
    out: dict[str, dict[str, str]] = {n: policy_style(n) for n in names if n in POLICY_STYLES}
    used = {tuple(s.values()) for s in out.values()}
    for name in (n for n in names if n not in POLICY_STYLES):
        base = _base_name(name)
        candidates = [c for c in COMBOS if c["color"] == POLICY_STYLES[base]["color"]] \
            if base in POLICY_STYLES else COMBOS
        digest = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
        for k in range(len(candidates)):
            style = candidates[(digest + k) % len(candidates)]
            if tuple(style.values()) not in used:
                break
        out[name] = dict(style)
        used.add(tuple(style.values()))
    return out


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


def figure(ncols: int = 1, nrows: int = 1, wide: bool = False, **kwargs):
    """A styled figure and its axes (``plt.subplots`` with netsim's paper defaults)."""
    plt.rcParams.update(RC)  # type: ignore[arg-type]  # matplotlib's stubs take only literal rc names
    size = TWO_COLUMN_IN if wide or ncols > 1 else ONE_COLUMN_IN
    return plt.subplots(nrows, ncols, figsize=(size[0], size[1] * nrows), **kwargs)
