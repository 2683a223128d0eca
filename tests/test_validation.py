"""Bad input never crashes, and nothing overwrites what a user has (issue 18): every problem
in one pass, unit traps, file limits, engine ranges, output paths, the deadline as a hard stop,
baselines that stop with a reason, file modes."""

from __future__ import annotations

import copy
import os
import stat
import time
import warnings

import pandas as pd
import pytest
import yaml

import netsim
from netsim.cli import main
from netsim.scenario.loading import ScenarioWarning, load_scenario, validate_scenario
from netsim.scenario.schema import MAX_SAMPLES
from netsim.yamlio import MAX_DEPTH, MAX_FILE_BYTES


def paths_of(data) -> dict[str, str]:
    return {p.path: p.message for p in validate_scenario(data).problems}


def write(tmp_path, data, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


# --- every problem in one pass -------------------------------------------------------------

def test_field_and_cross_field_problems_are_reported_together(star):
    star["devices"][1]["flop_per_s"] = -2e10
    star["aggregator"] = "nowhere"
    star["model"] = "no-such-model"
    star["links"][2]["b"] = "d9"                    # a link to an unknown device
    star["policies"] = {"random-k": {"k": 0}, "rando-k": {}}
    probs = paths_of(star)
    assert "greater than 0" in probs["devices[1].flop_per_s"]
    assert "'nowhere' is not a device id" in probs["aggregator"]
    assert "unknown built-in model 'no-such-model'" in probs["model"]
    assert "'d9' is not a device id" in probs["links[2].b"] and "d3" in probs["links[2].b"]
    assert "greater than or equal to 1" in probs["policies.random-k.k"]
    assert "did you mean 'random-k'" in probs["policies.rando-k"]


def test_a_network_node_joining_two_links_is_not_an_unknown_end(star):
    star["links"] = [{"a": "server", "b": "sw", "bandwidth_bps": 1e9},
                     *[{**link, "a": "sw"} for link in star["links"]]]
    assert paths_of(star) == {}


def test_no_device_can_ever_train_is_rejected(star):
    for d in star["devices"]:
        d["samples"] = 0
    assert "none can ever train" in paths_of(star)["devices"]
    big = copy.deepcopy(star)
    big["devices"][1]["samples"] = 10
    big["model"]["params"] = 1e12                   # 4 TB, x3 to train: no device holds it
    assert "more than any device holding samples has" in paths_of(big)["model"]
    cut = copy.deepcopy(big)
    cut["model"]["params"] = 1e6
    cut["links"] = cut["links"][1:]                 # d1, the only holder, cut off
    probs = paths_of(cut)
    assert "no route to the aggregator" in probs["devices[1].id"]
    assert "none can ever train" in probs["links"]


def test_generated_networks_that_cannot_train_are_rejected():
    data = {"generate": {"n_devices": 5, "samples_mean": 0}, "model": "small-cnn",
            "training": {"target_loss": 0.3, "deadline_s": 60}}
    assert "none can ever train" in paths_of(data)["generate.samples_mean"]
    data["generate"] = {"n_devices": 5, "mix": {"phon": 1}}
    assert "did you mean 'phone'" in paths_of(data)["generate.mix.phon"]


def test_validate_reports_every_problem_and_simulates_nothing(tmp_path, capsys):
    bad = write(tmp_path, """
devices:
  - {id: s, flop_per_s: 1e12, memory_bytes: 1e10, power_busy_w: 1, power_idle_w: 1}
  - {id: p, flop_per_s: -5, memory_bytes: 4 GB, power_busy_w: 1, power_idle_w: 1, samples: 10}
links: [{a: s, b: q, bandwidth_bps: 20 Mbit/s}]
aggregator: nowhere
model: no-such-model
training: {target_loss: 0.3, deadline_s: 100}
policies: {nope: {}}
""")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    for path in ("devices[1].flop_per_s", "links[0].b", "aggregator", "model", "policies.nope"):
        assert f"  - {path}:" in err, path
    assert "Traceback" not in err
    out = tmp_path / "o"
    assert main(["run", str(bad), "--param", "fedavg-all.k=[", "--param", "bad", "--seed", "-1",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    for path in ("devices[1].flop_per_s", "aggregator", "--param[0]", "--param[1]", "--seed[0]"):
        assert f"  - {path}:" in err, path
    assert not out.exists()


def test_sweep_problems_are_reported_in_one_pass(tmp_path, capsys):
    sweep = write(tmp_path, """
base: two-phones
policies: [fedavg-all, nope, {name: random-k, params: {k: 0}}]
seeds: -1
grid: {training.target_loss: [0.3, -1]}
""", "sweep.yaml")
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    for path in ("seeds", "policies[1].name", "policies[2].params.k", "training.target_loss"):
        assert path in err, path
    assert "5 problem(s)" not in err and "4 problem(s)" in err


# --- unit traps ----------------------------------------------------------------------------

def test_millibit_is_an_error_naming_what_was_read(star, tmp_path, capsys):
    # (issue 54: a case mistake is refused, not warned about; tests/test_units_trap.py)
    star["links"][0]["bandwidth_bps"] = "20 mbps"
    result = validate_scenario(star)
    assert result.warnings == [] and len(result.problems) == 1
    p = result.problems[0]
    assert p.path == "links[0].bandwidth_bps"
    assert "0.02 bit/s" in p.message and "write '20 Mbps' (20 Mbit/s)" in p.message
    with pytest.raises(netsim.ScenarioError if hasattr(netsim, "ScenarioError") else ValueError):
        load_scenario(star)
    path = write(tmp_path, star)
    assert main(["validate", str(path)]) == 2
    assert "links[0].bandwidth_bps: '20 mbps'" in capsys.readouterr().err


def test_an_implausible_number_is_a_warning(star, tmp_path, capsys):
    star["links"][0]["bandwidth_bps"] = 0.02    # (a number is never a case mistake)
    (w,) = validate_scenario(star).warnings
    assert w.path == "links[0].bandwidth_bps" and "0.02 bit/s" in w.message
    with pytest.warns(ScenarioWarning, match="0.02 bit/s"):
        load_scenario(star)
    path = write(tmp_path, star)
    assert main(["validate", str(path)]) == 0
    assert "warning: links[0].bandwidth_bps" in capsys.readouterr().err
    assert main(["validate", "--strict", str(path)]) == 2


@pytest.mark.parametrize("field, value, expect", [
    (("devices", 1, "flop_per_s"), "2 mFLOPS", "write '2 MFLOPS' (2 MFLOP/s)"),
    (("devices", 1, "power_busy_w"), "5 MW", "write '5 mW'"),
    (("devices", 1, "memory_bytes"), "4 mB", "write '4 MB'"),
])
def test_case_mistakes_are_errors(star, field, value, expect):
    section, i, key = field
    star[section][i][key] = value
    result = validate_scenario(star)
    assert result.warnings == []
    assert expect in paths_of(star)[f"{section}[{i}].{key}"]


@pytest.mark.parametrize("field, value, expect", [
    (("links", 1, "bandwidth_bps"), 500, "500 bit/s"),
    (("links", 1, "bandwidth_bps"), "20 Tbit/s", "2e+13 bit/s"),
])
def test_implausible_magnitudes_warn(star, field, value, expect):
    section, i, key = field
    star[section][i][key] = value
    (w,) = validate_scenario(star).warnings
    assert w.path == f"{section}[{i}].{key}" and expect in w.message


def test_plausible_values_do_not_warn(star):
    star["links"][0]["bandwidth_bps"] = "20 Mbit/s"
    star["devices"][1]["power_busy_w"] = "500 mW"
    assert validate_scenario(star).warnings == []
    assert validate_scenario("default").warnings == []


def test_wrong_dimension_names_what_pint_understood(star):
    star["links"][0]["bandwidth_bps"] = "20 Mb/s"
    msg = paths_of(star)["links[0].bandwidth_bps"]
    assert "megabarn" in msg and "did you mean '20 Mbit/s'" in msg


# --- files, ranges, outputs ------------------------------------------------------------------

@pytest.mark.parametrize("content, expect", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR", "not a text file"),
    (b"name: caf\xe9\n", "not UTF-8"),
    (b"  \n", "is empty"),
    (b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5), "nested more than"),
    (b"a: &a [x,x,x,x,x,x,x,x,x]\n" + b"".join(
        b"%c: &%c [%s]\n" % (98 + i, 98 + i, b",".join([b"*%c" % (97 + i)] * 9)) for i in range(8)),
     "once aliases are expanded"),
    (b"- just\n- a list\n", "expected a mapping"),
])
def test_unreadable_files_exit_2_with_a_plain_message(tmp_path, capsys, content, expect):
    path = tmp_path / "f.yaml"
    path.write_bytes(content)
    start = time.perf_counter()
    assert main(["validate", str(path)]) == 2
    assert time.perf_counter() - start < 5
    err = capsys.readouterr().err
    assert expect in err and "Traceback" not in err and "Error:" not in err


def test_an_unknown_medium_says_when_no_media_are_defined(star):
    star["links"][0]["medium"] = "cell-9"
    message = paths_of(star)["links[0].medium"]
    assert "unknown medium 'cell-9'; no media are defined" in message and "one of" not in message
    star["media"] = [{"id": "cell-1", "kind": "wifi"}]
    assert "did you mean 'cell-1'?" in paths_of(star)["links[0].medium"]


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path, capsys):
    scenario = write(tmp_path, "name: x\nseed: 1\n  bad: [\n")
    assert main(["validate", str(scenario)]) == 2
    err = capsys.readouterr().err
    assert f"{scenario}:3:6: not valid YAML: mapping values are not allowed here" in err
    assert "<unicode string>" not in err and "Traceback" not in err
    sweep = write(tmp_path, "name: s\nbase: two-phones\npolicies: [fedavg-all\nseeds: 2\n",
                  "sweep.yaml")
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "res"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"{sweep}:4:" in err and "<unicode string>" not in err
    control = write(tmp_path, "name: x\nseed: \"a\x07\"\n", "control.yaml")
    assert main(["validate", str(control)]) == 2
    err = capsys.readouterr().err
    assert f"{control}:2:9: not valid YAML: character #x0007" in err and "<unicode" not in err


def test_files_over_the_size_limit_are_refused_unread(tmp_path, capsys):
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)
    assert main(["validate", str(path)]) == 2
    assert f"the limit is {MAX_FILE_BYTES:,} bytes" in capsys.readouterr().err


def test_numbers_beyond_the_engine_are_rejected_with_a_range(star):
    star["devices"][1]["samples"] = 10**30
    star["seed"] = 2**64
    star["model"]["params"] = 1e300
    star["devices"][2]["flop_per_s"] = 1e-300         # its times would overflow to inf
    probs = paths_of(star)
    assert f"less than or equal to {MAX_SAMPLES:g}" in probs["devices[1].samples"]
    assert "seed" in probs and "model.params" in probs
    assert "below 1e-09" in probs["devices[2].flop_per_s"]


def test_output_paths_are_checked_before_anything_runs(star, tmp_path, capsys):
    scenario = write(tmp_path, star)
    taken = tmp_path / "taken"
    taken.write_text("mine")
    start = time.perf_counter()
    assert main(["run", str(scenario), "--out", str(taken), "--policy", "fedavg-all"]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
    assert time.perf_counter() - start < 5 and taken.read_text() == "mine"
    assert main(["report", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_results_and_reports_get_the_users_file_mode(star, tmp_path):
    old = os.umask(0o022)
    try:
        netsim.simulate(star, "fedavg-all", out=tmp_path / "res")
        assert main(["report", str(tmp_path / "res")]) == 0
    finally:
        os.umask(old)
    files = [*(tmp_path / "res").rglob("*.parquet"), tmp_path / "res" / "report.html"]
    assert len(files) >= 4
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f


# --- the deadline, and baselines that stop ---------------------------------------------------

def _epochs(star, deadline_s, **kw):
    star = copy.deepcopy(star)
    star["training"].update(deadline_s=deadline_s, target_loss=1e-6, max_epochs=50)
    return netsim.simulate(star, "fedavg-all", seed=0, **kw)


def test_the_deadline_is_a_hard_stop_and_earlier_epochs_are_unchanged(star):
    free = _epochs(star, 1e6).epochs
    cut_at = float(free["end_s"].iloc[4]) + 0.5 * float(free["end_s"].iloc[5] - free["end_s"].iloc[4])
    res = _epochs(star, cut_at)
    run = res.runs.iloc[0]
    assert run["status"] == "deadline" and "epoch 5" in run["error"] and "not run" in run["error"]
    assert (res.epochs["end_s"] <= cut_at).all() and len(res.epochs) == 5
    pd.testing.assert_frame_equal(res.epochs.drop(columns="run_id"),
                                  free.iloc[:5].drop(columns="run_id"))


def test_an_epoch_slowed_past_the_deadline_by_contention_is_not_recorded(star):
    # all three devices behind one 10 Mbit/s link: their transfers share it, the epoch takes
    # longer than its contention-free estimate; a deadline in between is caught after the run
    star["links"] = [{"a": "server", "b": "sw", "bandwidth_bps": 1e7},
                     *[{**link, "a": "sw", "bandwidth_bps": 1e9} for link in star["links"]]]
    from netsim.costs import estimate_epoch
    from netsim.devices import build_device_table
    from netsim.engine import resolve_scenario
    from netsim.runloop import _contention_free

    first = _epochs(star, 1e6).epochs.iloc[0]
    resolved = resolve_scenario(load_scenario(star), 0)
    table = _contention_free(build_device_table(resolved))  # the engine's pre-check bound
    estimate = estimate_epoch(table, resolved.model, 0, table.samples).time_s
    assert first["end_s"] > 1.5 * estimate
    res = _epochs(star, 0.5 * (estimate + float(first["end_s"])))
    run = res.runs.iloc[0]
    assert run["status"] == "deadline" and "contention" in run["error"] and res.epochs.empty


def test_baselines_stop_with_a_reason_when_no_device_can_train(star):
    for d in star["devices"][1:]:
        d["availability"] = 1e-12
    for policy in ("fedavg-all", "random-k", "fastest-k"):
        run = netsim.simulate(star, policy, seed=0).runs.iloc[0]
        assert run["status"] == "target_missed" and "none of the 3" in run["error"], policy


def test_baselines_leave_out_devices_that_cannot_hold_the_model(star):
    star["devices"][2]["memory_bytes"] = 1e6        # d2 cannot hold 4 MB x 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScenarioWarning)
        for policy in ("fedavg-all", "random-k", "fastest-k"):
            res = netsim.simulate(star, policy, seed=0, params={"k": 3} if "-k" in policy else None)
            assert res.runs.iloc[0]["status"] != "failed", res.runs.iloc[0]["error"]
            assert not any("d2" in ids for ids in res.epochs["participant_ids"])
