"""async-hfl's ``selection: classes`` (issue 57, item 3; netsim's stand-in for Async-HFL's
gradient-diversity utility): a device is rated by the loss drop the policy's per-class state
predicts from its data, per second of its estimated round time."""

import numpy as np
import yaml

import netsim
from experiments.hierarchical.run import PAPER_SCENARIO
from netsim.policy.registry import make_policy
from netsim.scenario import load_scenario
from tests.test_async_hfl_paper import _observation, _scenario


def _paper(**training) -> dict:
    data = yaml.safe_load(PAPER_SCENARIO.read_text())
    data["training"].update(training)
    return data


def test_devices_whose_labels_were_trained_rate_below_the_others():
    """After every device whose primary label is L trained (as the state records what the
    policy decided), those devices' predicted drop is below that of the devices whose
    primary label is another: the classes they would add are the lagging ones. Not every one:
    the state's mean loss weighs a class by the fleet's data of it, so a device holding a
    light class (a tenth of the heavy one's samples) beside the trained class gains little and
    interferes with the heavy class (cnn-mnist's measured interference), and may rate below a
    trained-label device whose second class is a heavy lagging one; so the bound is on the
    trained-label devices' median, which every other device exceeds."""
    data = _paper()
    obs = _observation(data)
    policy = make_policy("async-hfl", {"selection": "classes"})
    policy.reset(load_scenario(data), np.random.default_rng(0))
    rows = obs.devices.trainers
    ones = np.ones(obs.devices.n)
    policy._class_utility(obs, rows, ones)
    cov = policy._coverage
    assert cov is not None  # (the 0.8 / 0.2 label bias: a per-class state)
    primary = np.argmax(obs.label_counts, axis=1)
    label = int(np.bincount(primary[rows]).argmax())
    trained = {obs.devices.ids[r]: float(obs.devices.samples[r]) for r in rows
               if primary[r] == label}
    for _ in range(5):
        cov.commit(trained, 0)
    drop = policy._class_utility(obs, rows, ones)
    same = primary[rows] == label
    assert same.any() and (~same).any()
    assert (drop[~same] > np.median(drop[same])).all()
    assert drop[~same].mean() > 5 * drop[same].mean()


def test_iid_data_falls_back_to_the_data_per_second_utility():
    """No per-class state on IID data: the same runs as ``selection: utility``."""
    data = _scenario("nycmesh", max_epochs=8)
    tables = [netsim.simulate(data, policy=make_policy("async-hfl", {"selection": s}),
                              seed=0).epochs for s in ("utility", "classes")]
    np.testing.assert_array_equal(tables[0]["end_s"].to_numpy(), tables[1]["end_s"].to_numpy())
    assert tables[0]["updates_ids"].tolist() == tables[1]["updates_ids"].tolist()


def test_the_why_tables_rows_say_seeds_reached_mean_time_and_devices():
    """experiments.hierarchical.why's row: seeds that reached the target, the mean time of
    those (the missed ones named, not averaged in) and the range of devices trained, out of the
    run's own devices."""
    from experiments.hierarchical.why import row_text

    row = row_text(["IID", "utility"], [(True, 2.0, 31, 184), (False, 720.0, 31, 184),
                                       (True, 4.0, 33, 184)])
    assert row == "| IID | utility | 2 of 3 | 3.00 (2.00, missed, 4.00) | 31-33 of 184 |"
    assert "| 0 of 1 | never (missed) | 31 of 40 |" in row_text(["x"], [(False, 1.0, 31, 40)])
