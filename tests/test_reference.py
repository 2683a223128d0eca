"""The user's reference: `netsim schema`, `netsim policies NAME`, `--version`, docs/reference.md."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

import netsim
from netsim.cli import main
from netsim.reference import field_rows, reference_markdown

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


class Example(BaseModel):
    """Parameters.

    latency_s: how long it waits,
        over two lines.
    """

    latency_s: Annotated[float, Field(gt=0, le=10)] = 0.5
    k: Annotated[int, Field(ge=1)]
    names: list[str] | None = None


def test_rows_come_from_the_model():
    rows = {r["field"]: r for r in field_rows(Example)}
    assert rows["latency_s"] == {"field": "latency_s", "type": "float", "default": "0.5",
                                 "range": "> 0, <= 10", "unit": "s",
                                 "description": "how long it waits, over two lines."}
    assert (rows["k"]["default"], rows["k"]["range"], rows["k"]["unit"]) == ("required", ">= 1", "")
    assert rows["names"]["type"] == "list[str] | None" and rows["names"]["default"] == "-"


def test_schema_and_policy_parameters_on_the_command_line(capsys):
    assert main(["schema", "links"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("bandwidth_bps"))
    assert "> 0, <= 1e+18" in line and "bit/s" in line and "required" in line
    assert main(["schema", "generate"]) == 0
    assert "each run seed draws a new network" in capsys.readouterr().out
    assert main(["policies", "pact"]) == 0
    out = capsys.readouterr().out
    assert "epsilon" in out and "0.025" in out and "> 0, <= 0.5" in out
    assert main(["policies", "nosuch"]) == 2
    assert "no policy 'nosuch'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"netsim {netsim.__version__}"


def test_every_command_has_help_that_ends_a_sentence(capsys):
    from netsim.cli import build_parser

    parser = build_parser()
    assert not parser.description.endswith(";") and parser.description.endswith(".")
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():
        assert sub._choices_actions and command.description, name
    helps = {a.dest: a.help for a in sub._choices_actions}
    assert all(helps[n] for n in sub.choices)


def test_the_reference_page_is_generated_from_the_code():
    assert PAGE.read_text(encoding="utf-8") == reference_markdown(), (
        "docs/reference.md is stale: run `netsim schema --markdown > docs/reference.md`")
