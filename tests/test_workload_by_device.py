"""A decision's workload with per-participant figures (netsim.workload.DeviceWork: what a
driven round's messages carry, each its own): each participant moves its own bytes and
computes its own FLOP, and the aggregator spends the FLOP of the updates it takes. Checked
against the closed form on private links (architecture spec: alone on its route, a transfer
of S bytes takes 8 S / B + latency), on the static path and the guarded one (a deadline);
a Flower run on a changing world plays them too (tests/test_flower.py)."""

from __future__ import annotations

import pytest

from netsim.policy import Decision
from netsim.runloop import Run
from netsim.scenario.loading import load_scenario
from netsim.workload import DeviceWork, Workload

OWN = {"d1": DeviceWork(1000.0, 40.0, 2.0e9, 8.0e9),
       "d2": DeviceWork(250.0, 5000.0, 0.0, 0.0),
       "d3": DeviceWork(0.0, 16.0, 4.0e9, 1.0e9)}


def _run(star: dict, deadline_s: float | None) -> tuple[Run, object]:
    from netsim.results.recorder import Recorder

    sc = load_scenario(star)
    rec = Recorder("r", "star", "driver", 0, {}, sc.training.target_loss, sc.training.deadline_s)
    run = Run(sc, 0, rec)
    run.observe()
    work = Workload(0.0, 0.0, 0.0, 0.0, by_device=OWN)
    decision = Decision(participants={"d1": 500, "d2": 300, "d3": 800}, workload=work,
                        epoch_deadline_s=deadline_s)
    return run, run.execute(decision, "driver")


@pytest.mark.parametrize("deadline_s", [None, 600.0])
def test_each_participant_moves_and_computes_its_own(star, deadline_s):
    run, outcome = _run(star, deadline_s)
    links = {link["b"]: link for link in star["links"]}
    flops = {d["id"]: d["flop_per_s"] for d in star["devices"]}

    def alone(dev: str, nbytes: float) -> float:
        return 8 * nbytes / links[dev]["bandwidth_bps"] + links[dev]["latency_s"]

    last = max(alone(d, w.download_bytes) + w.flop / flops[d] + alone(d, w.upload_bytes)
               for d, w in OWN.items())
    aggregation = sum(w.aggregation_flop for w in OWN.values()) / flops["server"]
    assert outcome.end_s - outcome.start_s == pytest.approx(last + aggregation, rel=1e-12)
    net = run.world.network
    rows = {d: run.world.devices.index[d] for d in OWN}
    for dev, w in OWN.items():
        assert net.bytes_received[rows[dev]] == w.download_bytes
        assert net.bytes_sent[rows[dev]] == w.upload_bytes
    server = run.world.node_ids.index("server")
    assert net.bytes_sent[server] == sum(w.download_bytes for w in OWN.values())
    # compute energy: each device busy for its own FLOP at power_busy_w
    busy = {d["id"]: d["power_busy_w"] for d in star["devices"]}
    want = sum(busy[d] * w.flop / flops[d] for d, w in OWN.items()) \
        + busy["server"] * aggregation
    assert outcome.energy.compute_j == pytest.approx(want, rel=1e-12)


def test_figures_must_name_the_participants(star):
    from netsim.policy import InvalidDecision

    sc = load_scenario(star)
    from netsim.results.recorder import Recorder

    run = Run(sc, 0, Recorder("r", "star", "driver", 0, {}, 0.3, 3600.0))
    run.observe()
    work = Workload(0.0, 0.0, 0.0, 0.0, by_device={"d1": OWN["d1"]})
    with pytest.raises(InvalidDecision, match="workload.by_device"):
        run.execute(Decision(participants={"d1": 500, "d2": 300}, workload=work), "driver")
    with pytest.raises(ValueError, match="workload.by_device.flop"):
        DeviceWork(1.0, 1.0, -1.0, 0.0)


def _played(n: int, per_cell: int, media: bool, fast: bool, by_device: bool,
            deadline_s: float | None = None):
    """Two epochs of a workload with each participant's own figures (or down and up bytes
    that differ, one pair for all), on a generated network, with ``deadline_s`` (cutting no
    update): per epoch its end and energy, then every node's books."""
    import numpy as np

    from netsim.results.recorder import Recorder

    sc = load_scenario({"name": "own", "seed": 0,
                        "generate": {"n_devices": n, "devices_per_cell": per_cell, "seed": n,
                                     "shared_media": media},
                        "model": "small-cnn",
                        "training": {"target_loss": 1e-9, "deadline_s": 1e12,
                                     "max_epochs": 10}})
    run = Run(sc, 0, Recorder("r", "own", "driver", 0, {}, 1e-9, 1e12), fast_epochs=fast)
    t = run.world.devices
    rng = np.random.default_rng(n)
    devs = [d for i, d in enumerate(t.ids) if i != t.aggregator and t.samples[i] > 0]
    out = []
    for _ in range(2):
        if by_device:  # (downloads of no bytes among them: no radio wakes for those)
            own = {d: DeviceWork(float(rng.choice([0.0, 2e5, 9e5])),
                                 float(rng.uniform(1e4, 1.2e6)), float(rng.uniform(2e10, 5e10)),
                                 float(rng.uniform(0, 1e7))) for d in devs}
            work = Workload(0.0, 0.0, 0.0, 0.0, by_device=own)
        else:
            work = Workload(7e5, 2.5e5, 3e6, 2e6)
        run.observe()
        outcome = run.execute(Decision(participants={d: 1 for d in devs}, workload=work,
                                       epoch_deadline_s=deadline_s), "driver")
        assert not outcome.late and not outcome.dropped
        run.close_epoch()
        out.append([outcome.end_s, outcome.energy.compute_j, outcome.energy.communication_j,
                    outcome.energy.idle_j])
    snap = run.world.meter.snapshot(run.world.now_s)
    net = run.world.network
    books = np.concatenate([snap.compute_j, snap.communication_j, snap.radio_j,
                            net.bytes_sent, net.bytes_received, net.ledger.airtime_s])
    return np.array(out), books


@pytest.mark.parametrize(("n", "per_cell", "media", "by_device", "deadline_s"), [
    (40, 8, True, True, None),       # Wi-Fi and cellular cells, radios
    (300, 32, False, True, None),    # the aggregator's fibre binds both ways
    (120, 8, True, False, None),     # one pair of sizes, downloads and uploads of other bytes
    (40, 8, True, True, 3600.0),     # a Flower round's timeout that cuts nothing: the static
])                                   # arrays against the guarded events
def test_own_figures_play_in_arrays_as_on_events(monkeypatch, n, per_cell, media, by_device,
                                                 deadline_s):
    """Each participant's own bytes and FLOP (a Flower round's messages) play in arrays
    (netsim.fastepoch with per-flow sizes) and give the event path's times, energy and books
    to 1e-9; with a deadline that cuts no update too (the event path: guarded events)."""
    import numpy as np

    from netsim.epochs import arrays as static_arrays
    from netsim.fastepoch import play_plain_epoch

    plans = []

    def spy(*args, **kwargs):
        plans.append(play_plain_epoch(*args, **kwargs))
        return plans[-1]

    monkeypatch.setattr(static_arrays, "play_plain_epoch", spy)
    fast = _played(n, per_cell, media, True, by_device, deadline_s)
    assert len(plans) == 2 and all(p is not None for p in plans)
    slow = _played(n, per_cell, media, False, by_device, deadline_s)
    np.testing.assert_allclose(fast[0], slow[0], rtol=1e-9)
    np.testing.assert_allclose(fast[1], slow[1], rtol=1e-9, atol=1e-9)
