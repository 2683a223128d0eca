"""Energy meters: power integrated over piecewise-constant states."""

import numpy as np
import pytest

from netsim.energy import EnergyMeter


def test_busy_for_t_seconds_at_P_watts_meters_P_times_t():
    meter = EnergyMeter([7.5], [0.0])
    meter.set_busy(0, 2.0)
    meter.set_idle(0, 5.5)
    snap = meter.snapshot(10.0)
    assert snap.compute_j[0] == pytest.approx(7.5 * 3.5)
    assert snap.busy_s[0] == pytest.approx(3.5)


def test_idle_counts_only_non_busy_time_and_categories_sum():
    meter = EnergyMeter([10.0, 3.0], [2.0, 1.0])
    meter.set_busy(0, 1.0)
    meter.set_idle(0, 4.0)
    meter.add_communication(1, 0.25)
    snap = meter.snapshot(10.0)
    assert snap.idle_j[0] == pytest.approx(2.0 * 7.0)
    assert snap.idle_j[1] == pytest.approx(1.0 * 10.0)
    assert snap.total_j == pytest.approx(10.0 * 3 + 14.0 + 10.0 + 0.25)


def test_snapshot_while_busy_includes_the_running_part():
    meter = EnergyMeter([4.0], [1.0])
    meter.set_busy(0, 0.0)
    mid = meter.snapshot(2.0)
    assert mid.compute_j[0] == pytest.approx(8.0) and mid.idle_j[0] == 0.0
    meter.set_idle(0, 3.0)
    delta = meter.snapshot(5.0) - mid
    assert delta.compute_j[0] == pytest.approx(4.0) and delta.idle_j[0] == pytest.approx(2.0)


def test_one_job_at_a_time():
    meter = EnergyMeter([1.0], [1.0])
    meter.set_busy(0, 0.0)
    with pytest.raises(RuntimeError):
        meter.set_busy(0, 1.0)


def test_energy_never_negative_under_random_schedules():
    rng = np.random.default_rng(3)
    meter = EnergyMeter(rng.uniform(0, 10, 5), rng.uniform(0, 2, 5))
    t = 0.0
    for _ in range(200):
        i = int(rng.integers(5))
        t += float(rng.exponential(1.0))
        meter.set_busy(i, t)
        t += float(rng.exponential(1.0))
        meter.set_idle(i, t)
        meter.add_communication(i, float(rng.uniform(0, 1)))
    snap = meter.snapshot(t)
    for arr in (snap.compute_j, snap.communication_j, snap.idle_j):
        assert (arr >= 0).all()


def test_a_job_booked_ahead_counts_from_its_start():
    """The engine books a training job when its input's arrival time is known (set_busy with a
    start in the future): a reading before the start counts no busy time."""
    meter = EnergyMeter([4.0], [1.0])
    meter.set_busy(0, 3.0)
    early = meter.snapshot(1.0)
    assert early.busy_s[0] == 0.0 and early.idle_j[0] == pytest.approx(1.0)
    meter.set_idle(0, 5.0)
    assert meter.snapshot(6.0).compute_j[0] == pytest.approx(4.0 * 2.0)


def test_bulk_communication_charges_add_up_in_order():
    meter = EnergyMeter([0.0] * 3, [0.0] * 3)
    settled = []
    meter.settle_with(lambda: settled.append(True) or meter.add_communication_many(
        np.array([2, 0, 2]), np.array([0.5, 1.0, 0.25])) if not settled else None)
    snap = meter.snapshot(1.0)
    assert list(snap.communication_j) == [1.0, 0.0, 0.75] and settled == [True]


def test_a_few_charges_as_lists_sum_as_numpy_does():
    """add_communication_many's loop for fewer than FEW_IN_ORDER charges (lists) gives the
    floats numpy's arrays give: per node and in total, bit for bit (numpy adds so few in
    order; a numpy that changed that would fail here)."""
    from netsim.smallsum import FEW_IN_ORDER, sum_in_order

    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, FEW_IN_ORDER))
        nodes = rng.integers(0, 3, n)
        joules = rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 6, n)
        a, b = EnergyMeter([1.0] * 3, [0.5] * 3), EnergyMeter([1.0] * 3, [0.5] * 3)
        for meter in (a, b):
            meter.add_communication(1, 0.1)
        a.add_communication_many(nodes, joules)
        b.add_communication_many(nodes.tolist(), joules.tolist())
        assert a.communication_j.tolist() == b.communication_j.tolist()
        assert a.totals(0.0).communication_j == b.totals(0.0).communication_j
        assert sum_in_order(joules.tolist()) == float(np.sum(joules))
        assert sum_in_order(joules.tolist()) / n == float(np.mean(joules))
