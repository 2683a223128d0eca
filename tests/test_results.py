"""Result tables: contract columns, atomic storage, read-back."""

import pandas as pd

import netsim
from netsim.results import (
    DEVICE_COLUMNS,
    EPOCH_COLUMNS,
    RUN_COLUMNS,
    completed_runs,
    read_table,
    store,
)


def test_tables_have_the_contract_columns(star):
    res = netsim.simulate(star, "fedavg-all", seed=0)
    for df, cols in ((res.runs, RUN_COLUMNS), (res.epochs, EPOCH_COLUMNS),
                     (res.devices, DEVICE_COLUMNS)):
        assert list(df.columns[: len(cols)]) == cols
    assert res.runs["run_id"].iloc[0] == res.epochs["run_id"].iloc[0]


def test_run_id_depends_on_scenario_policy_params_and_seed(star):
    ids = {netsim.simulate(star, "random-k", seed=s, params={"k": k}).runs["run_id"].iloc[0]
           for s in (0, 1) for k in (1, 2)}
    assert len(ids) == 4
    again = netsim.simulate(star, "random-k", seed=0, params={"k": 1}).runs["run_id"].iloc[0]
    assert again in ids


def test_written_runs_read_back_identically(star, tmp_path):
    res = netsim.simulate(star, "fedavg-all", seed=0, out=tmp_path)
    rid = res.runs["run_id"].iloc[0]
    assert completed_runs(tmp_path) == {rid}
    pd.testing.assert_frame_equal(read_table(tmp_path, "runs"), res.runs)
    back = read_table(tmp_path, "epochs")
    assert back["loss"].tolist() == res.epochs["loss"].tolist()
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_failed_write_leaves_no_partial_file(star, tmp_path, monkeypatch):
    res = netsim.simulate(star, "fedavg-all", seed=0)

    def boom(self, path, **kw):
        with open(path, "wb") as fh:
            fh.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", boom)
    try:
        store.write_run(tmp_path, res.runs, res.epochs, res.devices)
    except OSError:
        pass
    assert completed_runs(tmp_path) == set()
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
