"""The command line: the default run, validation errors, information commands."""

import subprocess
import sys

import pandas as pd
import pytest

from netsim.cli import main


def run_cli(args, cwd):
    return subprocess.run([sys.executable, "-m", "netsim.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_netsim_run_with_no_arguments_writes_tables_and_figure(tmp_path):
    proc = run_cli(["run"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "netsim-out"
    runs = pd.read_parquet(out / "runs")
    assert set(runs["policy"]) >= {"fedavg-all", "greedy-energy"} and len(runs) >= 2
    assert (out / "figures" / "timeline.png").stat().st_size > 10_000
    assert (out / "figures" / "timeline.pdf").is_file()
    for col in ("energy_j", "time_s", "final_loss", "target_reached"):
        assert col in proc.stdout


def test_invalid_scenario_exits_2_naming_the_field_without_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("""
devices:
  - {id: s, flop_per_s: 1e12, memory_bytes: 1e10, power_busy_w: 1, power_idle_w: 1}
  - {id: p, flop_per_s: -5, memory_bytes: 4 GB, power_busy_w: 1, power_idle_w: 1, samples: 10}
links: [{a: s, b: p, bandwidth_bps: 20 ms}]
aggregator: s
model: small-cnn
training: {target_loss: 0.3, deadline_s: 100}
""")
    for cmd in (["validate", str(bad)], ["run", str(bad)]):
        proc = run_cli(cmd, tmp_path)
        assert proc.returncode == 2
        assert "devices[1].flop_per_s" in proc.stderr and "links[0].bandwidth_bps" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "netsim-out").exists()


def test_bad_arguments_exit_2(capsys):
    assert main(["run", "--policy", "nope"]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err
    assert main(["run", "--param", "fedavg-all"]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["run", "--seed", "x"])
    assert exc.value.code == 2


def test_information_commands(capsys):
    assert main(["policies"]) == 0
    assert "fedavg-all" in capsys.readouterr().out
    assert main(["scenarios"]) == 0
    assert "default" in capsys.readouterr().out
    assert main(["scenarios", "show", "default"]) == 0
    assert "generate:" in capsys.readouterr().out
    assert main(["scenarios", "show", "nope"]) == 2
    assert main(["models"]) == 0
    assert "resnet18" in capsys.readouterr().out
    assert main(["validate", "default"]) == 0


def test_run_with_params_and_seeds(tmp_path, capsys):
    code = main(["run", "two-phones", "--policy", "random-k", "--param", "random-k.k=1",
                 "--seed", "1", "--seed", "2", "--out", str(tmp_path), "--no-figure"])
    assert code == 0
    runs = pd.read_parquet(tmp_path / "runs")
    assert sorted(runs["seed"]) == [1, 2]
    assert '"k": 1' in runs["policy_params"].iloc[0]


def test_policy_takes_several_names_and_the_scenario_stays_unambiguous(tmp_path, capsys):
    out = tmp_path / "a"
    assert main(["run", "two-phones", "--policy", "fedavg-all", "random-k", "--out", str(out),
                 "--no-figure"]) == 0
    assert sorted(pd.read_parquet(out / "runs")["policy"]) == ["fedavg-all", "random-k"]
    # the scenario written after the names is still the scenario; the repeated form mixes in
    out = tmp_path / "b"
    assert main(["run", "--policy", "fedavg-all", "two-phones", "--policy", "random-k",
                 "--out", str(out), "--no-figure"]) == 0
    runs = pd.read_parquet(out / "runs")
    assert sorted(runs["policy"]) == ["fedavg-all", "random-k"]
    assert set(runs["scenario"]) == {"two-phones"}
    capsys.readouterr()
    # a second scenario is not a policy; a typo gets a suggestion
    assert main(["run", "two-phones", "--policy", "pact", "default", "--out", str(out)]) == 2
    assert "unknown policy 'default': it names a scenario" in capsys.readouterr().err
    assert main(["run", "two-phones", "--policy", "pactt", "--out", str(out)]) == 2
    assert "--policy: unknown policy 'pactt'; did you mean 'pact'?" in capsys.readouterr().err


def test_a_run_into_a_results_folder_says_what_it_replaces_and_adds(tmp_path, capsys):
    out = tmp_path / "res"
    args = ["run", "two-phones", "--seed", "1", "--out", str(out), "--no-figure"]
    assert main([*args, "--policy", "fedavg-all"]) == 0
    first = capsys.readouterr().out
    assert "already holds" not in first
    header = next(ln for ln in first.splitlines() if ln.split()[:2] == ["policy", "seed"])
    assert "sim_time_s" in header.split() and "time_s" not in header.split()  # simulated time
    (earlier,) = pd.read_parquet(out / "runs")["run_id"]
    assert main([*args, "--policy", "fedavg-all", "random-k"]) == 0
    second = capsys.readouterr().out
    runs = pd.read_parquet(out / "runs")
    (added,) = set(runs["run_id"]) - {earlier}
    lines = second.splitlines()
    assert lines[0] == f"{out} already holds 1 run(s); this run replaces 1 of them, keeps 0 and adds 1:"
    assert lines[1].split() == ["replaces", earlier, "fedavg-all", "seed", "1"]
    assert lines[2].split() == ["adds", added, "random-k", "seed", "1"]
    assert second.index("already holds") < second.index("sim_time_s")  # said before it runs
