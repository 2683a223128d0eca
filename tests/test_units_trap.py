"""Unit traps stop the run (issue 54): a value that a case mistake made implausible
(``'20 mbps'``, 0.02 bit/s) is refused by ``netsim validate``, ``netsim run`` and
``netsim sweep`` with exit 2, the field path and the spelling to write; units pint cannot read
in the wrong case (``'5 w'``, ``'4 gb'``) are refused with the case that reads."""

from __future__ import annotations

import pytest
import yaml

from netsim.cli import main
from netsim.units import case_fix, to_si, unit_checks, unit_trap


def write(tmp_path, data, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_millibit_bandwidth_stops_validate_and_run(star, tmp_path, capsys):
    star["links"][0]["bandwidth_bps"] = "20 mbps"
    path = write(tmp_path, star)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "links[0].bandwidth_bps: '20 mbps' was read as 0.02 bit/s" in err
    assert "write '20 Mbps' (20 Mbit/s)" in err and "m is milli, M is mega" in err
    out = tmp_path / "out"
    assert main(["run", str(path), "--policy", "fedavg-all", "--out", str(out),
                 "--no-figure"]) == 2
    err = capsys.readouterr().err
    assert "links[0].bandwidth_bps" in err and "'20 Mbps'" in err
    assert not (out / "runs").exists()  # nothing ran


def test_a_sweep_point_with_a_trap_is_refused(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("base: two-phones\npolicies: [fedavg-all]\n"
                     "grid:\n  links[0].bandwidth_bps: ['20 mbps']\n")
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    assert "'20 Mbps'" in capsys.readouterr().err


@pytest.mark.parametrize("key, value, hint", [
    ("power_busy_w", "5 w", "did you mean '5 W'?"),
    ("memory_bytes", "4 gb", "did you mean '4 GB'?"),
    ("memory_bytes", "4 mb", "did you mean '4 MB'?"),  # (not '4 mB', a millibyte)
])
def test_lower_case_units_are_refused_with_the_case_that_reads(star, tmp_path, capsys, key,
                                                               value, hint):
    star["devices"][1][key] = value
    assert main(["validate", str(write(tmp_path, star))]) == 2
    err = capsys.readouterr().err
    assert f"devices[1].{key}: " in err and hint in err and "case-sensitive" in err


def test_the_escape_for_an_implausible_value_meant_is_the_number(star, tmp_path, capsys):
    # the error says how to mean it: the number (SI) is only warned about
    msg = unit_trap("bandwidth_bps", "20 mbps")
    assert msg is not None and "the number 0.02 (bit/s)" in msg
    star["links"][0]["bandwidth_bps"] = 0.02
    assert main(["validate", str(write(tmp_path, star))]) == 0
    assert "warning: links[0].bandwidth_bps" in capsys.readouterr().err


def test_plausible_values_and_far_off_ones_without_a_case_fix_are_no_trap():
    assert unit_trap("bandwidth_bps", "20 Mbit/s") is None
    assert unit_trap("bandwidth_bps", "20 Tbit/s") is None  # (a warning: no case reads well)
    assert unit_trap("bandwidth_bps", 0.02) is None
    errors, warnings = unit_checks({"links": [{"bandwidth_bps": "20 mbps"},
                                              {"bandwidth_bps": "20 Tbit/s"}]})
    assert [p for p, _ in errors] == ["links[0].bandwidth_bps"]
    assert [p for p, _ in warnings] == ["links[1].bandwidth_bps"]


def test_case_fix_prefers_the_fewest_changes_that_read_plausibly():
    assert case_fix("20 mbps", "bps", "bandwidth_bps") == ("20 Mbps", 2e7)
    assert case_fix("10 kwh", "j") == ("10 kWh", 3.6e7)
    assert case_fix("abc", "bps") is None
    with pytest.raises(ValueError, match=r"did you mean '10 kWh' \(36 MJ\)"):
        to_si("10 kwh", "j")
