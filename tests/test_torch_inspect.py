"""``netsim models inspect``: a PyTorch model's workload measured from the model (issue 55 item
1): forward FLOP as FlopCounterMode counts them, training FLOP by the per-operator backward rule
(checked against counts written by hand), activation bytes, and the pruned variants."""

from __future__ import annotations

import copy
import json
import math
import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn.utils import prune  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from netsim.cli import main  # noqa: E402
from netsim.torchnet.graph import ModelError  # noqa: E402
from netsim.torchnet.inspect import (  # noqa: E402
    channel_pruned,
    inspect_model,
    load_factory,
    measure,
)
from netsim.torchnet.zoo import INPUT_SHAPES, TORCH_MODELS  # noqa: E402


class Branchy(nn.Module):
    """A stem, a depthwise-separable branch added back to its input (residual), a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        y = self.pw(torch.relu(self.dw(x)))
        return self.fc(torch.flatten(x + y, 1))


class DataDependent(nn.Module):
    """Python control flow on a tensor's value: neither fx nor torch.export can trace it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        if x.sum() > 0:
            x = -x
        return self.fc(x)


def flop_counter_forward(model: nn.Module, shape) -> int:
    """FlopCounterMode's forward count of one sample, on the meta device."""
    meta = model.to("meta").eval()
    with FlopCounterMode(display=False) as counter:
        meta(torch.empty((1, *shape), device="meta"))
    return counter.get_total_flops()


@pytest.mark.parametrize("name", ["small-cnn", "mlp-digits", "cnn-mnist", "branchy"])
def test_forward_flop_equal_flop_counter_modes(name):
    factory = Branchy if name == "branchy" else TORCH_MODELS[name]
    shape = (3, 8, 8) if name == "branchy" else INPUT_SHAPES[name]
    assert measure(factory(), shape).forward_flop_per_sample == flop_counter_forward(factory(), shape)


def test_lenet5_training_flop_by_hand():
    """LeNet-5 (1x28x28): each layer's forward 2 x MACs; backward 2x forward (input and weight
    gradients) but the first layer's 1x (its input, the data, needs no gradient)."""
    conv1 = 2 * 28 * 28 * 6 * (1 * 5 * 5)
    conv2 = 2 * 10 * 10 * 16 * (6 * 5 * 5)
    fc = 2 * (400 * 120 + 120 * 84 + 84 * 10)
    forward = conv1 + conv2 + fc
    train = forward + conv1 + 2 * (conv2 + fc)
    m = measure(TORCH_MODELS["small-cnn"](), (1, 28, 28))
    assert (m.forward_flop_per_sample, m.train_flop_per_sample) == (forward, train)
    assert forward == 833_040 and train == 2_263_920  # 3x forward would be 2,499,120
    assert m.params == 61_706
    # outputs of conv, relu, pool (x2), flatten, fc/relu (x2), fc; float32
    acts = 4 * (2 * 6 * 28 * 28 + 6 * 14 * 14 + 2 * 16 * 10 * 10 + 2 * 400 + 2 * 120 + 2 * 84 + 10)
    assert m.activation_bytes_per_sample == acts


def test_branch_and_depthwise_training_flop_by_hand():
    """The residual add joins two branches (no double count) and the depthwise convolution's
    backward is 2x its own grouped forward (not a dense convolution's)."""
    stem = 2 * 8 * 8 * 8 * (3 * 3 * 3)
    dw = 2 * 8 * 8 * 8 * (1 * 3 * 3)   # groups = 8: one input channel per filter
    pw = 2 * 8 * 8 * 8 * 8
    fc = 2 * 512 * 10
    m = measure(Branchy(), (3, 8, 8))
    assert m.forward_flop_per_sample == stem + dw + pw + fc
    assert m.train_flop_per_sample == (stem + dw + pw + fc) + stem + 2 * (dw + pw + fc)
    assert m.params == sum(p.numel() for p in Branchy().parameters())


def test_mlp_training_flop_against_the_three_x_rule():
    m = measure(TORCH_MODELS["mlp-digits"](), (64,))
    dense1, dense2 = 2 * 64 * 64, 2 * 64 * 10
    assert m.forward_flop_per_sample == dense1 + dense2 == 9_472
    assert m.train_flop_per_sample == 3 * (dense1 + dense2) - dense1 == 20_224  # not 28,416


def test_unstructured_variants_from_masks():
    report = inspect_model(TORCH_MODELS["small-cnn"], (1, 28, 28), "small-cnn")
    by = {v.name: v for v in report.variants}
    weights = [150, 2400, 48_000, 10_080, 840]  # pruned per tensor; the 236 biases are kept
    for amount in (50, 75, 90):
        nnz = sum(w - round(w * amount / 100) for w in weights) + 236
        v = by[f"pruned-{amount}"]
        assert v.kind == "unstructured" and v.flop_fraction == 1.0
        assert v.params_fraction == pytest.approx(nnz / 61_706, abs=0)
        # values plus one bit per prunable weight (the 61,470 weights; biases are sent whole)
        assert v.upload_bytes == nnz * 4 + math.ceil(61_470 / 8)
    assert report.prunable_params == sum(weights) == 61_470
    assert by["full"].upload_bytes == report.upload_bytes == 61_706 * 4


@pytest.mark.parametrize("encoding", ["bitmap", "values", "dense"])
def test_upload_bytes_are_the_pruned_models_own_tensors(encoding):
    model = TORCH_MODELS["small-cnn"]().eval()
    report = inspect_model(lambda: copy.deepcopy(model), (1, 28, 28), "lenet",
                           sparse_upload=encoding)
    assert report.sparse_upload == encoding
    by = {v.name: v for v in report.variants}
    for amount in (0.5, 0.75, 0.9):
        pruned = copy.deepcopy(model)  # pruned here by torch itself, counted tensor by tensor
        for module in pruned.modules():
            for name, param in list(module.named_parameters(recurse=False)):
                if param.dim() >= 2:
                    prune.l1_unstructured(module, name, amount=amount)
                    prune.remove(module, name)  # (the zeros written into the weight)
        tensors = list(pruned.parameters())
        values = sum(int(torch.count_nonzero(t)) * t.element_size() for t in tensors)
        bits = sum(t.numel() for t in tensors if t.dim() >= 2)
        dense = sum(t.numel() * t.element_size() for t in tensors)
        want = {"bitmap": values + math.ceil(bits / 8), "values": values, "dense": dense}
        assert by[f"pruned-{round(amount * 100)}"].upload_bytes == want[encoding]
    smaller, _ = channel_pruned(model, (1, 28, 28))
    assert smaller is not None  # the structured variant is its own dense tensors, any encoding
    assert by["channels-50"].upload_bytes == sum(t.numel() * t.element_size()
                                                 for t in smaller.parameters()) == 62_952


def test_inspect_sparse_upload_on_the_command_line(capsys):
    assert main(["models", "inspect", "small-cnn", "--sparse-upload", "values", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sparse_upload"] == "values" and out["prunable_params"] == 61_470
    assert {v["name"]: v["upload_bytes"] for v in out["variants"]}["pruned-90"] == \
        round(out["variants"][3]["params_fraction"] * 61_706) * 4
    with pytest.raises(SystemExit) as stop:
        main(["models", "inspect", "small-cnn", "--sparse-upload", "zip"])
    assert stop.value.code == 2 and "--sparse-upload: invalid choice: 'zip'" \
        in capsys.readouterr().err
    assert main(["models", "graph", "small-cnn", "--out", "g.json",
                 "--sparse-upload", "dense"]) == 2
    assert "--sparse-upload: only netsim models inspect takes it" in capsys.readouterr().err


def test_structured_variant_is_the_smaller_models_own():
    report = inspect_model(TORCH_MODELS["small-cnn"], (1, 28, 28), "small-cnn")
    v = next(v for v in report.variants if v.kind == "structured")
    smaller, _ = channel_pruned(TORCH_MODELS["small-cnn"]().eval(), (1, 28, 28))
    assert smaller is not None
    small = measure(smaller, (1, 28, 28))
    # conv 3@5x5, conv 8@5x5 on 3 channels, FC 200-60-42-10: the smaller model by hand
    assert small.params == (75 + 3) + (600 + 8) + (200 * 60 + 60) + (60 * 42 + 42) + (42 * 10 + 10)
    conv1, conv2 = 2 * 784 * 3 * 25, 2 * 100 * 8 * 3 * 25
    fc = 2 * (200 * 60 + 60 * 42 + 42 * 10)
    assert small.train_flop_per_sample == (conv1 + conv2 + fc) + conv1 + 2 * (conv2 + fc)
    assert v.params_fraction == small.params / 61_706
    assert v.flop_fraction == small.train_flop_per_sample / report.train_flop_per_sample
    assert v.upload_bytes == small.params * 4
    with torch.no_grad():
        assert smaller(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


def test_a_model_with_a_branch_gets_no_structured_variant():
    report = inspect_model(Branchy, (3, 8, 8), "branchy")
    assert [v.kind for v in report.variants] == ["full"] + ["unstructured"] * 3
    assert report.notes and "not a chain" in report.notes[0]


def test_inspect_json_from_the_command_line(capsys):
    assert main(["models", "inspect", "mlp-digits", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"params", "upload_bytes", "forward_flop_per_sample", "train_flop_per_sample",
            "activation_bytes_per_sample", "param_memory_bytes", "variants"} <= set(out)
    assert out["params"] == 4_810 and out["train_flop_per_sample"] == 20_224
    assert {tuple(sorted(v)) for v in out["variants"]} == {
        ("flop_fraction", "kind", "name", "params_fraction", "upload_bytes")}


def test_models_without_arguments_still_lists_the_builtins(capsys):
    assert main(["models"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("small-cnn")


def test_a_file_and_a_module_factory(tmp_path, monkeypatch, capsys):
    code = textwrap.dedent("""
        from torch import nn
        def make():
            return nn.Sequential(nn.Linear(6, 3), nn.ReLU(), nn.Linear(3, 2))
        def broken():
            raise RuntimeError("no weights here")
    """)
    (tmp_path / "mymodel.py").write_text(code, encoding="utf-8")
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "nets.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec in (f"{tmp_path / 'mymodel.py'}:make", "mypkg.nets:make"):
        assert main(["models", "inspect", spec, "--input-shape", "6", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["params"] == 6 * 3 + 3 + 3 * 2 + 2
    assert main(["models", "inspect", "mypkg.nets:broken", "--input-shape", "6"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "the factory raised RuntimeError: no weights here" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["small-cnn", "--input-shape", "1,32,32"], "--input-shape 1,32,32 does not fit the model: operator"),
    (["small-cnn", "--input-shape", "1,a"], "--input-shape: expected positive integers"),
    (["no_such_module_xyz:make", "--input-shape", "4"], "cannot import 'no_such_module_xyz'"),
    (["tests.test_torch_inspect:DataDependent", "--input-shape", "4"], "cannot trace the model"),
    (["tests.test_torch_inspect:nothing", "--input-shape", "4"], "has no 'nothing'"),
    (["just-a-name"], "MODEL: expected a built-in network"),
    (["tests.test_torch_inspect:Branchy"], "--input-shape: required"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(["models", "inspect", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_untraceable_names_the_line_and_the_way_out():
    with pytest.raises(ModelError) as info:
        measure(DataDependent(), (4,))
    text = str(info.value)
    assert "test_torch_inspect.py" in text and "if x.sum() > 0" in text
    assert "torch.export" in text and "ONNX" in text


def test_torch_missing_is_a_clear_error(monkeypatch, capsys):
    import netsim.commands.models as models

    monkeypatch.setattr(models, "find_spec", lambda name: None)
    assert main(["models", "inspect", "small-cnn"]) == 2
    assert 'pip install -e ".[torch]"' in capsys.readouterr().err


def test_load_factory_accepts_the_builtin_names():
    for name in ("small-cnn", "cnn-mnist", "mlp-digits"):
        assert load_factory(name) is TORCH_MODELS[name]
