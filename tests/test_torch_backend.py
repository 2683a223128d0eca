"""The PyTorch training backend (netsim/torchnet/): the networks, FedAvg's identities, the
scenario's ``training.backend: torch``, and that nothing else imports torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import netsim
from netsim.dynamics.buffered import Update
from netsim.epochs.outcome import EdgeUpdate, RoundUpdates
from netsim.scenario.errors import ScenarioError
from netsim.scenario.loading import builtin_scenarios, read_yaml, validate_scenario
from netsim.torchnet import TORCH_MODEL_DATA, require_torch
from netsim.training.models import builtin_models

torch = pytest.importorskip("torch")
pytest.importorskip("mlxtend")

from netsim.torchnet import zoo  # noqa: E402 (needs torch)
from netsim.torchnet.backend import TorchBackend  # noqa: E402

VARIANTS = [{"name": "full", "params_fraction": 1.0},
            {"name": "pruned-75", "params_fraction": 0.25}]


def backend(name: str = "mlp-digits", samples=(300, 300, 300), seed: int = 0,
            training: dict | None = None) -> TorchBackend:
    ids = [f"d{i}" for i in range(len(samples))]
    return TorchBackend({"name": name, "variants": VARIANTS}, ids, list(samples),
                        training or {}, np.random.default_rng(seed))


def assert_params_close(a, b, atol: float = 1e-6) -> None:
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=0.0, atol=atol)


def test_param_counts_match_models_yaml_and_each_network_runs_on_its_data():
    assert set(zoo.TORCH_MODELS) == set(zoo.INPUT_SHAPES) == set(TORCH_MODEL_DATA)
    models = builtin_models()
    for name in zoo.TORCH_MODELS:
        net = zoo.build(name, torch.Generator().manual_seed(0))
        assert zoo.param_count(net) == models[name].params, name
        out = net(torch.zeros((2, *zoo.INPUT_SHAPES[name])))
        assert out.shape == (2, 10)
    assert require_torch().get_num_threads() == 1


def test_same_seed_gives_identical_curves_and_another_seed_another():
    def curve(seed: int) -> list[float]:
        b = backend(seed=seed)
        plan = {"d0": 300, "d1": 120, "d2": 60}
        out = [b.initial_loss()]
        out += [b.advance(plan, v).loss for v in (0, 1, 1, 0)]
        out.append(b.advance_updates([Update("d1", 300, 0)], 0).loss)
        out.append(b.advance_updates([Update("d0", 200, 0), Update("d2", 100, 1)], 0).loss)
        return out

    assert curve(3) == curve(3)
    assert curve(3) != curve(4)


def test_a_cnn_on_a_few_devices_lowers_the_test_loss():
    b = backend("small-cnn", samples=(1000,) * 4, training={"real": {"learning_rate": 0.1}})
    losses = [b.initial_loss()]
    for _ in range(4):
        step = b.advance(dict.fromkeys(b.device_ids, 250), 0)
        losses.append(step.loss)
        assert np.isfinite(step.loss) and 0.0 <= step.accuracy <= 1.0
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    assert losses[-1] < losses[0] - 0.5


def test_fedavg_of_one_device_is_that_devices_local_model():
    # 2 x 2000 declared samples share mnist's 4000 training samples: 256 used -> 256 trained,
    # and a mean weighted by a power of two is exact in float32
    one, other = backend("small-cnn", (2000, 2000), seed=1), backend("small-cnn", (2000, 2000),
                                                                    seed=1)
    one.advance({"d0": 256}, 0)
    local, n = other.local_update("d0", 256, other.params)
    assert n == 256
    for a, b in zip(one.params, local, strict=True):
        assert torch.equal(a, b)


def test_advance_updates_with_staleness_0_is_advance():
    sync, asyn = backend(seed=5), backend(seed=5)
    for _ in range(2):
        x = sync.advance({"d0": 300, "d2": 150}, 0)
        y = asyn.advance_updates([Update("d0", 300, 0), Update("d2", 150, 0)], 0)
        assert y.loss == pytest.approx(x.loss, rel=1e-5)
    assert_params_close(sync.params, asyn.params)


def test_one_hierarchical_edge_round_is_advance():
    star, tier = backend(seed=7), backend(seed=7)
    samples = dict(zip(star.device_ids, star.device_samples, strict=True))
    star.advance(samples, 0)
    groups = (("d0", "d2"), ("d1",))
    tier.advance_tiers([EdgeUpdate(f"e{k}", (RoundUpdates(
        g, np.array([samples[d] for d in g]), np.zeros(len(g), dtype=int)),))
        for k, g in enumerate(groups)], 0)
    assert_params_close(star.params, tier.params)


def test_a_variant_keeps_its_sparsity_exactly_through_training_and_averaging():
    b = backend("small-cnn", samples=(1000,) * 3, seed=2)
    plan = dict.fromkeys(b.device_ids, 100)
    b.advance(plan, 1)
    b.advance_updates([Update("d2", 100, 0)], 1)
    b.advance_updates([Update("d0", 100, 0), Update("d1", 100, 1)], 1)
    for w, mask in zip(b.params[0::2], b.masks, strict=True):
        keep = max(1, round(0.25 * w.numel()))
        assert int(mask.sum()) == keep
        values = w.numpy()
        assert (values[~mask] == 0.0).all() and int((values != 0).sum()) == keep
    b.advance(plan, 0)  # regrown: the pruned weights train again (from 0.0)
    assert all(m.all() for m in b.masks)
    assert all(int((w != 0).sum()) > 0.5 * w.numel() for w in b.params[0::2])


def _torch_scenario(model) -> dict:
    sc = read_yaml(builtin_scenarios()["two-phones"])
    sc["model"] = model
    sc["training"].update(backend="torch", max_epochs=2, target_loss=0.01)
    return sc


def test_the_torch_backend_on_a_model_it_cannot_build_is_refused_naming_the_field(
        tmp_path, capsys, monkeypatch):
    problems = validate_scenario(_torch_scenario("resnet18")).problems
    assert [p.path for p in problems] == ["model.name"]
    assert "the torch backend trains ['cnn-mnist', 'mlp-digits', 'small-cnn']" \
        in problems[0].message
    import yaml

    from netsim.cli import main

    path = tmp_path / "torch.yaml"
    path.write_text(yaml.safe_dump(_torch_scenario("resnet18")))
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "model.name: the torch backend trains" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    # without torch installed: the pip line, exit 2, nothing simulated
    import importlib.util

    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real_find(name, *a))
    path.write_text(yaml.safe_dump(_torch_scenario("small-cnn")))
    assert main(["validate", str(path)]) == 2
    assert 'training.backend: torch needs PyTorch: pip install -e ".[torch]"' \
        in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "torch", None)  # (import torch raises ImportError)
    with pytest.raises(ScenarioError, match=r'torch needs PyTorch: pip install -e "\.\[torch\]"'):
        require_torch()


def test_a_whole_two_phones_run_trains_small_cnn_with_torch():
    res = netsim.simulate(_torch_scenario("small-cnn"), "fedavg-all", raise_errors=True)
    runs, epochs = res.runs.iloc[0], res.epochs
    assert runs["status"] == "target_missed"
    assert runs["error"].startswith("stopped after training.max_epochs (2) epochs")
    assert runs["loss_source"] == f"real training (netsim.torchnet, torch "\
                                  f"{'.'.join(torch.__version__.split('.')[:2])})"
    assert len(epochs) == 2 and np.isfinite(epochs["loss"]).all()
    assert epochs["loss"].iloc[-1] < runs["initial_loss"]


def test_import_netsim_and_a_surrogate_run_do_not_import_torch():
    code = textwrap.dedent("""
        import sys
        import netsim, netsim.cli, netsim.scenario.checks
        res = netsim.simulate("two-phones", "fedavg-all")
        assert res.runs["status"].iloc[0] in ("ok", "target_missed"), res.runs
        print(sorted(m for m in ("torch", "mlxtend", "netsim.torchnet") if m in sys.modules))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
