"""Trace files (docs/traces.md): reading, every bad row at once, checks against
the scenario, relative paths, the catalog's dynamics figures, `netsim traces generate/plot`."""

from __future__ import annotations

import copy
import hashlib
import os

import numpy as np
import pandas as pd
import pytest
import yaml

from netsim.cli import main
from netsim.dynamics.catalog import power_states, session_lengths
from netsim.dynamics.traces import (
    MAX_REPORTED,
    TraceError,
    availability_frame,
    availability_problems,
    bandwidth_frame,
    bandwidth_problems,
    bandwidth_trace_from_frame,
    link_series,
    read_availability_trace,
    read_bandwidth_trace,
    trace_kind,
    write_availability_trace,
    write_bandwidth_trace,
)
from netsim.scenario import ScenarioError, load_scenario
from netsim.scenario.generator import edge_catalog, generate_network
from netsim.scenario.loading import resolve_network, scenario_data, validate_scenario
from netsim.scenario.schema import GenerateSpec, LinkSpec
from tests.conftest import STAR

AVAILABILITY = pd.DataFrame({"device": ["d1", "d1", "d2", "d3"],
                             "start_s": [0.0, 100.5, 30.0, 0.0],
                             "end_s": [50.0, 200.0, 60.0, 1e4]})
BANDWIDTH = pd.DataFrame({"a": ["server", "server", "d2", "d2"],
                          "b": ["d1", "d1", "server", "server"],
                          "time_s": [0.0, 10.0, 0.0, 5.0],
                          "bandwidth_up_bps": [1e6, 2e6, 3e6, 4e6],
                          "bandwidth_down_bps": [5e5, 1e6, 3e6, 1e6]})


def _problems(exc: pytest.ExceptionInfo[TraceError]) -> list[str]:
    return [str(p) for p in exc.value.problems]


def _write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_availability_round_trip(tmp_path, suffix):
    path = write_availability_trace(AVAILABILITY, tmp_path / f"online.{suffix}")
    trace = read_availability_trace(path)
    assert list(trace.intervals) == ["d1", "d2", "d3"]
    np.testing.assert_array_equal(trace.intervals["d1"][0], [0.0, 100.5])
    np.testing.assert_array_equal(trace.intervals["d1"][1], [50.0, 200.0])
    assert trace.span_s == 1e4  # the largest end_s
    pd.testing.assert_frame_equal(availability_frame(trace), AVAILABILITY, check_dtype=False)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_bandwidth_round_trip_with_two_directions(tmp_path, suffix):
    path = write_bandwidth_trace(BANDWIDTH, tmp_path / f"bw.{suffix}")
    trace = read_bandwidth_trace(path)
    t, up, down = trace.links[("server", "d1")]
    np.testing.assert_array_equal(t, [0, 10])
    np.testing.assert_array_equal(up, [1e6, 2e6])
    np.testing.assert_array_equal(down, [5e5, 1e6])
    # largest time_s (10) + smallest positive gap between rows of one link (5)
    assert trace.span_s == 15.0
    pd.testing.assert_frame_equal(bandwidth_frame(trace), BANDWIDTH, check_dtype=False)
    assert trace_kind(path) == "bandwidth"
    assert trace_kind(write_availability_trace(AVAILABILITY, tmp_path / f"a.{suffix}")) \
        == "availability"


def test_bandwidth_bps_sets_both_directions_and_up_down_override_it(tmp_path):
    path = _write(tmp_path / "bw.csv", "a,b,time_s,bandwidth_bps,bandwidth_down_bps\n"
                                       "x,y,0,1e6,\n"
                                       "x,y,60,2e6,5e5\n")
    t, up, down = read_bandwidth_trace(path).links[("x", "y")]
    np.testing.assert_array_equal(up, [1e6, 2e6])
    np.testing.assert_array_equal(down, [1e6, 5e5])


def test_csv_from_a_spreadsheet_reads(tmp_path):
    """A byte-order mark, CRLF line ends and spaces after commas (as spreadsheets write)."""
    path = tmp_path / "online.csv"
    path.write_bytes(b"\xef\xbb\xbfdevice, start_s, end_s\r\nd1, 0, 10\r\n")
    assert trace_kind(path) == "availability"
    np.testing.assert_array_equal(read_availability_trace(path).intervals["d1"][1], [10.0])


def test_span_without_repeated_links_is_the_largest_time(tmp_path):
    path = _write(tmp_path / "bw.csv", "a,b,time_s,bandwidth_bps\nx,y,0,1e6\nu,v,30,1e6\n")
    assert read_bandwidth_trace(path).span_s == 30.0
    path = _write(tmp_path / "bw0.csv", "a,b,time_s,bandwidth_bps\nx,y,0,1e6\n")
    assert read_bandwidth_trace(path).span_s == 0.0


def test_reads_are_cached_until_the_file_changes(tmp_path):
    path = write_availability_trace(AVAILABILITY, tmp_path / "online.csv")
    first = read_availability_trace(path)
    assert read_availability_trace(str(path)) is first
    assert not first.intervals["d1"][0].flags.writeable  # shared: read-only
    write_availability_trace(AVAILABILITY.iloc[:2], path)
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    second = read_availability_trace(path)
    assert second is not first and list(second.intervals) == ["d1"]


def test_link_series_is_oriented_like_the_scenario_link():
    trace = bandwidth_trace_from_frame(BANDWIDTH)
    links = [LinkSpec(a="server", b="d1", bandwidth_bps=1e7),
             LinkSpec(a="server", b="d2", bandwidth_bps=1e7),  # the file lists d2, server
             LinkSpec(a="server", b="d3", bandwidth_bps=1e7)]  # not in the trace
    series = link_series(trace, links)
    assert set(series) == {0, 1}
    t, ab, ba = series[1]
    np.testing.assert_array_equal(t, [0, 5])
    np.testing.assert_array_equal(ab, [3e6, 1e6])  # server -> d2 is the file's "down"
    np.testing.assert_array_equal(ba, [3e6, 4e6])


# ------------------------------------------------------------------------------- bad rows


def test_every_bad_availability_row_is_reported_with_file_row_and_column(tmp_path):
    path = _write(tmp_path / "online.csv", "device,start_s,end_s\n"
                  "d1,0,100\n"          # 1 fine
                  "d1,50,200\n"         # 2 overlaps row 1
                  "d2,abc,10\n"         # 3 not a number
                  "d2,20,10\n"          # 4 end_s < start_s
                  "\n"                  # 5 blank: skipped but counted
                  "d1,300,400\n"        # 6 fine (after row 2's 200)
                  "d1,250,260\n"        # 7 before the previous interval (unsorted)
                  "d3,-5,inf\n"         # 8 negative, not finite
                  ",1,2\n"              # 9 empty device
                  "d4,1,2,3\n")         # 10 too many fields
    with pytest.raises(TraceError) as exc:
        read_availability_trace(path)
    probs = _problems(exc)
    expect = [("row 2, column start_s", "overlaps"), ("row 3, column start_s", "'abc' is not a number"),
              ("row 4, column end_s", "before start_s"), ("row 7, column start_s", "before"),
              ("row 8, column start_s", "negative"), ("row 8, column end_s", "not a finite"),
              ("row 9, column device", "empty"), ("row 10", "4 fields")]
    assert len(probs) == len(expect), probs
    for (where, what), text in zip(expect, probs, strict=True):
        assert text.startswith(f"{path}, {where}") and what in text, (where, text)
    assert exc.value.keys is not None and "d4" not in exc.value.keys  # readable rows' devices


def test_every_bad_bandwidth_row_is_reported(tmp_path):
    path = _write(tmp_path / "bw.csv", "a,b,time_s,bandwidth_bps,bandwidth_up_bps\n"
                  "x,y,0,1e6,\n"        # 1 fine
                  "x,y,0,1e6,\n"        # 2 time not increasing within the link
                  "y,x,20,1e6,\n"       # 3 the link in the other orientation
                  "x,x,1,1e6,\n"        # 4 a node to itself
                  "p,q,-1,,\n"          # 5 negative time; no capacity at all
                  "p,q,1,-5,nan\n"      # 6 negative capacity; not finite
                  "u,v,0,0,\n")         # 7 zero capacity
    with pytest.raises(TraceError) as exc:
        read_bandwidth_trace(path)
    probs = _problems(exc)
    expect = [("row 2, column time_s", "not after"), ("row 3, column a", "one orientation"),
              ("row 4, column b", "two different nodes"), ("row 5, column time_s", "negative"),
              ("row 5, column bandwidth_bps", "empty"), ("row 6, column bandwidth_bps", "negative"),
              ("row 6, column bandwidth_up_bps", "not a finite"),
              ("row 7, column bandwidth_bps", "not a positive capacity")]
    assert len(probs) == len(expect), probs
    for (where, what), text in zip(expect, probs, strict=True):
        assert text.startswith(f"{path}, {where}") and what in text, (where, text)


def test_parquet_rows_are_counted_from_one(tmp_path):
    path = tmp_path / "online.parquet"
    pd.DataFrame({"device": ["d1", "d1", None], "start_s": [0.0, 5.0, 1.0],
                  "end_s": [10.0, 20.0, np.nan]}).to_parquet(path)
    with pytest.raises(TraceError) as exc:
        read_availability_trace(path)
    probs = _problems(exc)
    assert any(p.startswith(f"{path}, row 2, column start_s") and "overlaps" in p for p in probs)
    assert any(p.startswith(f"{path}, row 3, column device") for p in probs)
    assert any(p.startswith(f"{path}, row 3, column end_s") and "empty" in p for p in probs)


def test_file_level_problems(tmp_path):
    cases = {
        "empty.csv": ("", "empty file"),
        "header.csv": ("device,start_s,end_s\n", "no data rows"),
        "cols.csv": ("device,start,end_s\nd1,0,1\n", "column start_s: missing column"),
    }
    for name, (text, what) in cases.items():
        with pytest.raises(TraceError) as exc:
            read_availability_trace(_write(tmp_path / name, text))
        assert any(what in p for p in _problems(exc)), (name, _problems(exc))
    with pytest.raises(TraceError) as exc:
        read_availability_trace(_write(tmp_path / "cols.csv", "device,start,end_s\nd1,0,1\n"))
    assert any("column start: unknown column; did you mean 'start_s'?" in p
               for p in _problems(exc))
    with pytest.raises(TraceError) as exc:
        read_bandwidth_trace(_write(tmp_path / "bw.csv", "a,b,time_s\nx,y,0\n"))
    assert any("column bandwidth_bps: missing column" in p for p in _problems(exc))
    with pytest.raises(TraceError, match="no such file"):
        read_availability_trace(tmp_path / "absent.csv")
    with pytest.raises(TraceError, match=r"\.csv or \.parquet"):
        read_availability_trace(_write(tmp_path / "online.txt", "device,start_s,end_s\n"))
    with pytest.raises(TraceError, match="cannot be read as Parquet"):
        read_availability_trace(_write(tmp_path / "fake.parquet", "not parquet"))
    assert issubclass(TraceError, ScenarioError)  # the CLI exits 2


def test_many_bad_rows_are_capped_with_a_count(tmp_path):
    rows = "".join(f"d{i},x,1\n" for i in range(MAX_REPORTED + 30))
    with pytest.raises(TraceError) as exc:
        read_availability_trace(_write(tmp_path / "many.csv", "device,start_s,end_s\n" + rows))
    probs = _problems(exc)
    assert len(probs) == MAX_REPORTED + 1 and "and 30 more problem(s)" in probs[-1]


def test_writing_a_bad_frame_raises_and_writes_nothing(tmp_path):
    bad = AVAILABILITY.copy()
    bad.loc[1, "end_s"] = -1.0
    with pytest.raises(TraceError, match="row 2, column end_s"):
        write_availability_trace(bad, tmp_path / "online.csv")
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------- against the scenario


def test_unknown_devices_and_links_name_their_rows(tmp_path):
    avail = read_availability_trace(write_availability_trace(AVAILABILITY, tmp_path / "a.csv"))
    probs = [str(p) for p in availability_problems(avail, ["server", "d1", "d2"])]
    assert len(probs) == 1 and probs[0].startswith(f"{tmp_path / 'a.csv'}, row 4, column device")
    assert "unknown device 'd3'" in probs[0]
    band = read_bandwidth_trace(write_bandwidth_trace(BANDWIDTH, tmp_path / "b.csv"))
    links = [LinkSpec(a="d1", b="server", bandwidth_bps=1e7)]  # either order matches
    probs = [str(p) for p in bandwidth_problems(band, links)]
    assert len(probs) == 1 and "row 3, column a" in probs[0] and "d2–server" in probs[0]
    assert "also rows 4" in probs[0]


def _scenario_with_traces(folder, availability: str | None, bandwidth: str | None) -> dict:
    data = copy.deepcopy(STAR)
    dyn: dict = {}
    if availability is not None:
        dyn["availability"] = {"model": "trace", "trace": availability}
    if bandwidth is not None:
        dyn["bandwidth"] = {"model": "trace", "trace": bandwidth}
    data["dynamics"] = dyn
    return data


def test_netsim_run_with_bad_traces_exits_2_listing_every_bad_row(tmp_path, capsys):
    folder = tmp_path / "sc"
    _write(folder / "traces" / "online.csv", "device,start_s,end_s\n"
           "d1,0,100\nd1,50,200\nd9,0,10\nd2,30,20\n")
    _write(folder / "traces" / "bw.csv", "a,b,time_s,bandwidth_bps\n"
           "d1,server,0,1e6\nserver,d2,0,x\nd1,d2,0,1e6\n")
    data = _scenario_with_traces(folder, "traces/online.csv", "traces/bw.csv")
    scenario = folder / "bad.yaml"
    scenario.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out), "--policy", "fedavg-all"]) == 2
    err = capsys.readouterr().err
    online, bw = folder / "traces" / "online.csv", folder / "traces" / "bw.csv"
    for text in (f"dynamics.availability.trace: {online}, row 2, column start_s",
                 f"dynamics.availability.trace: {online}, row 3, column device: unknown device 'd9'",
                 f"dynamics.availability.trace: {online}, row 4, column end_s",
                 f"dynamics.bandwidth.trace: {bw}, row 2, column bandwidth_bps",
                 f"dynamics.bandwidth.trace: {bw}, row 3, column a: unknown link d1–d2"):
        assert text in err, (text, err)
    assert "Traceback" not in err
    assert not out.exists()
    assert main(["validate", str(scenario)]) == 2


def test_relative_trace_paths_are_read_from_the_scenario_files_folder(tmp_path, monkeypatch):
    folder = tmp_path / "scenarios"
    write_availability_trace(AVAILABILITY.iloc[:3], folder / "traces" / "online.csv")
    scenario = folder / "s.yaml"
    scenario.write_text(yaml.safe_dump(_scenario_with_traces(folder, "traces/online.csv", None)))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sc = load_scenario(str(scenario))
    assert sc.dynamics.availability.trace == str(folder / "traces" / "online.csv")
    assert scenario_data(str(scenario))["dynamics"]["availability"]["trace"] \
        == str(folder / "traces" / "online.csv")
    # a mapping resolves against the current directory: not found from here
    result = validate_scenario(_scenario_with_traces(folder, "traces/online.csv", None))
    assert any(p.path == "dynamics.availability.trace" and "no such file" in p.message
               for p in result.problems)
    monkeypatch.chdir(folder)
    assert validate_scenario(_scenario_with_traces(folder, "traces/online.csv", None)).problems \
        == []
    # absolute paths are kept
    data = _scenario_with_traces(folder, str(folder / "traces" / "online.csv"), None)
    assert load_scenario(data).dynamics.availability.trace == str(folder / "traces" / "online.csv")


def test_run_ids_name_a_trace_by_its_content_not_its_folder(tmp_path):
    from netsim.api import run_id, scenario_hash

    def ids(folder, rows):
        write_availability_trace(rows, folder / "traces" / "online.csv")
        scenario = folder / "s.yaml"
        scenario.write_text(yaml.safe_dump(_scenario_with_traces(folder, "traces/online.csv", None)))
        sc = load_scenario(str(scenario))
        return run_id(sc, "fedavg-all", {}, 1), scenario_hash(sc)

    here = ids(tmp_path / "project", AVAILABILITY.iloc[:3])
    moved = ids(tmp_path / "moved" / "project", AVAILABILITY.iloc[:3])
    assert moved == here  # the same trace in another folder: the same runs
    changed = ids(tmp_path / "other", AVAILABILITY.iloc[:2])
    assert changed[0] != here[0] and changed[1] != here[1]


def test_traces_of_a_generated_network_are_checked_against_its_ids(tmp_path):
    data = scenario_data("default")
    data = copy.deepcopy(data)
    data["generate"]["seed"] = 3
    data["dynamics"] = {}
    net = resolve_network(load_scenario(data), seed=0)
    phone = next(d.id for d in net.devices if d.device_class == "phone")
    path = write_availability_trace(pd.DataFrame({"device": [phone, "nope-1"], "start_s": [0, 0],
                                                  "end_s": [10, 10]}), tmp_path / "a.csv")
    data["dynamics"] = {"availability": {"model": "trace", "trace": str(path)}}
    problems = validate_scenario(data).problems
    assert [p.path for p in problems] == ["dynamics.availability.trace"]
    assert "unknown device 'nope-1'" in problems[0].message
    assert "set generate.seed" not in problems[0].message  # the seed is fixed


def test_generated_ids_change_with_the_seed():
    """Why the checks resolve a generated network at its seed: the class prefix of each index
    and the cells' members are drawn (netsim's generator), so ids are not seed-independent."""
    spec = GenerateSpec(n_devices=40)
    ids = [tuple(d.id for d in generate_network(spec, np.random.default_rng(s))[0])
           for s in (0, 1)]
    assert ids[0] != ids[1]


# ---------------------------------------------------------------- generator and the catalog


def _digest(devices, links) -> str:
    h = hashlib.sha256()
    for x in [*devices, *links]:
        h.update(x.model_dump_json().encode())
    return h.hexdigest()


def test_generated_network_without_dynamics_is_unchanged():
    """Byte-identical to the generator before power states (digest taken from that code),
    with private links (``shared_media: false``: the fields media added at their defaults;
    ``devices[].edges``, issue 46, at its default None)."""
    data = copy.deepcopy(scenario_data("default"))
    data["generate"]["shared_media"] = False
    sc = load_scenario(data)
    assert sc.dynamics is None
    media_fields = {"medium", "rx_energy_j_per_bit", "radio_power_w", "tail_s", "tail_power_w"}
    h = hashlib.sha256()
    for seed in (0, 1):
        net = resolve_network(sc, seed)
        assert not net.media and all(x.medium is None and x.radio_power_w == 0.0
                                     for x in net.links)
        for x in net.devices:
            assert x.edges is None
            h.update(x.model_dump_json(exclude={"edges"}).encode())
        for x in net.links:  # (goodput_factor: a field added in 0.7.0, absent: None)
            h.update(x.model_dump_json(exclude=media_fields | {"goodput_factor"}).encode())
    assert h.hexdigest() == "11f501e569dbc49bcce38b4d4c9950c15c5f02c3648e9abab07317f3bc7133ff"
    assert all(d.power_sleep_w is None and d.battery_j is None for d in net.devices)


def test_power_states_only_with_dynamics_and_otherwise_the_same_network():
    data = copy.deepcopy(scenario_data("default"))
    static = resolve_network(load_scenario(data), seed=5)
    data["dynamics"] = {}
    dynamic = resolve_network(load_scenario(data), seed=5)
    assert static.links == dynamic.links
    for s, d in zip(static.devices, dynamic.devices, strict=True):
        assert s == d.model_copy(update={"power_sleep_w": None, "battery_j": None})
        sleep, battery = power_states(d.device_class)
        assert d.battery_j == battery
        assert (d.power_sleep_w is None) == (sleep is None)
    phones = [d for d in dynamic.devices if d.device_class == "phone"]
    assert phones and all(d.battery_j == pytest.approx(5.5e4) for d in phones)
    assert all(0 < d.power_sleep_w < d.power_idle_w for d in phones)


def test_catalog_gives_dynamics_figures_with_sources():
    classes = edge_catalog()["device_classes"]
    for name, cls in classes.items():
        for key in ("mean_online_s", "mean_offline_s", "power_sleep_w", "battery_j"):
            assert key in cls, (name, key)
        assert cls["mean_online_s"] > 0 and cls["mean_offline_s"] > 0
        assert "ession" in cls["source"], name  # session lengths are sourced or marked ours
    assert classes["phone"]["battery_j"] and classes["laptop"]["battery_j"]
    for mains in ("edge-server", "cloud", "sbc", "jetson"):
        assert classes[mains]["battery_j"] is None
    assert "Yang et al." in classes["phone"]["source"]


def test_session_lengths():
    assert session_lengths("phone") == (1800.0, 7200.0)
    assert session_lengths(None) == (1800.0, 7200.0)
    assert session_lengths("no-such-class") == (1800.0, 7200.0)
    on, off = session_lengths("laptop")
    assert on == edge_catalog()["device_classes"]["laptop"]["mean_online_s"] and off > 0


# --------------------------------------------------------------------------------- commands


def test_traces_plot_command(tmp_path, capsys):
    a = write_availability_trace(AVAILABILITY, tmp_path / "a.csv")
    b = write_bandwidth_trace(BANDWIDTH, tmp_path / "b.parquet")
    assert main(["traces", "plot", str(a), "--out", str(tmp_path / "a.png")]) == 0
    assert main(["traces", "plot", str(b)]) == 0  # default: next to the file
    assert (tmp_path / "a.png").stat().st_size > 5_000
    assert (tmp_path / "b.png").stat().st_size > 5_000
    assert "availability trace" in capsys.readouterr().out
    bad = _write(tmp_path / "bad.csv", "device,start_s,end_s\nd1,5,1\n")
    assert main(["traces", "plot", str(bad), "--out", str(tmp_path / "bad.png")]) == 2
    assert "row 1, column end_s" in capsys.readouterr().err
    assert not (tmp_path / "bad.png").exists()
    odd = _write(tmp_path / "odd.csv", "x,y\n1,2\n")
    assert main(["traces", "plot", str(odd)]) == 2
    assert "neither an availability trace" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_traces_generate_writes_replayable_traces(tmp_path, capsys, fmt):
    data = copy.deepcopy(STAR)
    data["dynamics"] = {"availability": {"model": "markov", "mean_online_s": 600,
                                         "mean_offline_s": 600},
                        "bandwidth": {"model": "lognormal", "sigma": 0.3, "step_s": 60}}
    data["training"]["deadline_s"] = 3600
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(data))
    out = tmp_path / "traces"
    assert main(["traces", "generate", str(scenario), "--out", str(out), "--seed", "2",
                 "--format", fmt]) == 0
    text = capsys.readouterr().out
    avail = read_availability_trace(out / f"availability.{fmt}")
    band = read_bandwidth_trace(out / f"bandwidth.{fmt}")
    assert set(avail.intervals) <= {"server", "d1", "d2", "d3"}
    assert avail.span_s <= 3600 + 1e-6
    assert {frozenset(k) for k in band.links} <= {frozenset(("server", d))
                                                  for d in ("d1", "d2", "d3")}
    assert f"trace: traces/availability.{fmt}" in text and "dynamics:" in text
    # replay: the printed snippet, pasted into the scenario, validates
    snippet = yaml.safe_load(text[text.index("dynamics:"):].split("\nnote:")[0])
    data["dynamics"].update(snippet["dynamics"])
    scenario.write_text(yaml.safe_dump(data))
    replay = load_scenario(str(scenario))
    assert replay.dynamics.availability.model == "trace"
    assert replay.dynamics.bandwidth.trace == str(out / f"bandwidth.{fmt}")
    if fmt == "csv":  # and it runs
        assert main(["run", str(scenario), "--policy", "fedavg-all", "--no-figure",
                     "--out", str(tmp_path / "run")]) in (0, 1)
        runs = pd.read_parquet(tmp_path / "run" / "runs")
        assert len(runs) == 1 and runs["status"].iloc[0] != "failed", runs["error"].iloc[0]


def test_traces_generate_default_horizon_and_bad_arguments(tmp_path, capsys):
    from netsim.commands.traces import default_horizon_s

    assert default_horizon_s(3600) == 3600 and default_horizon_s(1e9) == 7 * 86400
    out = tmp_path / "t"
    assert main(["traces", "generate", "two-phones", "--out", str(out),
                 "--horizon-s", "-1"]) == 2
    assert "--horizon-s" in capsys.readouterr().err and not out.exists()
    assert main(["traces", "generate", "no-such-scenario", "--out", str(out)]) == 2
    assert main(["traces"]) == 2
