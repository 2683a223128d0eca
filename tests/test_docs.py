"""The README and docs/ stay true (issue 36): the outputs they quote are what the commands print
today, their code examples run, the README stays a landing page, and the site's navigation
holds every page.

An output block is marked in Markdown by the command that prints it::

    <!-- output: netsim run wifi-cellular -->
    ```text
    ...what the command prints on stdout, in a fresh folder (trailing blanks aside)...
    ```

A change that moves such an output must update the page (the failure shows the new output).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

#: The README's set-up commands: a contract (issue 36), kept exactly.
SETUP_COMMANDS = [
    'python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && '
    'pip install -e ".[dev]" && netsim run',
    ". .venv/bin/activate && ruff check . && mypy && python -m pytest -q -n 2 --dist loadfile",
]

OUTPUT_BLOCK = re.compile(r"<!-- output: (?P<cmd>[^>]*?) -->\n```text\n(?P<text>.*?)```", re.S)


def pages() -> list[Path]:
    """The README and every docs page."""
    return [README, *sorted(DOCS.glob("*.md"))]


def quoted_outputs() -> dict[str, list[tuple[str, str]]]:
    """Command -> [(page, quoted output)] for every marked output block."""
    out: dict[str, list[tuple[str, str]]] = {}
    for page in pages():
        for m in OUTPUT_BLOCK.finditer(page.read_text(encoding="utf-8")):
            out.setdefault(m["cmd"].strip(), []).append((page.name, m["text"]))
    return out


QUOTED = quoted_outputs()


def lines(text: str) -> list[str]:
    """The lines of an output, each without trailing blanks (pandas pads its tables' last
    column; editors strip trailing blanks)."""
    return [line.rstrip() for line in text.rstrip("\n").splitlines()]


def test_the_readme_and_the_docs_quote_outputs():
    assert "netsim run" in QUOTED and "README.md" in [p for p, _ in QUOTED["netsim run"]]
    assert {"netsim run wifi-cellular", "netsim run changing-world"} <= set(QUOTED)


@pytest.mark.parametrize("command", sorted(QUOTED))
def test_quoted_output_is_what_the_command_prints_today(command, tmp_path, monkeypatch, capsys):
    from netsim.cli import main

    argv = shlex.split(command)
    assert argv[0] == "netsim", command
    monkeypatch.chdir(tmp_path)  # a fresh folder: netsim-out/ is new, paths print as quoted
    assert main(argv[1:]) == 0
    printed = lines(capsys.readouterr().out)
    for page, text in QUOTED[command]:
        assert lines(text) == printed, (
            f"{page} quotes another output of `{command}` than it prints today; "
            "update the page to:\n" + "\n".join(printed))


def test_the_readme_is_a_landing_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    for command in SETUP_COMMANDS:
        assert f"```bash\n{command}\n```" in text, command
    for link in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]+)?\)", text):
        assert (ROOT / link).is_file(), link
    assert (ROOT / "CHANGELOG.md").is_file() and "](CHANGELOG.md)" in text


def test_the_citation_names_todays_version():
    import netsim

    version = re.search(r"version = \{([^}]*)\}", README.read_text(encoding="utf-8"))
    assert version is not None and version[1] == netsim.__version__


def test_the_site_lists_every_page():
    import yaml

    class Loader(yaml.SafeLoader):
        """mkdocs.yml's ``!!python/name:`` tags (superfences' mermaid fence) read as text."""

    Loader.add_multi_constructor("tag:yaml.org,2002:python/",
                                 lambda loader, suffix, node: suffix)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)

    def leaves(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from leaves(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from leaves(value)

    listed = set(leaves(config["nav"]))
    on_disk = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert on_disk == listed
    assert config.get("strict") is True


def test_the_home_page_and_the_readme_link_every_page():
    """docs/index.md and the README's table of pages name every page of docs/ (curves.md was
    left out of both until 0.6.0)."""
    on_disk = {p.name for p in DOCS.glob("*.md")} - {"README.md", "index.md"}
    from_index = set(re.findall(r"\]\(([\w.-]+\.md)", (DOCS / "index.md").read_text()))
    from_readme = set(re.findall(r"\]\(docs/([\w.-]+\.md)", README.read_text()))
    assert on_disk - from_index == set()
    assert on_disk - {"changelog.md"} - from_readme == set()


def table_rows(page: Path, heading: str) -> dict[str, str]:
    """The first table under ``heading`` (a whole heading line) on ``page``: first cell's
    `name` -> the row."""
    text = page.read_text(encoding="utf-8").split("\n" + heading + "\n", 1)[1]
    rows, started = {}, False
    for line in text.splitlines():
        if line.startswith("|"):
            started = True
            m = re.match(r"\| `([^`]+)` \|", line)
            if m:
                rows[m[1]] = line
        elif started:
            break
    return rows


@pytest.mark.parametrize(("page", "scenarios", "models"), [
    (README, "## Built-in scenarios", "## Models"),
    (DOCS / "scenarios.md", "## Built-in scenarios to start from", "## Built-in models")])
def test_the_built_in_scenarios_and_models_listed_are_the_codes(page, scenarios, models):
    """The tables of built-in scenarios and models list what `netsim scenarios` and
    `netsim models` list, and call a model's curve fitted exactly where the code does."""
    from netsim.scenario.loading import builtin_scenarios
    from netsim.training.models import builtin_models

    assert set(table_rows(page, scenarios)) == set(builtin_scenarios())
    listed, known = table_rows(page, models), builtin_models()
    assert set(listed) == set(known)
    for name, m in known.items():
        fitted = m.loss is not None and m.loss.source.startswith("fitted")
        assert ("**fitted**" in listed[name]) == fitted, name
        assert ("illustrative" in listed[name]) == (not fitted), name


def code_blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def test_the_policy_example_runs():
    import netsim
    from netsim.scenario.loading import scenario_data

    space: dict = {}
    exec(code_blocks(DOCS / "writing-a-policy.md", "python")[0], space)
    data = scenario_data("default")
    data["training"]["max_epochs"] = 3
    result = netsim.simulate(data, policy=space["CheapestK"](space["Params"](k=3)), seed=0)
    run = result.runs.iloc[0]
    assert run["status"] != "failed", run["error"]
    assert run["epochs"] == 3 and (result.epochs["participants"] == 3).all()


def test_the_figure_example_draws(tmp_path):
    import netsim
    from netsim.figures import draw, overlapping_texts, save

    space: dict = {}
    exec(code_blocks(DOCS / "writing-a-figure.md", "python")[0], space)
    for policy in ("fedavg-all", "random-k"):
        netsim.simulate("two-phones", policy=policy, seed=0, out=tmp_path / "res")
    drawn = list(draw(netsim.load_results(tmp_path / "res"), [space["EPOCHS_PER_POLICY"]]))
    assert len(drawn) == 1 and drawn[0].figure is not None, drawn
    assert overlapping_texts(drawn[0].figure) == []
    assert all(p.is_file() for p in save(drawn[0].figure, tmp_path / "fig" / "epochs"))


def test_scenarios_quoted_in_full_validate():
    """Every YAML block of a docs page that is a whole scenario (a network and a training
    goal) validates."""
    from netsim.scenario.loading import validate_scenario
    from netsim.yamlio import safe_load

    checked = 0
    for page in pages():
        for block in code_blocks(page, "yaml"):
            data = safe_load(block)
            if isinstance(data, dict) and "training" in data and (
                    "devices" in data or "generate" in data):
                result = validate_scenario(data)
                assert not result.problems, (page.name, result.problems)
                checked += 1
    assert checked >= 1
