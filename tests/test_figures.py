"""Figures drawn headless (Agg) from stored results: the expected series, units, files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import netsim  # noqa: E402
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
    assert ax.get_xlabel() == "energy (J)"
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"n_devices={n}" for n in SIZES]
    from matplotlib.container import BarContainer

    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [c.get_label() for c in bars] == POLICIES
    fedavg = [p.get_width() for p in bars[0]]
    expected = results.runs[results.runs["policy_label"] == "fedavg-all"].groupby(
        "point")["energy_j"].mean()
    assert fedavg == pytest.approx(list(expected))


def test_energy_by_policy_legend_runs_in_the_bars_order(results):
    fig = compare.energy_by_policy(results)
    fig.canvas.draw()
    ax = fig.axes[0]
    from matplotlib.container import BarContainer

    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for point in range(len(SIZES)):  # top to bottom on the page, in each group of bars
        tops = {c.get_label(): c.patches[point].get_window_extent().y0
                for c in ax.containers if isinstance(c, BarContainer)}
        assert sorted(tops, key=lambda label: -tops[label]) == legend
    plt.close(fig)


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
    assert legend_labels(figs["point1"]) == sorted([f"{p} (n=3)" for p in POLICIES] + ["target"])
    assert ax.get_xlabel() == "simulated time (s)" and ax.get_ylabel() == "loss (nats)"
    assert ax.get_title() == "n_devices=20"


def test_energy_time_has_a_series_per_policy(results):
    fig = compare.energy_time(results)
    assert legend_labels(fig) == POLICIES
    assert fig.axes[0].get_xlabel() == "simulated training time (s)"


def test_helpers():
    assert axis_label("time_s") == "time (s)"
    assert axis_label("links[0].energy_j_per_bit") == "energy (J/bit)"
    mean, lo, hi = band(np.array([[1.0, 2.0], [3.0, np.nan]]))
    assert mean[0] == 2.0 and mean[1] == 2.0 and lo[1] == hi[1] == 2.0 and lo[0] < 2.0 < hi[0]


def test_figures_draw_compares_interval_clipped_at_zero_for_positive_quantities():
    """Two seeds 1 J and 100 J: Student-t's interval is about [-578, 679] J, as ``netsim
    compare`` prints it; the figures draw the same interval, its low bound at 0 (energy cannot
    be negative); a signed quantity keeps its negative bound."""
    from netsim.sweep.stats import t_interval, t_intervals

    mean, lo, hi = t_interval([1.0, 100.0])
    assert mean == 50.5 and lo < 0
    m, blo, bhi = band(np.array([[1.0], [100.0]]))
    assert (m[0], blo[0], bhi[0]) == (mean, 0.0, hi)
    rng = np.random.default_rng(3)
    ys = rng.lognormal(0.0, 2.0, size=(3, 50))  # 3 seeds, 50 grid points, heavy spread
    m, lo, hi = band(ys)
    tm, tlo, thi = t_intervals(ys)
    np.testing.assert_allclose(hi, thi)
    np.testing.assert_allclose(lo, np.maximum(tlo, 0.0))
    assert (lo >= 0).all() and (lo <= m).all() and (m <= hi).all()
    signed = np.array([[-1.0], [2.0], [3.0]])
    assert tuple(float(v[0]) for v in band(signed)) == t_interval([-1.0, 2.0, 3.0])


def test_bars_of_few_seeds_stay_above_zero(tmp_path):
    """energy-by-policy on two seeds whose energies differ a hundredfold: no error bar
    reaches below zero."""
    rows = [{"run_id": f"r{s}", "sweep": "", "point": 0, "point_label": "p", "seed": s,
             "policy_label": "a", "policy": "a", "status": "ok", "energy_j": e,
             "time_s": 1.0, "final_loss": 0.1, "target_reached": True, "scenario": "x"}
            for s, e in enumerate([1.0, 100.0])]
    res = Results(runs=pd.DataFrame(rows), epochs=pd.DataFrame(), devices=pd.DataFrame(),
                  axes=())
    fig = compare.energy_by_policy(res)
    (bars,) = [c for c in fig.axes[0].containers if hasattr(c, "errorbar") and c.errorbar]
    segments = bars.errorbar.lines[2][0].get_segments()
    assert min(float(seg[:, 0].min()) for seg in segments) >= 0.0


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


def test_figures_command_replaces_only_figures_netsim_wrote(tmp_path, capsys):
    """A user's own energy-by-policy.png (or a part's, energy-vs-axis-x.pdf) in the output
    folder stops the command before anything is drawn; figures netsim wrote are replaced."""
    synthetic(tmp_path / "res")
    args = ["figures", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "fig"),
            "--only", "energy-by-policy", "--only", "energy-vs-axis"]
    assert main(args) == 0
    own = tmp_path / "fig" / "energy-by-policy.png"
    before = own.stat().st_mtime_ns
    assert main(args) == 0 and own.stat().st_mtime_ns >= before  # (its own: replaced)
    for name in ("energy-by-policy.png", "energy-vs-axis-n_devices.pdf"):
        precious = tmp_path / "fig" / name
        precious.write_bytes(b"\x89PNG my own plot")
        capsys.readouterr()
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "--out" in err and name in err and "is not a figure netsim wrote" in err
        assert precious.read_bytes() == b"\x89PNG my own plot"
        precious.unlink()
        assert main(args) == 0


def test_run_never_replaces_a_users_timeline_png(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    precious = out / "figures" / "timeline.png"
    precious.write_text("mine")
    assert main(["run", "two-phones", "--policy", "fedavg-all", "--out", str(out)]) == 2
    assert "timeline.png" in capsys.readouterr().err and precious.read_text() == "mine"
    assert not (out / "runs").exists()  # (refused before anything ran)


def test_figures_command_lists_skipped_figures_once_per_reason(tmp_path, capsys):
    synthetic(tmp_path / "res")
    assert main(["figures", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "fig")]) == 0
    lines = capsys.readouterr().out.splitlines()
    skipped = [ln for ln in lines if ln.startswith("skipped")]
    missing = []
    for d in registry.draw(load_results(tmp_path / "res")):
        if d.figure is not None:
            plt.close(d.figure)
        elif not d.error:
            missing.append(d)
    assert len(missing) > len(skipped) >= 1
    assert sorted(skipped) == sorted(
        f"skipped {sum(d.note == note for d in missing)} figure(s) ({note}): "
        + ", ".join(d.name for d in missing if d.note == note)
        for note in {d.note for d in missing})
    assert lines[-1].endswith(f"figure(s) in {tmp_path / 'fig'}")


def family_synthetic(out) -> pd.DataFrame:
    """Stored runs of PACT- and DepL-family policies over two loss targets and two pi, with
    epochs (variants, participants) and devices; returns the runs table."""
    rng = np.random.default_rng(1)
    rows = []
    specs = [("pact", None), ("fedavg-all", None), ("depl", 0.8), ("depl", 0.9),
             ("depl-mean", 0.9)]
    for target in (0.3, 0.4):
        for policy, pi in specs:
            for seed in range(4):
                rid = f"{policy}-{pi}-{target}-{seed}"
                n = 4
                energy = 100.0 / target * (2 if policy == "fedavg-all" else 1) + rng.normal(0, 5)
                reached = seed != 3 or policy != "depl-mean"
                params = json.dumps({"target_probability": pi} if pi else {})
                run = pd.DataFrame([{
                    "run_id": rid, "scenario": "fam", "policy": policy, "seed": seed,
                    "status": "ok" if reached else "target_missed", "error": "", "epochs": n,
                    "time_s": 4.0, "energy_j": energy, "final_loss": target * (0.9 if reached
                                                                                 else 1.2),
                    "target_reached": reached, "wall_s": 0.01, "policy_params": params,
                    "target_loss": target, "deadline_s": 100.0, "initial_loss": 2.3,
                    "planned_energy_j": 90.0 / target if policy == "pact" else np.nan,
                    "scenario_hash": f"h{target}"}])
                ep = pd.DataFrame({"run_id": rid, "epoch": np.arange(n), "start_s": np.arange(n),
                                   "end_s": np.arange(1, n + 1.0), "energy_compute_j": energy / n,
                                   "energy_comm_j": 0.0, "energy_idle_j": 0.0,
                                   "loss": np.geomspace(2.0, target, n), "variant": [1, 1, 0, 0],
                                   "variant_name": ["pruned", "pruned", "full", "full"],
                                   "participant_ids": [["a"], ["a", "b"], ["b"], ["a", "b"]]})
                dev = pd.DataFrame({"run_id": rid, "device": ["agg", "a", "b", "switch"],
                                    "energy_compute_j": energy / 4,
                                    "network_node": [False, False, False, True]})
                write_run(out, run, ep, dev)
                rows.append(run)
    return pd.concat(rows, ignore_index=True)


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> Results:
    out = tmp_path_factory.mktemp("family")
    family_synthetic(out)
    return load_results(out)


def stored_sweeps(out) -> None:
    """Real runs, stored by sweeps: the baechi policy as in experiments/baechi/sweep.yaml (its
    memory axis, 3 seeds) and PACT at two epsilons with pact-optimum on the small star."""
    import yaml

    from netsim.sweep import api

    root = Path(__file__).resolve().parents[1] / "experiments"
    baechi = yaml.safe_load((root / "baechi" / "sweep.yaml").read_text(encoding="utf-8"))
    baechi.update(base=str(root / "baechi" / baechi["base"]), seeds=3)
    api.sweep(baechi, out=out)
    api.sweep({"name": "pact-eps", "base": str(root / "pact" / "small.yaml"), "seeds": 3,
               "policies": [{"name": "pact", "params": {"epsilon": 0.2}},
                            {"name": "pact", "params": {"epsilon": 0.1}}, "pact-optimum"]},
              out=out)


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Results:
    out = tmp_path_factory.mktemp("stored")
    stored_sweeps(out)
    return load_results(out)


def test_policy_styles_are_fixed_distinct_and_colour_blind_safe():
    from netsim.policy import registered
    from plots.style import PALETTE, policy_style, style_for

    names = list(registered())
    combos = {tuple(policy_style(n).values()) for n in names}
    assert len(combos) == len(names)  # no two registered policies look alike
    assert {policy_style(n)["color"] for n in names} <= set(PALETTE)
    assert style_for(["pact", "fedavg-all"])["pact"] == style_for(["depl", "pact", "x"])["pact"]
    labels = ["random-k(k=1)", "random-k(k=5)", "my-policy", "other"]
    styles = style_for(labels)
    assert len({s["color"] for s in styles.values()}) == len(labels)
    assert styles["random-k(k=1)"]["color"] == policy_style("random-k")["color"]  # its family
    assert style_for(labels)["my-policy"] == styles["my-policy"]


def test_curves_are_held_at_their_final_value():
    from plots.common import curves_on_grid, still_running

    curves = [(np.array([0.0, 1.0]), np.array([0.0, 10.0])),
              (np.array([0.0, 2.0]), np.array([0.0, 30.0]))]
    grid, ys = curves_on_grid(curves, points=5)  # grid 0, .5, 1, 1.5, 2
    assert list(ys[0]) == [0.0, 5.0, 10.0, 10.0, 10.0]
    mean = ys.mean(axis=0)
    assert np.all(np.diff(mean) >= 0) and mean[-1] == 20.0  # the mean never falls
    assert np.isnan(curves_on_grid(curves, points=5, hold=False)[1][0, -1])
    assert list(still_running(curves, grid)) == [2, 2, 2, 1, 1]


def test_overlap_check_finds_colliding_text_and_legends_over_data():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.bar(range(12), range(12), label="bars")
    ax.set_xticks(range(12), [f"a long point label {i}" for i in range(12)])
    ax.legend(loc="upper left")
    found = registry.overlapping_texts(fig)
    assert ("legend", "axes") in found
    assert any(a.startswith("a long") and b.startswith("a long") for a, b in found)
    plt.close(fig)


def test_every_registered_figure_is_legible_captioned_and_saved_with_metadata(
        results, family, stored, tmp_path):
    from PIL import Image

    names = set()
    for res in (results, family, stored):
        for drawn in registry.draw(res):
            if drawn.figure is None:
                assert not drawn.error, drawn
                continue
            names.add(drawn.name.split("-point")[0])
            fig = drawn.figure
            assert registry.overlapping_texts(fig) == [], drawn.name
            caption = fig.texts[-1].get_text()
            assert caption.startswith("scenario ") and f"netsim {netsim.__version__}" in caption
            shown = getattr(fig, "netsim_runs", None)  # (a figure of some runs: theirs)
            if shown is None:
                assert "seeds 0-" in caption
                assert re.search(r"\d+ runs, \d+(-\d+)? per policy and point", caption), caption
            else:
                seeds = sorted(set(res.runs.set_index("run_id").loc[shown, "seed"]))
                assert (f"seed {seeds[0]};" if len(seeds) == 1 else "seeds ") in caption
                assert re.search(rf"; {len(shown)} runs?[;,]", caption), caption
            if drawn.name in ("energy-by-policy", "pact-schedule-point0"):
                png, pdf = registry.save(fig, tmp_path / drawn.name)
                assert Image.open(png).text["Description"] == caption
                assert pdf.read_bytes()[:4] == b"%PDF"
                if drawn.name == "energy-by-policy":  # vector: no raster inside (a heatmap has)
                    assert b"/Subtype /Image" not in pdf.read_bytes()
                assert f"/Subject ({caption})".encode() in pdf.read_bytes()
            else:
                matplotlib.pyplot.close(fig)
    family_figures = {n for n in registry.registered_figures()
                      if n.startswith(("pact", "depl", "baechi"))}
    assert family_figures - {"pact-energy-vs-deadline", "pact-energy-vs-devices"} <= names
    assert {"baechi-step-time", "baechi-peak-memory", "pact-energy-vs-epsilon"} <= names


def test_family_figures_show_the_stored_runs(family):
    from plots import families

    fig = families.pact_energy_vs_target(family)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    runs = family.runs[family.runs["policy"] == "fedavg-all"]
    assert list(lines["fedavg-all"].get_xdata()) == [0.3, 0.4]
    assert list(lines["fedavg-all"].get_ydata()) == pytest.approx(
        list(runs.groupby("target_loss")["energy_j"].mean()))
    assert list(lines["pact (planned)"].get_ydata()) == pytest.approx([300.0, 225.0])
    fig = families.depl_success_vs_pi(family)
    mean = fig.axes[0].containers[-1].lines[0]  # depl-mean at pi 0.9: 6 of 8 runs reached
    assert list(mean.get_ydata()) == pytest.approx([0.75])
    assert families.pact_energy_vs_deadline(family) is None  # one deadline: nothing to draw
    assert set(families.device_counts(family)) == {3.0}


def test_timeline_mean_energy_never_falls_when_runs_of_different_lengths_end(results):
    from plots.timeline import timeline_figure

    figs = timeline_figure(results)  # 3 points; seeds run 5, 6 and 7 epochs
    assert sorted(figs) == ["point0", "point1", "point2"]
    energy_axis = figs["point0"].axes[1]
    for line in energy_axis.get_lines():
        y = np.asarray(line.get_ydata(), dtype=float)
        assert np.all(np.diff(y) >= -1e-9) and not np.isnan(y).any(), line.get_label()
    assert figs["point0"].get_suptitle().startswith("n_devices=10: seeds 0, 1, 2")


def test_timeline_of_runs_without_a_loss_says_so_on_the_energy_panels_time_axis(results):
    import dataclasses

    from plots.timeline import timeline_figure

    one = results.select(results.runs["point"] == 0)
    lossless = dataclasses.replace(one, runs=one.runs.assign(initial_loss=np.nan),
                                   epochs=one.epochs.assign(loss=np.nan))
    fig = timeline_figure(lossless)
    ax_loss, ax_energy = fig.axes[:2]
    assert [t.get_text() for t in ax_loss.texts] == ["no loss recorded\n(the runs report none)"]
    assert ax_loss.get_xlim() == ax_energy.get_xlim() and ax_energy.get_xlim()[1] > 0
    assert ax_loss.get_yscale() == "linear"
    drawn = timeline_figure(one)  # loss 2.3 -> 0.3 nats: less than a decade, linear
    assert not drawn.axes[0].texts and drawn.axes[0].get_yscale() == "linear"
    with registry.scale("log"):
        assert timeline_figure(one).axes[0].get_yscale() == "log"
    from plots.compare import loss_vs_time

    assert loss_vs_time(lossless) is None  # (no figure of nothing)
    assert sorted(loss_vs_time(one)) == ["point0"]
    matplotlib.pyplot.close("all")


def test_baechi_figures_show_what_the_policy_placed(stored):
    from matplotlib.container import BarContainer

    from plots import baechi

    runs = stored.select(stored.runs["policy"] == "baechi")
    table = baechi.placements(runs)
    assert len(table) == 9 and set(table["placement_algorithm"]) <= {"single", *baechi.ALGORITHMS}
    fig = baechi.step_time(runs)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "64", "128"]
    assert ax.get_xlabel() == "batch samples" and ax.get_ylabel() == "step time (s)"
    heights = sorted(round(b.get_height(), 9) for c in ax.containers
                     if isinstance(c, BarContainer) for b in c)
    stored_steps = sorted(round(s, 9) for row in table.drop_duplicates("point")["placement_step_s"]
                          for a, s in row.items() if a != "single" and s is not None)
    assert heights == stored_steps
    assert "one device" in legend_labels(fig) and "chosen" in legend_labels(fig)
    figs = baechi.peak_memory(runs)
    assert sorted(figs) == ["point0", "point1", "point2"]
    first = table[table["point"] == 2].iloc[0]
    bars = [b.get_width() for b in figs["point2"].axes[0].patches]
    assert bars == pytest.approx([m / 1e6 for m in first["placement_peak_memory_bytes"]])
    assert figs["point2"].axes[0].get_title() == "batch samples 128"
    matplotlib.pyplot.close("all")


def test_pact_energy_vs_epsilon_draws_the_stored_runs_and_the_optimum(stored):
    from plots import families

    runs = families.with_epsilon(stored)
    pact = runs[runs["policy"] == "pact"]
    assert sorted(pact["epsilon"].unique()) == [0.1, 0.2] and (pact["planning_s"] > 0).all()
    fig = families.pact_energy_vs_epsilon(stored)
    energy, planning = fig.axes
    lines = {line.get_label(): line for line in energy.get_lines()}
    assert list(lines["pact"].get_xdata()) == [0.1, 0.2]
    opt = runs[(runs["policy"] == "pact-optimum") & runs["target_reached"].astype(bool)]
    assert lines["pact-optimum"].get_ydata()[0] == pytest.approx(opt["energy_j"].mean())
    times = planning.get_lines()[0].get_ydata()
    assert list(times) == pytest.approx(list(pact.groupby("epsilon")["planning_s"].mean()))
    assert planning.get_ylabel() == "planning time (s)"
    matplotlib.pyplot.close("all")


def test_airtime_by_cell_shows_each_cells_air_time_per_epoch(tmp_path):
    """Stored runs on one Wi-Fi cell of four phones: every epoch of fedavg-all uses the cell
    for 2 x 8S x sum(1/r_i) s (each phone's download and upload), which the heat map shows
    per second of the epoch; the devices' air time sums to the cell's."""
    from plots import media
    from tests.test_media import cell_scenario

    rates = (8e7, 8e7, 2.4e7, 5.4e7)
    for policy in ("fedavg-all", "greedy-energy"):
        r = netsim.simulate(cell_scenario(rates=rates), policy, seed=0)
        write_run(tmp_path, r.runs, r.epochs, r.devices)
    res = load_results(tmp_path)
    fed = res.epochs[res.epochs["run_id"] == res.runs.set_index("policy").loc[
        "fedavg-all", "run_id"]].sort_values("epoch")
    bits = 8.0 * 1.1e7 * 4
    per_epoch = [json.loads(x)["cell-1"] for x in fed["airtime_by_medium_s"]]
    np.testing.assert_allclose(per_epoch, 2 * bits * sum(1 / r for r in rates), rtol=1e-9)
    devices = res.devices[res.devices["run_id"] == fed["run_id"].iloc[0]]
    assert devices["airtime_s"].sum() == pytest.approx(sum(per_epoch), rel=1e-9)
    media_ids, _, share = media.airtime_matrix(fed)
    assert media_ids == ["cell-1"]
    np.testing.assert_allclose(share[0], np.array(per_epoch)
                               / (fed["end_s"] - fed["start_s"]).to_numpy(), rtol=1e-12)
    assert (share <= 1.0 + 1e-9).all()  # a Wi-Fi cell's budget
    fig = registry.registered_figures()["airtime-by-cell"].plot(res)
    assert len(fig.axes) == 3  # a heat map per policy, and the colour bar
    assert registry.overlapping_texts(fig) == []
    assert fig.texts[-1].get_text().startswith("scenario ")
