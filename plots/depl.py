"""Figures of DepL (issue 7): functions reading result tables, never simulating.

Each function takes the ``runs`` (and where needed ``epochs``) tables written by
``netsim.simulate(..., out=DIR)`` (read them with :func:`load_tables`) and writes OUT.png and
OUT.pdf through :mod:`plots.style` (Agg backend, Okabe-Ito colour-blind-safe palette, a stable
style per policy). The target probability pi of a run is read from its ``policy_params``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from plots.common import axis_label, mean_band_by
from plots.style import figure, legend_outside, save, style_for

DEPL = "depl"
ORDER = ("depl", "depl-mean", "depl-margin", "full-model", "never-switch", "depl-optimum")


def load_tables(folder: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs and epochs tables under ``folder``, runs with a ``pi`` column (NaN if unset)."""
    folder = Path(folder)
    runs = pd.read_parquet(folder / "runs")
    epochs = pd.read_parquet(folder / "epochs") if (folder / "epochs").exists() else None
    params = runs["policy_params"].map(lambda s: json.loads(s) if isinstance(s, str) else dict(s))
    runs["pi"] = params.map(lambda p: p.get("target_probability")).astype(float)
    return runs, epochs


def _policies(runs: pd.DataFrame) -> list[str]:
    names = list(runs["policy"].unique())
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def wilson(k: np.ndarray, n: np.ndarray, z: float = 1.96) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial proportion k / n (95 % by default)."""
    k, n = np.asarray(k, float), np.asarray(n, float)
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return centre - half, centre + half


def success_table(runs: pd.DataFrame, x: str = "pi") -> pd.DataFrame:
    """Success rate (target reached) per policy and ``x`` with its Wilson interval."""
    g = runs.groupby(["policy", x])["target_reached"].agg(["sum", "count"]).reset_index()
    g["success"] = g["sum"] / g["count"]
    g["lo"], g["hi"] = wilson(g["sum"].to_numpy(), g["count"].to_numpy())
    return g


def final_loss_cdf_figure(runs: pd.DataFrame, pi: float | None = None):
    """Empirical CDF of the final loss over seeds, one line per policy, L* marked.

    ``pi`` selects the runs planned for that target probability (default: the largest).
    """
    pi = float(runs["pi"].max()) if pi is None else pi
    sel = runs[np.isclose(runs["pi"], pi)]
    styles = style_for(_policies(runs))
    fig, ax = figure()
    for name in _policies(sel):
        loss = np.sort(sel.loc[sel.policy == name, "final_loss"].to_numpy())
        st = styles[name]
        ax.step(loss, np.arange(1, len(loss) + 1) / len(loss), where="post", label=name,
                color=st["color"], linestyle=st["linestyle"])
    target = float(sel["target_loss"].iloc[0])
    ax.axvline(target, color="black", linewidth=0.8)
    ax.axhline(pi, color="grey", linewidth=0.6, linestyle=":")
    ax.annotate(f"L* = {target:g}", (target, 0.02), xytext=(3, 0), textcoords="offset points")
    ax.set_xlabel(axis_label("final_loss"))
    ax.set_ylabel(f"fraction of runs (pi = {pi:g})")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def success_vs_pi_figure(runs: pd.DataFrame):
    """Success rate vs target probability pi with 95 % intervals; the diagonal is the promise."""
    tab = success_table(runs.dropna(subset=["pi"]))
    styles = style_for(_policies(runs))
    fig, ax = figure()
    for name in _policies(tab):
        t = tab[tab.policy == name].sort_values("pi")
        st = styles[name]
        ax.errorbar(t["pi"], t["success"], yerr=[t["success"] - t["lo"], t["hi"] - t["success"]],
                    label=name, color=st["color"], linestyle=st["linestyle"], marker=st["marker"],
                    markersize=3, capsize=2)
    lims = [min(0.4, tab["success"].min()), 1.0]
    ax.plot(lims, lims, color="black", linewidth=0.7, label="promise (success = pi)")
    ax.set_xlabel("target probability pi")
    ax.set_ylabel(axis_label("success"))
    legend_outside(ax)
    fig.tight_layout()
    return fig


def _cost_vs(runs: pd.DataFrame, x: str, xlabel: str):
    r = runs.dropna(subset=[x]).assign(policy_label=runs["policy"])
    tab = mean_band_by(r, x, "energy_j")
    styles = style_for(_policies(runs))
    fig, ax = figure()
    for name in _policies(r):
        t = tab[tab.policy_label == name].sort_values(x)
        st = styles[name]
        ax.plot(t[x], t["mean"], label=name, color=st["color"], linestyle=st["linestyle"],
                marker=st["marker"], markersize=3)
        ax.fill_between(t[x], t["lo"], t["hi"], color=st["color"], alpha=0.15, linewidth=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(axis_label("energy_j"))
    legend_outside(ax)
    fig.tight_layout()
    return fig


def cost_vs_pi_figure(runs: pd.DataFrame):
    """Mean training energy (J) over seeds vs pi, 95 % bands."""
    return _cost_vs(runs, "pi", "target probability pi")


def cost_vs_target_figure(runs: pd.DataFrame):
    """Mean training energy (J) over seeds vs the loss target L* (nats), 95 % bands."""
    return _cost_vs(runs, "target_loss", "loss target L* (nats)")


def model_per_epoch_figure(runs: pd.DataFrame, epochs: pd.DataFrame, pi: float | None = None,
                           seed: int | None = None):
    """The variant each policy trains in each epoch (one run per policy): switches show."""
    pi = float(runs["pi"].max()) if pi is None else pi
    sel = runs[np.isclose(runs["pi"], pi)]
    seed = int(sel["seed"].min()) if seed is None else seed
    sel = sel[sel.seed == seed]
    styles = style_for(_policies(runs))
    names = dict(zip(epochs["variant"], epochs["variant_name"], strict=False))
    fig, ax = figure()
    for k, name in enumerate(_policies(sel)):
        rid = sel.loc[sel.policy == name, "run_id"].iloc[0]
        e = epochs[epochs.run_id == rid].sort_values("epoch")
        st = styles[name]
        ax.step(e["epoch"], e["variant"] + 0.06 * (k - 2), where="post", label=name,
                color=st["color"], linestyle=st["linestyle"])
    ticks = sorted(names)
    ax.set_yticks(ticks, [names[t] for t in ticks])
    ax.invert_yaxis()
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"model variant (seed {seed}, pi = {pi:g})")
    legend_outside(ax)
    fig.tight_layout()
    from netsim.figures import drawn_from

    return drawn_from(fig, [sel.loc[sel.policy == n, "run_id"].iloc[0] for n in _policies(sel)])


def cost_ratio_figure(runs: pd.DataFrame):
    """Each baseline's mean energy over DepL's, per pi; hatched bars miss the promise
    (success below pi minus two binomial standard errors)."""
    r = runs.dropna(subset=["pi"])
    cost = r.groupby(["policy", "pi"])["energy_j"].mean()
    succ = success_table(r).set_index(["policy", "pi"])
    pis = sorted(r["pi"].unique())
    base = [n for n in _policies(r) if n != DEPL]
    styles = style_for(_policies(runs))
    fig, ax = figure(wide=True)
    width = 0.8 / max(len(base), 1)
    for j, name in enumerate(base):
        xs, ys, misses = [], [], []
        for i, pi in enumerate(pis):
            if (name, pi) not in cost or (DEPL, pi) not in cost or not cost[(DEPL, pi)] > 0:
                continue
            xs.append(i + (j - (len(base) - 1) / 2) * width)
            ys.append(cost[(name, pi)] / cost[(DEPL, pi)])
            s = succ.loc[(name, pi)]
            misses.append(s["success"] < pi - 2 * np.sqrt(pi * (1 - pi) / s["count"]))
        bars = ax.bar(xs, ys, width, label=name, color=styles[name]["color"])
        for bar, miss in zip(bars, misses, strict=True):
            if miss:
                bar.set_hatch("///")
                bar.set_edgecolor("white")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(pis)), [f"{p:g}" for p in pis])
    ax.set_xlabel("target probability pi (hatched: misses pi)")
    ax.set_ylabel("energy / DepL's energy")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def final_loss_cdf(runs: pd.DataFrame, out: str | Path, pi: float | None = None) -> list[Path]:
    """:func:`final_loss_cdf_figure` saved as OUT.png and OUT.pdf."""
    return save(final_loss_cdf_figure(runs, pi), out)


def success_vs_pi(runs: pd.DataFrame, out: str | Path) -> list[Path]:
    """:func:`success_vs_pi_figure` saved as OUT.png and OUT.pdf."""
    return save(success_vs_pi_figure(runs), out)


def cost_vs_pi(runs: pd.DataFrame, out: str | Path) -> list[Path]:
    """:func:`cost_vs_pi_figure` saved as OUT.png and OUT.pdf."""
    return save(cost_vs_pi_figure(runs), out)


def cost_vs_target(runs: pd.DataFrame, out: str | Path) -> list[Path]:
    """:func:`cost_vs_target_figure` saved as OUT.png and OUT.pdf."""
    return save(cost_vs_target_figure(runs), out)


def model_per_epoch(runs: pd.DataFrame, epochs: pd.DataFrame, out: str | Path,
                    pi: float | None = None, seed: int | None = None) -> list[Path]:
    """:func:`model_per_epoch_figure` saved as OUT.png and OUT.pdf."""
    return save(model_per_epoch_figure(runs, epochs, pi, seed), out)


def cost_ratio(runs: pd.DataFrame, out: str | Path) -> list[Path]:
    """:func:`cost_ratio_figure` saved as OUT.png and OUT.pdf."""
    return save(cost_ratio_figure(runs), out)
