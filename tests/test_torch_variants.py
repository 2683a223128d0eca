"""Compression as real models (issue 55 item 4): a measured scenario's variants cost the bytes
the pruned models hold (``model_bytes`` equal to ``netsim models inspect``'s upload bytes in
each encoding); the torch backend trains a structured variant as the smaller dense model
(its parameters, its bytes on the wire) and an unstructured one with masks whose sparsity is
exactly the measured one after every aggregation."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("mlxtend")

import netsim  # noqa: E402
from netsim.cli import main  # noqa: E402
from netsim.dynamics.buffered import Update  # noqa: E402
from netsim.epochs.outcome import EdgeUpdate, RoundUpdates  # noqa: E402
from netsim.policy.contract import Decision  # noqa: E402
from netsim.scenario.loading import builtin_scenarios, read_yaml  # noqa: E402
from netsim.scenario.schema import ModelSpec, TorchModelSpec  # noqa: E402
from netsim.torchnet.backend import TorchBackend  # noqa: E402
from netsim.torchnet.inspect import inspect_model  # noqa: E402
from netsim.torchnet.scenario import measure_model  # noqa: E402
from netsim.torchnet.zoo import TORCH_MODELS  # noqa: E402

SMALL = (75 + 3) + (600 + 8) + (200 * 60 + 60) + (60 * 42 + 42) + (42 * 10 + 10)  # channels-50


def lenet(**extra):
    return measure_model(TorchModelSpec.model_validate({"torch": {"factory": "small-cnn"},
                                                        **extra}))


@pytest.mark.parametrize("encoding", ["bitmap", "values", "dense"])
def test_a_measured_variants_bytes_are_inspects_upload_bytes(encoding):
    model = lenet(sparse_upload=encoding)
    report = inspect_model(TORCH_MODELS["small-cnn"], (1, 28, 28), "small-cnn", encoding)
    assert model.prunable_params == report.prunable_params == 61_470
    assert [(v.name, v.kind) for v in model.variants] == [
        ("full", None), ("pruned-50", "unstructured"), ("pruned-75", "unstructured"),
        ("pruned-90", "unstructured"), ("channels-50", "structured")]
    assert [model.model_bytes(i) for i in range(5)] == pytest.approx(
        [v.upload_bytes for v in report.variants], rel=1e-12, abs=0)
    assert model.model_bytes(4) == pytest.approx(SMALL * 4, rel=1e-12)


def backend(model, samples=(200, 200, 200), seed=0) -> TorchBackend:
    ids = [f"d{i}" for i in range(len(samples))]
    return TorchBackend(model, ids, list(samples), {"real": {"local_epochs": 1}},
                        np.random.default_rng(seed))


def kept(b: TorchBackend) -> int:
    """Values the global model sends: the weights its masks keep and every bias (as inspect
    counts them), after checking that every weight a mask removes is exactly 0.0 (a kept
    weight may be 0.0 too: regrown from 0.0 behind a dead ReLU)."""
    weights = [p for p in b.params[:len(b._trainable)] if p.dim() >= 2]
    for w, mask in zip(weights, b.masks, strict=True):
        assert (w.numpy()[~mask] == 0.0).all()
    return sum(int(m.sum()) for m in b.masks) + sum(
        p.numel() for p in b.params[:len(b._trainable)] if p.dim() < 2)


def test_unstructured_sparsity_is_the_measured_one_after_every_aggregation():
    model = lenet()
    b = backend(model)
    plan = dict.fromkeys(b.device_ids, 100)
    want = {i: round(model.variants[i].params_fraction * model.params) for i in (1, 2, 3)}
    assert want[1] == 30_971  # (tests/test_variant_bytes.py's hand count)
    b.advance(plan, 1)
    assert kept(b) == want[1]
    b.advance_updates([Update("d2", 100, 0)], 3)
    b.advance_updates([Update("d0", 100, 0), Update("d1", 100, 1)], 3)
    assert kept(b) == want[3]
    edge = EdgeUpdate(edge="e", rounds=[RoundUpdates(devices=["d0", "d1"],
                                                     samples=np.array([100, 100]),
                                                     staleness=np.zeros(2, dtype=int))])
    b.advance_tiers([edge], 2)
    assert kept(b) == want[2]
    b.advance(plan, 4)  # to the structured variant and back: the masks exact again
    b.advance(plan, 2)
    assert kept(b) == want[2]
    assert sum(int(torch.count_nonzero(p)) for p in b.params) <= want[2]


def test_the_structured_variant_trains_as_the_smaller_dense_model():
    model = lenet()
    b = backend(model)
    full = [p.clone() for p in b.params]
    b.set_variant(4)  # channels-50, nothing trained: the full model's kept channels
    assert sum(p.numel() for p in b._trainable) == SMALL == round(
        model.variants[4].params_fraction * model.params)
    assert [tuple(p.shape) for p in b.params] == [
        (3, 1, 5, 5), (3,), (8, 3, 5, 5), (8,), (60, 200), (60,), (42, 60), (42,), (10, 42),
        (10,)]
    assert (b.params[-1] == full[-1]).all()  # (the last layer's biases: every output kept)
    b.set_variant(0)  # and back, untrained: the full model as it was, bit for bit
    assert all((a == c).all() for a, c in zip(b.params, full, strict=True))
    # trained: federated averaging over the smaller model's own parameters
    before = b.initial_loss()
    plan = dict.fromkeys(b.device_ids, 200)
    b.advance(plan, 4)
    b.advance_updates([Update("d0", 100, 0)], 4)
    b.advance_updates([Update("d1", 100, 0), Update("d2", 100, 1)], 4)
    assert [p.numel() for p in b.params] == [75, 3, 600, 8, 12_000, 60, 2_520, 42, 420, 10]
    small_loss = b.evaluate(b.params).loss
    assert small_loss < before
    b.advance_updates([Update("d0", 100, 1)], 0)  # back to the full model, a stale update
    assert [p.numel() for p in b.params] == [p.numel() for p in full]
    changed = [bool((a != c).any()) for a, c in zip(b.params, full, strict=True)]
    assert all(changed)  # every tensor holds the trained channels


class Pinned:
    """Every device, all its samples, one variant, every epoch (test policy)."""

    name = "pinned"

    def __init__(self, variant: int) -> None:
        self.variant = variant

    def reset(self, scenario, rng):
        pass

    def decide(self, obs):
        return Decision(participants={d: int(s) for d, s in zip(
            obs.devices.ids, obs.devices.samples, strict=True) if s > 0}, variant=self.variant)


def test_a_run_on_channels_50_moves_the_smaller_models_bytes():
    sc = read_yaml(builtin_scenarios()["two-phones"])
    sc["model"] = {"torch": {"factory": "small-cnn", "variants": ["channels-50"]}}
    sc["training"].update(backend="torch", max_epochs=2, target_loss=0.01,
                          real={"local_epochs": 1})
    res = netsim.simulate(sc, Pinned(1), raise_errors=True)
    assert res.runs.iloc[0]["status"] == "target_missed" and len(res.epochs) == 2
    assert res.epochs["loss"].iloc[-1] < res.runs.iloc[0]["initial_loss"]
    nbytes = SMALL * 4  # each download and upload: the smaller dense model, float32
    trainers = {d["id"] for d in sc["devices"] if d.get("samples", 0) > 0}
    devices = res.devices.set_index("device")
    for dev in trainers:  # two epochs: two downloads and two uploads each
        assert devices.loc[dev, "bytes_sent"] == pytest.approx(2 * nbytes, rel=1e-9)
        assert devices.loc[dev, "bytes_received"] == pytest.approx(2 * nbytes, rel=1e-9)
    server = devices.loc[sc["aggregator"]]
    assert server["bytes_received"] == pytest.approx(2 * len(trainers) * nbytes, rel=1e-9)


def test_a_bad_encoding_exits_2_naming_the_field(tmp_path, capsys):
    sc = read_yaml(builtin_scenarios()["two-phones"])
    sc["model"] = {"torch": {"factory": "small-cnn"}, "sparse_upload": "zip"}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(sc))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "model.sparse_upload" in err and "'bitmap'" in err, err
    assert not out.exists()


def test_a_structured_variant_the_backend_cannot_build_is_refused():
    model = lenet().model_dump()
    model["variants"][4]["name"] = "narrow"
    with pytest.raises(ValueError, match=r"model\.variants\[4\]\.name: .*channels-NN"):
        backend(ModelSpec.model_validate(model))
    model["variants"][4].update(name="channels-50", params_fraction=0.5)
    with pytest.raises(ValueError, match=r"model\.variants\[4\]\.params_fraction: 0\.5, but "
                                         r"the channel-pruned model keeps 15738 of 61706"):
        backend(ModelSpec.model_validate(model))
