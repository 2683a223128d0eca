"""The figure registry: each paper figure, the function in plots/ that draws it, and its runs.

``netsim figures --results DIR --out FIGDIR`` and ``netsim report DIR`` draw every entry of
:data:`FIGURES` from stored results (never simulating). To add a figure, add one line::

    figure("pact-energy-vs-devices", pact_plots.energy_vs_devices, runs={"sweep": "pact-scale"}),

``runs`` selects the runs that feed it: a mapping ``column -> value or list of values`` over the
runs table as :func:`netsim.sweep.results.load_results` returns it (run columns such as
``policy``, ``scenario``, ``status``; ``sweep``, ``point_label``, ``policy_label``; each sweep
axis by its dotted path), or a function ``runs DataFrame -> bool mask``; ``None`` means every
run. A plot function takes a :class:`Results` and returns a figure, a mapping
``suffix -> figure`` (written as ``NAME-SUFFIX``), or ``None`` when it has nothing to draw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from netsim.sweep.results import Results
from plots import compare

Selector = Mapping[str, Any] | Callable[[pd.DataFrame], pd.Series] | None


@dataclass(frozen=True)
class FigureEntry:
    """A registered figure: its name, its plot function, which runs feed it, what it shows."""

    name: str
    plot: Callable[[Results], Any]
    runs: Selector = None
    description: str = ""


def figure(name: str, plot: Callable[[Results], Any], runs: Selector = None,
           description: str = "") -> FigureEntry:
    """One registry line (see the module docstring)."""
    return FigureEntry(name, plot, runs, description or (plot.__doc__ or "").split("\n")[0])


FIGURES: list[FigureEntry] = [
    figure("energy-by-policy", compare.energy_by_policy),
    figure("energy-vs-time", compare.energy_time),
    figure("energy-vs-axis", compare.metric_vs_axis),
    figure("time-vs-axis", lambda r: compare.metric_vs_axis(r, "time_s"),
           description="Training time (s) vs each numeric sweep axis, a line per policy"),
    figure("loss-vs-time", compare.loss_vs_time),
    # PACT, DepL, Baechi: one line each, e.g.
    # figure("pact-energy-vs-devices", pact_plots.energy_vs_devices, runs={"sweep": "pact-scale"}),
]


def select_mask(runs: pd.DataFrame, selector: Selector) -> pd.Series:
    """Which runs a selector picks (a bool Series over ``runs``).

    Raises
    ------
    KeyError
        If a mapping selector names a column the runs table lacks.
    """
    if selector is None:
        return pd.Series(True, index=runs.index)
    if callable(selector):
        return pd.Series(selector(runs), index=runs.index).astype(bool)
    mask = pd.Series(True, index=runs.index)
    for column, wanted in selector.items():
        if column not in runs:
            raise KeyError(f"runs have no column {column!r} (selector of a figure)")
        values = wanted if isinstance(wanted, list | tuple | set) else [wanted]
        mask &= runs[column].isin(list(values))
    return mask


@dataclass(frozen=True)
class Drawn:
    """One drawn figure (``figure`` set) or why an entry drew none (``note``)."""

    name: str
    figure: Any = None
    note: str = ""
    error: bool = False


def draw(results: Results, entries: list[FigureEntry] | None = None,
         only: list[str] | None = None) -> Iterator[Drawn]:
    """Draw each registered figure from ``results``; one :class:`Drawn` per figure or skip.

    A plot function that raises yields a ``Drawn`` with ``error=True`` and the message; the
    other figures are still drawn.
    """
    for entry in entries if entries is not None else FIGURES:
        if only and entry.name not in only:
            continue
        try:
            chosen = results.select(select_mask(results.runs, entry.runs))
            if chosen.runs.empty:
                yield Drawn(entry.name, note="no runs match its selector")
                continue
            drawn = entry.plot(chosen)
        except Exception as exc:  # one broken figure must not stop the others
            yield Drawn(entry.name, note=f"{type(exc).__name__}: {exc}", error=True)
            continue
        if drawn is None or (isinstance(drawn, Mapping) and not drawn):
            yield Drawn(entry.name, note="nothing to draw for these runs")
        elif isinstance(drawn, Mapping):
            for suffix, fig in drawn.items():
                yield Drawn(f"{entry.name}-{suffix}", fig)
        else:
            yield Drawn(entry.name, drawn)
