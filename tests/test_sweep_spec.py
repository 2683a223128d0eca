"""Sweep files: parsing, expansion into points and runs, and errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

import netsim
from netsim.scenario.errors import ScenarioError
from netsim.sweep.plan import load_plan, point_label
from netsim.sweep.spec import parse_path, set_path


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path) -> dict[str, str]:
    with pytest.raises(ScenarioError) as info:
        load_plan(path)
    return {p.path: p.message for p in info.value.problems}


def test_grid_times_zip_times_policies_times_seeds(tmp_path):
    path = write(tmp_path, """
base: default
policies: [fedavg-all, {name: random-k, params: {k: 3}}]
seeds: [4, 7]
grid:
  training.target_loss: [0.3, 0.5]
  generate.n_devices: [10, 20, 30]
zip:
  generate.samples_mean: [100, 200]
  generate.devices_per_cell: [4, 8]
""")
    plan = load_plan(path)
    assert plan.name == "sweep"
    assert plan.n_points == 2 * 3 * 2
    assert len(plan.tasks) == 12 * 2 * 2
    assert sorted({t.seed for t in plan.tasks}) == [4, 7]
    zipped = {(t.axes["generate.samples_mean"], t.axes["generate.devices_per_cell"])
              for t in plan.tasks}
    assert zipped == {(100, 4), (200, 8)}  # zipped, not crossed
    task = next(t for t in plan.tasks if t.point == 5)
    assert task.scenario["generate"]["n_devices"] == task.axes["generate.n_devices"]
    assert task.scenario["training"]["target_loss"] == task.axes["training.target_loss"]
    assert len({t.run_id for t in plan.tasks}) == len(plan.tasks)
    manifest = plan.manifest()
    assert list(manifest["run_id"]) == [t.run_id for t in plan.tasks]


def test_seed_count_means_zero_to_n_minus_one_and_labels(tmp_path):
    path = write(tmp_path, """
name: labels
base: two-phones
policies: [fedavg-all, {name: random-k, params: {k: 1}}, {name: random-k, params: {k: 2}}]
seeds: 3
""")
    plan = load_plan(path)
    assert plan.n_points == 1
    assert sorted({t.seed for t in plan.tasks}) == [0, 1, 2]
    assert sorted({t.policy_label for t in plan.tasks}) == [
        "fedavg-all", "random-k(k=1)", "random-k(k=2)"]
    assert {t.point_label for t in plan.tasks} == {"two-phones"}


def test_run_ids_match_simulate(tmp_path):
    path = write(tmp_path, """
base: two-phones
policies: [fedavg-all]
seeds: [3]
grid:
  links[1].bandwidth_bps: [1.0e6]
  training.max_epochs: [2]
""")
    (task,) = load_plan(path).tasks
    result = netsim.simulate(task.scenario, policy="fedavg-all", seed=3)
    assert result.runs["run_id"].iloc[0] == task.run_id
    assert task.scenario["links"][1]["bandwidth_bps"] == 1.0e6


def test_base_file_is_relative_to_the_sweep_file(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    write(sub, "name: mine\nbase: default\npolicies: [x]\nseeds: 1\n", "ignored.yaml")
    from netsim.scenario.loading import builtin_scenarios

    (sub / "scen.yaml").write_text(builtin_scenarios()["two-phones"].read_text())
    plan = load_plan(write(sub, "base: scen.yaml\npolicies: [fedavg-all]\nseeds: 1\n"))
    assert plan.tasks[0].scenario["name"] == "two-phones"


def test_structural_errors_are_all_reported_with_field_paths(tmp_path):
    found = problems(write(tmp_path, """
base: default
policies: []
seeds: -1
colour: red
zip: {generate.seed: [1, 2], training.max_epochs: [5]}
grid: {"not a path!": [1], generate.n_devices: [3]}
"""))
    assert "seeds" in found and "1..100000" in found["seeds"]
    assert "colour" in found and "unknown field" in found["colour"]
    assert "policies" in found
    assert "equal lengths" in found["zip.generate.seed"]
    assert "equal lengths" in found["zip.training.max_epochs"]
    assert any(k.startswith("grid") and "dotted" in v for k, v in found.items())


def test_axis_in_grid_and_zip_is_an_error(tmp_path):
    found = problems(write(tmp_path, """
base: default
policies: [fedavg-all]
seeds: 1
grid: {generate.seed: [1, 2]}
zip: {generate.seed: [3, 4]}
"""))
    assert "also in grid" in found["zip.generate.seed"]


def test_invalid_points_name_the_point_and_the_field(tmp_path):
    found = problems(write(tmp_path, """
base: default
policies: [fedavg-all, {name: random-k, params: {k: 0}}, nosuch]
seeds: 2
grid:
  generate.n_devices: [20, 0]
  training.target_loss: [0.3, -1]
"""))
    assert "point 1 (n_devices=20, target_loss=-1) training.target_loss" in found
    assert "point 2 (n_devices=0, target_loss=0.3) generate.n_devices" in found
    assert "greater than or equal to 1" in found["point 2 (n_devices=0, target_loss=0.3) "
                                                 "generate.n_devices"]
    assert "unknown policy 'nosuch'" in found["policies[2].name"]
    assert "greater than or equal to 1" in found["policies[1].params.k"]
    assert not any(k.startswith("point 0 ") for k in found)


def test_bad_paths_and_bases(tmp_path):
    found = problems(write(tmp_path, """
base: two-phones
policies: [fedavg-all]
seeds: 1
grid:
  devices[7].flop_per_s: [1.0e9]
"""))
    assert "out of range" in found["grid.devices[7].flop_per_s"]
    found = problems(write(tmp_path, "base: nowhere\npolicies: [fedavg-all]\nseeds: 1\n"))
    assert "nowhere" in found["base"]


def test_duplicate_labels_are_rejected(tmp_path):
    found = problems(write(tmp_path, """
base: two-phones
policies: [{name: random-k, label: a}, {name: fastest-k, label: a}]
seeds: 1
"""))
    assert "used twice" in found["policies[1].label"]


def test_paths():
    assert parse_path("devices[1].flop_per_s") == ["devices", 1, "flop_per_s"]
    assert parse_path("links.0.bandwidth_bps") == ["links", 0, "bandwidth_bps"]
    base = {"a": {"b": [1, {"c": 2}]}}
    assert set_path(base, "a.b[1].c", 5) == {"a": {"b": [1, {"c": 5}]}}
    assert base == {"a": {"b": [1, {"c": 2}]}}  # copied, not mutated
    assert set_path({}, "policies.pact.eps", 0.1) == {"policies": {"pact": {"eps": 0.1}}}
    with pytest.raises(ValueError, match="not a mapping"):
        set_path({"a": 3}, "a.b", 1)
    with pytest.raises(ValueError, match="not in the base scenario"):
        set_path({}, "devices[0].x", 1)
    assert point_label({"generate.n_devices": 20, "training.target_loss": 0.3}, "x") == \
        "n_devices=20, target_loss=0.3"
    assert point_label({"a.seed": 1, "b.seed": 2}, "x") == "a.seed=1, b.seed=2"
    assert point_label({}, "default") == "default"


def test_two_entries_that_run_the_same_once_the_scenarios_block_is_merged_are_refused(
        tmp_path):
    """``random-k`` with the scenario's own ``k`` and ``random-k`` with that ``k`` given
    again are one policy: the second entry would vanish from the results under its label;
    refused naming both entries, nothing runs."""
    import yaml

    import netsim
    from netsim.scenario.loading import scenario_data

    base = scenario_data("two-phones")
    base["policies"] = {"random-k": {"k": 1}}
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(base))
    tmp_path = tmp_path / "out"
    spec = {"name": "dup", "base": str(path), "seeds": 1,
            "policies": ["random-k", {"name": "random-k", "params": {"k": 1}}]}
    with pytest.raises(netsim.ScenarioError, match=r"policies\[1\].*runs exactly as "
                                                   r"policies\[0\]"):
        netsim.sweep(spec, out=tmp_path)
    assert not (tmp_path / "runs").exists()
    spec["policies"][1]["params"] = {"k": 2}  # another k: two policies, two labels
    labels = set(netsim.sweep(spec, out=tmp_path).runs["policy_label"])
    assert labels == {"random-k", "random-k(k=2)"}
