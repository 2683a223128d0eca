"""The figure registry: figures found through the entry-point group ``netsim.figures``.

``netsim figures --results DIR --out FIGDIR`` and ``netsim report DIR`` draw every registered
figure from stored results (never simulating). A package registers a figure by declaring a
:class:`FigureEntry` under the group in its metadata (netsim's own live in plots/registry.py)::

    [options.entry_points]
    netsim.figures =
        pact-energy-vs-devices = mypkg.figures:ENERGY_VS_DEVICES

    ENERGY_VS_DEVICES = figure("pact-energy-vs-devices", energy_vs_devices,
                               runs={"sweep": "pact-scale"})

``runs`` selects the runs that feed it: a mapping ``column -> value or list of values`` over the
runs table as :func:`netsim.sweep.results.load_results` returns it (run columns such as
``policy``, ``scenario``, ``status``; ``sweep``, ``point_label``, ``policy_label``; each sweep
axis by its dotted path), or a function ``runs DataFrame -> bool mask``; ``None`` means every
run. A plot function takes a :class:`~netsim.sweep.results.Results` and returns a matplotlib
figure, a mapping ``suffix -> figure`` (written as ``NAME-SUFFIX``), or ``None`` when it has
nothing to draw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from netsim.plugins import FIGURES, group
from netsim.sweep.results import Results

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


@cache
def registered_figures() -> dict[str, FigureEntry]:
    """Every figure declared under the entry-point group ``netsim.figures`` (netsim's own in
    plots/, and any installed package's), by name, sorted; loaded once per process.

    Raises
    ------
    TypeError
        If an entry point loads something other than a :class:`FigureEntry`.
    """
    out = {}
    for name, ep in group(FIGURES).items():
        entry = ep.load()
        if not isinstance(entry, FigureEntry):
            raise TypeError(f"entry point {name!r} of group {FIGURES!r} loads {entry!r}, "
                            "not a netsim.figures.FigureEntry")
        out[name] = entry if entry.name == name else FigureEntry(name, entry.plot, entry.runs,
                                                                 entry.description)
    return out


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
    for entry in entries if entries is not None else registered_figures().values():
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


def save(fig: Any, out_base: str | Path, formats: tuple[str, ...] = ("png", "pdf")) -> list[Path]:
    """Write ``fig`` as OUT_BASE.png and OUT_BASE.pdf (folders created), close it; returns the
    paths."""
    import matplotlib.pyplot as plt

    base = Path(out_base)
    base.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = base.with_name(f"{base.name}.{fmt}")  # names may contain dots (x=0.3)
        fig.savefig(path)
        paths.append(path)
    plt.close(fig)
    return paths
