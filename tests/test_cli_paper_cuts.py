"""The command line as documented (issue 54): ``--debug`` named where it goes, ``| head``
without a BrokenPipeError, docs/cli.md's flag table generated from the parser, the field
reference's ``target_loss`` not required where ``target_accuracy`` stands in, and "did you
mean" for field-name typos."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from netsim.cli import BROKEN_PIPE_EXIT, FLAGS_BEGIN, FLAGS_END, command_flags, flags_markdown, main

CLI_PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


@pytest.fixture
def builtin_plugins_only(monkeypatch):
    """Only the entry points netsim itself declares (a user's plug-in commands and policies
    are not netsim's to document)."""
    import netsim.plugins
    from netsim.figures import registered_figures
    from netsim.policy.registry import _load

    real = netsim.plugins.entry_points
    monkeypatch.setattr(netsim.plugins, "entry_points", lambda group: [
        ep for ep in real(group=group) if netsim.plugins.is_builtin(ep)])
    _load.cache_clear()
    registered_figures.cache_clear()
    yield
    _load.cache_clear()
    registered_figures.cache_clear()


# --- --debug goes before the command -------------------------------------------------------

def test_an_unexpected_failure_says_where_debug_goes(monkeypatch, capsys):
    import netsim.commands.info as info

    def broken(args):
        raise RuntimeError("something unexpected")

    monkeypatch.setattr(info, "_scenarios", broken)
    assert main(["scenarios"]) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: something unexpected" in err
    assert "netsim --debug COMMAND ..." in err and "--debug goes before the command" in err
    with pytest.raises(RuntimeError):
        main(["--debug", "scenarios"])


def test_debug_after_the_command_is_refused_with_where_it_goes(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["validate", "two-phones", "--debug"])
    assert exit_.value.code == 2
    assert "--debug goes before the command: netsim --debug COMMAND" in capsys.readouterr().err


# --- a reader that goes away ----------------------------------------------------------------

class _GonePipe:
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_reader_gone_is_a_quiet_exit(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _GonePipe())
    assert main(["scenarios"]) == BROKEN_PIPE_EXIT
    assert "BrokenPipeError" not in capsys.readouterr().err


def test_piping_into_head_ends_without_a_traceback():
    # (the reader closes before netsim writes: every write is a broken pipe)
    proc = subprocess.Popen([sys.executable, "-m", "netsim.cli", "schema"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == BROKEN_PIPE_EXIT
    assert "Traceback" not in err and "BrokenPipeError" not in err


# --- docs/cli.md lists every flag -------------------------------------------------------------

def test_the_flag_table_of_docs_cli_is_generated_from_the_parser(builtin_plugins_only):
    page = CLI_PAGE.read_text(encoding="utf-8")
    start, end = page.index(FLAGS_BEGIN), page.index(FLAGS_END) + len(FLAGS_END)
    assert page[start:end] + "\n" == flags_markdown(), (
        "docs/cli.md's flag table is stale: replace it with the output of "
        "`python -m netsim.cli --flags-markdown`")


def test_every_flag_the_issue_named_is_in_the_table(builtin_plugins_only):
    rows = {(c, f.split()[0]) for c, f, _ in command_flags()}
    for command, flag in [("netsim run", "--no-figure"), ("netsim run", "--strict"),
                          ("netsim sweep", "--dry-run"), ("netsim sweep", "--retry-failed"),
                          ("netsim", "--debug")]:
        assert (command, flag) in rows, (command, flag)
    table = flags_markdown()
    assert all(f"`{c}` | `{f}" in table for c, f, _ in command_flags())


# --- the field reference and typos ----------------------------------------------------------

def test_target_loss_is_required_unless_target_accuracy(capsys):
    assert main(["schema", "training"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines()
                if ln.startswith("target_loss "))
    assert "required unless target_accuracy" in line


def test_field_name_typos_get_did_you_mean(star, tmp_path, capsys):
    star["devices"][1]["flop_per_sec"] = star["devices"][1].pop("flop_per_s")
    star["links"][0]["latncy_s"] = 0.01
    star["training"]["deadline"] = star["training"].pop("deadline_s")
    star["policies"] = {"pact": {"epsilonn": 0.1}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(star))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    for where, meant in [("devices[1].flop_per_sec", "flop_per_s"),
                         ("links[0].latncy_s", "latency_s"),
                         ("training.deadline", "deadline_s"),
                         ("policies.pact.epsilonn", "epsilon")]:
        assert f"{where}: unknown field; did you mean {meant!r}?" in err, where


def test_sweep_field_typos_get_did_you_mean(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("base: two-phones\npolicies: [{name: random-k, parms: {k: 1}}]\n"
                     "seed: 3\n")
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "policies[0].parms: unknown field; did you mean 'params'?" in err
    assert "seed: unknown field; did you mean 'seeds'?" in err
    assert "constrained-str" not in err
