"""What the baechi policy records of its placement (epochs ``info``), that it is the choice
``netsim place`` makes on the same graph and devices, and the sweep files of the Baechi and PACT
figures (experiments/baechi/sweep.yaml, experiments/pact/epsilon.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import netsim
from netsim.cli import main
from netsim.opgraph import load_graph, total_memory_bytes
from netsim.opgraph.backward import add_backward
from netsim.opgraph.graph import REFERENCE_FLOP_PER_S
from netsim.sweep.plan import load_plan
from policies.baechi.command import STAR_BANDWIDTH_BPS, STAR_ENERGY_J_PER_BIT, STAR_LATENCY_S

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
PLACEMENT_KEYS = {"placement_algorithm", "placement_step_s", "placement_s", "placement_status",
                  "placement_devices", "placement_memory_bytes", "placement_peak_memory_bytes"}
CANDIDATES = {"single", "m-topo", "m-etf", "m-sct"}


def star_scenario(model: str, n: int, memory_bytes: float) -> dict:
    """``n`` identical reference devices on the star ``netsim place --mode heterogeneous``
    builds (same ids, links and switch), training built-in ``model``."""
    devices = [{"id": f"gpu{i}", "flop_per_s": REFERENCE_FLOP_PER_S, "memory_bytes": memory_bytes,
                "power_busy_w": 10.0, "power_idle_w": 1.0, "samples": 100} for i in range(n)]
    links = [{"a": f"gpu{i}", "b": "switch", "bandwidth_bps": STAR_BANDWIDTH_BPS,
              "latency_s": STAR_LATENCY_S, "energy_j_per_bit": STAR_ENERGY_J_PER_BIT}
             for i in range(n)]
    return {"name": "star", "devices": devices, "links": links, "aggregator": "gpu0",
            "model": model, "training": {"target_loss": 1.0, "max_epochs": 2, "deadline_s": 3600}}


def place_json(capsys, model: str, n: int, memory_bytes: float, algorithm: str) -> dict:
    main(["place", model, "--mode", "heterogeneous", "--devices", str(n), "--memory",
          repr(memory_bytes), "--algorithm", algorithm, "--json"])
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("fraction", "expected"), [(0.5, "m-topo"), (1.0, "single")])
def test_policy_info_records_the_placement_netsim_place_chooses(capsys, fraction, expected):
    model, n = "resnet18", 4
    memory = fraction * total_memory_bytes(add_backward(load_graph(model)))
    result = netsim.simulate(star_scenario(model, n, memory), "baechi", seed=0)
    infos = [json.loads(text) for text in result.epochs["info"]]
    assert len(infos) == 2
    info = infos[0]
    assert PLACEMENT_KEYS <= set(info)
    assert not PLACEMENT_KEYS & set(infos[1])  # the placement once per run; small
    assert {"algorithm", "step_time_s"} <= set(infos[1])
    assert len(result.epochs["info"].iloc[0]) < 1000
    assert set(info["placement_step_s"]) == set(info["placement_s"]) == CANDIDATES
    assert all(t >= 0 for t in info["placement_s"].values())
    assert info["placement_devices"] == [f"gpu{i}" for i in range(n)]
    assert info["placement_memory_bytes"] == [memory] * n
    assert len(info["placement_peak_memory_bytes"]) == n
    assert max(info["placement_peak_memory_bytes"]) <= memory

    best = place_json(capsys, model, n, memory, "best")
    assert info["placement_algorithm"] == best["chosen"] == expected
    assert info["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-12)
    assert info["placement_peak_memory_bytes"] == pytest.approx(best["peak_memory_bytes"])
    for name, step in info["placement_step_s"].items():
        one = place_json(capsys, model, n, memory, name)
        assert info["placement_status"][name] == one["status"]
        if step is None:
            assert one["step_time_s"] is None
        else:
            assert step == pytest.approx(one["step_time_s"], rel=1e-12)
    fits = {k: v for k, v in info["placement_step_s"].items() if v is not None}
    assert info["step_time_s"] == pytest.approx(min(fits.values()), rel=1e-12)


def test_baechi_sweep_file_plans_a_batch_axis():
    plan = load_plan(EXPERIMENTS / "baechi" / "sweep.yaml")
    assert [t.policy for t in plan.tasks] == ["baechi"] * 3
    assert [t.axes["policies.baechi.batch_samples"] for t in plan.tasks] == [16, 64, 128]


def test_pact_epsilon_sweep_file_sets_pacts_epsilon_per_point():
    plan = load_plan(EXPERIMENTS / "pact" / "epsilon.yaml")
    pact = [t for t in plan.tasks if t.policy == "pact"]
    eps = sorted({t.scenario["policies"]["pact"]["epsilon"] for t in pact})
    assert eps == [0.025, 0.05, 0.1, 0.2]
    assert {t.policy for t in plan.tasks} == {"pact", "pact-optimum"}
    assert "pact-energy-vs-epsilon" in (EXPERIMENTS / "pact" / "README.md").read_text(
        encoding="utf-8")


def test_step_time_axis_counts_zipped_memory_axes_once():
    from plots.baechi import point_ticks

    axes = [f"devices[{i}].memory_bytes" for i in (1, 2)]
    table = pd.DataFrame({"point": [0, 1, 2], "point_label": ["a", "b", "c"],
                          axes[0]: [4e9, 1.5e8, 2.5e8], axes[1]: [4e9, 1.5e8, 2.5e8]})
    points, ticks, label = point_ticks(table, axes)
    assert points == [1, 2, 0] and ticks == ["150 MB", "250 MB", "4 GB"]
    assert label == "memory per device"
    table["training.target_loss"] = [0.3, 0.4, 0.5]
    points, ticks, label = point_ticks(table, [*axes, "training.target_loss"])
    assert points == [0, 1, 2] and ticks == ["a", "b", "c"] and label == "sweep point"


def placed_results(labels: list[str], with_epochs: bool = True):
    """Results of baechi runs at one point, one per label, without simulating."""
    from netsim.sweep.results import Results

    info = {"algorithm": "m-topo", "step_time_s": 2.0, "placement_algorithm": "m-topo",
            "placement_step_s": {"single": None, "m-topo": 2.0, "m-etf": None, "m-sct": 2.5},
            "placement_s": {"single": 0.01, "m-topo": 0.01, "m-etf": 0.01, "m-sct": 0.02},
            "placement_status": {"single": "infeasible", "m-topo": "ok", "m-etf": "infeasible",
                                 "m-sct": "ok"},
            "placement_devices": ["a", "b"], "placement_memory_bytes": [3e8, 3e8],
            "placement_peak_memory_bytes": [2.5e8, 1e8]}
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(len(labels))], "point": 0,
                         "point_label": "p", "policy_label": labels, "seed": 0,
                         "policy": "baechi", "scenario": "s"})
    epochs = pd.DataFrame({"run_id": runs["run_id"], "epoch": 0,
                           "info": [json.dumps(info)] * len(labels)})
    return Results(runs, epochs if with_epochs else epochs.iloc[:0], pd.DataFrame())


def test_baechi_figures_keep_parameter_sets_apart_and_skip_runs_without_a_placement():
    from netsim.figures import overlapping_texts
    from plots import baechi

    labels = ["baechi(max_devices=2,batch_samples=128)", "baechi(max_devices=4,batch_samples=128)"]
    fig = baechi.step_time(placed_results(labels))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == labels  # long: on the y-axis
    assert [round(p.get_width(), 6) for p in ax.patches] == [2.0, 2.5, 2.0, 2.5]
    assert overlapping_texts(fig) == []
    figs = baechi.peak_memory(placed_results(labels))
    assert sorted(figs) == [f"point0-{label}" for label in labels]
    assert baechi.step_time(placed_results(labels, with_epochs=False)) is None
    assert baechi.peak_memory(placed_results(labels, with_epochs=False)) is None
    import matplotlib.pyplot as plt

    plt.close("all")
