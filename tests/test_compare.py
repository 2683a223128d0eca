"""Comparison tables: t and Wilson intervals, ratios to the best policy and to the optimum."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from netsim.cli import main
from netsim.sweep.compare import compare_table, format_compare
from netsim.sweep.stats import t_interval, wilson_interval


def test_t_interval_matches_the_textbook_formula():
    x = np.array([10.0, 12.0, 11.0, 15.0])
    mean, lo, hi = t_interval(x)
    half = stats.t.ppf(0.975, 3) * x.std(ddof=1) / 2
    assert mean == pytest.approx(12.0)
    assert (lo, hi) == pytest.approx((12.0 - half, 12.0 + half))
    assert t_interval([5.0, math.nan, 5.0]) == (5.0, 5.0, 5.0)
    m, lo1, hi1 = t_interval([3.0])
    assert m == 3.0 and math.isnan(lo1) and math.isnan(hi1)
    assert all(math.isnan(v) for v in t_interval([]))


def test_wilson_interval_known_values():
    # Wilson (1927) / Newcombe (1998) table: 8/10 -> [0.490, 0.943], 0/10 -> [0, 0.278]
    assert [round(v, 3) for v in wilson_interval(8, 10)] == [0.8, 0.49, 0.943]
    assert [round(v, 3) for v in wilson_interval(0, 10)] == [0.0, 0.0, 0.278]
    assert [round(v, 3) for v in wilson_interval(10, 10)] == [1.0, 0.722, 1.0]
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError, match="0..3"):
        wilson_interval(4, 3)


def _runs() -> pd.DataFrame:
    rows = []
    specs = {  # policy -> (energies, times, reached)
        "a": ([100.0, 110.0, 120.0], [10.0, 10.0, 10.0], [True, True, False]),
        "b": ([200.0, 220.0, 240.0], [5.0, 6.0, 7.0], [True, True, True]),
        "b-optimum": ([50.0, 50.0, 50.0], [20.0, 20.0, 20.0], [True, True, True]),
    }
    for policy, (energy, time_s, reached) in specs.items():
        for seed, (e, t, r) in enumerate(zip(energy, time_s, reached, strict=True)):
            rows.append({"run_id": f"{policy}{seed}", "sweep": "s", "point": 0,
                         "point_label": "p0", "policy_label": policy, "policy": policy,
                         "seed": seed, "status": "ok" if r else "target_missed",
                         "energy_j": e, "time_s": t, "final_loss": 0.3, "target_reached": r})
    rows.append({"run_id": "a-failed", "sweep": "s", "point": 0, "point_label": "p0",
                 "policy_label": "a", "policy": "a", "seed": 9, "status": "failed",
                 "energy_j": 1e9, "time_s": 1e9, "final_loss": math.nan, "target_reached": False})
    return pd.DataFrame(rows)


def test_compare_table_ratios_and_failures():
    table = compare_table(_runs()).set_index("policy")
    a = table.loc["a"]
    assert (a["runs"], a["failed"]) == (4, 1)
    assert a["energy_j"] == pytest.approx(110.0)  # the failed run is left out of the mean
    assert a["success"] == pytest.approx(2 / 4)  # but counts as a miss
    assert (a["success_lo"], a["success_hi"]) == pytest.approx(wilson_interval(2, 4)[1:])
    assert table.loc["b-optimum", "energy_vs_best"] == pytest.approx(1.0)
    assert a["energy_vs_best"] == pytest.approx(110.0 / 50.0)
    assert table.loc["b", "time_vs_best"] == pytest.approx(1.0)
    assert a["time_vs_best"] == pytest.approx(10.0 / 6.0)
    assert table.loc["b", "energy_vs_optimum"] == pytest.approx(220.0 / 50.0)
    assert a["time_vs_optimum"] == pytest.approx(10.0 / 20.0)
    text = format_compare(compare_table(_runs()))
    assert "sweep s, point 0: p0" in text
    assert "110 [85.16, 134.8]" in text and "energy/optimum" in text
    assert "50% [15%, 85%]" in text


def test_no_optimum_means_no_optimum_column():
    runs = _runs()
    table = compare_table(runs[runs["policy"] != "b-optimum"])
    assert table["energy_vs_optimum"].isna().all()
    assert "energy/optimum" not in format_compare(table)


def test_compare_command(tmp_path, capsys):
    from netsim.sweep.plan import load_plan
    from netsim.sweep.runner import run_sweep

    path = tmp_path / "s.yaml"
    path.write_text("base: two-phones\npolicies: [fedavg-all, fastest-k]\nseeds: 2\n"
                    "grid: {training.max_epochs: [3, 6]}\n")
    run_sweep(load_plan(path), tmp_path / "out", progress=False)
    csv = tmp_path / "table.csv"
    assert main(["compare", str(tmp_path / "out"), "--csv", str(csv)]) == 0
    text = capsys.readouterr().out
    assert "sweep s, point 0: max_epochs=3 (2 seeds)" in text
    assert "sweep s, point 1: max_epochs=6 (2 seeds)" in text
    assert text.count("fedavg-all") == 2 and text.count("fastest-k") == 2
    table = pd.read_csv(csv)
    assert len(table) == 4 and (table["runs"] == 2).all()
    assert main(["compare", str(tmp_path / "empty")]) == 2
    assert "no complete runs" in capsys.readouterr().err
