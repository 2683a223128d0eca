"""Running sweeps: local pool, in-process and Dask give identical tables; resume; failures."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from netsim.policy import Decision, NoParams, PolicyEntry
from netsim.results.store import completed_runs, read_table
from netsim.sweep import dask_runner
from netsim.sweep.plan import load_plan
from netsim.sweep.results import load_results
from netsim.sweep.runner import run_sweep
from netsim.sweep.worker import execute

SWEEP = """
name: tiny
base: two-phones
policies: [fedavg-all, {name: random-k, params: {k: 1}}]
seeds: 2
grid:
  links[0].bandwidth_bps: [5.0e6, 5.0e7]
  training.max_epochs: [25]
"""
KEYS = {"runs": ["run_id"], "epochs": ["run_id", "epoch"], "devices": ["run_id", "device"]}


def tables(out: Path) -> dict[str, pd.DataFrame]:
    got = {}
    for name, keys in KEYS.items():
        df = read_table(out, name).drop(columns=["wall_s"], errors="ignore")
        got[name] = df.sort_values(keys, kind="stable").reset_index(drop=True)
    return got


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sweep") / "tiny.yaml"
    path.write_text(SWEEP, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def serial(sweep_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serial")
    summary = run_sweep(load_plan(sweep_file), out, workers=1, progress=False)
    assert (summary.total, summary.computed, summary.skipped) == (8, 8, 0)
    return out


def test_pool_and_dask_store_the_same_tables_as_serial(sweep_file, serial, tmp_path):
    distributed = pytest.importorskip("distributed")
    plan = load_plan(sweep_file)
    pool_out, dask_out = tmp_path / "pool", tmp_path / "dask"
    run_sweep(plan, pool_out, workers=2, progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        summary = run_sweep(plan, dask_out, scheduler=cluster.scheduler_address, progress=False)
    assert summary.computed == 8
    ref = tables(serial)
    assert len(ref["runs"]) == 8 and len(ref["epochs"]) == 8 * 25
    for other in (tables(pool_out), tables(dask_out)):
        for name in KEYS:
            pd.testing.assert_frame_equal(other[name], ref[name])
    assert completed_runs(serial) == {t.run_id for t in plan.tasks}


def test_resume_skips_finished_runs_and_computes_the_rest(sweep_file, serial, tmp_path):
    plan = load_plan(sweep_file)
    out = tmp_path / "resume"
    # a partial sweep: half of the runs copied from a finished one
    kept = sorted(completed_runs(serial))[:4]
    for table in KEYS:
        (out / table).mkdir(parents=True)
        for rid in kept:
            (out / table / f"{rid}.parquet").write_bytes((serial / table / f"{rid}.parquet")
                                                         .read_bytes())
    before = {r: (out / "runs" / f"{r}.parquet").stat().st_mtime_ns for r in kept}
    summary = run_sweep(plan, out, workers=1, progress=False)
    assert summary.skipped == 4 and summary.computed == 4
    assert not set(summary.computed_ids) & set(kept)
    assert {r: (out / "runs" / f"{r}.parquet").stat().st_mtime_ns for r in kept} == before
    again = run_sweep(plan, out, workers=2, progress=False)
    assert (again.skipped, again.computed) == (8, 0)
    for name in KEYS:
        pd.testing.assert_frame_equal(tables(out)[name], tables(serial)[name])


class _Raises:
    """A policy with a bug: it raises in its third epoch."""

    def __init__(self, params: NoParams) -> None:
        self.name, self.params = "test-raises", params

    def reset(self, scenario, rng) -> None:
        pass

    def decide(self, obs) -> Decision:
        if obs.epoch == 2:
            raise ZeroDivisionError("policy bug on purpose")
        return Decision(participants={"phone-1": 10})


class _Invalid(_Raises):
    """A policy whose decision names a device that does not exist."""

    def __init__(self, params: NoParams) -> None:
        self.name, self.params = "test-invalid", params

    def decide(self, obs) -> Decision:
        return Decision(participants={"no-such-phone": 10})


RAISES = PolicyEntry("test-raises", _Raises, "raises", NoParams)
INVALID = PolicyEntry("test-invalid", _Invalid, "invalid", NoParams)


def test_failing_runs_are_recorded_and_do_not_stop_the_sweep(tmp_path, add_entry_point):
    add_entry_point("netsim.policies", "test-raises", "test_sweep_runner:RAISES")
    add_entry_point("netsim.policies", "test-invalid", "test_sweep_runner:INVALID")
    path = tmp_path / "f.yaml"
    path.write_text("base: two-phones\npolicies: [test-raises, fedavg-all, test-invalid]\n"
                    "seeds: 2\ngrid: {training.max_epochs: [5]}\n")
    summary = run_sweep(load_plan(path), tmp_path / "out", workers=1, progress=False)
    assert summary.computed == 6
    assert summary.statuses.get("failed") == 4
    assert len(summary.failures) == 4
    text = summary.text()
    assert "4 failed run(s)" in text and "ZeroDivisionError" in text
    assert "test-invalid / seed 1" in text
    runs = load_results(tmp_path / "out").runs
    bug = runs[runs["policy"] == "test-raises"]
    assert (bug["status"] == "failed").all() and (bug["epochs"] == 2).all()
    assert bug["error"].str.contains("policy bug on purpose").all()
    assert runs.loc[runs["policy"] == "test-invalid", "error"].str.contains("no-such-phone").all()
    ok = runs[runs["policy"] == "fedavg-all"]
    assert (ok["status"] != "failed").all() and (ok["epochs"] == 5).all()
    # failed runs count as finished: not recomputed unless asked
    assert run_sweep(load_plan(path), tmp_path / "out", progress=False).computed == 0
    retry = run_sweep(load_plan(path), tmp_path / "out", progress=False, retry_failed=True)
    assert retry.computed == 4


def test_a_run_that_raises_outside_the_engine_is_stored_as_failed(sweep_file, tmp_path):
    task = load_plan(sweep_file).tasks[0]
    broken = type(task)(**{**task.__dict__, "policy": "no-such-policy"})
    outcome = execute(broken, str(tmp_path))
    assert outcome.status == "failed" and "no-such-policy" in outcome.error
    runs = read_table(tmp_path, "runs")
    assert list(runs["run_id"]) == [task.run_id]
    assert runs["status"].iloc[0] == "failed" and np.isnan(runs["final_loss"].iloc[0])


def test_missing_dask_gives_a_clear_message(monkeypatch, sweep_file, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails
    with pytest.raises(dask_runner.DaskUnavailable, match=r"pip install 'netsim\[dask\]'"):
        run_sweep(load_plan(sweep_file), tmp_path, scheduler="tcp://127.0.0.1:1",
                  progress=False)


def test_unreachable_scheduler_gives_a_clear_message(monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr(dask_runner, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(dask_runner.DaskUnavailable, match="cannot connect"):
        dask_runner.connect("tcp://127.0.0.1:9")
