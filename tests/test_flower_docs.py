"""docs/flower.md's snippets run as written: every Python block (its "In brief" imports what it
uses), and the three commands that take a Flower app folder to netsim's tables and figures.

They run in a fresh folder in which ``tests`` and ``experiments`` are the repository's (the
docs' paths are the repository root's), so what they write stays out of the checkout.
"""

from __future__ import annotations

import io
import re
import shlex
from contextlib import redirect_stdout
from pathlib import Path

import pytest

pytest.importorskip("flwr")

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "flower.md"


def _blocks(language: str, text: str | None = None) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text or PAGE.read_text(encoding="utf-8"),
                      re.S)


@pytest.fixture
def repo_folder(tmp_path, monkeypatch) -> Path:
    for name in ("tests", "experiments"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_each_python_snippet_runs_as_written(index, repo_folder, capsys):
    space: dict = {}
    exec(_blocks("python")[index], space)  # (a fresh namespace: it imports what it uses)
    result = space["result"]
    assert result.runs["status"].iloc[0] != "failed", result.runs["error"].iloc[0]
    assert len(result.epochs) >= 1


def test_three_commands_take_an_app_folder_to_tables_and_figures(repo_folder, capsys):
    from netsim.cli import main

    section = PAGE.read_text(encoding="utf-8").split("## From your Flower app folder")[1]
    commands = [line for line in _blocks("bash", section)[0].splitlines() if line.strip()]
    assert len(commands) == 3
    for command in commands:
        argv, _, target = command.partition(" > ")
        args = shlex.split(argv)
        assert args[0] == "netsim"
        printed = io.StringIO()
        with redirect_stdout(printed):
            code = main(args[1:])
        assert code == 0, (command, capsys.readouterr().err)
        if target:
            Path(target.strip()).write_text(printed.getvalue())
    results = Path("results")
    assert (results / "figures" / "timeline.png").is_file()
    assert Path("report.html").stat().st_size > 10_000
    import netsim

    stored = netsim.load_results(results)
    assert list(stored.runs["status"]) == ["ok"] and len(stored.epochs) == 2
