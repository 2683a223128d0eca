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
    primary label is another: the classes they would add are the lagging ones."""
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
    assert drop[same].max() < drop[~same].min()


def test_iid_data_falls_back_to_the_data_per_second_utility():
    """No per-class state on IID data: the same runs as ``selection: utility``."""
    data = _scenario("nycmesh", max_epochs=8)
    tables = [netsim.simulate(data, policy=make_policy("async-hfl", {"selection": s}),
                              seed=0).epochs for s in ("utility", "classes")]
    np.testing.assert_array_equal(tables[0]["end_s"].to_numpy(), tables[1]["end_s"].to_numpy())
    assert tables[0]["updates_ids"].tolist() == tables[1]["updates_ids"].tolist()
