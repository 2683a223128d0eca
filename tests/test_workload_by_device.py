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
