"""``netsim place`` (policies/baechi/command.py): the best-of choice and the built-in models."""

import json

from netsim.cli import main


def place_json(capsys, *args) -> dict:
    code = main(["place", *args, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == (0 if out["status"] == "ok" else 1)
    return out


def test_best_is_never_slower_than_each_algorithm(capsys):
    common = ["layered-80", "--forward-only", "--no-group", "--devices", "3", "--memory", "0.5"]
    best = place_json(capsys, *common, "--algorithm", "best")
    assert best["status"] == "ok" and best["chosen"] in ("m-topo", "m-etf", "m-sct", "single")
    for name in ("m-topo", "m-etf", "m-sct"):
        other = place_json(capsys, *common, "--algorithm", name)
        if other["status"] == "ok":
            assert best["step_time_s"] <= other["step_time_s"] * (1 + 1e-12)


def test_best_keeps_one_device_when_splitting_does_not_pay(capsys):
    # a chain gains nothing from a second device: one device, no transfer
    best = place_json(capsys, "chain-20", "--forward-only", "--memory", "1.0", "--algorithm", "best")
    assert best["chosen"] == "single" and best["bytes_moved"] == 0.0


def test_builtin_model_graphs_place(capsys):
    out = place_json(capsys, "small-cnn", "--algorithm", "m-sct")
    assert out["status"] == "ok" and out["operators"] > 5  # forward, backward and updates
    assert main(["place", "layered-10", "--algorithm", "nope"]) == 2
    assert "best" in capsys.readouterr().err


def test_the_gantt_chart_of_netsim_place_names_its_graph_and_algorithm(tmp_path, capsys):
    """``netsim place --gantt``: the chart's caption (its PNG Description) names the graph,
    the algorithm asked for and the one chosen (issue 54: it named neither)."""
    from PIL import Image

    out = tmp_path / "g.png"
    assert main(["place", "layered-10", "--gantt", str(out), "--json"]) == 0
    caption = Image.open(out).text["Description"]
    assert caption.startswith("graph layered-10, algorithm ")
    assert "chosen m-" in caption and "netsim place --gantt" in caption
