"""Comparison tables: t and Wilson intervals, ratios to the best policy and to the optimum."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from netsim.cli import main
from netsim.sweep.compare import compare_table, format_compare
from netsim.sweep.stats import ratio_of_means, t_interval, wilson_interval


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


def test_ratio_of_means_is_the_ratio_with_a_bootstrap_interval_around_it():
    rng = np.random.default_rng(0)
    # constant sides: every resample has the same means, so the interval is the point
    assert ratio_of_means(np.full(5, 3.0), np.full(4, 2.0), rng) == (1.5, 1.5, 1.5)
    num, den = rng.lognormal(1.0, 0.3, 10), rng.lognormal(0.5, 0.3, 8)
    r, lo, hi = ratio_of_means(num, den, np.random.default_rng(1))
    assert r == pytest.approx(num.mean() / den.mean(), rel=1e-15)
    assert lo < r < hi
    # the bounds are ratios of resampled means: within the extreme ratios of the values
    assert num.min() / den.max() <= lo and hi <= num.max() / den.min()
    # seeded: the same generator state gives the same interval
    assert ratio_of_means(num, den, np.random.default_rng(1)) == (r, lo, hi)
    assert all(math.isnan(x) for x in ratio_of_means(num, den[:0], rng))


def test_compare_table_success_first_means_both_ways_and_best_among_those_that_meet():
    table = compare_table(_runs()).set_index("policy")
    a = table.loc["a"]
    assert (a["runs"], a["failed"], a["seeds"]) == (4, 1, 4)
    assert a["success"] == pytest.approx(2 / 4)  # the failed run counts as a miss
    assert (a["success_lo"], a["success_hi"]) == pytest.approx(wilson_interval(2, 4)[1:])
    assert a["energy_j"] == pytest.approx(105.0)  # over the runs that reached the target
    assert (a["energy_j_lo"], a["energy_j_hi"]) == pytest.approx(t_interval([100, 110])[1:])
    assert a["energy_j_all"] == pytest.approx(110.0)  # over all runs, the failed one left out
    assert not a["meets"] and table.loc["b", "meets"]
    assert table["best"].sum() == 1 and table.loc["b-optimum", "best"]
    assert table.loc["b-optimum", "energy_vs_best"] == pytest.approx(1.0)
    assert a["energy_vs_best"] == pytest.approx(110.0 / 50.0)
    assert table.loc["b", "time_vs_best"] == pytest.approx(1.0)  # the fastest that meets it
    assert table.loc["b-optimum", "time_vs_best"] == pytest.approx(20.0 / 6.0)
    assert table.loc["b", "energy_vs_optimum"] == pytest.approx(220.0 / 50.0)
    text = format_compare(compare_table(_runs()))
    assert "sweep s, point 0: p0 (4 seeds)" in text and "b-optimum *" in text
    assert text.index("success") < text.index("energy J, reached") < text.index("energy J, all")
    assert "105 [41.47, 168.5]" in text and "50% [15%, 85%]" in text


def _cheap_but_failing(runs: pd.DataFrame, pi: float | None) -> pd.DataFrame:
    runs = runs[runs["policy"] != "b-optimum"]
    cheap = runs[runs["policy"] == "b"].assign(policy="c", policy_label="c", energy_j=1.0,
                                               target_reached=False, status="target_missed")
    runs = pd.concat([runs, cheap], ignore_index=True)
    return runs.assign(target_probability=math.nan if pi is None else pi)


def test_best_is_never_a_policy_that_misses_the_required_share():
    every = compare_table(_cheap_but_failing(_runs(), None)).set_index("policy")
    assert every.loc["c", "energy_j_all"] == 1.0 and every.loc["c", "success"] == 0.0
    assert list(every.index[every["best"]]) == ["b"]  # a (2/4) and c (0/3) miss "every run"
    assert every.loc["c", "energy_vs_best"] == pytest.approx(1.0 / 220.0)
    half = compare_table(_cheap_but_failing(_runs(), 0.5)).set_index("policy")
    assert half.loc["a", "meets"] and list(half.index[half["best"]]) == ["a"]
    assert half.loc["b", "energy_vs_best"] == pytest.approx(220.0 / 110.0)
    nobody = _cheap_but_failing(_runs(), None)
    nobody = nobody[nobody["policy"] == "c"]
    table = compare_table(nobody)
    assert not table["best"].any() and table["energy_vs_best"].isna().all()
    assert "no policy reaches the target in every run" in format_compare(table)


def test_paired_differences_over_common_seeds():
    table = compare_table(_runs(), baseline="b").set_index("policy")
    a = table.loc["a"]
    diffs = np.array([100.0, 110.0, 120.0]) - np.array([200.0, 220.0, 240.0])  # seeds 0-2
    assert a["paired_n"] == 3  # a's failed seed 9 has no partner
    assert (a["d_energy_j"], a["d_energy_j_lo"], a["d_energy_j_hi"]) == pytest.approx(
        t_interval(diffs))
    assert a["d_time_s"] == pytest.approx(np.mean([10 - 5, 10 - 6, 10 - 7]))
    assert math.isnan(table.loc["b", "paired_n"]) and table.loc["b", "baseline"]
    assert "baseline" in format_compare(compare_table(_runs(), baseline="b"))
    with pytest.raises(ValueError, match="nosuch"):
        compare_table(_runs(), baseline="nosuch")


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
    assert "sweep s, point 0: max_epochs=3 (2 seeds)" in text, text
    assert "sweep s, point 1: max_epochs=6 (2 seeds)" in text
    assert text.count("fedavg-all") == 2 and text.count("fastest-k") == 2
    table = pd.read_csv(csv)
    assert len(table) == 4 and (table["runs"] == 2).all()
    assert main(["compare", str(tmp_path / "empty")]) == 2
    assert "no complete runs" in capsys.readouterr().err


def test_runs_are_grouped_by_scenario_content_not_name(tmp_path, capsys):
    import netsim
    from netsim.scenario.loading import scenario_data
    from netsim.sweep.results import load_results

    first = scenario_data("two-phones")
    second = {**first, "training": {**first["training"], "max_epochs": 3}}  # same name
    for scenario, seeds in ((first, range(3)), (second, range(2))):
        for seed in seeds:
            for policy in ("fedavg-all", "fastest-k"):
                netsim.simulate(scenario, policy, seed=seed, out=tmp_path)
    results = load_results(tmp_path)
    assert results.runs["scenario"].nunique() == 1
    assert results.runs.groupby("point")["seed"].nunique().sort_values().tolist() == [2, 3]
    assert results.runs["name_clash"].all() and len(results.name_clashes()) == 1
    assert main(["compare", str(tmp_path), "--baseline", "fedavg-all", "--wide"]) == 0
    text = capsys.readouterr().out  # (--wide: the paired energy and time columns, with n)
    assert text.startswith("warning: 2 different scenarios are named 'two-phones'")
    assert "(3 seeds)" in text and "(2 seeds)" in text and "(5 seeds)" not in text
    assert text.count("(n=3)") == 2 and text.count("(n=2)") == 2  # paired over common seeds
    assert main(["compare", str(tmp_path), "--baseline", "nosuch"]) == 2
    assert "--baseline" in capsys.readouterr().err


def test_the_required_share_comes_from_the_scenario_else_a_policys_pi_and_says_which():
    runs = _cheap_but_failing(_runs(), None)
    params = {"a": '{"target_probability": 0.5, "epsilon": 0.01}', "b": '{"epsilon": 0.1}',
              "c": '{"target_probability": null}'}
    runs = runs.assign(policy_params=runs["policy"].map(params))
    table = compare_table(runs).set_index("policy")
    assert (table["required"] == 0.5).all()  # a's pi, as the scenario's would be
    assert table.loc["a", "meets"] and list(table.index[table["best"]]) == ["a"]
    assert set(table["required_source"]) == {"target_probability of a"}
    assert "at least 50% of runs (pi: target_probability of a)" in format_compare(
        compare_table(runs))
    # two policies set different pi: the strictest holds (a's 2/4 no longer meets 0.9)
    runs2 = runs.assign(policy_params=runs["policy"].map(
        {**params, "c": '{"target_probability": 0.9}'}))
    t2 = compare_table(runs2).set_index("policy")
    assert (t2["required"] == 0.9).all() and not t2.loc["a", "meets"]
    assert t2["required_source"].iloc[0] == "target_probability of c (the highest set)"
    # the scenario's pi wins over any policy's
    t3 = compare_table(runs.assign(target_probability=0.25)).set_index("policy")
    assert (t3["required"] == 0.25).all()
    assert t3["required_source"].iloc[0] == "scenario's training.target_probability"
    # nobody sets it: every run
    t4 = compare_table(runs.assign(policy_params='{"epsilon": 0.1}'))
    assert (t4["required"] == 1.0).all() and t4["required_source"].iloc[0].startswith("none set")


def test_compare_reads_a_pi_set_only_in_depls_parameters(tmp_path, capsys):
    import netsim

    out = tmp_path / "out"
    for seed in range(2):
        netsim.simulate("default", "depl", seed=seed, out=out,
                        params={"target_probability": 0.8})
    assert main(["compare", str(out)]) == 0
    text = capsys.readouterr().out
    assert "at least 80% of runs (pi: target_probability of depl)" in text, text
