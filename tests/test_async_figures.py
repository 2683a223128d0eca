"""The asynchronous experiment's runner and figure (experiments/async/run.py,
plots/asynchronous.py) on a small real sweep: a dozen devices, a synchronous and an
asynchronous policy, with and without stragglers, two seeds."""

from __future__ import annotations

import copy
import importlib

import matplotlib
import numpy as np
import pytest
import yaml

matplotlib.use("Agg")

from netsim import figures as registry  # noqa: E402
from tests.test_async import STRAGGLERS, fleet  # noqa: E402

POLICIES = ["random-k", "fedbuff"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    run = importlib.import_module("experiments.async.run")  # ("async" is a keyword)
    folder = tmp_path_factory.mktemp("scen")
    paths = {}
    for name, dyn in (("static", None), ("stragglers", STRAGGLERS)):
        sc = copy.deepcopy(fleet(dyn, n=12))
        sc["policies"] = {"random-k": {"k": 4}, "fedbuff": {"concurrency": 4,
                                                            "buffer_updates": 2}}
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_text(yaml.safe_dump(sc))
    return run.run_sweeps(tmp_path_factory.mktemp("res"), 2, workers=1, policies=POLICIES,
                          scenarios=paths)


def test_the_figure_draws_loss_against_time_and_energy_per_world(results):
    drawn = list(registry.draw(results, only=["async-loss-time-energy"]))
    assert not any(d.error for d in drawn), [d.note for d in drawn]
    names = sorted(d.name for d in drawn)  # one per world (both sweeps have a point 0)
    assert names == ["async-loss-time-energy-point0-async-static",
                     "async-loss-time-energy-point0-async-stragglers"]
    for fig in (d.figure for d in drawn):
        time_ax, energy_ax = fig.axes[:2]
        assert time_ax.get_xlabel().startswith("simulated time")
        assert energy_ax.get_xlabel().startswith("energy")
        labels = [t.get_text() for t in energy_ax.get_legend().get_texts()]
        assert {lab.split(" (")[0] for lab in labels} >= set(POLICIES)
        for ax in (time_ax, energy_ax):
            for line in ax.get_lines():
                x = np.asarray(line.get_xdata(), dtype=float)
                assert (np.diff(x) >= 0).all()  # time and energy only grow
        assert not registry.overlapping_texts(fig)


def test_the_runner_tables_report_the_claim(results):
    run = importlib.import_module("experiments.async.run")
    table = run.table(results)
    assert set(table["policy"]) == set(POLICIES)
    assert (table.loc[table["policy"] == "random-k", "staleness"] == 0).all()
    assert (table.loc[table["policy"] == "fedbuff", "staleness"] > 0).all()
    claim = run.claim(results)
    fedbuff = claim[claim["policy"] == "fedbuff"]
    assert len(fedbuff) == 2 and fedbuff["time_s_ratio"].notna().all()
    assert (fedbuff["time_s_ratio_lo"] <= fedbuff["time_s_ratio"]).all()
    assert "| fedbuff |" in run.claim_markdown(claim)
    assert "| random-k |" in run.markdown(table)
