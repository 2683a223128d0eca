"""Asynchronous hierarchical epochs in a changing world (issue 56 item 4; docs/hierarchical.md,
"In a changing world"; netsim.epochs.tiered, ``_Changing``).

What must hold: rfl-ha's and async-hfl's device jobs are the star's asynchronous jobs (a
device whose session ends mid-job drops it, what it drew is wasted: a closed form, with a
bandwidth trace on its link too); a device offline when its edge's next round starts does not
start; a battery that empties mid-job stops it for good, having drawn exactly its capacity; a
device offline for the whole run never trains and draws only idle or sleep energy (none
here); energy is never negative and its categories add up to the run's; the same seed gives
the same tables, with ``fast_epochs`` on or off (arrays where they apply, events otherwise:
tests/test_tiers_arrays_dynamics.py compares the two); netsim
validate and netsim run accept both policies under a dynamics: block.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

import netsim
from netsim.cli import main
from tests.test_edges_dynamics import (
    CATEGORIES,
    DEVICES,
    SESSIONS,
    _energy,
    _sessions,
    fleet,
    tiny,
)

POLICIES = {  # (every device of an edge takes part; the cloud waits for both edge models)
    "rfl-ha": {"edge_rounds": 1, "buffer_updates": 2},
    "async-hfl": {"edge_rounds": 1, "participants_per_edge": 3, "edge_buffer_updates": 3,
                  "buffer_updates": 2},
}
BITS = 8 * 2e5 * 4  # the model (bits)
BACKHAUL_GW1_S = BITS / 5e7 + 0.05  # the cloud's model down to gw1 (s)


def _tables(result) -> list[pd.DataFrame]:
    return [result.epochs, result.devices]


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("traced", [False, True], ids=["constant", "bandwidth-trace"])
def test_a_device_whose_session_ends_mid_job_drops_it_as_a_star_device_does(
        tmp_path, policy, traced):
    """d0 is online until 2 s. Its job starts once gw1 has the cloud's model (0.178 s): it
    downloads from gw1 (0.65 s; 1.29 s where a bandwidth trace halves its link's downward
    capacity), trains from then and stops at 2 s; its samples do not count, what it drew in
    its job (idle power while it downloaded, busy power while it trained) is the epoch's
    wasted energy, and it draws nothing once offline."""
    dynamics: dict = {"availability": _sessions(tmp_path, [("d0", 0.0, 2.0)])}
    down_bps = 1e7
    if traced:
        down_bps = 5e6
        path = tmp_path / "bandwidth.csv"
        pd.DataFrame([("d0", "gw1", 0.0, 1e7, down_bps)],
                     columns=["a", "b", "time_s", "bandwidth_up_bps", "bandwidth_down_bps"]
                     ).to_csv(path, index=False)
        dynamics["bandwidth"] = {"model": "trace", "trace": str(path)}
    r = netsim.simulate(tiny(dynamics), policy=policy, params=POLICIES[policy],
                        raise_errors=True)
    first = r.epochs.iloc[0]
    download = BITS / down_bps + 0.01
    busy = 2.0 - BACKHAUL_GW1_S - download
    assert first["dropped"] == 1 and list(first["dropped_ids"]) == ["d0"]
    assert first["energy_wasted_j"] == pytest.approx(5 * busy + 1 * download, rel=1e-9)
    assert first["samples"] == sum(s for d, _, s, *_ in DEVICES if d != "d0")
    dev = r.devices.set_index("device")
    assert dev.loc["d0", "busy_s"] == pytest.approx(busy, rel=1e-9)
    assert dev.loc["d0", "bytes_sent"] == 0
    assert _energy(dev).loc["d0"] == pytest.approx(BACKHAUL_GW1_S + 5 * busy + download,
                                                   rel=1e-9)
    assert dev.loc["d0", "dropouts"] == 1 and dev.loc["d0", "online_s"] == 2.0
    assert "d0" not in {d for ids in r.epochs["participant_ids"].iloc[1:] for d in ids}


def test_an_edge_goes_on_without_a_device_offline_at_its_next_round_and_batteries_stop(
        tmp_path):
    """rfl-ha, two edge rounds: d2 leaves between them (online 0 to 3.5 s, back at 12 s),
    so gw1's second round is d1's alone (d0 dropped out at 2 s): 300 + 200 + 300 samples;
    d3's battery (5 J) empties while it trains: it stops for good having drawn exactly its
    capacity, and gw2 goes on with d4 and d5 (2 x 550)."""
    data = tiny({"availability": _sessions(tmp_path, [
        ("d0", 0.0, 2.0), ("d2", 0.0, 3.5), ("d2", 12.0, 1e6)])}, batteries={"d3": 5.0})
    for fast_epochs in (True, False):
        r = netsim.simulate(data, policy="rfl-ha",
                            params={"edge_rounds": 2, "buffer_updates": 2},
                            fast_epochs=fast_epochs, raise_errors=True)
        first = r.epochs.iloc[0]
        assert first["samples"] == 800 + 1100
        assert sorted(first["dropped_ids"]) == ["d0", "d3"]
        dev = r.devices.set_index("device")
        assert _energy(dev).loc["d3"] == pytest.approx(5.0, rel=1e-9)
        assert dev.loc["d3", "battery_end_j"] == pytest.approx(0.0, abs=1e-9)
        assert dev.loc["d3", "dropouts"] == 1
        assert "d3" not in {d for ids in r.epochs["participant_ids"].iloc[1:] for d in ids}
        assert dev.loc["d2", "busy_s"] == pytest.approx(2.0 * (1 + 2 * (len(r.epochs) - 2)),
                                                        rel=1e-9)  # (not in epoch 1)


@pytest.mark.parametrize("policy,params", [
    ("rfl-ha", {"edge_rounds": 2}),
    ("async-hfl", {"edge_rounds": 2, "participants_per_edge": 2, "edge_buffer_updates": 1}),
])
def test_a_device_offline_for_the_whole_run_never_trains_and_energy_adds_up(
        tmp_path, policy, params):
    data = tiny({"availability": _sessions(tmp_path, [
        ("d4", 0.0, 0.0), ("d1", 0.0, 1.0), ("d1", 30.0, 1e6)])},
        batteries={"d2": 40.0}, max_epochs=8)
    r = netsim.simulate(data, policy=policy, params=params, raise_errors=True)
    dev = r.devices.set_index("device")
    d4 = dev.loc["d4"]
    assert d4["busy_s"] == 0 and d4["bytes_sent"] == 0 and d4["bytes_received"] == 0
    assert d4["energy_compute_j"] == d4["energy_comm_j"] == 0  # (idle and sleep only: none)
    assert _energy(dev).loc["d4"] == 0 and d4["online_s"] == 0 and d4["dropouts"] == 0
    assert "d4" not in {d for ids in r.epochs["participant_ids"] for d in ids}
    assert r.epochs["dropped"].sum() > 0  # (d1 leaves at 1 s)
    assert (r.devices[CATEGORIES + ["energy_wasted_j"]].to_numpy() >= 0).all()
    assert (r.epochs[CATEGORIES + ["energy_wasted_j", "energy_edges_j"]].to_numpy()
            >= 0).all()
    assert float(_energy(r.devices).sum()) == pytest.approx(
        float(r.runs["energy_j"].iloc[0]), rel=1e-12)
    assert float(r.epochs[CATEGORIES].to_numpy().sum()) == pytest.approx(
        float(r.runs["energy_j"].iloc[0]), rel=1e-9)
    assert dev.loc["d2", "battery_end_j"] >= 0


@pytest.mark.parametrize("policy,params", [
    ("rfl-ha", {"edge_rounds": 3, "participants_per_edge": 5}),
    ("async-hfl", {"edge_rounds": 2, "participants_per_edge": 4, "edge_buffer_updates": 2}),
])
def test_the_same_seed_gives_the_same_tables_on_either_setting_of_fast_epochs(policy, params):
    """Markov sessions (online 2 s on average), a compute spread with stragglers and log-normal links on a
    generated fleet with edges (Wi-Fi and LTE cells)."""
    data = fleet({"availability": {**SESSIONS, "mean_online_s": 2},
                  "compute": {"spread": 0.3, "straggler_probability": 0.1},
                  "bandwidth": {"model": "lognormal", "sigma": 0.4, "correlation_s": 10,
                                "step_s": 0.5}}, n=48)
    runs = [netsim.simulate(data, policy=policy, params=params, seed=1, fast_epochs=fast,
                            raise_errors=True) for fast in (True, False, True)]
    assert runs[0].epochs["dropped"].sum() > 0  # (sessions end mid-job)
    for other in runs[1:]:
        for a, b in zip(_tables(runs[0]), _tables(other), strict=True):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
    r = runs[0]
    assert float(_energy(r.devices).sum()) == pytest.approx(
        float(r.runs["energy_j"].iloc[0]), rel=1e-12)
    assert (r.devices[CATEGORIES + ["energy_wasted_j"]].to_numpy() >= 0).all()


def test_validate_and_run_accept_the_asynchronous_tiers_under_dynamics(tmp_path, capsys):
    data = tiny({"availability": _sessions(tmp_path, [("d0", 0.0, 2.0)]),
                 "compute": {"spread": 0.2}}, batteries={"d3": 50.0})
    data["policies"] = {"rfl-ha": {"edge_rounds": 2},
                        "async-hfl": {"edge_rounds": 2, "participants_per_edge": 2}}
    path = tmp_path / "tiers.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--no-figure"]) == 0
    runs = pd.read_parquet(tmp_path / "out" / "runs")
    assert set(runs["policy"]) == {"rfl-ha", "async-hfl"}
    assert (runs["status"] != "failed").all() and (runs["epochs"] > 0).all()
