"""The Python API for sweeps and comparisons: netsim.sweep, netsim.load_results, netsim.compare."""

from __future__ import annotations

import pandas as pd
import pytest

import netsim
from netsim.sweep.compare import compare_table

SPEC = {"name": "api", "base": "two-phones", "policies": ["fedavg-all", "fastest-k"],
        "seeds": 2, "grid": {"training.max_epochs": [2, 4]}}


def test_sweep_runs_every_run_once_and_compare_reads_it(tmp_path):
    results = netsim.sweep(SPEC, out=tmp_path)
    runs = results.runs
    assert len(runs) == 2 * 2 * 2 and set(runs["sweep"]) == {"api"}
    assert sorted(runs["epochs"].unique()) == [2, 4]  # the grid axis reached the scenario
    stamps = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "runs").iterdir()}
    again = netsim.sweep(SPEC, out=tmp_path)  # resumes: nothing recomputed
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "runs").iterdir()} == stamps
    pd.testing.assert_frame_equal(again.runs, netsim.load_results(tmp_path).runs)
    table = netsim.compare(tmp_path, baseline="fedavg-all")
    pd.testing.assert_frame_equal(table, compare_table(results.runs, baseline="fedavg-all"))
    assert len(table) == 4 and (table.loc[table["policy"] == "fastest-k", "paired_n"] == 2).all()
    with pytest.raises(ValueError, match="nosuch"):
        netsim.compare(results, baseline="nosuch")


def test_sweep_rejects_an_invalid_spec_before_running(tmp_path):
    with pytest.raises(netsim.ScenarioError, match="seeds"):
        netsim.sweep({"base": "two-phones", "policies": ["fedavg-all"]}, out=tmp_path)
    with pytest.raises(netsim.ScenarioError, match="nosuch"):
        netsim.sweep({**SPEC, "policies": ["nosuch"]}, out=tmp_path)
    assert not (tmp_path / "runs").exists()


def test_compare_warns_about_scenarios_that_share_a_name(tmp_path):
    from netsim.scenario.loading import scenario_data

    first = scenario_data("two-phones")
    second = {**first, "training": {**first["training"], "max_epochs": 2}}
    for scenario in (first, second):
        netsim.simulate(scenario, "fedavg-all", seed=0, out=tmp_path)
    with pytest.warns(UserWarning, match="2 different scenarios are named 'two-phones'"):
        table = netsim.compare(tmp_path)
    assert len(table) == 2


def test_a_sweep_returns_its_own_runs_not_an_earlier_sweeps_in_the_same_folder(tmp_path):
    """Two sweeps into one folder: each call returns the runs its plan names (stored now or
    before), with its own axes; load_results gives the whole folder."""
    first = netsim.sweep(SPEC, out=tmp_path)
    other = {"name": "other", "base": "two-phones", "policies": ["random-k"], "seeds": 1,
             "grid": {"training.deadline_s": [500.0]}}
    second = netsim.sweep(other, out=tmp_path)
    assert set(second.runs["sweep"]) == {"other"} and len(second.runs) == 1
    assert second.axes == ("training.deadline_s",)
    assert "training.max_epochs" not in second.runs
    assert set(second.epochs["run_id"]) <= set(second.runs["run_id"])
    everything = netsim.load_results(tmp_path)
    assert len(everything.runs) == len(first.runs) + 1
    again = netsim.sweep(SPEC, out=tmp_path)
    assert set(again.runs["run_id"]) == set(first.runs["run_id"])
