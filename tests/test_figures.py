"""Figures drawn headless (Agg) from stored results: the expected series, units, files."""

from __future__ import annotations

import json

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from netsim import figures as registry  # noqa: E402
from netsim.cli import main  # noqa: E402
from netsim.results.store import (
    write_parquet_atomic,  # noqa: E402
    write_run,  # noqa: E402
)
from netsim.sweep.plan import MANIFEST_COLUMNS  # noqa: E402
from netsim.sweep.results import Results, load_results  # noqa: E402
from plots import compare  # noqa: E402
from plots.common import axis_label, band  # noqa: E402

POLICIES = ["fedavg-all", "greedy-energy"]
SIZES = [10, 20, 40]


def synthetic(out) -> None:
    """Stored results of a 3-point sweep (n_devices), 2 policies, 3 seeds, without simulating."""
    rng = np.random.default_rng(0)
    manifest = []
    for point, n in enumerate(SIZES):
        for k, policy in enumerate(POLICIES):
            for seed in range(3):
                rid = f"r{point}{k}{seed}"
                epochs = 5 + seed
                end = np.cumsum(np.full(epochs, 2.0 + k))
                energy = 100.0 * n * (1 + k) + rng.normal(0, 10)
                runs = pd.DataFrame([{
                    "run_id": rid, "scenario": "default", "policy": policy, "seed": seed,
                    "status": "ok", "error": "", "epochs": epochs, "time_s": end[-1],
                    "energy_j": energy, "final_loss": 0.3, "target_reached": True,
                    "wall_s": 0.01, "initial_loss": 2.3, "target_loss": 0.3}])
                ep = pd.DataFrame({"run_id": rid, "epoch": np.arange(epochs),
                                   "start_s": end - (2.0 + k), "end_s": end,
                                   "energy_compute_j": energy / epochs, "energy_comm_j": 0.0,
                                   "energy_idle_j": 0.0,
                                   "loss": np.geomspace(2.0, 0.3, epochs)})
                dev = pd.DataFrame({"run_id": [rid], "device": ["d0"],
                                    "energy_compute_j": [energy]})
                write_run(out, runs, ep, dev)
                manifest.append({"run_id": rid, "sweep": "synth", "point": point,
                                 "point_label": f"n_devices={n}", "policy_label": policy,
                                 "axes_json": json.dumps({"generate.n_devices": n})})
    write_parquet_atomic(pd.DataFrame(manifest, columns=MANIFEST_COLUMNS),
                    out / "sweeps" / "synth-0.parquet")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Results:
    out = tmp_path_factory.mktemp("synth")
    synthetic(out)
    return load_results(out)


def legend_labels(fig) -> list[str]:
    return sorted(t.get_text() for ax in fig.axes if ax.get_legend()
                  for t in ax.get_legend().get_texts())


def test_results_join_the_manifest(results):
    runs = results.runs
    assert results.axes == ("generate.n_devices",)
    assert sorted(runs["generate.n_devices"].unique()) == SIZES
    assert set(runs["policy_label"]) == set(POLICIES) and len(runs) == 18


def test_energy_by_policy_has_a_bar_per_policy_and_point(results):
    fig = compare.energy_by_policy(results)
    ax = fig.axes[0]
    assert legend_labels(fig) == POLICIES
    assert len(ax.patches) == len(POLICIES) * len(SIZES)
    assert ax.get_ylabel() == "energy (J)"
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"n_devices={n}" for n in SIZES]
    from matplotlib.container import BarContainer

    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [c.get_label() for c in bars] == POLICIES
    fedavg = [p.get_height() for p in bars[0]]
    expected = results.runs[results.runs["policy_label"] == "fedavg-all"].groupby(
        "point")["energy_j"].mean()
    assert fedavg == pytest.approx(list(expected))


def test_metric_vs_axis_draws_mean_and_band_per_policy(results):
    figs = compare.metric_vs_axis(results)
    assert list(figs) == ["n_devices"]
    fig = figs["n_devices"]
    ax = fig.axes[0]
    assert legend_labels(fig) == POLICIES
    assert ax.get_xlabel() == "devices" and ax.get_ylabel() == "energy (J)"
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["greedy-energy"].get_xdata()) == SIZES
    assert len(ax.collections) == len(POLICIES)  # one 95 % band each


def test_loss_vs_time_one_figure_per_point(results):
    figs = compare.loss_vs_time(results)
    assert sorted(figs) == ["point0", "point1", "point2"]
    ax = figs["point1"].axes[0]
    assert legend_labels(figs["point1"]) == sorted(POLICIES + ["target"])
    assert ax.get_xlabel() == "simulated time (s)" and ax.get_ylabel() == "loss (nats)"
    assert ax.get_title() == "n_devices=20"


def test_energy_time_has_a_series_per_policy(results):
    fig = compare.energy_time(results)
    assert legend_labels(fig) == POLICIES
    assert fig.axes[0].get_xlabel().endswith("(s, simulated)")


def test_helpers():
    assert axis_label("time_s") == "time (s)"
    assert axis_label("links[0].energy_j_per_bit") == "energy (J/bit)"
    mean, lo, hi = band(np.array([[1.0, 2.0], [3.0, np.nan]]))
    assert mean[0] == 2.0 and mean[1] == 2.0 and lo[1] == hi[1] == 2.0 and lo[0] < 2.0 < hi[0]


def test_registry_selects_skips_and_survives_a_broken_figure(results):
    def broken(_):
        raise RuntimeError("plot bug")

    entries = [registry.figure("ebp", compare.energy_by_policy, runs={"policy": "fedavg-all"}),
               registry.figure("none", compare.energy_by_policy, runs={"sweep": "other"}),
               registry.figure("bad", broken),
               registry.figure("many", compare.loss_vs_time,
                               runs=lambda r: r["generate.n_devices"] > 10)]
    drawn = {d.name: d for d in registry.draw(results, entries)}
    assert legend_labels(drawn["ebp"].figure) == ["fedavg-all"]
    assert drawn["none"].figure is None and "no runs" in drawn["none"].note
    assert drawn["bad"].error and "plot bug" in drawn["bad"].note
    assert sorted(n for n in drawn if n.startswith("many-")) == ["many-point1", "many-point2"]
    with pytest.raises(KeyError, match="nosuch"):
        registry.select_mask(results.runs, {"nosuch": 1})


def test_figures_command_writes_png_and_pdf(tmp_path, capsys):
    synthetic(tmp_path / "res")
    code = main(["figures", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "fig"),
                 "--only", "energy-by-policy", "--only", "energy-vs-axis"])
    assert code == 0
    names = sorted(p.name for p in (tmp_path / "fig").iterdir())
    assert names == ["energy-by-policy.pdf", "energy-by-policy.png",
                     "energy-vs-axis-n_devices.pdf", "energy-vs-axis-n_devices.png"]
    assert (tmp_path / "fig" / "energy-by-policy.pdf").read_bytes()[:4] == b"%PDF"
    assert main(["figures", "--results", str(tmp_path / "res"), "--out", str(tmp_path),
                 "--only", "nosuch"]) == 2
    assert "unknown figure" in capsys.readouterr().err
