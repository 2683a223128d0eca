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

Every drawn figure carries where it comes from (:func:`annotate`): a small caption line under
it (scenario names, seeds, run count, netsim version; a figure of one run per policy names
what it drew, :func:`drawn_from`) and the same in the PNG's and PDF's metadata (:func:`save`). :func:`overlapping_texts` finds text that collides in a rendered
figure (the tests hold every registered figure to none).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from netsim.plugins import FIGURES, load_group
from netsim.scenario.errors import Problem
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
    """One registry line (see the module docstring); the description defaults to the plot
    function's first docstring sentence."""
    return FigureEntry(name, plot, runs, description or first_sentence(plot.__doc__ or ""))


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


@cache
def registered_figures() -> dict[str, FigureEntry]:
    """Every figure declared under the entry-point group ``netsim.figures`` (netsim's own in
    plots/, and any installed package's), by name, sorted; loaded once per process. One
    that fails to load, or loads something other than a :class:`FigureEntry`, is skipped
    with a warning naming it (:func:`netsim.plugins.load_group`)."""
    return load_group(FIGURES, _figure_entry)


def _figure_entry(entry: Any, name: str) -> FigureEntry:
    """The :class:`FigureEntry` an entry point loads, under the entry point's ``name``."""
    if not isinstance(entry, FigureEntry):
        raise TypeError(f"entry point {name!r} of group {FIGURES!r} loads {entry!r}, "
                        "not a netsim.figures.FigureEntry")
    return entry if entry.name == name else FigureEntry(name, entry.plot, entry.runs,
                                                        entry.description)


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


SCALES = ("auto", "log", "linear")
"""How figures scale their value axes (energy, time, loss): ``auto`` (logarithmic where the
plotted values span more than a decade, :func:`plots.style.set_value_scale`), or every such
axis ``log`` or ``linear`` (``netsim figures --log`` / ``--linear``, as ``netsim report``)."""

_scale: ContextVar[str] = ContextVar("netsim_figure_scale", default="auto")


def value_scale() -> str:
    """The value-axis scale figures are drawn with now: one of :data:`SCALES`."""
    return _scale.get()


@contextmanager
def scale(mode: str) -> Iterator[None]:
    """Draw the figures inside the ``with`` block with value axes ``mode`` (:data:`SCALES`).

    Raises
    ------
    ValueError
        If ``mode`` is not one of :data:`SCALES`.
    """
    if mode not in SCALES:
        raise ValueError(f"scale {mode!r} is not one of {', '.join(SCALES)}")
    token = _scale.set(mode)
    try:
        yield
    finally:
        _scale.reset(token)


@dataclass(frozen=True)
class Drawn:
    """One drawn figure (``figure`` set) or why an entry drew none (``note``)."""

    name: str
    figure: Any = None
    note: str = ""
    error: bool = False


def draw(results: Results, entries: list[FigureEntry] | None = None,
         only: list[str] | None = None, value_axes: str = "auto") -> Iterator[Drawn]:
    """Draw each registered figure from ``results``; one :class:`Drawn` per figure or skip.

    ``value_axes``: how energy, time and loss axes are scaled (:data:`SCALES`). A plot
    function that raises yields a ``Drawn`` with ``error=True`` and the message; the other
    figures are still drawn.
    """
    for entry in entries if entries is not None else registered_figures().values():
        if only and entry.name not in only:
            continue
        try:
            chosen = results.select(select_mask(results.runs, entry.runs))
            if chosen.runs.empty:
                yield Drawn(entry.name, note="no runs match its selector")
                continue
            with scale(value_axes):
                drawn = entry.plot(chosen)
        except Exception as exc:  # one broken figure must not stop the others
            yield Drawn(entry.name, note=f"{type(exc).__name__}: {exc}", error=True)
            continue
        if drawn is None or (isinstance(drawn, Mapping) and not drawn):
            yield Drawn(entry.name, note="nothing to draw for these runs")
        elif isinstance(drawn, Mapping):
            for suffix, fig in drawn.items():
                yield Drawn(f"{entry.name}-{suffix}", annotate(fig, chosen,
                                                               f"{entry.name}-{suffix}"))
        else:
            yield Drawn(entry.name, annotate(drawn, chosen, entry.name))


def drawn_from(fig: Any, run_ids: Iterable[str]) -> Any:
    """Mark ``fig`` as drawn from these runs only (one run of each policy, say, of the many
    it was given): its caption and metadata then name their scenarios, seeds and count
    (``seed 0; 1 run``), not those of every run it was given (:func:`annotate`). Returns
    ``fig``."""
    fig.netsim_runs = [str(r) for r in run_ids]
    return fig


def _seeds_text(seeds: list[int]) -> str:
    """``0-9`` for a run of seeds, else up to six listed (``0, 2, 5``)."""
    if not seeds:
        return "-"
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]}"
    shown = ", ".join(str(s) for s in seeds[:6])
    return shown + (f", ... ({len(seeds)})" if len(seeds) > 6 else "")


def provenance(results: Results) -> dict[str, str]:
    """Where a figure's data come from: scenario names, seeds, runs, netsim version."""
    import netsim

    runs = results.runs
    names = sorted({str(n) for n in runs.get("scenario", pd.Series(dtype=object)).dropna()})
    sweeps = sorted({str(s) for s in runs.get("sweep", pd.Series(dtype=object)).dropna() if s})
    seeds = sorted({int(s) for s in runs["seed"].dropna()}) if "seed" in runs else []
    scen = ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")
    return {"scenario": scen, "sweep": ", ".join(sweeps), "seeds": _seeds_text(seeds),
            "runs": str(len(runs)), "per_bar": _runs_per_bar(runs),
            "netsim": str(netsim.__version__)}


def _runs_per_bar(runs: pd.DataFrame) -> str:
    """How many runs stand behind each bar, line or interval: the fewest and most runs (not
    failed) per scenario point and policy, as ``"10"`` or ``"8-10"``; empty if unknown."""
    keys = [k for k in ("sweep", "point", "policy_label") if k in runs]  # (points per sweep)
    if keys in ([], ["sweep"]) or runs.empty:
        return ""
    ok = runs[runs["status"] != "failed"] if "status" in runs else runs
    counts = ok.groupby(keys, sort=False, dropna=False).size()
    if counts.empty:
        return "0"
    lo, hi = int(counts.min()), int(counts.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def caption_text(meta: Mapping[str, str]) -> str:
    """The caption line: ``scenario default; sweep smoke; seeds 0-9; 60 runs, 10 per policy
    and point; netsim 0.2.0`` (the runs per policy and point: what stands behind each bar or
    interval, failed runs left out); a figure of one run: ``...; seed 0; 1 run; ...``, of
    one run per policy: ``seed 0; 3 runs, 1 per policy and point``."""
    parts = [f"scenario {meta['scenario']}"] + ([f"sweep {meta['sweep']}"] if meta["sweep"]
                                                else [])
    per_bar = meta.get("per_bar", "")
    count = meta["runs"]
    runs = f"{count} run{'' if count == '1' else 's'}" + (
        f", {per_bar} per policy and point" if per_bar and count != "1" else "")
    seeds = meta["seeds"]
    one_seed = seeds.isdigit() or (seeds.startswith("-") and seeds[1:].isdigit())
    return "; ".join(parts + [f"seed{'' if one_seed else 's'} {seeds}", runs,
                              f"netsim {meta['netsim']}"])


def annotate(fig: Any, results: Results, name: str = "") -> Any:
    """Add the provenance caption under ``fig`` (once) and keep it for :func:`save`'s
    metadata; returns ``fig``. A figure marked by :func:`drawn_from` is captioned with the
    runs it drew, not every run of ``results``."""
    if getattr(fig, "netsim_meta", None) is not None:
        return fig
    drawn = getattr(fig, "netsim_runs", None)
    if drawn is not None and "run_id" in results.runs:
        results = results.select(results.runs["run_id"].astype(str).isin(drawn))
    meta = {"name": name, **provenance(results)}
    fig.netsim_meta = meta
    fig.text(0.01, 0.0, caption_text(meta), ha="left", va="top", fontsize=5, color="0.35")
    return fig


def overlapping_texts(fig: Any, tolerance_px: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty texts of ``fig`` whose rendered boxes overlap (by more than
    ``tolerance_px`` pixels each way), plus any legend that overlaps its axes' plotting area
    (as ``("legend", axes title)``): both should be empty for a figure fit to print."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    hidden = set()  # tick labels matplotlib keeps but does not draw: ticks outside the view
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            span = (hi - lo) * 1e-9
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - span <= tick.get_loc() <= hi + span:
                    hidden.update({id(tick.label1), id(tick.label2)})
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
             and id(t) not in hidden]
    boxes = [(t.get_text(), t.get_window_extent(renderer).expanded(1, 1)) for t in texts]
    out = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            w = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            h = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if w > tolerance_px and h > tolerance_px:
                out.append((a, b))
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            lb, ab = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
            if lb.x0 < ab.x1 - tolerance_px and lb.x1 > ab.x0 + tolerance_px \
                    and lb.y0 < ab.y1 - tolerance_px and lb.y1 > ab.y0 + tolerance_px:
                out.append(("legend", ax.get_title() or "axes"))
    return out


def metadata(fig: Any, fmt: str) -> dict[str, str]:
    """The file metadata of an annotated figure (PNG text chunks, PDF info keys)."""
    import netsim

    meta = getattr(fig, "netsim_meta", None) or {}
    info = {"Title": meta.get("name", ""), "Creator": f"netsim {netsim.__version__}"}
    if meta:
        info["Subject"] = caption_text(meta)
        info["Keywords"] = "; ".join(f"{k}={v}" for k, v in meta.items() if k != "name")
    if fmt == "png":
        info = {**info, "Software": info.pop("Creator"), "Description": info.pop("Subject", "")}
    return {k: v for k, v in info.items() if v}


def extra_artists(fig: Any) -> list[Any]:
    """What a saved file must hold besides the axes: legends (some kept out of
    ``tight_layout``, outside the axes) and the figure's texts (the caption)."""
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return legends + list(fig.texts)


FORMATS = ("png", "pdf")
"""The files :func:`save` writes per figure."""


def is_own_figure(path: str | Path) -> bool:
    """Whether the PNG or PDF file at ``path`` is one :func:`save` wrote: its metadata name
    netsim as the software (PNG text chunk ``Software``, PDF ``/Creator``)."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(size - 65536, 0))
            tail = f.read()
    except OSError:
        return False
    return b"tEXtSoftware\x00netsim " in head or b"/Creator (netsim " in head + tail


def replace_figure_problems(folder: str | Path, names: Iterable[str],
                            flag: str = "--out") -> list[Problem]:
    """The files in ``folder`` that saving the figures ``names`` could replace (``NAME.png``,
    ``NAME.pdf``, and ``NAME-*`` for figures drawn in parts) and that netsim did not write
    (:func:`is_own_figure`): each a problem, so that a user's own file is never replaced
    (as ``netsim report --out``). Empty when there are none."""
    root = Path(folder)
    if not root.is_dir():
        return []
    out = []
    for name in names:
        for fmt in FORMATS:
            for path in sorted({*root.glob(f"{name}.{fmt}"), *root.glob(f"{name}-*.{fmt}")}):
                if path.is_file() and not is_own_figure(path):
                    out.append(Problem(flag, f"{str(path)!r} exists and is not a figure netsim "
                                             "wrote; netsim replaces only its own (give "
                                             "another folder, or move that file first)"))
    return out


def save(fig: Any, out_base: str | Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Write ``fig`` as OUT_BASE.png and OUT_BASE.pdf (vector; folders created) with its
    provenance in the files' metadata, close it; returns the paths."""
    import matplotlib.pyplot as plt

    base = Path(out_base)
    base.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = base.with_name(f"{base.name}.{fmt}")  # names may contain dots (x=0.3)
        fig.savefig(path, metadata=metadata(fig, fmt), bbox_inches="tight",
                    bbox_extra_artists=extra_artists(fig))
        paths.append(path)
    plt.close(fig)
    return paths
