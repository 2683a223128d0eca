"""Paper style for every netsim figure: one column wide, readable, colour-blind safe.

Colours are the Okabe-Ito palette (safe for the common colour-vision deficiencies); line
styles and markers cycle too, so series stay distinct in greyscale.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import cycle

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


def series_styles() -> Iterator[dict[str, str]]:
    """Endless (colour, linestyle, marker) combinations for successive series."""
    for i in cycle(range(len(OKABE_ITO) * len(LINESTYLES))):
        yield {"color": OKABE_ITO[i % len(OKABE_ITO)],
               "linestyle": LINESTYLES[(i // len(OKABE_ITO)) % len(LINESTYLES)],
               "marker": MARKERS[i % len(MARKERS)]}


def style_for(names: list[str]) -> dict[str, dict[str, str]]:
    """A stable style per series name (sorted), so a policy looks the same in every figure."""
    styles = series_styles()
    return {name: next(styles) for name in sorted(names)}


def figure(ncols: int = 1, nrows: int = 1, wide: bool = False, **kwargs):
    """A styled figure and its axes (``plt.subplots`` with netsim's paper defaults)."""
    plt.rcParams.update(RC)
    size = TWO_COLUMN_IN if wide or ncols > 1 else ONE_COLUMN_IN
    return plt.subplots(nrows, ncols, figsize=(size[0], size[1] * nrows), **kwargs)
