"""PACT and DepL figures drawn from stored run tables (the ``netsim.figures`` registry).

The functions of :mod:`plots.pact` and :mod:`plots.depl` draw the figures of
experiments/pact/run.py and experiments/depl/run.py; here each takes a
:class:`netsim.sweep.results.Results`, so ``netsim figures`` and ``netsim report`` draw them
from any results folder that holds the runs (a sweep, or ``netsim.simulate(..., out=DIR)``).
Swept quantities are read from the runs table itself: the loss target (``target_loss``,
nats), the deadline (``deadline_s``, s), DepL's target probability (``pi``, from
``policy_params``), PACT's ``epsilon`` (from ``policy_params``; its planning time from the
epochs' ``info``) and the number of devices (the sweep axis ``generate.n_devices``, else the
non-network nodes of the ``devices`` table). A figure returns ``None`` (skipped, with a note)
when its quantity takes fewer than two values.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pandas as pd
from matplotlib.ticker import NullFormatter

from netsim.figures import drawn_from
from netsim.sweep.results import Results
from plots import depl, pact
from plots.common import band
from plots.style import figure, legend_outside, series_label, style_for

PACT_OWN = ["pact", "pact-optimum", "compress-first", "pact-no-compression", "pact-all-nodes"]
PACT_FAMILY = [*PACT_OWN, "fedavg-all", "greedy-energy", "fastest-k", "random-k"]
DEPL_FAMILY = list(depl.ORDER)


def family_runs(members: list[str], own: list[str]) -> Callable[[pd.DataFrame], pd.Series]:
    """A figure's run selector (:mod:`netsim.figures`): the runs of ``members`` (a family
    and the baselines it is compared with), but none unless some run is of the family's
    ``own`` policies, so a sweep of baselines alone draws no ``pact-*`` figure."""
    def select(runs: pd.DataFrame) -> pd.Series:
        ran = runs["policy"].isin(own).any()
        return runs["policy"].isin(members) & bool(ran)

    select.__doc__ = f"runs of {', '.join(members)}, where one of {', '.join(own)} ran"
    return select


def _varies(runs: pd.DataFrame, column: str) -> bool:
    return column in runs and runs[column].dropna().nunique() >= 2


def _pact_lines(runs: pd.DataFrame, x: str, xlabel: str, title: str, log: bool = False):
    runs = runs.assign(x=runs[x].astype(float))
    fig, ax = figure(wide=True)
    pact._energy_lines(ax, runs, xlabel)
    planned = runs[runs["policy"].isin(["pact", "pact-optimum"])]
    if "planned_energy_j" in planned:
        planned = planned.dropna(subset=["planned_energy_j"])
        for (name, grp), ls in zip(planned.groupby("policy"), ["-", ":"], strict=False):
            mean = grp.groupby("x")["planned_energy_j"].mean()
            if len(mean) >= 2:
                ax.plot(mean.index, mean.to_numpy(), color="black", linestyle=ls,
                        linewidth=0.9, label=f"{name} (planned)")
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_title(title)
    legend_outside(ax)
    fig.tight_layout()
    return fig


def pact_energy_vs_target(results: Results):
    """Total energy (J) vs loss target (nats) per policy, with PACT's and the optimum's
    planned energies (runs that reached the target; hollow: some seeds missed it)."""
    runs = results.runs
    if not _varies(runs, "target_loss"):
        return None
    return _pact_lines(runs, "target_loss", "loss target (nats)",
                       "energy vs loss target (hollow: some seeds missed it)")


def pact_energy_vs_deadline(results: Results):
    """Total energy (J) vs deadline (s) per policy (runs that reached the target)."""
    runs = results.runs
    if not _varies(runs, "deadline_s"):
        return None
    return _pact_lines(runs, "deadline_s", "deadline (s)",
                       "energy vs deadline (hollow: some seeds missed the target)")


def device_counts(results: Results) -> pd.Series:
    """Devices per run (run_id -> count): the sweep axis ``generate.n_devices`` if present,
    else the run's nodes in the ``devices`` table that are not network nodes."""
    runs = results.runs
    if "generate.n_devices" in runs and runs["generate.n_devices"].notna().all():
        return runs.set_index("run_id")["generate.n_devices"].astype(float)
    dev = results.devices
    if dev.empty:
        return pd.Series(dtype=float)
    if "network_node" in dev:
        dev = dev[~dev["network_node"].astype(bool)]
    return dev.groupby("run_id").size().astype(float)


def pact_energy_vs_devices(results: Results):
    """Total energy (J) vs number of devices per policy, log-log."""
    counts = device_counts(results)
    runs = results.runs.assign(n_devices=results.runs["run_id"].map(counts))
    if not _varies(runs, "n_devices"):
        return None
    return _pact_lines(runs, "n_devices", "number of devices", "energy vs number of devices",
                       log=True)


def pact_schedule(results: Results):
    """PACT's variant per epoch and which devices train in each epoch, for its first run
    (lowest point, then seed); one figure per scenario point, keyed ``point<N>``."""
    runs = results.runs[(results.runs["policy"] == "pact") & (results.runs["epochs"] > 0)]
    out = {}
    for point, grp in runs.groupby("point", sort=True):
        run = grp.sort_values(["seed", "policy_label" if "policy_label" in grp else "policy"]
                              ).iloc[0]
        rid = run["run_id"]
        epochs = results.epochs[results.epochs["run_id"] == rid]
        devices = results.devices[results.devices["run_id"] == rid]
        if not epochs.empty and not devices.empty:
            fig = pact.schedule_figure(epochs, devices)
            where = run.get("point_label") or run.get("scenario")
            fig.suptitle(f"{series_label(str(run.get('policy_label', 'pact')))}, seed "
                         f"{int(run['seed'])}" + (f", {where}" if where else "")
                         + ": variant and devices per epoch", fontsize=8)
            fig.tight_layout()
            out[f"point{int(point)}"] = drawn_from(fig, [rid])
    return out or None


def with_epsilon(results: Results) -> pd.DataFrame:
    """The runs with ``epsilon`` (the policy's ``epsilon`` parameter from ``policy_params``,
    NaN for policies without one) and ``planning_s``: the run's total planning wall time (s),
    each plan's ``planning_s`` from the epochs' ``info`` counted once (a plan is named by the
    ``replans`` count that it carries), NaN where the epochs record none."""
    runs = results.runs
    params = runs["policy_params"].map(lambda p: json.loads(p) if isinstance(p, str) else {}) \
        if "policy_params" in runs else pd.Series([{}] * len(runs), index=runs.index)
    eps = params.map(lambda p: p.get("epsilon") if isinstance(p, dict) else None).astype(float)
    planning: dict[str, float] = {}
    epochs = results.epochs
    if not epochs.empty and "info" in epochs:
        for rid, infos in epochs.groupby("run_id")["info"]:
            plans: dict[object, float] = {}
            for text in infos:
                info = json.loads(text) if isinstance(text, str) and text else {}
                if isinstance(info.get("planning_s"), int | float):
                    plans.setdefault(info.get("replans"), float(info["planning_s"]))
            if plans:
                planning[str(rid)] = sum(plans.values())
    return runs.assign(epsilon=eps, planning_s=runs["run_id"].map(planning).astype(float))


def pact_energy_vs_epsilon(results: Results):
    """Total energy (J) and planning time (s) vs PACT's epsilon per policy, with
    pact-optimum's mean energy as a reference line where present; one figure per scenario
    when the runs hold several (keyed by the scenario's name)."""
    runs = with_epsilon(results)
    swept = runs[runs["epsilon"].notna()]
    if swept.empty:
        return None
    out = {}
    for name, grp in swept.groupby("scenario", sort=True):
        grp = grp[grp.groupby("policy")["epsilon"].transform("nunique") >= 2]
        if grp.empty:
            continue
        optimum = runs[(runs["policy"] == "pact-optimum") & (runs["scenario"] == name)
                       & (runs["status"] != "failed")]
        out[str(name)] = _epsilon_figure(grp.assign(x=grp["epsilon"]), optimum)
    if len(out) <= 1:
        return next(iter(out.values()), None)
    return out


def _epsilon_figure(runs: pd.DataFrame, optimum: pd.DataFrame):
    fig, (left, right) = figure(ncols=2)
    pact._energy_lines(left, runs, "epsilon", key="policy")  # (epsilon is the x axis)
    if len(optimum):
        reached = optimum[optimum["target_reached"].astype(bool)]
        ref = (reached if len(reached) else optimum)["energy_j"].mean()
        left.axhline(ref, color="black", linestyle=":", linewidth=1.0, label="pact-optimum")
    left.set_xscale("log")
    left.set_title("energy (hollow: some seeds missed the target)")
    styles = style_for(sorted(runs["policy"].unique()))
    for policy, grp in runs.dropna(subset=["planning_s"]).groupby("policy", sort=True):
        xs = np.sort(grp["x"].unique())
        mean = np.array([band(grp.loc[grp["x"] == x, "planning_s"].to_numpy()[:, None])[0][0]
                         for x in xs])
        st = styles[policy]
        right.plot(xs, mean, color=st["color"], linestyle=st["linestyle"], marker=st["marker"],
                   markersize=3, label=policy)
    right.set_xscale("log")
    right.set_yscale("log")
    right.set(xlabel="epsilon", ylabel="planning time (s)", title="planning (wall time)")
    ticks = np.sort(runs["x"].unique())
    for ax in (left, right):  # the swept values as ticks, no crowded log minor labels
        ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
    handles, labels = left.get_legend_handles_labels()
    legend_outside(right, handles, labels)
    fig.tight_layout()
    return fig


def with_pi(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with ``pi``: the policy's ``target_probability`` parameter, else the
    scenario's ``training.target_probability``, else NaN."""
    params = runs["policy_params"].map(lambda p: json.loads(p) if isinstance(p, str) else {})
    pi = params.map(lambda p: p.get("target_probability")).astype(float)
    if "target_probability" in runs:
        pi = pi.fillna(runs["target_probability"].astype(float))
    return runs.assign(pi=pi)


def _depl_runs(results: Results, column: str = "pi") -> pd.DataFrame | None:
    runs = with_pi(results.runs)
    runs = runs[runs["status"] != "failed"].dropna(subset=["pi"])
    return runs if len(runs) and runs[column].nunique() >= (2 if column != "seed" else 1) \
        else None


def depl_final_loss_cdf(results: Results):
    """Empirical CDF of the final loss (nats) over seeds per policy at the largest pi."""
    runs = _depl_runs(results, "seed")
    return None if runs is None else depl.final_loss_cdf_figure(runs)


def depl_success_vs_pi(results: Results):
    """Success rate vs target probability pi with Wilson 95 % intervals (the promise dashed)."""
    runs = _depl_runs(results)
    return None if runs is None else depl.success_vs_pi_figure(runs)


def depl_cost_vs_pi(results: Results):
    """Mean energy (J) over seeds vs pi per policy, 95 % bands."""
    runs = _depl_runs(results)
    return None if runs is None else depl.cost_vs_pi_figure(runs)


def depl_cost_vs_target(results: Results):
    """Mean energy (J) over seeds vs the loss target L* (nats) per policy, 95 % bands."""
    runs = _depl_runs(results, "target_loss")
    return None if runs is None else depl.cost_vs_target_figure(runs)


def depl_model_per_epoch(results: Results):
    """The model variant each DepL-family policy trains per epoch (one seed, largest pi)."""
    runs = _depl_runs(results, "seed")
    if runs is None or results.epochs.empty:
        return None
    return depl.model_per_epoch_figure(runs, results.epochs)


def depl_cost_ratio(results: Results):
    """Each policy's mean energy over DepL's per pi; hatched bars miss the promise."""
    runs = _depl_runs(results, "seed")
    if runs is None or not (runs["policy"] == depl.DEPL).any() or runs["policy"].nunique() < 2:
        return None
    return depl.cost_ratio_figure(runs)


__all__ = ["depl_cost_ratio", "depl_cost_vs_pi", "depl_cost_vs_target", "depl_final_loss_cdf",
           "depl_model_per_epoch", "depl_success_vs_pi", "device_counts", "pact_energy_vs_deadline",
           "pact_energy_vs_devices", "pact_energy_vs_epsilon", "pact_energy_vs_target",
           "pact_schedule", "with_epsilon", "with_pi"]
