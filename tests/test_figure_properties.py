"""Properties a reviewer checks in every figure (issue 54): the interval ``netsim compare``
prints, error bars visible on their bars, log axes where values span more than a decade,
colours and markers that keep 12 policies apart, times in readable units, captions that name
the seed, a family's figures only where the family ran, and ``netsim compare`` in 100
columns. Synthetic stored results (nothing simulated), Agg; fast."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib import colors as mcolors
from matplotlib.container import BarContainer

from netsim.sweep.compare import compare_table
from netsim.sweep.results import Results, load_results
from plots import compare

POLICIES = ["fedavg-all", "greedy-energy", "random-k"]


def runs_table(energies: dict[str, list[float]], point_label: str = "p") -> pd.DataFrame:
    """A runs table of one scenario point: a run per (policy, seed) with those energies (J)."""
    return pd.DataFrame([
        {"run_id": f"{policy}-{seed}", "sweep": "s", "point": 0, "point_label": point_label,
         "seed": seed, "policy_label": policy, "policy": policy, "status": "ok",
         "energy_j": energy, "time_s": 10.0 * (seed + 1), "final_loss": 0.1,
         "target_reached": True, "scenario": "x", "scenario_hash": "h"}
        for policy, values in energies.items() for seed, energy in enumerate(values)])


def results_of(runs: pd.DataFrame) -> Results:
    return Results(runs=runs, epochs=pd.DataFrame(), devices=pd.DataFrame(), axes=())


def bar_intervals(fig) -> dict[str, list[tuple[float, float]]]:
    """The drawn error bars of energy-by-policy: policy -> [(low, high)] per point (J)."""
    ax = fig.axes[0]
    out = {}
    for container in ax.containers:
        if isinstance(container, BarContainer) and container.errorbar is not None:
            segments = container.errorbar.lines[2][0].get_segments()
            out[container.get_label()] = [(float(s[:, 0].min()), float(s[:, 0].max()))
                                          for s in segments]
    return out


def test_energy_by_policy_draws_the_interval_netsim_compare_prints():
    """The same runs, the same numbers: each bar's error bar is compare's Student-t interval
    of the all-runs mean energy (a low bound below 0 drawn at 0)."""
    runs = runs_table({"fedavg-all": [100.0, 130.0, 90.0], "greedy-energy": [1.0, 100.0],
                       "random-k": [40.0, 41.0, 45.0, 39.0]})
    table = compare_table(runs).set_index("policy")
    drawn = bar_intervals(compare.energy_by_policy(results_of(runs)))
    assert sorted(drawn) == sorted(table.index)
    for policy, [(lo, hi)] in drawn.items():
        assert hi == pytest.approx(table.loc[policy, "energy_j_all_hi"], rel=1e-12)
        assert lo == pytest.approx(max(0.0, table.loc[policy, "energy_j_all_lo"]), rel=1e-12,
                                   abs=1e-12)
    assert table.loc["greedy-energy", "energy_j_all_lo"] < 0 and drawn["greedy-energy"][0][0] == 0


def luminance(colour) -> float:
    """WCAG relative luminance of a colour."""
    rgb = np.array(mcolors.to_rgb(colour))
    lin = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return float(lin @ [0.2126, 0.7152, 0.0722])


def contrast(a, b) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""
    la, lb = sorted([luminance(a), luminance(b)], reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_error_bars_stay_visible_on_every_bar_and_on_the_page():
    """fedavg-all's black bar: its black interval is drawn above the bar inside a white halo,
    so the line or its halo contrasts (>= 4.5:1) with every bar's colour and the page."""
    runs = runs_table({p: [100.0 * (k + 1), 120.0 * (k + 1), 90.0 * (k + 1)]
                       for k, p in enumerate(POLICIES)})
    fig = compare.energy_by_policy(results_of(runs))
    ax = fig.axes[0]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert any(luminance(c.patches[0].get_facecolor()) < 0.01 for c in bars)  # (a black bar)
    for container in bars:
        _, caps, lines = container.errorbar.lines
        face = container.patches[0].get_facecolor()
        for artist in [*caps, *lines]:
            assert artist.get_zorder() > container.patches[0].get_zorder()
            line = artist.get_markeredgecolor() if hasattr(artist, "get_markeredgecolor") \
                else artist.get_colors()[0]  # (a cap is a marker; the interval a collection)
            halos = [e._gc["foreground"] for e in artist.get_path_effects()
                     if hasattr(e, "_gc") and "foreground" in e._gc]
            assert halos, "an interval without a halo"
            for background in (face, "white"):
                assert max(contrast(line, background),
                           *(contrast(h, background) for h in halos)) >= 4.5
            assert contrast(line, halos[0]) >= 4.5


def test_a_one_seed_bar_has_no_interval_and_compare_prints_none():
    runs = runs_table({"fedavg-all": [100.0]})
    assert np.isnan(compare_table(runs)["energy_j_all_lo"].iloc[0])
    assert bar_intervals(compare.energy_by_policy(results_of(runs))) == {
        "fedavg-all": [(100.0, 100.0)]}


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Results:
    from tests.test_figures import synthetic

    out = tmp_path_factory.mktemp("synth")
    synthetic(out)
    return load_results(out)


# --- log axes where values span more than a decade ------------------------------------------

def is_log(scale: str) -> bool:
    return scale in ("log", "symlog")


def test_energy_by_policy_is_logarithmic_where_its_bars_span_more_than_a_decade():
    from netsim.figures import scale

    wide = results_of(runs_table({"fedavg-all": [5000.0, 5100.0], "random-k": [40.0, 41.0],
                                  "greedy-energy": [300.0, 310.0]}))
    narrow = results_of(runs_table({"fedavg-all": [500.0, 510.0], "random-k": [100.0, 101.0]}))
    assert is_log(compare.energy_by_policy(wide).axes[0].get_xscale())
    assert compare.energy_by_policy(narrow).axes[0].get_xscale() == "linear"
    with scale("linear"):
        assert compare.energy_by_policy(wide).axes[0].get_xscale() == "linear"
    with scale("log"):
        assert is_log(compare.energy_by_policy(narrow).axes[0].get_xscale())
    with pytest.raises(ValueError, match="one of auto, log, linear"):
        with scale("logarithmic"):
            pass


def test_energy_vs_time_timeline_and_loss_axes_choose_their_scale(stored):
    """The synthetic sweep: energies 1,000-8,000 J at one point (less than a decade: linear),
    losses 2.3 -> 0.3 nats (linear); a policy 100 times cheaper makes energy logarithmic."""
    import dataclasses

    from netsim.figures import scale
    from plots.timeline import timeline_figure

    one = stored.select(stored.runs["point"] == 0)
    fig = timeline_figure(one)
    assert [ax.get_yscale() for ax in fig.axes[:2]] == ["linear", "linear"]
    cheap = one.runs["policy"] == "greedy-energy"
    spread = dataclasses.replace(one, epochs=one.epochs.assign(energy_compute_j=np.where(
        one.epochs["run_id"].isin(one.runs.loc[cheap, "run_id"]),
        one.epochs["energy_compute_j"] / 100, one.epochs["energy_compute_j"])),
        runs=one.runs.assign(energy_j=np.where(cheap, one.runs["energy_j"] / 100,
                                               one.runs["energy_j"])))
    assert is_log(timeline_figure(spread).axes[1].get_yscale())
    assert is_log(compare.energy_time(spread).axes[0].get_yscale())
    assert compare.energy_time(one).axes[0].get_yscale() == "linear"
    with scale("log"):
        assert compare.loss_vs_time(one)["point0"].axes[0].get_yscale() == "log"
        assert is_log(timeline_figure(one).axes[1].get_yscale())
    assert compare.loss_vs_time(one)["point0"].axes[0].get_yscale() == "linear"
    with scale("linear"):
        assert timeline_figure(spread).axes[1].get_yscale() == "linear"
    import matplotlib.pyplot as plt

    plt.close("all")


def test_figures_and_report_take_log_and_linear(tmp_path, capsys):
    from netsim.cli import main
    from tests.test_figures import synthetic

    synthetic(tmp_path / "res")
    base = ["figures", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "fig"),
            "--only", "energy-by-policy"]
    assert main([*base, "--log"]) == 0 and main([*base, "--linear"]) == 0
    with pytest.raises(SystemExit) as exc:
        main([*base, "--log", "--linear"])
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err
    from netsim.cli import build_parser

    assert build_parser().parse_args(["report", "x", "--log"]).value_axes == "log"
    assert build_parser().parse_args(["report", "x"]).value_axes == "auto"


# --- 12 policies kept apart; parameters in legends ------------------------------------------

TWELVE = ["pact", "pact-no-compression", "pact-all-nodes", "compress-first", "fedavg-all",
          "greedy-energy", "fastest-k", "random-k", "hierfavg", "rfl-ha", "async-hfl",
          "cloud-only"]


def lab(colour) -> np.ndarray:
    """CIE L*a*b* of an sRGB colour (D65)."""
    rgb = np.array(mcolors.to_rgb(colour))
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ lin / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("names", [TWELVE, [f"my-policy-{i}" for i in range(12)],
                                   TWELVE[:8], [f"random-k(k={k})" for k in range(1, 13)]])
def test_twelve_series_differ_in_colour_and_marker_both(names):
    """Any 12 series of one figure (registered policies whose preferred hues are shared by a
    family, unknown names, one policy with 12 parameter sets): 12 colours, pairwise at least
    20 apart in CIE L*a*b* (clearly different side by side), none too pale for the page, and
    12 markers."""
    from plots.style import style_for

    styles = style_for(names)
    colours = [s["color"] for s in styles.values()]
    assert len(set(colours)) == len(names)
    assert len({s["marker"] for s in styles.values()}) == len(names)
    points = [lab(c) for c in colours]
    gaps = [float(np.linalg.norm(a - b)) for i, a in enumerate(points) for b in points[i + 1:]]
    assert min(gaps) >= 20, min(gaps)
    assert all(contrast(c, "white") >= 1.9 for c in colours)
    assert style_for(names) == styles  # (the same figure twice: the same styles)


def test_a_figure_of_twelve_policies_draws_each_in_its_own_colour_and_marker():
    runs = runs_table({p: [10.0 * (k + 1), 11.0 * (k + 1)] for k, p in enumerate(TWELVE)})
    fig = compare.energy_time(results_of(runs))
    lines = [c.lines[0] for c in fig.axes[0].containers]
    assert len({mcolors.to_hex(line.get_color()) for line in lines}) == 12
    assert len({line.get_marker() for line in lines}) == 12


def test_legends_name_the_parameters_when_a_policy_runs_with_several():
    """A sweep's labels ``random-k(k=5)`` and a stored run's ``random-k {"k": 5}`` read
    ``random-k (k=5)`` in legends; a lone policy keeps its bare name."""
    from plots.style import series_label

    assert series_label("random-k(k=5)") == "random-k (k=5)"
    assert series_label('random-k {"k": 5, "frac": 0.5}') == "random-k (k=5, frac=0.5)"
    assert series_label("pact(epsilon=0.1,k=2)") == "pact (epsilon=0.1, k=2)"
    assert series_label("fedavg-all") == "fedavg-all"
    runs = runs_table({"random-k(k=5)": [10.0, 12.0], "random-k(k=2)": [20.0, 21.0],
                       "fedavg-all": [30.0, 31.0]})
    runs["policy"] = runs["policy"].str.split("(").str[0]
    fig = compare.energy_by_policy(results_of(runs))
    assert sorted(t.get_text() for t in fig.axes[0].get_legend().get_texts()) == [
        "fedavg-all", "random-k (k=2)", "random-k (k=5)"]


# --- times in s, min, h or days by their span -----------------------------------------------

def test_time_axes_read_in_a_unit_fit_to_their_span(stored):
    """The synthetic sweep's runs end at 10-21 s (seconds); the same runs 1,000 times longer
    (to about 6 h) read in hours, the drawn times divided to match."""
    import dataclasses

    from plots.common import time_unit
    from plots.timeline import timeline_figure

    assert [time_unit(s)[0] for s in (59.0, 600.0, 601.0, 3 * 3600.0, 250_000.0, 3e5)] == [
        "s", "s", "min", "min", "h", "days"]
    one = stored.select(stored.runs["point"] == 0)
    slow = dataclasses.replace(
        one, runs=one.runs.assign(time_s=one.runs["time_s"] * 1000),
        epochs=one.epochs.assign(start_s=one.epochs["start_s"] * 1000,
                                 end_s=one.epochs["end_s"] * 1000))
    for res, unit, factor in ((one, "s", 1.0), (slow, "h", 1000 / 3600)):
        fig = timeline_figure(res)
        assert [ax.get_xlabel() for ax in fig.axes[:2]] == [f"simulated time ({unit})"] * 2
        end = max(float(np.max(line.get_xdata())) for line in fig.axes[1].get_lines())
        assert end == pytest.approx(float(one.epochs["end_s"].max()) * factor)
        loss = compare.loss_vs_time(res)["point0"].axes[0]
        assert loss.get_xlabel() == f"simulated time ({unit})"
        assert compare.energy_time(res).axes[0].get_xlabel() == \
            f"simulated training time ({unit})"
    import matplotlib.pyplot as plt

    plt.close("all")


# --- a family's figures only where it ran; captions and titles say what was drawn -----------

def test_a_family_is_not_drawn_without_its_runs(stored):
    """The synthetic sweep (fedavg-all and greedy-energy over n_devices, both PACT's
    baselines) draws no pact-* figure: no PACT-family run; one pact run brings them back."""
    from netsim import figures as registry
    from plots import registry as own

    drawn = {d.name: d for d in registry.draw(stored)}
    for name in ("pact-energy-vs-devices", "pact-energy-vs-target", "depl-cost-vs-pi"):
        assert drawn[name].figure is None and "no runs match" in drawn[name].note, name
    assert not own.PACT(stored.runs).any() and not own.DEPL(stored.runs).any()
    with_pact = stored.runs.assign(policy=np.where(
        stored.runs["policy"] == "greedy-energy", "pact", stored.runs["policy"]))
    assert own.PACT(with_pact).all()
    import matplotlib.pyplot as plt

    plt.close("all")


def test_a_figure_of_one_run_names_its_seed_and_one_run():
    """pact-schedule draws the first seed's run of four per point: its caption says ``seed
    0; 1 run``, not the four seeds it was given; its title names the policy and seed."""
    import tempfile
    from pathlib import Path

    from netsim import figures as registry
    from tests.test_figures import family_synthetic

    with tempfile.TemporaryDirectory() as tmp:
        family_synthetic(Path(tmp))
        res = load_results(tmp)
    drawn = next(d for d in registry.draw(res, only=["pact-schedule"]))
    assert drawn.name == "pact-schedule-point0"
    caption = drawn.figure.texts[-1].get_text()
    assert "; seed 0; 1 run; " in caption and "seeds" not in caption
    assert drawn.figure.get_suptitle().startswith("pact, seed 0")
    meta = registry.metadata(drawn.figure, "png")
    assert "runs=1" in meta["Keywords"] and "seeds=0" in meta["Keywords"]
    assert registry.caption_text({"scenario": "x", "sweep": "", "seeds": "0-2", "runs": "3",
                                  "per_bar": "3", "netsim": "0"}) == \
        "scenario x; seeds 0-2; 3 runs, 3 per policy and point; netsim 0"


def airtime_results() -> Results:
    """Two policies' runs on two cells: fedavg-all uses cell-a and cell-b over 3 epochs
    (30 s), greedy-energy (two seeds) only cell-a over 2 (10 s)."""
    import json

    runs = pd.DataFrame([{"run_id": "f", "policy": "fedavg-all", "seed": 0, "scenario": "x"},
                         {"run_id": "g", "policy": "greedy-energy", "seed": 0, "scenario": "x"},
                         {"run_id": "g1", "policy": "greedy-energy", "seed": 1,
                          "scenario": "x"}])
    rows = [("f", k, 10.0 * k, 10.0 * (k + 1), {"cell-a": 5.0, "cell-b": 2.0})
            for k in range(3)]
    rows += [(rid, k, 5.0 * k, 5.0 * (k + 1), {"cell-a": 1.0}) for rid in ("g", "g1")
             for k in range(2)]
    epochs = pd.DataFrame([{"run_id": r, "epoch": k, "start_s": a, "end_s": b,
                            "airtime_by_medium_s": json.dumps(m)} for r, k, a, b, m in rows])
    return Results(runs=runs, epochs=epochs, devices=pd.DataFrame(), axes=())


def test_airtime_panels_share_their_time_range_show_unused_cells_at_0_and_count_right():
    from netsim.figures import annotate
    from plots.media import airtime_by_cell

    res = airtime_results()
    fig = airtime_by_cell(res)
    panels = [ax for ax in fig.axes if ax.get_ylabel() == "cell"]
    assert [ax.get_title() for ax in panels] == [
        "fedavg-all, seed 0: 2 cells", "greedy-energy, seed 0: 1 of 2 cells"]
    assert {ax.get_xlim() for ax in panels} == {(0.0, 30.0)}
    for ax in panels:
        assert [t.get_text() for t in ax.get_yticklabels()] == ["cell-a", "cell-b"]
    greedy = panels[1].collections[0].get_array().reshape(2, 2)
    assert list(greedy[1]) == [0.0, 0.0] and list(greedy[0]) == pytest.approx([0.2, 0.2])
    caption = annotate(fig, res).texts[-1].get_text()
    assert "; seed 0; 2 runs" in caption  # (the first seed of each policy, not seed 1)


# --- netsim place --gantt -------------------------------------------------------------------

def test_the_gantt_chart_has_its_caption_and_transfers_never_cover_operators(tmp_path,
                                                                              monkeypatch):
    import matplotlib.pyplot as plt
    from PIL import Image

    from plots import baechi

    record = {"devices": ["gpu0", "gpu1"], "memory_bytes": [2**30, 2**30],
              "step_time_s": 0.012, "graph": "chain-3", "algorithm": "m-etf",
              "ops": [["a", 0, 0.0, 0.004], ["b", 1, 0.005, 0.009], ["c", 0, 0.009, 0.012]],
              "transfers": [["a", 0, 1, 1e6, 0.004, 0.005], ["b", 1, 0, 1e6, 0.009, 0.0095]],
              "memory_trace": [[[0.0, 1e8], [0.012, 0.0]], [[0.005, 2e8], [0.009, 0.0]]]}
    figures = []
    monkeypatch.setattr(baechi, "_save", lambda fig, out: figures.append(fig) or out)
    baechi.gantt_figure(record, tmp_path / "g.png")
    (fig,) = figures
    top = fig.axes[0]
    rows: dict[str, list[tuple[float, float]]] = {"op": [], "transfer": []}  # (y extents)
    for coll in top.collections:
        kind = "transfer" if coll.get_zorder() < 2 else "op"
        for path in coll.get_paths():
            rows[kind].append((path.vertices[:, 1].min(), path.vertices[:, 1].max()))
    assert len(rows["op"]) == 3 and len(rows["transfer"]) == 2
    for t0, t1 in rows["transfer"]:  # a lane of their own: never over an operator's bar
        assert all(t1 <= o0 or t0 >= o1 for o0, o1 in rows["op"])
    caption = fig.texts[-1].get_text()
    assert caption.startswith("graph chain-3, algorithm m-etf; 2 devices, 1024 MiB each;")
    assert "3 operators, 2 transfers; step 12 ms; netsim " in caption
    from netsim import figures as registry

    assert registry.overlapping_texts(fig) == []
    monkeypatch.undo()
    path = baechi.gantt_figure(record, tmp_path / "g.png")
    assert Image.open(path).text["Description"] == caption
    plt.close("all")


# --- netsim compare in 100 columns ----------------------------------------------------------

def test_compare_prints_within_100_columns_and_everything_behind_wide(tmp_path, capsys):
    """The synthetic sweep with a baseline, a failed run, parameter labels and a long point
    label: every line of ``netsim compare`` within 100 characters, the energy interval the
    same numbers as ``--wide``'s brackets (mean ± half-width), the rest behind ``--wide``."""
    from netsim.cli import main
    from netsim.sweep.compare import format_compare

    runs = runs_table({"random-k(fraction=0.25,k=5)": [100.0, 130.0, 90.0, 95.0],
                       "fedavg-all": [1000.0, 1100.0, 990.0, 1005.0],
                       "compress-first": [40.0, 45.0, 41.0, 44.0]},
                      point_label="generate.n_devices=100, links[0].bandwidth_bps=5e+06, "
                                  "training.target_loss=0.3, deadline_s=86400")
    runs.loc[1, "status"] = "failed"
    table = compare_table(runs, baseline="fedavg-all")
    text = format_compare(table, ["two scenarios named x differ in content " * 4], wide=False)
    assert max(len(line) for line in text.splitlines()) <= 100, text
    assert "random-k(fraction=0.25,k=5)" in text and "4 (1 failed)" in text
    assert "baseline" in text and "energy J, reached" not in text
    row = table.set_index("policy").loc["compress-first"]
    half = (row["energy_j_all_hi"] - row["energy_j_all_lo"]) / 2
    assert f"{row['energy_j_all']:.4g} ± {float(f'{half:.2g}'):g}" in text
    wide = format_compare(table, wide=True)
    assert "energy J, reached" in wide and "final loss" in wide
    assert max(len(line) for line in wide.splitlines()) > 100
    from tests.test_figures import synthetic

    synthetic(tmp_path / "res")
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "res"), "--baseline", "fedavg-all"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100 and "energy J ± 95%" in out
    assert main(["compare", str(tmp_path / "res"), "--wide"]) == 0
    assert "energy J, all" in capsys.readouterr().out
