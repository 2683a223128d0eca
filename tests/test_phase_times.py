"""Each device's phase times in the devices table (issue 53, item 2): with
``record_phase_times``, per static star epoch a device took part in, its download start and
end, training start and end, upload start and end; the arrays equal the events to 1e-9, an
analytic case holds exactly, and nothing is added without the flag."""

from __future__ import annotations

import numpy as np
import pytest

import netsim
from tests.test_goodput import one_link


def _times(result, device: str) -> np.ndarray:
    row = result.devices[result.devices.device == device].iloc[0]
    return np.asarray(row["phase_times_s"], dtype=float).reshape(-1, 7)


def test_one_device_on_one_link_is_its_closed_form():
    data = one_link(goodput=0.9)
    data["record_phase_times"] = True
    data["training"]["max_epochs"] = 2
    r = netsim.simulate(data, policy="fedavg-all")
    t = _times(r, "phone")
    transfer = 8 * 4e6 / (2e7 * 0.9) + 0.01
    compute = 100 * 1e7 / 1e9
    assert t[:, 0].tolist() == [0.0, 1.0]
    for k, start in enumerate(r.epochs.start_s):
        assert t[k, 1:].tolist() == pytest.approx(
            [start, start + transfer, start + transfer, start + transfer + compute,
             start + transfer + compute, start + 2 * transfer + compute], rel=1e-12)
        assert t[k, 6] <= r.epochs.end_s.iloc[k]  # (then the aggregation)
    assert _times(r, "server").size == 0


def test_the_arrays_equal_the_events_on_a_fleet_with_cells():
    data = {"name": "cells", "seed": 0,
            "generate": {"n_devices": 120, "devices_per_cell": 20, "seed": 5},
            "model": "small-cnn", "record_phase_times": True,
            "training": {"target_loss": 0.01, "deadline_s": 1e6, "max_epochs": 3}}
    fast = netsim.simulate(data, policy="random-k", params={"k": 30})
    slow = netsim.simulate(data, policy="random-k", params={"k": 30}, fast_epochs=False)
    a = np.concatenate([np.asarray(x, dtype=float) for x in fast.devices.phase_times_s])
    b = np.concatenate([np.asarray(x, dtype=float) for x in slow.devices.phase_times_s])
    assert len(a) == 3 * 30 * 7
    np.testing.assert_allclose(a, b, rtol=1e-9)
    t = a.reshape(-1, 7)
    assert (np.diff(t[:, 1:], axis=1) >= -1e-12).all()  # each phase after the one before


def test_without_the_flag_the_devices_table_is_unchanged():
    r = netsim.simulate(one_link(), policy="fedavg-all")
    assert "phase_times_s" not in r.devices.columns
