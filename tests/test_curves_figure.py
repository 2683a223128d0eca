"""The figure ``recorded-curves`` (plots/curves.py, docs/curves.md): the recorded runs of
cnn-mnist and vgg11-cifar10 against netsim's prediction, one panel per modelled setting, its
lines and bands from the fit; registered, and drawn by ``netsim calibrate --recorded
``python -m plots.curves``."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

import netsim  # noqa: E402
from netsim import figures as registry  # noqa: E402
from netsim.training import recorded as rec  # noqa: E402
from plots import curves  # noqa: E402

TABLES = ["mnist", "cifar"]


def panels(fig) -> dict[str, object]:
    """The setting each panel shows (its title's first word) -> the panel."""
    return {ax.get_title().split(" (")[0]: ax for ax in fig.axes}


def line(ax, label: str):
    (found,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return found


def band(ax, label: str) -> np.ndarray:
    """The vertices of a fill_between band (x, y): its lower edge, then its upper edge."""
    (found,) = [c for c in ax.collections if isinstance(c, PolyCollection)
                and c.get_label() == label]
    return found.get_paths()[0].vertices


def band_at(vertices: np.ndarray, x: float) -> tuple[float, float]:
    ys = vertices[np.isclose(vertices[:, 0], x), 1]
    return float(ys.min()), float(ys.max())


@pytest.fixture(scope="module", params=TABLES)
def drawn(request):
    fig = curves.recorded_curves(request.param)
    yield curves.fitted(request.param), fig
    plt.close(fig)


def test_one_panel_per_modelled_setting_marked_and_labelled(drawn):
    fit, fig = drawn
    data = fit.data
    shown = panels(fig)
    assert list(shown) == data.modelled  # the model's settings only, in the table's order
    for label, ax in shown.items():
        title = ax.get_title()
        if label in fit.held_out:
            assert title.endswith("(held back)") and ax.title.get_fontweight() == "bold"
        elif label in fit.fit_settings:
            assert title.endswith("(fitted)")
        else:  # MNIST B = inf, E = 20: its one run diverged
            assert title.endswith("(diverged, not fitted)") and label == "Binf-E20"
    bottom = [ax for ax in shown.values() if ax.get_xlabel()]
    assert bottom and all(ax.get_xlabel().startswith("round") for ax in bottom)
    assert {ax.get_ylabel() for ax in shown.values()} == {"test accuracy", ""}
    assert fig.axes[0].get_ylabel() == "test accuracy"
    if data.name == "mnist":
        assert fig.axes[0].get_xscale() == "log" and fig.axes[0].get_xlabel() == "" \
            and "round (log scale)" in {ax.get_xlabel() for ax in bottom}


def test_predicted_mean_and_band_are_the_fits(drawn):
    fit, fig = drawn
    data, entry = fit.data, fit.entry()
    last = int(data.table["round"].max())
    for label, ax in panels(fig).items():
        pred = rec.predict(entry, data.settings[label], last)
        mean = line(ax, "predicted mean")
        np.testing.assert_array_equal(mean.get_xdata(), pred.rounds)
        np.testing.assert_allclose(mean.get_ydata(), pred.accuracy, rtol=1e-12)
        vertices = band(ax, "predicted 10-90 % band")
        for r in (1, 25, 50, last):
            lo, hi = band_at(vertices, r)
            assert (lo, hi) == pytest.approx((pred.accuracy_low[r - 1],
                                              pred.accuracy_high[r - 1]), rel=1e-12)
            assert lo < pred.accuracy[r - 1] < hi


def test_the_registered_prediction_is_the_shipped_entry():
    """The registered figure predicts with the default fit; that fit is what loss_params.yaml
    holds for the model (the entry the runs it is drawn for used)."""
    import yaml

    path = os.path.join(os.path.dirname(rec.__file__), "..", "data", "loss_params.yaml")
    with open(path, encoding="utf-8") as fh:
        shipped = yaml.safe_load(fh)
    # terms a real backend measured and anchored on the recorded setting rescale samples_half
    # so that setting keeps this curve (tests/test_recorded.py checks the scale)
    anchored = {"samples_half", "heterogeneity", "participant_exponent"}
    for name in TABLES:
        fit = curves.fitted(name)
        entry = shipped[fit.data.model]
        fitted = {k: v for k, v in fit.loss_params("").items() if k != "source"
                  and not (entry.get("scale_source") and k in anchored)}
        assert {k: entry[k] for k in fitted} == fitted


def test_real_runs_mean_band_and_diverged_runs(drawn):
    fit, fig = drawn
    data = fit.data
    diverged = {(i.setting, i.seed) for i in rec.incidents(data) if i.kind == "diverged"}
    for label, ax in panels(fig).items():
        rows = data.table[(data.table["setting"] == label) & (data.table["round"] >= 1)]
        bad = sorted(seed for setting, seed in diverged if setting == label)
        dashed = [ln for ln in ax.get_lines() if ln.get_label() == "real run that diverged "
                  "(left out)"]
        assert len(dashed) == len(bad) and all(ln.get_linestyle() == "--" for ln in dashed)
        clean = rows[~rows["seed"].isin(bad)].pivot_table(index="round", columns="seed",
                                                          values="accuracy")
        if clean.shape[1] > 1:
            real = line(ax, "real runs: mean")
            np.testing.assert_allclose(real.get_ydata(), clean.mean(axis=1).to_numpy())
            lo, hi = band_at(band(ax, "real runs: seeds' min-max"), 100)
            assert (lo, hi) == pytest.approx((clean.loc[100].min(), clean.loc[100].max()))
        elif clean.shape[1] == 1:
            real = line(ax, "real run")
            np.testing.assert_allclose(real.get_ydata(), clean.iloc[:, 0].to_numpy())
        assert line(ax, "predicted mean").get_linestyle() == "-."
    if data.name == "cifar":  # a diverged seed ends at chance, outside the seeds' band
        ax = panels(fig)["fedavg-vanilla-var"]
        (run,) = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert run.get_ydata()[-1] == pytest.approx(0.1, abs=0.01)
        assert band_at(band(ax, "real runs: seeds' min-max"), 100)[0] > 0.6


def test_legible_one_legend_beside_the_panels_and_captioned(drawn):
    fit, fig = drawn
    assert registry.overlapping_texts(fig) == []
    (legend,) = fig.legends
    renderer = fig.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    for ax in fig.axes:  # in the empty cell: over no panel
        assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()
    labels = [t.get_text() for t in legend.get_texts()]
    assert "predicted mean" in labels and "predicted 10-90 % band" in labels
    assert ("real runs: mean" in labels) == (fit.data.name == "cifar")
    caption = fig.texts[-1].get_text()
    assert f"netsim/data/curves/{fit.data.file}" in caption
    assert caption == registry.caption_text(fig.netsim_meta)
    assert fig.netsim_meta["name"] == f"recorded-curves-{fit.data.name}"


def test_a_custom_fit_is_drawn_as_given():
    data = rec.load("mnist")
    fit = rec.fit_recorded(data, ["B50-E1", "Binf-E5"])
    fig = curves.recorded_curves(data, fit)
    ax = panels(fig)["Binf-E5"]
    assert ax.get_title() == "Binf-E5 (held back)"
    assert panels(fig)["B10-E5"].get_title() == "B10-E5 (not fitted)"  # no loss: never fitted
    pred = rec.predict(fit.entry(), data.settings["Binf-E5"], 1000)
    np.testing.assert_allclose(line(ax, "predicted mean").get_ydata(), pred.accuracy)
    plt.close(fig)


def test_registered_for_runs_of_the_fitted_models_only(tmp_path):
    from PIL import Image

    assert "recorded-curves" in registry.registered_figures()
    netsim.simulate("fedavg-mnist", "fedavg-all", seed=0, out=tmp_path / "fitted")
    netsim.simulate("fednova-cifar", "fedavg-all", seed=0, out=tmp_path / "fitted")
    netsim.simulate("two-phones", "fedavg-all", seed=0, out=tmp_path / "other")
    results = netsim.load_results(tmp_path / "fitted")
    assert curves.tables_used(results.runs) == ["cifar", "mnist"]
    drawn = {d.name: d for d in registry.draw(results, only=["recorded-curves"])}
    assert sorted(drawn) == ["recorded-curves-cifar", "recorded-curves-mnist"]
    for name, d in drawn.items():
        assert registry.overlapping_texts(d.figure) == []
        assert d.figure.netsim_meta["scenario"].startswith("none (recorded runs")
        (png,) = registry.save(d.figure, tmp_path / "fig" / name, ("png",))
        assert Image.open(png).text["Title"] == name
    other = netsim.load_results(tmp_path / "other")
    (skipped,) = registry.draw(other, only=["recorded-curves"])
    assert skipped.figure is None and not skipped.error
    assert curves.recorded_curves_for(other) is None  # (called with any runs: nothing)
    assert not curves.uses_recorded_fit(other.runs).any()


def test_the_plots_module_writes_the_pngs(tmp_path, capsys):
    """``python -m plots.curves cifar --out DIR`` (netsim never imports plots: the figure is
    drawn from plots/, the registry's or this command's)."""
    out = tmp_path / "figs"
    assert curves.main(["cifar", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["recorded-curves-cifar.png"]
    assert f"figure: {out / 'recorded-curves-cifar.png'}" in capsys.readouterr().out
    assert (out / "recorded-curves-cifar.png").read_bytes()[:4] == b"\x89PNG"
    blocked = tmp_path / "a-file"
    blocked.write_text("x")
    with pytest.raises(SystemExit) as err:
        curves.main(["mnist", "--out", str(blocked)])
    assert err.value.code == 2
    assert "--out" in capsys.readouterr().err
