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


@pytest.fixture
def builtin_plugins_only(monkeypatch):
    """Only the entry points netsim itself declares, whatever else is installed (issue 54: a
    user's own policy package must not change netsim's generated pages or fail its tests)."""
    import netsim.plugins
    from netsim.policy.registry import _load

    real = netsim.plugins.entry_points
    monkeypatch.setattr(netsim.plugins, "entry_points", lambda group: [
        ep for ep in real(group=group) if netsim.plugins.is_builtin(ep)])
    _load.cache_clear()
    yield
    _load.cache_clear()


def test_the_reference_page_is_generated_from_the_code(builtin_plugins_only):
    assert PAGE.read_text(encoding="utf-8") == reference_markdown(), (
        "docs/reference.md is stale: run `netsim schema --markdown > docs/reference.md`")


def test_a_users_installed_policy_is_left_out_of_netsims_page(add_entry_point,
                                                              builtin_plugins_only):
    from netsim.policy import registered

    before = reference_markdown()
    add_entry_point("netsim.policies", "user-one", "test_policy_contract:UserOne")
    assert "user-one" not in registered() and "fedavg-all" in registered()
    assert reference_markdown() == before


#: The unit each field-name suffix carries (issue 36): the whole name may be the suffix
#: (``flop_per_s`` is FLOP/s, not seconds), else ``_`` + suffix ends it; longest first.
DIMENSIONS = [("j_per_bit", "J/bit", "joule / bit"), ("flop_per_s", "FLOP/s", "flop / second"),
              ("bytes", "bytes", "byte"), ("flop", "FLOP", "flop"), ("bps", "bit/s", "bit / second"),
              ("j", "J", "joule"), ("w", "W", "watt"), ("s", "s", "second")]


def expected_unit(name: str) -> tuple[str, str] | None:
    """(label, pint unit) of the dimension a field's name carries, or None."""
    for suffix, label, si in DIMENSIONS:
        if name == suffix or name.endswith("_" + suffix):
            return label, si
    return None


def shown_units(text: str, sections: list[str]) -> dict[str, str]:
    """``section.field -> unit`` from `netsim schema`'s aligned tables (the unit column)."""
    out, section, start, end = {}, None, 0, 0
    for line in text.splitlines():
        head = line.split(":", 1)[0]
        if head in sections and not line.startswith(" "):
            section = head
        elif line.startswith("field "):
            start, end = line.index("unit"), line.index("description")
        elif section and line.strip():
            out[f"{section}.{line.split()[0]}"] = line[start:end].strip()
    return out


def test_every_fields_unit_shown_matches_the_dimension_its_name_carries(capsys):
    from netsim.reference import SECTIONS
    from netsim.units import registry

    assert main(["schema"]) == 0
    shown = shown_units(capsys.readouterr().out, list(SECTIONS))
    fields = [f"{s}.{f}" for s, m in SECTIONS.items() for f in m.model_fields]
    assert sorted(shown) == sorted(fields)
    assert shown["devices.flop_per_s"] == "FLOP/s"
    ureg = registry()
    for key, unit in shown.items():
        want = expected_unit(key.rsplit(".", 1)[1])
        if want is None:
            assert unit == "", key
            continue
        assert unit == want[0], key
        # the label is a unit of the field's dimension, as pint reads it
        assert ureg.Quantity(1, unit).dimensionality == ureg.Quantity(1, want[1]).dimensionality


def test_the_reference_page_shows_each_fields_unit_by_its_dimension():
    from netsim.reference import SECTIONS, field_rows

    for section, model in SECTIONS.items():
        for row in field_rows(model, section):
            want = expected_unit(row["field"])
            assert row["unit"] == (want[0] if want else ""), f"{section}.{row['field']}"
    assert "| `flop_per_s` | float | required | > 0, <= 1e+24 | FLOP/s |" in PAGE.read_text()
