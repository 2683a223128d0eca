"""The dynamics figures (plots/dynamics.py) drawn from a small real run: a star of six phones
under markov churn, log-normal bandwidth and stragglers, and its static twin, two policies, two
seeds; and the experiment's runner table (experiments/dynamics/run.py) from the same runs."""

from __future__ import annotations

import copy

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from netsim import figures as registry  # noqa: E402
from plots import dynamics  # noqa: E402
from tests.conftest import STAR  # noqa: E402

POLICIES = ["fedavg-all", "overselect"]


def scenarios() -> tuple[dict, dict]:
    """A star of six phones (a short run), static and with churn."""
    sc = copy.deepcopy(STAR)
    server, proto = sc["devices"][0], sc["devices"][1]
    sc["devices"] = [server] + [{**proto, "id": f"p{i}", "flop_per_s": 5e8 * (1 + i % 3)}
                                for i in range(6)]
    sc["links"] = [{"a": "server", "b": f"p{i}", "bandwidth_bps": 1e7, "latency_s": 0.02,
                    "energy_j_per_bit": 1e-7} for i in range(6)]
    sc["training"].update({"target_loss": 0.3, "max_epochs": 12, "deadline_s": 600})
    sc["policies"] = {"overselect": {"k": 2, "overselect": 0.5}}
    static = {**copy.deepcopy(sc), "name": "dynamics-test-static"}
    churn = {**copy.deepcopy(sc), "name": "dynamics-test-churn", "dynamics": {
        "availability": {"model": "markov", "mean_online_s": 6.0, "mean_offline_s": 3.0},
        "bandwidth": {"model": "lognormal", "sigma": 0.4, "correlation_s": 2.0, "step_s": 0.5},
        "compute": {"spread": 0.3, "straggler_probability": 0.2, "straggler_slowdown": 5}}}
    return static, churn


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from experiments.dynamics.run import run_sweeps

    folder = tmp_path_factory.mktemp("scen")
    paths = {}
    import yaml

    for name, sc in zip(("static", "churn"), scenarios(), strict=True):
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_text(yaml.safe_dump(sc))
    out = tmp_path_factory.mktemp("dyn")
    return run_sweeps(out, 2, workers=1, policies=POLICIES, scenarios=paths)


def test_the_runs_saw_churn(results):
    runs = results.runs
    assert len(runs) == 8 and set(runs["policy"]) == set(POLICIES)
    assert (runs["status"] != "failed").all(), runs["error"].tolist()
    churn = runs[runs["scenario"] == "dynamics-test-churn"]["run_id"]
    dev = results.devices[results.devices["run_id"].isin(churn)]
    assert "online_intervals_s" in dev and dev["online_s"].notna().all()


def test_energy_time_shows_every_policy_on_both_scenarios(results):
    fig = dynamics.energy_time(results)
    energy, time, success = fig.axes
    assert [t.get_text() for t in energy.get_yticklabels()] == POLICIES
    assert energy.get_xlabel() == "energy to target (J)"
    assert time.get_xlabel() == "time to target (s)" and success.get_xlabel() == "success rate"
    from matplotlib.container import BarContainer

    bars = [c for c in success.containers if isinstance(c, BarContainer)]
    assert [c.get_label() for c in bars] == ["dynamics-test-static", "dynamics-test-churn"]
    runs = results.runs
    for container in bars:
        sub = runs[runs["point_label"] == container.get_label()]
        want = sub.groupby("policy")["target_reached"].mean().reindex(POLICIES)
        assert [p.get_width() for p in container] == pytest.approx(list(want))
    table = dynamics.summary(runs)
    reached = runs[runs["target_reached"].astype(bool)]
    for container in (c for c in energy.containers if isinstance(c, BarContainer)):
        sub = reached[reached["point_label"] == container.get_label()]
        want = sub.groupby("policy")["energy_j"].mean().reindex(POLICIES).fillna(0.0)
        assert [p.get_width() for p in container] == pytest.approx(list(want))
    assert set(table["policy"]) == set(POLICIES) and len(table) == 4
    assert registry.overlapping_texts(fig) == []
    matplotlib.pyplot.close(fig)


def test_availability_map_draws_intervals_participation_and_dropouts(results):
    figs = dynamics.availability_map(results)
    assert list(figs) == ["dynamics-test-churn"]  # the static twin: nobody ever offline
    fig = figs["dynamics-test-churn"]
    ax = fig.axes[0]
    runs = results.runs
    rid = dynamics.pick_run(runs[runs["scenario"] == "dynamics-test-churn"], results)
    assert runs.set_index("run_id").loc[rid, "policy"] == "overselect"  # its late updates too
    epochs = results.epochs[results.epochs["run_id"] == rid]
    devices = results.devices[results.devices["run_id"] == rid]
    shown = [t.get_text() for t in ax.get_yticklabels()]
    assert shown and set(shown) <= set(devices["device"]) and "server" not in shown
    bars = {c.get_label(): c for c in ax.containers}
    n_intervals = sum(len(dynamics.intervals(v)) for d, v in
                      zip(devices["device"], devices["online_intervals_s"], strict=True)
                      if d in shown)
    assert len(bars["online"]) == n_intervals > len(shown)  # someone went offline and back
    assert len(bars["trains (epoch)"]) == sum(len(ids) for ids in epochs["participant_ids"])
    marks = {c.get_label(): c for c in ax.collections}
    assert len(marks["dropped out"].get_offsets()) == int(epochs["dropped"].sum())
    assert len(marks["late (discarded)"].get_offsets()) == int(epochs["late"].sum())
    assert f"{int(epochs['dropped'].sum())} dropouts" in ax.get_title()
    assert ax.get_xlabel() == "simulated time (s)"
    assert registry.overlapping_texts(fig) == []
    matplotlib.pyplot.close(fig)


def test_both_figures_are_registered_and_drawn_with_captions(results, tmp_path):
    names = set(registry.registered_figures())
    assert {"dynamics-availability-map", "dynamics-energy-time"} <= names
    drawn = {d.name: d for d in registry.draw(
        results, only=["dynamics-availability-map", "dynamics-energy-time"])}
    assert set(drawn) == {"dynamics-availability-map-dynamics-test-churn",
                          "dynamics-energy-time"}
    for d in drawn.values():
        caption = d.figure.texts[-1].get_text()
        assert caption.startswith("scenario dynamics-test-")
        # (the map draws one run: its seed; the bars every run: their seeds)
        assert ("seed 0; 1 run;" if "map" in d.name else "seeds 0, 1") in caption
        assert registry.overlapping_texts(d.figure) == [], d.name
        png, pdf = registry.save(d.figure, tmp_path / d.name)
        assert png.exists() and pdf.read_bytes()[:4] == b"%PDF"


def test_runner_table_has_a_row_per_scenario_and_policy(results):
    from experiments.dynamics.run import markdown, table

    t = table(results)
    assert list(t["point_label"]) == ["dynamics-test-static"] * 2 + ["dynamics-test-churn"] * 2
    assert list(t["policy"]) == POLICIES * 2
    churn = results.runs[results.runs["scenario"] == "dynamics-test-churn"]["run_id"]
    ep = results.epochs[results.epochs["run_id"].isin(churn)]
    assert t.loc[t["point_label"] == "dynamics-test-churn", "dropped"].sum() * 2 == \
        pytest.approx(float(ep["dropped"].sum()))
    assert (t.loc[t["point_label"] == "dynamics-test-static", "dropped"] == 0).all()
    md = markdown(t)
    assert md.count("\n") == 5 and "| dynamics-test-churn | overselect |" in md
    assert isinstance(t["success"].iloc[0], float) and not pd.isna(t["success"]).any()
    assert np.isfinite(t["epochs"]).all()


def test_runner_energy_breakdown_sums_to_the_runs_energy(results):
    from experiments.dynamics.run import energy_breakdown

    e = energy_breakdown(results)
    assert list(e["policy"]) == POLICIES * 2
    parts = e[["energy_compute_j", "energy_comm_j", "energy_idle_j", "energy_sleep_j"]]
    assert list(parts.sum(axis=1)) == pytest.approx(list(e["energy_j"]), rel=1e-6)
    static = e[e["point_label"] == "dynamics-test-static"]
    assert list(static["online_share"]) == pytest.approx([1.0, 1.0])
    assert (static["energy_sleep_j"] == 0).all()
    assert (e.loc[e["point_label"] == "dynamics-test-churn", "online_share"] < 1).all()
