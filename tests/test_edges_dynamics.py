"""Synchronous hierarchical epochs in a changing world (issue 56 item 4; docs/hierarchical.md,
"In a changing world"; netsim.epochs.hierarchy._run_changing).

What must hold: the array path and the event path give the same tables to 1e-9 on the same
seed (sessions, compute spread, batteries, bandwidth models and traces; one edge round and
several, each edge at its own pace); a participant whose session ends mid-round drops out of
its edge round as a star participant drops out of an epoch (its update does not count, what
it drew is wasted: a closed form); a battery that empties mid-round stops it and takes it
offline for good, having drawn exactly its capacity; a device offline for the whole run never
trains and draws nothing; energy is never negative and its categories add up to the run's;
netsim validate accepts hierfavg under a dynamics: block, and the asynchronous tiers too
(tests/test_tiers_dynamics.py); experiments/hierarchical/dynamic-edges.yaml runs through the
command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import netsim
from netsim.cli import main
from tests.test_hierarchy import MODEL  # (the same two-tier model)

ROOT = Path(__file__).resolve().parents[1]
DEVICES = [  # id, FLOP/s, samples, link bit/s, latency s, edge
    ("d0", 1e9, 100, 1e7, 0.01, "gw1"), ("d1", 2e9, 300, 2e7, 0.012, "gw1"),
    ("d2", 3e9, 200, 1e7, 0.02, "gw1"), ("d3", 5e8, 50, 3e7, 0.005, "gw2"),
    ("d4", 4e9, 400, 2.5e7, 0.015, "gw2"), ("d5", 1e9, 150, 2e7, 0.01, "gw2")]


def tiny(dynamics: dict, batteries: dict | None = None, max_epochs: int = 4) -> dict:
    """Two edges, six devices on private links, each edge on its own link to the cloud."""
    devices = [{"id": "cloud", "flop_per_s": 1e12, "memory_bytes": 1e11,
                "power_busy_w": 100, "power_idle_w": 10}]
    links = []
    for dev, flops, samples, bps, lat, edge in DEVICES:
        spec = {"id": dev, "flop_per_s": flops, "memory_bytes": 4e9, "power_busy_w": 5,
                "power_idle_w": 1, "samples": samples}
        if batteries and dev in batteries:
            spec["battery_j"] = batteries[dev]
        devices.append(spec)
        links.append({"a": dev, "b": edge, "bandwidth_bps": bps, "latency_s": lat,
                      "energy_j_per_bit": 1e-8})
    links += [{"a": "gw1", "b": "cloud", "bandwidth_bps": 5e7, "latency_s": 0.05},
              {"a": "gw2", "b": "cloud", "bandwidth_bps": 4e7, "latency_s": 0.04}]
    return {"name": "tiny-tiers-dyn", "seed": 3, "devices": devices, "links": links,
            "edges": [{"id": e, "flop_per_s": f, "power_busy_w": 50, "power_idle_w": 20}
                      for e, f in {"gw1": 1e10, "gw2": 2e10}.items()],
            "aggregator": "cloud", "model": MODEL, "dynamics": dynamics,
            "training": {"target_loss": 0.01, "deadline_s": 1e6, "max_epochs": max_epochs}}


def fleet(dynamics: dict, n: int = 72) -> dict:
    """A generated fleet with an edge per two cells of twelve (Wi-Fi and LTE)."""
    return {"name": "fleet-tiers-dyn", "seed": 0,
            "generate": {"n_devices": n, "devices_per_cell": 12, "seed": 5,
                         "access": {"wifi": 0.6, "lte": 0.4},
                         "edges": {"cells_per_edge": 2, "backhaul_bps": 5e7,
                                   "metro_bps": 2e8}},
            "model": "small-cnn", "dynamics": dynamics,
            "training": {"target_loss": 0.01, "deadline_s": 1e6, "max_epochs": 5}}


def _paths(result) -> set[str]:
    return {p["path"] for phases in result.epochs["phases"] for p in json.loads(phases)
            if p["type"] == "edge-round"}


def assert_same_tables(fast, slow) -> None:
    """Every column of the epochs and devices tables equal (floats to 1e-9; JSON columns
    parsed, their numbers to 1e-9), but the edge rounds' path."""
    for name in ("epochs", "devices"):
        a, b = getattr(fast, name), getattr(slow, name)
        assert list(a.columns) == list(b.columns) and len(a) == len(b) > 0
        for col in a.columns:
            x, y = a[col], b[col]
            if col == "phases":
                for p, q in zip(x, y, strict=True):
                    p, q = json.loads(p), json.loads(q)
                    assert len(p) == len(q)
                    for u, v in zip(p, q, strict=True):
                        u.pop("path", None), v.pop("path", None)
                        assert u.keys() == v.keys()
                        for key in u:
                            if isinstance(u[key], str):
                                assert u[key] == v[key], key
                            else:
                                assert u[key] == pytest.approx(v[key], rel=1e-9,
                                                               abs=1e-12), key
            elif col == "airtime_by_medium_s":
                for p, q in zip(x, y, strict=True):
                    p, q = json.loads(p), json.loads(q)
                    assert p.keys() == q.keys()
                    assert [p[k] for k in p] == pytest.approx([q[k] for k in p], rel=1e-9)
            elif pd.api.types.is_float_dtype(x):
                np.testing.assert_allclose(x.to_numpy(), y.to_numpy(), rtol=1e-9, atol=1e-12,
                                           err_msg=f"{name}.{col}")
            else:
                assert x.astype(str).tolist() == y.astype(str).tolist(), f"{name}.{col}"


def _both(data: dict, params: dict, seed: int = 1):
    fast = netsim.simulate(data, policy="hierfavg", params=params, seed=seed,
                           raise_errors=True)
    slow = netsim.simulate(data, policy="hierfavg", params=params, seed=seed,
                           fast_epochs=False, raise_errors=True)
    return fast, slow


SESSIONS = {"model": "markov", "mean_online_s": 4, "mean_offline_s": 4}


@pytest.mark.parametrize("dynamics", [
    {"availability": SESSIONS, "compute": {"spread": 0.3, "straggler_probability": 0.1}},
    {"availability": SESSIONS, "bandwidth": {"model": "lognormal", "sigma": 0.4,
                                             "correlation_s": 10, "step_s": 0.5}},
], ids=["sessions-compute", "sessions-bandwidth"])
@pytest.mark.parametrize("kappa", [1, 3])
def test_arrays_and_events_give_the_same_tables_on_a_fleet(dynamics, kappa):
    fast, slow = _both(fleet(dynamics), {"edge_rounds": kappa, "participants_per_edge": 5})
    assert "arrays" in _paths(fast) and _paths(slow) == {"events"}  # (a piece the arrays
    # cannot play, a cell's medium past its onset as capacities change: events, both sides)
    assert fast.epochs["dropped"].sum() > 0  # (sessions end mid-round)
    assert_same_tables(fast, slow)


def _sessions(tmp_path: Path, rows: list[tuple[str, float, float]]) -> dict:
    """An availability trace of ``rows`` that does not repeat (d5 online throughout: the
    trace's span is the run's)."""
    path = tmp_path / "online.csv"
    pd.DataFrame(rows + [("d5", 0.0, 1e6)], columns=["device", "start_s", "end_s"]
                 ).to_csv(path, index=False)
    return {"model": "trace", "trace": str(path), "repeat": False}


CATEGORIES = ["energy_compute_j", "energy_comm_j", "energy_idle_j", "energy_sleep_j"]


def _energy(devices: pd.DataFrame) -> pd.Series:
    return devices[CATEGORIES].sum(axis=1)


def _bandwidth_trace(tmp_path: Path) -> str:
    """d1's link and gw1's backhaul change capacity while rounds and the backhaul run."""
    path = tmp_path / "bandwidth.csv"
    pd.DataFrame([("d1", "gw1", 0.0, 2e7, 2e7), ("d1", "gw1", 0.5, 4e6, 8e6),
                  ("d1", "gw1", 2.0, 3e7, 3e7), ("gw1", "cloud", 0.0, 5e7, 5e7),
                  ("gw1", "cloud", 4.0, 1e7, 2e7), ("gw1", "cloud", 9.0, 6e7, 6e7)],
                 columns=["a", "b", "time_s", "bandwidth_up_bps", "bandwidth_down_bps"]
                 ).to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("kappa", [1, 2])
def test_arrays_and_events_agree_under_traces_and_batteries(tmp_path, kappa):
    """Sessions from a trace (d0 leaves mid-training, d2 between edge rounds and comes
    back), a bandwidth trace on a device link and on a backhaul link, and d3's battery that
    empties while it trains."""
    data = tiny({"availability": _sessions(tmp_path, [
        ("d0", 0.0, 2.0), ("d2", 0.0, 3.5), ("d2", 12.0, 1e6)]),
        "bandwidth": {"model": "trace", "trace": _bandwidth_trace(tmp_path)}},
        batteries={"d3": 5.0, "d4": 400.0})
    fast, slow = _both(data, {"edge_rounds": kappa})
    assert _paths(fast) == {"arrays"} and _paths(slow) == {"events"}
    assert_same_tables(fast, slow)
    dev = fast.devices.set_index("device")
    assert dev.loc["d0", "dropouts"] == 1 and dev.loc["d3", "dropouts"] == 1
    assert dev.loc["d3", "battery_end_j"] == pytest.approx(0.0, abs=1e-9)
    if kappa == 2:  # d2's first-round update counts (gw1: 300 + 200, then d1's 300 alone)
        assert list(fast.epochs["updates_samples"].iloc[0]) == [800, 1100]
        assert list(fast.epochs["dropped_ids"].iloc[0]) == ["d0", "d2", "d3"]


def test_a_participant_whose_session_ends_mid_training_drops_out_as_in_a_star(tmp_path):
    """d0 is online until 2 s: it downloads (0.65 s), trains from then, and stops at 2 s;
    its samples do not count and what it drew (busy power while it trained, idle power
    before) is the epoch's wasted energy; it never takes part again."""
    data = tiny({"availability": _sessions(tmp_path, [("d0", 0.0, 2.0)])})
    for fast_epochs in (True, False):
        r = netsim.simulate(data, policy="hierfavg", params={"edge_rounds": 1},
                            fast_epochs=fast_epochs, raise_errors=True)
        first = r.epochs.iloc[0]
        arrival = 8 * 8e5 / 1e7 + 0.01
        busy = 2.0 - arrival
        assert first["dropped"] == 1 and json.loads(first["dropped_ids"]) == ["d0"] \
            if isinstance(first["dropped_ids"], str) else list(first["dropped_ids"]) == ["d0"]
        assert first["energy_wasted_j"] == pytest.approx(5 * busy + 1 * arrival, rel=1e-9)
        assert first["samples"] == sum(s for d, _, s, *_ in DEVICES if d != "d0")
        dev = r.devices.set_index("device")
        assert dev.loc["d0", "busy_s"] == pytest.approx(busy, rel=1e-9)
        assert _energy(dev).loc["d0"] == pytest.approx(5 * busy + arrival, rel=1e-9)
        assert dev.loc["d0", "dropouts"] == 1 and dev.loc["d0", "online_s"] == 2.0


def test_an_empty_battery_stops_a_device_for_good_at_its_capacity():
    data = tiny({"compute": {"spread": 0.0}}, batteries={"d3": 5.0})
    for fast_epochs in (True, False):
        r = netsim.simulate(data, policy="hierfavg", params={"edge_rounds": 2},
                            fast_epochs=fast_epochs, raise_errors=True)
        dev = r.devices.set_index("device")
        assert dev.loc["d3", "dropouts"] == 1
        assert _energy(dev).loc["d3"] == pytest.approx(5.0, rel=1e-9)  # (all it had)
        assert dev.loc["d3", "battery_end_j"] == pytest.approx(0.0, abs=1e-9)
        # it emptied while training in its first edge round: 0.2183 s at 1 W, then 5 W
        down = 8 * 8e5 / 3e7 + 0.005
        assert dev.loc["d3", "online_s"] == pytest.approx(down + (5.0 - down) / 5, rel=1e-9)
        assert r.epochs["dropped"].tolist() == [1] + [0] * (len(r.epochs) - 1)


def test_a_device_offline_for_the_whole_run_never_trains_and_energy_adds_up(tmp_path):
    data = tiny({"availability": _sessions(tmp_path, [
        ("d4", 0.0, 0.0), ("d1", 0.0, 1.0), ("d1", 30.0, 1e6)])},
        batteries={"d2": 300.0}, max_epochs=6)
    for fast_epochs in (True, False):
        r = netsim.simulate(data, policy="hierfavg", params={"edge_rounds": 2},
                            fast_epochs=fast_epochs, raise_errors=True)
        dev = r.devices.set_index("device")
        d4 = dev.loc["d4"]
        assert d4["busy_s"] == 0 and d4["bytes_sent"] == 0 and d4["bytes_received"] == 0
        assert _energy(dev).loc["d4"] == 0 and d4["online_s"] == 0 and d4["dropouts"] == 0
        assert "d4" not in {d for ids in r.epochs["participant_ids"] for d in ids}
        assert (r.devices[CATEGORIES + ["energy_wasted_j"]].to_numpy() >= 0).all()
        assert (r.epochs[CATEGORIES + ["energy_wasted_j", "energy_edges_j"]].to_numpy()
                >= 0).all()
        assert float(_energy(r.devices).sum()) == pytest.approx(
            float(r.runs["energy_j"].iloc[0]), rel=1e-12)
        assert dev.loc["d2", "battery_end_j"] >= 0


def test_star_policies_run_there_too_on_a_world_with_edges():
    """cloud-only (a star epoch relaying through the edges) under sessions: the edges'
    energy is read through the availability timeline (network nodes always on)."""
    r = netsim.simulate(fleet({"availability": SESSIONS}), policy="cloud-only",
                        params={"k": 15}, seed=1, raise_errors=True)
    assert r.runs["status"].iloc[0] != "failed"
    assert (r.epochs["energy_edges_j"] > 0).all()


def test_validate_accepts_the_hierarchical_policies_under_dynamics(tmp_path, capsys):
    """hierfavg (synchronous tiers), rfl-ha and async-hfl (asynchronous tiers,
    tests/test_tiers_dynamics.py) and a star policy: none refused under a dynamics: block."""
    data = fleet({"compute": {"spread": 0.3}})
    data["policies"] = {"hierfavg": {"edge_rounds": 2}, "cloud-only": {"k": 5},
                        "rfl-ha": {"edge_rounds": 2},
                        "async-hfl": {"edge_rounds": 2, "participants_per_edge": 2}}
    path = tmp_path / "dyn.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert main(["validate", str(path)]) == 0
    assert "static world" not in capsys.readouterr().err


def test_the_dynamic_edges_example_runs_through_the_command_line(tmp_path):
    path = ROOT / "experiments" / "hierarchical" / "dynamic-edges.yaml"
    assert main(["run", str(path), "--out", str(tmp_path), "--no-figure"]) == 0
    runs = pd.read_parquet(tmp_path / "runs")
    epochs = pd.read_parquet(tmp_path / "epochs").merge(runs[["run_id", "policy"]])
    assert set(runs["policy"]) == {"hierfavg", "cloud-only", "rfl-ha", "async-hfl"}
    assert (runs["status"] != "failed").all() and (runs["epochs"] > 0).all()
    assert (epochs.groupby("policy")["dropped"].sum() > 0).all()  # (sessions end mid-round)
