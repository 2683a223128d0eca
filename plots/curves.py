"""Recorded federated runs against netsim's prediction (docs/curves.md): the figure
``recorded-curves``.

Reads the recorded tables shipped with netsim (netsim/data/curves/, through
:mod:`netsim.training.recorded`) and never simulates: the prediction is the fitted entry's
closed-form mean curve and 10-90 % band (:func:`netsim.training.recorded.predict`).

- :func:`recorded_curves`: for one recorded table (``mnist``: the MNIST CNN, ``cifar``:
  VGG-11 on CIFAR-10), one panel per setting the progress model covers: test accuracy against
  round, the real runs (their mean and the seeds' min-max band, or the single run) beside the
  predicted mean accuracy and the predicted 10-90 % band; the panel's title says whether the
  setting was fitted, held back or (diverged) not fitted; a run that diverged (NaN loss) is
  drawn dashed and left out of the real mean and band, as the fit leaves it out. MNIST's
  rounds (1,000) are on a log axis and its 97 % target is drawn; CIFAR-10's 100 rounds are on a
  linear one. ``netsim calibrate --recorded mnist|cifar --figure DIR`` writes it.
- :func:`recorded_curves_for` (registered as ``recorded-curves``): the figure of each recorded
  table whose fitted constants the given runs used (their ``loss_source`` says ``fitted by
  `netsim calibrate --recorded mnist``` or ``... cifar``: models ``cnn-mnist`` and
  ``vgg11-cifar10`` with their shipped entries, as scenarios ``fedavg-mnist`` and
  ``fednova-cifar`` run), keyed by the table's name; None for runs of any other model. The
  figure shows the recorded runs, not the given ones, so its caption names the recorded file
  (not the results' scenario).
"""

from __future__ import annotations

import os
import re
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from netsim.figures import caption_text
from netsim.scenario.schema import LossParams
from netsim.sweep.results import Results
from netsim.training import recorded as rec
from plots.style import OKABE_ITO, figure, legend_outside

#: The figure's name in the registry (one figure per recorded table: ``recorded-curves-mnist``).
NAME = "recorded-curves"
REAL = OKABE_ITO[0]  # blue: the recorded runs
PREDICTED = OKABE_ITO[1]  # vermillion: netsim's prediction
NCOLS = 3
#: What a run's ``loss_source`` starts with when its model's constants come from this fit.
FITTED_SOURCE = re.compile(r"fitted by `netsim calibrate --recorded (\w+)`")
#: The legend's order (a panel draws only what its setting has).
LEGEND_ORDER = ("real runs: seeds' min-max", "real runs: mean", "real run",
                "real run that diverged (left out)", "predicted mean", "predicted 10-90 % band")


@cache
def fitted(name: str) -> rec.RecordedFit:
    """The fit of the recorded table ``name`` with its default held-back settings (as
    ``netsim calibrate --recorded NAME`` fits it; once per process)."""
    return rec.fit_recorded(rec.load(name))


def role(fit: rec.RecordedFit, label: str) -> str:
    """``fitted``, ``held back`` or ``not fitted`` (``diverged, not fitted`` where every run
    of the setting diverged) for a panel's title."""
    if label in fit.fit_settings:
        return "fitted"
    if label in fit.held_out:
        return "held back"
    clean = rec.clean_runs(fit.data)
    return "not fitted" if (clean["setting"] == label).any() else "diverged, not fitted"


def runs_of(data: rec.Recorded, label: str) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """One setting's recorded accuracy (rounds >= 1): a ``round x seed`` table of the runs that
    did not diverge, and each diverged run's rows."""
    diverged = {i.seed for i in rec.incidents(data) if i.setting == label and i.kind == "diverged"}
    rows = data.table[(data.table["setting"] == label) & (data.table["round"] >= 1)]
    rows = rows.dropna(subset=["accuracy"])
    clean = rows[~rows["seed"].isin(diverged)].pivot_table(index="round", columns="seed",
                                                           values="accuracy")
    bad = [grp.sort_values("round") for seed, grp in rows.groupby("seed") if seed in diverged]
    return clean.sort_index(), bad


def _caption(fig: Any, data: rec.Recorded, settings: list[str]) -> None:
    """The provenance caption and file metadata (:func:`netsim.figures.annotate`'s, naming
    the recorded file instead of a scenario: these runs were not simulated)."""
    import netsim

    rows = data.table[data.table["setting"].isin(settings)]
    seeds = sorted({int(s) for s in rows["seed"]})
    runs = len(rows.groupby(["setting", "seed"]))
    seeds_text = (f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 2
                  and seeds == list(range(seeds[0], seeds[-1] + 1))
                  else ", ".join(str(s) for s in seeds))
    meta = {"name": f"{NAME}-{data.name}",
            "scenario": f"none (recorded runs, netsim/data/curves/{data.file})",
            "sweep": "", "seeds": seeds_text, "runs": str(runs), "per_bar": "",
            "netsim": str(netsim.__version__)}
    fig.netsim_meta = meta
    fig.text(0.01, 0.0, caption_text(meta), ha="left", va="top", fontsize=5, color="0.35")


def _panel(ax: Any, data: rec.Recorded, label: str, prediction: rec.Prediction) -> None:
    """One setting: the real runs, the predicted mean and its 10-90 % band."""
    clean, diverged = runs_of(data, label)
    r = prediction.rounds
    ax.fill_between(r, prediction.accuracy_low, prediction.accuracy_high, color=PREDICTED,
                    alpha=0.2, linewidth=0, label=LEGEND_ORDER[5])
    if clean.shape[1] > 1:
        ax.fill_between(clean.index, clean.min(axis=1), clean.max(axis=1), color=REAL,
                        alpha=0.3, linewidth=0, label=LEGEND_ORDER[0])
    if clean.shape[1]:
        ax.plot(clean.index, clean.mean(axis=1), color=REAL, linewidth=1.0,
                label=LEGEND_ORDER[1] if clean.shape[1] > 1 else LEGEND_ORDER[2])
    for run in diverged:
        ax.plot(run["round"], run["accuracy"], color=REAL, linestyle="--", linewidth=0.8,
                label=LEGEND_ORDER[3])
    ax.plot(r, prediction.accuracy, color=PREDICTED, linestyle="-.", linewidth=1.2,
            label=LEGEND_ORDER[4])


def recorded_curves(data: rec.Recorded | str, fit: rec.RecordedFit | None = None,
                    entry: LossParams | None = None) -> Any:
    """Real accuracy curves against netsim's prediction, one panel per modelled setting of a
    recorded table (the module docstring).

    Parameters
    ----------
    data: the recorded table, or its name (``mnist``, ``cifar``).
    fit: its fit (default: the default held-back settings' fit, :func:`fitted` by name); the
        figure draws ``fit.data``.
    entry: the constants that predict (default: ``fit.entry()``, as written to
        loss_params.yaml).
    """
    if fit is None:  # a table by name: its default fit, once per process
        fit = fitted(data) if isinstance(data, str) else rec.fit_recorded(data)
    data = fit.data
    entry = entry or fit.entry()
    settings = data.modelled
    last = int(data.table["round"].max())
    nrows = -(-len(settings) // NCOLS)
    fig, axes = figure(ncols=NCOLS, nrows=nrows, wide=True, sharex=True, sharey=True)
    axes = np.ravel(axes)
    for ax, label in zip(axes, settings, strict=False):
        _panel(ax, data, label, rec.predict(entry, data.settings[label], last))
        what = role(fit, label)
        ax.set_title(f"{label} ({what})", fontweight="bold" if what == "held back" else None)
    if data.target == "rounds":  # MNIST: 1,000 rounds; the target decides early
        for ax in axes[: len(settings)]:
            ax.axhline(data.target_accuracy, color="grey", linestyle=":", linewidth=0.8,
                       label=f"target {100 * data.target_accuracy:g} %")
        axes[0].set(xscale="log", xlim=(1, last), ylim=(0.8, 1.0))
    else:
        axes[0].set(xlim=(1, last), ylim=(data.chance, None))
    for ax in axes[: len(settings)]:
        if _nothing_below(ax, axes, settings):
            ax.set_xlabel("round" + (" (log scale)" if data.target == "rounds" else ""))
            ax.tick_params(labelbottom=True)
        if ax.get_subplotspec().is_first_col():
            ax.set_ylabel("test accuracy")
    fig.suptitle(f"{data.model}: recorded runs against netsim's prediction", fontsize=8)
    fig.tight_layout()
    _legend(fig, axes, settings)
    _caption(fig, data, settings)
    return fig


def _nothing_below(ax: Any, axes: np.ndarray, settings: list[str]) -> bool:
    """Whether the panel has no drawn panel under it (its x labels then show)."""
    index = list(axes).index(ax)
    return index + NCOLS >= len(settings)


def _legend(fig: Any, axes: np.ndarray, settings: list[str]) -> None:
    """One legend for every panel (what any panel drew, once), in the first empty cell (else
    right of the figure)."""
    found: dict[str, Any] = {}
    for ax in axes[: len(settings)]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(label, handle)
    labels = sorted(found, key=lambda k: LEGEND_ORDER.index(k) if k in LEGEND_ORDER
                    else len(LEGEND_ORDER))
    handles = [found[k] for k in labels]
    empty = list(axes[len(settings):])
    if not empty:
        legend_outside(fig, handles, labels, bbox_to_anchor=(1.0, 0.9))
        return
    box = empty[0].get_position()
    for ax in empty:
        fig.delaxes(ax)
    fig.legend(handles, labels, loc="center", frameon=False,
               bbox_to_anchor=(box.x0, box.y0, box.width, box.height))


def tables_used(runs: pd.DataFrame) -> list[str]:
    """The recorded tables whose fitted constants ``runs`` used (by their ``loss_source``)."""
    if "loss_source" not in runs:
        return []
    found = runs["loss_source"].dropna().astype(str).str.extract(FITTED_SOURCE)[0].dropna()
    return sorted(set(found) & set(rec.LOADERS))


def uses_recorded_fit(runs: pd.DataFrame) -> pd.Series:
    """The runs whose model's constants were fitted to recorded runs (the registry's
    selector of ``recorded-curves``)."""
    if "loss_source" not in runs:
        return pd.Series(False, index=runs.index)
    found = runs["loss_source"].astype(str).str.extract(FITTED_SOURCE)[0]
    return found.isin(list(rec.LOADERS))


def recorded_curves_for(results: Results) -> dict[str, Any] | None:
    """Recorded runs of the runs' fitted model (cnn-mnist, vgg11-cifar10) against netsim's
    prediction: test accuracy vs round, one panel per setting.

    One figure per recorded table whose fitted constants the runs used (keyed ``mnist``,
    ``cifar``); None where no run did. Read from netsim/data/curves, never simulated."""
    names = tables_used(results.runs)
    return {name: recorded_curves(name) for name in names} or None


def write(name: str, out_dir: str | os.PathLike, fit: rec.RecordedFit | None = None,
          entry: LossParams | None = None, formats: tuple[str, ...] = ("png",)) -> list[str]:
    """Draw the figure of the recorded table ``name`` and save it as
    OUT_DIR/recorded-curves-NAME.png (and the other ``formats``); returns the paths."""
    from plots.style import save

    fig = recorded_curves(fit.data if fit is not None else name, fit, entry)
    return [str(p) for p in save(fig, os.path.join(out_dir, f"{NAME}-{name}"), formats)]


def main(argv: list[str] | None = None) -> int:
    """``python -m plots.curves mnist cifar --out DIR``: each recorded table's figure, with
    the fit ``netsim calibrate --recorded`` makes (its default held-back settings)."""
    import argparse

    ap = argparse.ArgumentParser(description="recorded runs against netsim's prediction")
    ap.add_argument("tables", nargs="+", choices=sorted(rec.LOADERS))
    ap.add_argument("--out", required=True, help="folder for recorded-curves-NAME.png")
    args = ap.parse_args(argv)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        ap.error(f"--out: {args.out!r} exists and is not a folder")
    for name in args.tables:
        for written in write(name, args.out):
            print(f"figure: {written}")
    return 0


__all__ = ["fitted", "main", "recorded_curves", "recorded_curves_for", "runs_of",
           "tables_used", "uses_recorded_fit", "write"]


if __name__ == "__main__":
    raise SystemExit(main())
