"""Comparing policies per scenario point: means with 95 % intervals, success rates, ratios.

For each point (a sweep point, or a scenario name for runs outside sweeps) and each policy
label: runs, failures, mean energy (J), time (s) and final loss with Student-t 95 % intervals
over the non-failed runs, the success rate (target reached, over all runs) with its Wilson
95 % interval, and the ratio of the mean energy and time to the best policy's at that point and
to the optimum's (policies named ``*-optimum``), where one ran.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from netsim.sweep.stats import t_interval, wilson_interval

METRICS = ("energy_j", "time_s", "final_loss")
GROUP = ["sweep", "point", "point_label"]
OPTIMUM_SUFFIX = "-optimum"


def compare_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (point, policy label) of the runs table of :func:`load_results`.

    Columns: sweep, point, point_label, policy, runs, failed, then for each metric M of
    energy_j, time_s, final_loss: M, M_lo, M_hi (mean and 95 % t-interval); success,
    success_lo, success_hi (Wilson); energy_vs_best, time_vs_best; energy_vs_optimum,
    time_vs_optimum (NaN where the point has no ``*-optimum`` policy).
    """
    rows = []
    for (sweep, point, label, policy), grp in runs.groupby(GROUP + ["policy_label"], sort=True):
        ok = grp[grp["status"] != "failed"]
        row: dict = {"sweep": sweep, "point": int(point), "point_label": label,
                     "policy": policy, "runs": len(grp), "failed": len(grp) - len(ok)}
        for metric in METRICS:
            row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = t_interval(ok[metric])
        reached = int(grp["target_reached"].fillna(False).astype(bool).sum())
        row["success"], row["success_lo"], row["success_hi"] = wilson_interval(reached, len(grp))
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    for metric, short in (("energy_j", "energy"), ("time_s", "time")):
        best = table.groupby(GROUP)[metric].transform("min")
        table[f"{short}_vs_best"] = table[metric] / best
        opt = table[metric].where(table["policy"].str.endswith(OPTIMUM_SUFFIX))
        table[f"{short}_vs_optimum"] = table[metric] / opt.groupby(
            [table[g] for g in GROUP]).transform("min")
    return table


def _num(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4g}"


def _ci(mean: float, lo: float, hi: float) -> str:
    if math.isnan(mean):
        return "-"
    if math.isnan(lo):
        return f"{mean:.4g}"
    return f"{mean:.4g} [{lo:.4g}, {hi:.4g}]"


def display_table(part: pd.DataFrame) -> pd.DataFrame:
    """A point's rows as strings, intervals in brackets (the printed and HTML form)."""
    shown = pd.DataFrame({"policy": part["policy"], "runs": part["runs"],
                          "failed": part["failed"]})
    for metric in METRICS:
        shown[f"{metric} (95% CI)"] = [_ci(*v) for v in zip(
            part[metric], part[f"{metric}_lo"], part[f"{metric}_hi"], strict=True)]
    shown["success (95% CI)"] = [
        "-" if math.isnan(p) else f"{p:.0%} [{lo:.0%}, {hi:.0%}]"
        for p, lo, hi in zip(part["success"], part["success_lo"], part["success_hi"], strict=True)]
    shown["energy/best"] = [_num(x) for x in part["energy_vs_best"]]
    shown["time/best"] = [_num(x) for x in part["time_vs_best"]]
    if part["energy_vs_optimum"].notna().any():
        shown["energy/optimum"] = [_num(x) for x in part["energy_vs_optimum"]]
        shown["time/optimum"] = [_num(x) for x in part["time_vs_optimum"]]
    return shown.reset_index(drop=True)


def point_heading(sweep: str, point: int, label: str, n_seeds: int) -> str:
    """``sweep smoke, point 0: bandwidth_bps=5e+06 (3 seeds)``."""
    where = f"sweep {sweep}, point {point}: {label}" if sweep else f"scenario {label}"
    return f"{where} ({n_seeds} seed{'s' if n_seeds != 1 else ''})"


def format_compare(table: pd.DataFrame) -> str:
    """The comparison as text: a heading and an aligned table per point."""
    blocks = []
    for (sweep, point, label), part in table.groupby(GROUP, sort=True):
        seeds = int(np.max(part["runs"]))
        blocks.append(point_heading(str(sweep), int(point), str(label), seeds))
        blocks.append(display_table(part).to_string(index=False))
        blocks.append("")
    return "\n".join(blocks).rstrip() + "\n"
