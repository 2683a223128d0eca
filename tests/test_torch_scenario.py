"""A scenario that takes the PyTorch model itself (``model: {torch: ...}``, issue 55 item 3):
its figures measured by netsim.torchnet.inspect, imported only with --allow-imports, placed by
``netsim place`` and the baechi policy, trained by the torch backend on the user's ``.npz``;
each bad input refused (exit 2) naming its field. docs/byo-model.md is the user's page."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("torch")

import netsim  # noqa: E402
from netsim.api import scenario_content  # noqa: E402
from netsim.cli import main  # noqa: E402
from netsim.measuring import measured_scenario  # noqa: E402
from netsim.scenario.loading import load_scenario, validate_scenario  # noqa: E402
from netsim.scenario.schema import ModelSpec, TorchModelSpec  # noqa: E402
from netsim.torchnet import MISSING_TORCH  # noqa: E402
from netsim.training.models import loss_param_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODEL_FILE = ROOT / "experiments" / "byo_model" / "tiny_cnn.py"


def scenario(**model: object) -> dict:
    """The example's scenario (two phones), its model the tiny CNN beside it, the torch
    backend on ``data.npz`` beside it, 3 epochs."""
    torch_block = {"factory": "tiny_cnn.py:tiny_cnn", "input_shape": [1, 8, 8],
                   "data": {"npz": "data.npz"}, **model}
    return {
        "name": "byo", "seed": 0,
        "devices": [
            {"id": "server", "flop_per_s": 1e13, "memory_bytes": 6.4e10, "power_busy_w": 300,
             "power_idle_w": 60},
            {"id": "p1", "flop_per_s": 2e10, "memory_bytes": 4e9, "power_busy_w": 5,
             "power_idle_w": 1, "samples": 160},
            {"id": "p2", "flop_per_s": 1e10, "memory_bytes": 2e9, "power_busy_w": 4,
             "power_idle_w": 0.8, "samples": 160}],
        "links": [{"a": "server", "b": "p1", "bandwidth_bps": 5e7, "latency_s": 0.02},
                  {"a": "server", "b": "p2", "bandwidth_bps": 2e7, "latency_s": 0.03}],
        "aggregator": "server",
        "model": {"torch": torch_block},
        "training": {"backend": "torch", "target_loss": 0.01, "deadline_s": 600,
                     "max_epochs": 3,
                     "real": {"learning_rate": 0.2, "batch_size": 16, "local_epochs": 2,
                              "test_fraction": 0.2}},
    }


def write_npz(path: Path, n: int = 400, shape: tuple[int, ...] = (1, 8, 8),
              labels: np.ndarray | None = None) -> Path:
    """``n`` of scikit-learn's digits as ``x`` (float32, ``shape``) and ``y``."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data[:n].astype(np.float32) / 16.0).reshape(n, *shape)
    y = digits.target[:n].astype(np.int64) if labels is None else labels
    np.savez(path, x=x, y=y)
    return path


@pytest.fixture()
def folder(tmp_path, monkeypatch) -> Path:
    """A scenario folder (the model file and data.npz in it); the commands run elsewhere."""
    where = tmp_path / "project"
    where.mkdir()
    shutil.copy(MODEL_FILE, where / "tiny_cnn.py")
    write_npz(where / "data.npz")
    (where / "bad.py").write_text("def boom():\n    raise RuntimeError('no weights today')\n")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # (paths are the scenario file's, not the cwd's)
    return where


def write(folder: Path, data: dict, name: str = "s.yaml") -> str:
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_the_scenario_fills_what_netsim_models_inspect_measures(folder, capsys):
    path = write(folder, scenario())
    assert main(["models", "inspect", str(folder / "tiny_cnn.py") + ":tiny_cnn",
                 "--input-shape", "1,8,8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    loaded = load_scenario(path)
    assert isinstance(loaded.model, TorchModelSpec)
    model = measured_scenario(loaded).model
    assert isinstance(model, ModelSpec)
    assert model.params == report["params"] == 3658
    assert model.train_flop_per_sample == report["train_flop_per_sample"]
    assert model.bytes_per_param == 4.0 and model.name == "tiny_cnn"
    assert [(v.name, v.params_fraction, v.flop_fraction) for v in model.variants] == \
        [(v["name"], v["params_fraction"], v["flop_fraction"]) for v in report["variants"]]
    assert model.loss == loss_param_table()["generic"]  # (no loss: block given)
    assert model.torch is not None and model.torch.input_shape == (1, 8, 8)
    # a chosen subset, full first; the loss block and name as given
    chosen = measured_scenario(load_scenario(write(folder, {
        **scenario(variants=["channels-50", "pruned-50"]),
        "model": {"name": "mine", "loss": {**loss_param_table()["generic"].model_dump(),
                                            "initial_loss": 2.0},
                  "torch": scenario(variants=["channels-50", "pruned-50"])["model"]["torch"]}},
        "c.yaml"))).model
    assert isinstance(chosen, ModelSpec) and chosen.name == "mine"
    assert [v.name for v in chosen.variants] == ["full", "channels-50", "pruned-50"]
    assert chosen.loss is not None and chosen.loss.initial_loss == 2.0
    # run ids name the model file and the data by their content, not their paths
    content = scenario_content(measured_scenario(loaded))["model"]["torch"]
    assert content["factory"].startswith("sha256:") and content["factory"].endswith(":tiny_cnn")
    assert content["data"]["npz"].startswith("sha256:")


def test_a_scenario_files_factory_is_imported_only_with_allow_imports(folder, tmp_path, capsys):
    path = write(folder, scenario(), "s.yaml")
    out = tmp_path / "out"
    assert main(["validate", path]) == 0  # (imports nothing: lists what a run would import)
    printed = capsys.readouterr().out
    assert "model tiny_cnn (PyTorch, measured when run)" in printed
    assert f"model.torch.factory: {folder / 'tiny_cnn.py'}:tiny_cnn" in printed
    assert main(["run", path, "--policy", "fedavg-all", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "model.torch.factory:" in err and "--allow-imports" in err and "is not imported" in err
    assert not out.exists()  # nothing simulated
    assert main(["run", path, "--policy", "fedavg-all", "--out", str(out), "--no-figure",
                 "--allow-imports"]) == 0
    runs = netsim.load_results(out).runs
    assert runs["epochs"].iloc[0] == 3 and runs["loss_source"].iloc[0].startswith(
        "real training (netsim.torchnet")


def test_netsim_place_and_the_baechi_policy_place_the_models_graph(folder, tmp_path, capsys):
    from netsim.engine import resolve_scenario
    from netsim.opgraph.profile import load_profile
    from policies.baechi.policy import BaechiParams, scenario_graph

    path = write(folder, scenario(), "s.yaml")
    place = ["place", path, "--devices", "2", "--memory", "1.0", "--algorithm", "best",
             "--json"]
    assert main(place) == 2
    assert "model.torch.factory" in capsys.readouterr().err
    assert main([*place, "--allow-imports", "--batch", "8"]) == 0
    placed = json.loads(capsys.readouterr().out)
    assert main(["models", "graph", str(folder / "tiny_cnn.py") + ":tiny_cnn",
                 "--input-shape", "1,8,8", "--batch", "8", "--out", str(folder / "g.json")]) == 0
    capsys.readouterr()
    from_file = load_profile(folder / "g.json")
    assert placed["status"] == "ok" and placed["operators"] == from_file.number_of_nodes()
    # the baechi policy places the same graph (its batch_samples), and runs on it
    resolved = resolve_scenario(measured_scenario(load_scenario(path)), 0)
    graph = scenario_graph(resolved, BaechiParams(batch_samples=8))
    def totals(g):
        return (sorted(a["name"] for _, a in g.nodes(data=True)), g.number_of_edges(),
                sum(a["memory_bytes"] for _, a in g.nodes(data=True)),
                sum(a["output_bytes"] for _, a in g.nodes(data=True)))

    assert totals(graph) == totals(from_file)
    assert graph.graph["name"] == "tiny_cnn-train"
    # baechi.graph: a graph file from elsewhere, relative to the scenario file
    data = {**scenario(), "policies": {"baechi": {"graph": "g.json", "batch_samples": 8}},
            "training": {**scenario()["training"], "backend": "surrogate", "max_epochs": 2}}
    res = netsim.simulate(load_scenario(write(folder, data, "g.yaml")), "baechi")
    run = res.runs.iloc[0]
    assert run["status"] != "failed", run["error"]
    info = json.loads(res.epochs["info"].iloc[0])
    assert info["placement_algorithm"] in ("m-topo", "m-etf", "m-sct", "single")
    bad = {**data, "policies": {"baechi": {"graph": "nothere.json"}}}
    problems = validate_scenario(write(folder, bad, "bad.yaml")).problems
    assert [p.path for p in problems] == ["policies.baechi.graph"], problems


def test_a_sweep_measures_the_model_once_a_point_with_the_same_run_ids(folder, tmp_path,
                                                                       capsys):
    data = {**scenario(), "training": {**scenario()["training"], "backend": "surrogate",
                                       "max_epochs": 2}}
    write(folder, data, "base.yaml")
    sweep = write(folder, {"name": "byo", "base": "base.yaml", "policies": ["fedavg-all"],
                           "seeds": 1, "grid": {"seed": [0, 1]}}, "sweep.yaml")
    out = tmp_path / "sweep-out"
    assert main(["sweep", sweep, "--out", str(out), "--workers", "1", "--no-progress"]) == 2
    assert "model.torch.factory" in capsys.readouterr().err
    assert main(["sweep", sweep, "--out", str(out), "--workers", "1", "--no-progress",
                 "--allow-imports"]) == 0
    runs = netsim.load_results(out).runs
    assert len(runs) == 2 and (runs["status"] != "failed").all(), runs["error"].tolist()


def test_the_torch_backend_trains_the_users_model_on_its_npz(folder):
    sc = measured_scenario(load_scenario(write(folder, scenario())))
    first = netsim.simulate(sc, "fedavg-all", raise_errors=True)
    again = netsim.simulate(sc, "fedavg-all", raise_errors=True)
    run = first.runs.iloc[0]
    losses = [run["initial_loss"], *first.epochs["loss"]]
    assert len(losses) == 4 and all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    assert first.epochs["loss"].tolist() == again.epochs["loss"].tolist()  # bit for bit
    assert first.epochs["accuracy"].iloc[-1] > 0.3


def _labels_too_high(folder: Path) -> dict:
    write_npz(folder / "wide.npz", labels=np.arange(400) % 12)
    return scenario(data={"npz": "wide.npz"})


BAD = {
    "factory raises": (lambda f: scenario(factory="bad.py:boom"), "model.torch",
                       "the factory raised RuntimeError: no weights today"),
    "shape does not fit": (lambda f: {**scenario(input_shape=[3, 8, 8]), "training": {
        **scenario()["training"], "backend": "surrogate"}}, "model.torch",
        "input_shape [3, 8, 8] does not fit the model"),
    "no such factory": (lambda f: scenario(factory="tiny_cnn.py:nothere"), "model.torch",
                        "has no 'nothere'"),
    "x does not fit": (lambda f: (write_npz(f / "flat.npz", shape=(64,)),
                                  scenario(data={"npz": "flat.npz"}))[1],
                       "model.torch.data.npz", "but input_shape is [1, 8, 8]"),
    "y not integer": (lambda f: (write_npz(f / "float.npz", labels=np.zeros(400)),
                                 scenario(data={"npz": "float.npz"}))[1],
                      "model.torch.data.npz", "y must be integer labels"),
    "labels above the outputs": (_labels_too_high, "model.torch.data",
                                 "labels go up to 11, but the model scores 10 classes"),
    "no data": (lambda f: scenario(data=None), "model.torch.data", "data you give"),
    "shipped set of another shape": (lambda f: scenario(data="digits"), "model.torch.data",
                                     "the digits data set's samples are [64]"),
    "unknown variant": (lambda f: scenario(variants=["pruned-60"]), "model.torch.variants[0]",
                        "'pruned-60' is not a variant of this model"),
    "no input shape": (lambda f: scenario(input_shape=None), "model.torch",
                       "input_shape: required"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_bad_input_exits_2_naming_its_field(case, folder, tmp_path, capsys):
    make, field, words = BAD[case]
    data = make(folder)
    if data["model"]["torch"].get("data", 0) is None or \
            data["model"]["torch"].get("input_shape", 0) is None:
        data["model"]["torch"] = {k: v for k, v in data["model"]["torch"].items()
                                  if v is not None}
    out = tmp_path / "out"
    code = main(["run", write(folder, data), "--policy", "fedavg-all", "--out", str(out),
                 "--allow-imports"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"  - {field}: " in err and words in err, err
    assert not out.exists()


def test_torch_missing_is_the_pip_install_line(folder, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    data = {**scenario(), "training": {**scenario()["training"], "backend": "surrogate"}}
    assert main(["validate", write(folder, data)]) == 2
    assert f"model.torch: {MISSING_TORCH}" in capsys.readouterr().err
    assert 'pip install -e ".[torch]"' in MISSING_TORCH


def test_target_accuracy_with_a_pytorch_model_needs_its_accuracy_map():
    from netsim.scenario.loading import validate_scenario

    data = {"name": "ta", "aggregator": "server",
            "devices": [{"id": "server", "flop_per_s": 1e12, "memory_bytes": 8e10,
                         "power_busy_w": 100, "power_idle_w": 10},
                        {"id": "p1", "flop_per_s": 1e9, "memory_bytes": 4e9,
                         "power_busy_w": 5, "power_idle_w": 1, "samples": 100}],
            "links": [{"a": "p1", "b": "server", "bandwidth_bps": 1e7}],
            "model": {"torch": {"factory": "small-cnn"}},
            "training": {"target_accuracy": 0.9, "deadline_s": 1000, "max_epochs": 1}}
    result = validate_scenario(data)
    assert [p.path for p in result.problems] == ["training.target_accuracy"]
    assert "model.loss.accuracy" in result.problems[0].message
    data["model"]["loss"] = {"initial_loss": 2.3, "floor_full": 0.05, "samples_half": 3000.0,
                             "exponent": 0.9, "accuracy": {"chance": 0.1, "top": 1.0,
                                                           "loss_mid": 1.0, "exponent": 1.0}}
    result = validate_scenario(data)
    assert not result.problems, result.problems
    amap = result.scenario.model.loss.accuracy
    assert amap.accuracy(result.scenario.training.target_loss) == pytest.approx(0.9)
