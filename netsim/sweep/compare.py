"""Comparing policies per scenario point: success first, then energy and time, then "best".

For each point (a sweep point, or one scenario content for runs outside sweeps; see
:mod:`netsim.sweep.results`) and each policy label:

- ``success``: the share of runs that reached the target (failed runs count as misses), with
  its Wilson 95 % interval, and ``meets``: whether it is at least the point's required share
  ``required``, with ``required_source`` saying where it comes from: the scenario's
  ``training.target_probability`` π where given; else the π a policy's parameters set
  (``target_probability`` in its recorded ``policy_params``, as DepL's; the highest where
  policies set different ones); else 1, every run;
- energy (J) and time (s) means with Student-t 95 % intervals over the successful runs
  (``energy_j``, ``time_s``) and over all non-failed runs (``energy_j_all``, ``time_s_all``);
  the final loss (nats) over all non-failed runs;
- ``energy_vs_best`` / ``time_vs_best``: the all-runs mean over the lowest all-runs mean among
  the policies that meet the requirement (NaN throughout when none meets it); ``best`` marks
  the cheapest (energy) of those; ``*_vs_optimum`` likewise against policies named
  ``*-optimum``;
- with a baseline policy: ``d_energy_j`` / ``d_time_s``, the mean paired difference (policy
  minus baseline, J and s) over the seeds both ran without failing, with its Student-t 95 %
  interval, over ``paired_n`` seeds.
"""

from __future__ import annotations

import json
import math
import textwrap
from typing import Any

import numpy as np
import pandas as pd

from netsim.sweep.stats import t_interval, wilson_interval

GROUP = ["sweep", "point", "point_label"]
OPTIMUM_SUFFIX = "-optimum"
PAIRED = ("energy_j", "time_s")


SCENARIO_PI = "scenario's training.target_probability"
EVERY_RUN = "none set: every run"


def _param_pi(params: Any) -> float | None:
    """The ``target_probability`` a run's recorded policy parameters set (None: not set)."""
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            return None
    value = params.get("target_probability") if isinstance(params, dict) else None
    return float(value) if isinstance(value, (int, float)) and not math.isnan(value) else None


def required_share(point: pd.DataFrame) -> tuple[float, str]:
    """The share of runs that must reach the target at a point, and where it comes from
    (see the module): the scenario's pi, else the highest pi a policy's parameters set, else
    1 (every run)."""
    pi = point["target_probability"].dropna() if "target_probability" in point \
        else pd.Series([], dtype=float)
    if len(pi):
        return float(pi.iloc[0]), SCENARIO_PI
    if "policy_params" in point:
        by_policy: dict[str, float] = {}
        for label, params in zip(point["policy_label"], point["policy_params"], strict=True):
            value = _param_pi(params)
            if value is not None:
                by_policy[str(label)] = max(value, by_policy.get(str(label), value))
        if by_policy:
            highest = max(by_policy.values())
            setters = sorted(k for k, v in by_policy.items() if v == highest)
            more = " (the highest set)" if len(set(by_policy.values())) > 1 else ""
            return highest, f"target_probability of {', '.join(setters)}{more}"
    return 1.0, EVERY_RUN


def _policy_row(grp: pd.DataFrame, required: float, source: str) -> dict:
    ok = grp[grp["status"] != "failed"]
    reached = ok["target_reached"].fillna(False).astype(bool)
    row: dict = {"runs": len(grp), "failed": len(grp) - len(ok),
                 "seeds": int(grp["seed"].nunique())}
    n_reached = int(reached.sum())
    row["success"], row["success_lo"], row["success_hi"] = wilson_interval(n_reached, len(grp))
    row["required"], row["required_source"] = required, source
    row["meets"] = bool(n_reached >= required * len(grp) - 1e-9)
    for metric in ("energy_j", "time_s"):
        row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = t_interval(ok.loc[reached, metric])
        row[f"{metric}_all"], row[f"{metric}_all_lo"], row[f"{metric}_all_hi"] = \
            t_interval(ok[metric])
    row["final_loss"], row["final_loss_lo"], row["final_loss_hi"] = t_interval(ok["final_loss"])
    return row


def _paired(grp: pd.DataFrame, base: pd.DataFrame) -> dict:
    """Mean paired difference (this policy minus the baseline) over their common seeds."""
    mine = grp[grp["status"] != "failed"].groupby("seed")[list(PAIRED)].mean()
    theirs = base[base["status"] != "failed"].groupby("seed")[list(PAIRED)].mean()
    common = mine.index.intersection(theirs.index)
    row: dict = {"paired_n": len(common)}
    for metric in PAIRED:
        diff = (mine.loc[common, metric] - theirs.loc[common, metric]).to_numpy()
        row[f"d_{metric}"], row[f"d_{metric}_lo"], row[f"d_{metric}_hi"] = t_interval(diff)
    return row


def compare_table(runs: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """One row per (point, policy label) of the runs table of :func:`load_results`.

    Parameters
    ----------
    runs: the runs table (:func:`netsim.sweep.results.load_results`).
    baseline: a policy label; adds the paired differences against it (see the module).

    Raises
    ------
    ValueError
        If ``baseline`` is given and no point holds runs of it.
    """
    if baseline is not None and baseline not in set(runs["policy_label"]):
        raise ValueError(f"baseline {baseline!r} has no runs (policies: "
                         f"{', '.join(sorted(runs['policy_label'].unique()))})")
    rows = []
    for key, point in runs.groupby(GROUP, sort=True):
        required, source = required_share(point)
        base = point[point["policy_label"] == baseline] if baseline else None
        for policy, grp in point.groupby("policy_label", sort=True):
            row = {**dict(zip(GROUP, key, strict=True)), "policy": policy,
                   **_policy_row(grp, required, source)}
            if baseline is not None:
                assert base is not None  # a baseline is a label with runs (checked above)
                row["baseline"] = policy == baseline
                row.update(_paired(grp, base) if len(base) and policy != baseline
                           else {"paired_n": math.nan})
            rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["point"] = table["point"].astype(int)
    if baseline is not None:
        for col in [f"d_{m}{s}" for m in PAIRED for s in ("", "_lo", "_hi")]:
            table[col] = table[col] if col in table else math.nan
    _ratios(table)
    return table


def _ratios(table: pd.DataFrame) -> None:
    """``best``, ``*_vs_best`` and ``*_vs_optimum`` columns, in place."""
    keys = [table[g] for g in GROUP]
    for metric, short in (("energy_j", "energy"), ("time_s", "time")):
        value = table[f"{metric}_all"]
        best = value.where(table["meets"]).groupby(keys).transform("min")
        table[f"{short}_vs_best"] = value / best
        opt = value.where(table["policy"].str.endswith(OPTIMUM_SUFFIX))
        table[f"{short}_vs_optimum"] = value / opt.groupby(keys).transform("min")
    lowest = table["energy_j_all"].where(table["meets"]).groupby(keys).transform("min")
    table["best"] = table["meets"] & (table["energy_j_all"] == lowest)


def _num(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4g}"


def _ci(mean: float, lo: float, hi: float) -> str:
    if mean is None or math.isnan(mean):
        return "-"
    if math.isnan(lo):
        return f"{mean:.4g}"
    return f"{mean:.4g} [{lo:.4g}, {hi:.4g}]"


def _head(part: pd.DataFrame, success_column: str, success_text: str) -> pd.DataFrame:
    """Both tables' first columns: the policy (``*``: the best), its success with its
    interval as ``success_text`` formats it (fields p, lo, hi and lo100, hi100 in percent),
    and whether it meets the required share."""
    shown = pd.DataFrame({"policy": [f"{p} *" if b else p for p, b in
                                     zip(part["policy"], part["best"], strict=True)]})
    shown[success_column] = [
        "-" if math.isnan(p) else success_text.format(p=p, lo=lo, hi=hi, lo100=lo * 100,
                                                      hi100=hi * 100)
        for p, lo, hi in zip(part["success"], part["success_lo"], part["success_hi"], strict=True)]
    shown["meets"] = ["yes" if m else "no" for m in part["meets"]]
    return shown


def display_table(part: pd.DataFrame) -> pd.DataFrame:
    """A point's rows as strings, intervals in brackets (the printed and HTML form)."""
    shown = _head(part, "success (95% CI)", "{p:.0%} [{lo:.0%}, {hi:.0%}]")
    shown["runs"], shown["failed"] = part["runs"].to_numpy(), part["failed"].to_numpy()
    for metric, unit in (("energy_j", "J"), ("time_s", "s")):
        name = metric.split("_")[0]
        for suffix, where in (("", "reached"), ("_all", "all")):
            shown[f"{name} {unit}, {where}"] = [_ci(*v) for v in zip(
                part[f"{metric}{suffix}"], part[f"{metric}{suffix}_lo"],
                part[f"{metric}{suffix}_hi"], strict=True)]
    shown["final loss"] = [_num(x) for x in part["final_loss"]]
    shown["energy/best"] = [_num(x) for x in part["energy_vs_best"]]
    shown["time/best"] = [_num(x) for x in part["time_vs_best"]]
    if "paired_n" in part:
        for metric, unit in (("energy_j", "J"), ("time_s", "s")):
            shown[f"d{metric.split('_')[0]} {unit} vs base"] = [
                "baseline" if b else "-" if math.isnan(n) else _ci(m, lo, hi) + f" (n={int(n)})"
                for m, lo, hi, n, b in zip(part[f"d_{metric}"], part[f"d_{metric}_lo"],
                                           part[f"d_{metric}_hi"], part["paired_n"],
                                           part["baseline"], strict=True)]
    if part["energy_vs_optimum"].notna().any():
        shown["energy/optimum"] = [_num(x) for x in part["energy_vs_optimum"]]
        shown["time/optimum"] = [_num(x) for x in part["time_vs_optimum"]]
    return shown.reset_index(drop=True)


def _pm(mean: float, lo: float, hi: float) -> str:
    """``1002 ± 9.8``: a mean and its symmetric (Student-t) 95 % half-width."""
    if mean is None or math.isnan(mean):
        return "-"
    if math.isnan(lo) or math.isnan(hi):
        return f"{mean:.4g}"
    half = (hi - lo) / 2
    if half > 0 and math.isfinite(half):  # two significant digits, no exponent below 1e6
        half = round(half, 1 - math.floor(math.log10(half)))
    return f"{mean:.4g} ± {half:g}"


def compact_table(part: pd.DataFrame) -> pd.DataFrame:
    """A point's rows as ``netsim compare`` prints them by default, to fit 100 columns:
    policy (``*`` best), success with its Wilson interval, meets, runs (and failed), energy
    (J) and time (s) over all runs as mean ± the Student-t 95 % half-width, energy over the
    best's, and with a baseline the paired energy difference. :func:`display_table` (``--wide``,
    the HTML report) adds the runs that reached the target, the final loss, time/best, the
    paired time difference and the ratios to an optimum."""
    shown = _head(part, "success [95%]", "{p:.0%} [{lo100:.0f}, {hi100:.0f}]")
    shown["runs"] = [f"{r}" if not f else f"{r} ({f} failed)"
                     for r, f in zip(part["runs"], part["failed"], strict=True)]
    for metric, head in (("energy_j", "energy J ± 95%"), ("time_s", "time s ± 95%")):
        shown[head] = [_pm(*v) for v in zip(part[f"{metric}_all"], part[f"{metric}_all_lo"],
                                            part[f"{metric}_all_hi"], strict=True)]
    shown["energy/best"] = [_num(x) for x in part["energy_vs_best"]]
    if "paired_n" in part:
        # (the seeds paired, where fewer than the policy's runs that did not fail)
        shown["dE J vs base"] = [
            "baseline" if b else "-" if math.isnan(n) else _pm(m, lo, hi)
            + (f" (n={int(n)})" if n < runs - failed else "")
            for m, lo, hi, n, b, runs, failed in zip(
                part["d_energy_j"], part["d_energy_j_lo"], part["d_energy_j_hi"],
                part["paired_n"], part["baseline"], part["runs"], part["failed"], strict=True)]
    return shown.reset_index(drop=True)


COLUMNS = 100
"""The width ``netsim compare`` keeps to by default (``--wide``: no limit)."""


def point_heading(sweep: str, point: int, label: str, n_seeds: int) -> str:
    """``sweep smoke, point 0: bandwidth_bps=5e+06 (3 seeds)``."""
    where = f"sweep {sweep}, point {point}: {label}" if sweep else f"scenario {label}"
    return f"{where} ({n_seeds} seed{'s' if n_seeds != 1 else ''})"


def point_note(part: pd.DataFrame) -> str:
    """What "best" means at this point: the required share and who meets it."""
    required = float(part["required"].iloc[0])
    source = str(part["required_source"].iloc[0])
    need = (f"every run ({source})" if required >= 1
            else f"at least {required:.0%} of runs (pi: {source})")
    if not part["meets"].any():
        return f"no policy reaches the target in {need}: no best"
    return f"* best: lowest mean energy over all runs among policies reaching the target in {need}"


def _wrap(text: str, width: int | None, indent: str = "") -> str:
    """``text`` wrapped to ``width`` columns (None: one line), later lines indented."""
    if width is None or len(text) <= width:
        return text
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent,
                                   break_on_hyphens=False))


def _note_lines(note: str, width: int | None) -> str:
    """A point's note within ``width`` columns, broken before what the target asks (``in
    every run ...``, ``in at least 80% of runs (pi: ...)``) so that stays on one line."""
    if width is None or len(note) <= width or " the target in " not in note:
        return _wrap(note, width, "  ")
    head, need = note.split(" the target in ", 1)
    return _wrap(head + " the target", width, "  ") + "\n" + _wrap("  in " + need, width, "  ")


def format_compare(table: pd.DataFrame, clashes: list[str] | tuple[str, ...] = (),
                   wide: bool = True) -> str:
    """The comparison as text: warnings, then a heading, a table and a note per point.

    ``wide``: every column (:func:`display_table`), lines as long as they come; else the
    columns of :func:`compact_table` and every line within :data:`COLUMNS` (a table still
    too wide continues below itself, as pandas wraps it), as ``netsim compare`` prints by
    default."""
    width = None if wide else COLUMNS
    blocks = [_wrap(f"warning: {c}", width, "  ") for c in clashes] + ([""] if clashes else [])
    for (sweep, point, label), part in table.groupby(GROUP, sort=True):
        seeds = int(np.max(part["seeds"]))
        blocks.append(_wrap(point_heading(str(sweep), int(point), str(label), seeds), width,
                            "  "))
        shown = display_table(part) if wide else compact_table(part)
        blocks.append(shown.to_string(index=False, line_width=width))
        blocks.append(_note_lines(point_note(part), width))
        blocks.append("")
    if not wide and len(table):
        blocks.append(_wrap("Intervals 95%: success Wilson, energy and time Student-t over all "
                            "runs (failed ones left out); --wide adds the runs that reached "
                            "the target, final loss, time/best and the ratios to an optimum.",
                            width))
    return "\n".join(blocks).rstrip() + "\n"
