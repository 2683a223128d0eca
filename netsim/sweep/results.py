"""Reading a results folder: the run tables (netsim.results.store) plus the sweeps' manifests.

A sweep writes ``DIR/sweeps/<name>-<digest>.parquet`` (atomically, before any run) mapping each
run_id to its sweep, point, point label, policy label and axis values. Runs written by
``netsim run`` or ``netsim.simulate(out=...)`` have no manifest row: their point is their
scenario name and their label their policy name.

Runs are grouped into scenario points by the scenario's content hash (``scenario_hash``,
:func:`netsim.api.scenario_hash`), never by its name alone: two different scenarios that share
a ``name:`` become two points, labelled ``NAME [HASH]`` and flagged in ``name_clash``. Runs
stored before the hash was recorded fall back to their scenario name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from netsim.results.store import completed_runs, read_table, write_parquet_atomic
from netsim.scenario.errors import Problem, ScenarioError
from netsim.sweep.plan import MANIFEST_COLUMNS, SweepPlan


@dataclass(frozen=True)
class Results:
    """A results folder's tables, runs joined with their sweep manifest.

    ``runs`` gains: sweep, point (int), point_label, policy_label and one column per sweep
    axis (its dotted path, e.g. ``generate.n_devices``). ``axes`` lists those axis columns.
    """

    runs: pd.DataFrame
    epochs: pd.DataFrame
    devices: pd.DataFrame
    axes: tuple[str, ...] = ()

    def name_clashes(self) -> list[str]:
        """One line per scenario name that two or more different scenarios share."""
        if "name_clash" not in self.runs:
            return []
        clash = self.runs[self.runs["name_clash"]]
        return [f"{len(grp['scenario_key'].unique())} different scenarios are named {name!r} "
                f"(content hashes {', '.join(sorted(k[:6] for k in grp['scenario_key'].unique()))}"
                "): shown apart, never pooled"
                for name, grp in clash.groupby("scenario", sort=True)]

    def select(self, mask: pd.Series) -> Results:
        """The runs where ``mask`` (over ``runs``) holds, with their epochs and devices."""
        runs = self.runs[mask.to_numpy()].reset_index(drop=True)
        keep = set(runs["run_id"])
        epochs = self.epochs[self.epochs["run_id"].isin(keep)] if len(self.epochs) else self.epochs
        devices = self.devices[self.devices["run_id"].isin(keep)] if len(self.devices) \
            else self.devices
        return Results(runs, epochs.reset_index(drop=True), devices.reset_index(drop=True),
                       self.axes)


def write_manifest(out_dir: str | Path, plan: SweepPlan) -> Path:
    """Store the plan's manifest under ``out_dir/sweeps/`` (atomically); returns its path."""
    path = Path(out_dir) / "sweeps" / f"{plan.name}-{plan.digest()}.parquet"
    if not path.exists():
        write_parquet_atomic(plan.manifest(), path)
    return path


def read_manifest(out_dir: str | Path) -> pd.DataFrame:
    """Every sweep manifest under ``out_dir`` (the newest entry per run_id wins)."""
    files = sorted((Path(out_dir) / "sweeps").glob("*.parquet"), key=lambda p: p.stat().st_mtime)
    if not files:
        return pd.DataFrame(columns=MANIFEST_COLUMNS)
    table = pd.concat([pd.read_parquet(p) for p in files], ignore_index=True)
    return table.drop_duplicates("run_id", keep="last").reset_index(drop=True)


def stored_status(out_dir: str | Path, run_ids: list[str]) -> pd.DataFrame:
    """run_id, status and error of those of ``run_ids`` that are complete under ``out_dir``."""
    done = completed_runs(out_dir)
    files = [str(Path(out_dir) / "runs" / f"{r}.parquet") for r in run_ids if r in done]
    if not files:
        return pd.DataFrame(columns=["run_id", "status", "error"])
    import pyarrow.dataset as ds

    return ds.dataset(files, format="parquet").to_table(
        columns=["run_id", "status", "error"]).to_pandas()


def load_results(out_dir: str | Path, devices: bool = True) -> Results:
    """The results under ``out_dir`` (every complete run), runs joined with their manifests;
    ``devices=False`` leaves the devices table (a row per device and run) empty.

    Raises
    ------
    ScenarioError
        If ``out_dir`` holds no complete run (invalid input: the CLI exits with code 2).
    """
    runs = read_table(out_dir, "runs")
    if runs.empty:
        raise ScenarioError([Problem("DIR", f"no complete runs under {out_dir} "
                                            f"(expected {out_dir}/runs/)")], "results folder")
    manifest = read_manifest(out_dir)
    runs = runs.merge(manifest, on="run_id", how="left")
    runs["sweep"] = runs["sweep"].fillna("")
    outside = runs["point_label"].isna()
    runs["point_label"] = runs["point_label"].fillna(runs["scenario"])
    runs["policy_label"] = runs["policy_label"].fillna(runs["policy"])
    hashes = runs["scenario_hash"] if "scenario_hash" in runs else pd.Series(pd.NA, runs.index)
    runs["scenario_key"] = hashes.astype("object").where(hashes.notna(), "name:" + runs["scenario"])
    runs["policy_label"] = _params_labels(runs, outside)
    _group_points(runs)
    axes = _expand_axes(runs)
    runs = runs.drop(columns=["axes_json"])
    order = ["sweep", "point", "policy_label", "seed"]
    runs = runs.sort_values(order, kind="stable").reset_index(drop=True)
    return Results(runs, read_table(out_dir, "epochs"),
                   read_table(out_dir, "devices") if devices else pd.DataFrame(), axes)


def _group_points(runs: pd.DataFrame) -> None:
    """Set ``point`` (int) and ``name_clash`` in place (``scenario_key`` set).

    A sweep point keeps its manifest index; runs outside sweeps are numbered after the sweeps'
    points, one point per (scenario name, content hash). Where one (sweep, point label) holds
    several contents, each content gets its own point and ``NAME [HASH]`` label.
    """
    manifest = runs["point"].astype("float64")
    point = pd.Series(-1, index=runs.index, dtype="int64")
    clash = pd.Series(False, index=runs.index)
    free = int(manifest.max()) + 1 if manifest.notna().any() else 0
    in_sweep = manifest.notna()
    groups = list(runs[in_sweep].groupby(["sweep", manifest[in_sweep], "point_label"], sort=True))
    groups += list(runs[~in_sweep].groupby(["sweep", "point_label"], sort=True))
    for key, grp in groups:
        keys = sorted(grp["scenario_key"].unique())
        for i, content in enumerate(keys):
            idx = grp.index[grp["scenario_key"] == content]
            if len(key) == 3 and i == 0:
                point[idx] = int(key[1])
            else:
                point[idx], free = free, free + 1
            if len(keys) > 1:
                clash[idx] = True
                runs.loc[idx, "point_label"] = f"{key[-1]} [{content.removeprefix('name:')[:6]}]"
    runs["point"], runs["name_clash"] = point, clash


def _params_labels(runs: pd.DataFrame, outside: pd.Series) -> pd.Series:
    """Policy labels; outside sweeps, a policy run with several parameter sets on one scenario
    is labelled ``NAME {params}`` per set, so different parameters are never pooled."""
    labels = runs["policy_label"].copy()
    if "policy_params" not in runs:
        return labels
    params = runs["policy_params"].map(lambda p: p if isinstance(p, str) else json.dumps(
        p, sort_keys=True, default=str))
    part = runs[outside].assign(_params=params[outside])
    for _, grp in part.groupby(["scenario_key", "policy"], sort=False):
        if grp["_params"].nunique() > 1:
            labels[grp.index] = grp["policy"] + " " + grp["_params"]
    return labels


def _expand_axes(runs: pd.DataFrame) -> tuple[str, ...]:
    parsed: list[dict[str, Any]] = [json.loads(a) if isinstance(a, str) else {}
                                    for a in runs["axes_json"]]
    keys: list[str] = []
    for axes in parsed:
        keys.extend(k for k in axes if k not in keys)
    columns = []
    for key in keys:
        column = f"axis.{key}" if key in runs.columns else key  # e.g. the scenario's 'seed'
        runs[column] = [a.get(key) for a in parsed]
        columns.append(column)
    return tuple(columns)
