"""A variant's bytes, netsim's one formula (``ModelSpec.model_bytes``, issue 55 item 4): a
structured variant is a smaller dense model, an unstructured one is sent as
``model.sparse_upload`` says (values plus a bitmap, values only, or dense); a variant without
a kind is counted as before 0.7.0. Counted by hand on LeNet-5 (netsim's small-cnn: 61,706
parameters, 61,470 of them in weights of two or more dimensions); bad values are refused
naming their field."""

from __future__ import annotations

import copy
import math

import pytest
import yaml

from netsim.cli import main
from netsim.scenario.loading import validate_scenario
from netsim.scenario.schema import ModelSpec

PARAMS = 61_706
WEIGHTS = [150, 2_400, 48_000, 10_080, 840]  # conv1, conv2, fc1, fc2, fc3 (the 236 biases kept)
PRUNABLE = sum(WEIGHTS)
KEPT_50 = sum(w - round(0.5 * w) for w in WEIGHTS) + 236  # torch.nn.utils.prune's count
SMALL = (75 + 3) + (600 + 8) + (200 * 60 + 60) + (60 * 42 + 42) + (42 * 10 + 10)  # channels-50


def lenet(sparse_upload: str | None = None, prunable: float | None = PRUNABLE) -> ModelSpec:
    data: dict = {
        "name": "lenet", "params": PARAMS, "bytes_per_param": 4, "train_flop_per_sample": 2.3e6,
        "variants": [
            {"name": "full", "params_fraction": 1.0, "flop_fraction": 1.0},
            {"name": "pruned-50", "params_fraction": KEPT_50 / PARAMS, "flop_fraction": 1.0,
             "kind": "unstructured"},
            {"name": "channels-50", "params_fraction": SMALL / PARAMS, "flop_fraction": 0.3,
             "kind": "structured"},
            {"name": "declared-50", "params_fraction": 0.5, "flop_fraction": 0.5}]}
    if sparse_upload is not None:
        data["sparse_upload"] = sparse_upload
    if prunable is not None:
        data["prunable_params"] = prunable
    return ModelSpec.model_validate(data)


def test_hand_counts_on_lenet5_for_each_kind_and_encoding():
    assert KEPT_50 == 30_971 and PRUNABLE == 61_470 and SMALL == 15_738
    bitmap = math.ceil(PRUNABLE / 8)  # one bit per prunable weight: 7,684 bytes
    want = {  # (full, pruned-50, channels-50, declared-50)
        "bitmap": (PARAMS * 4, KEPT_50 * 4 + bitmap, SMALL * 4, PARAMS * 0.5 * 4),
        "values": (PARAMS * 4, KEPT_50 * 4, SMALL * 4, PARAMS * 0.5 * 4),
        "dense": (PARAMS * 4, PARAMS * 4, SMALL * 4, PARAMS * 0.5 * 4),
    }
    for encoding, counts in want.items():
        model = lenet(encoding)
        got = tuple(model.model_bytes(i) for i in range(4))
        assert got == pytest.approx(counts, rel=1e-12, abs=0), encoding
        for i in range(4):  # the workload moves those bytes both ways
            work = model.workload(i)
            assert work.upload_bytes == work.download_bytes == model.model_bytes(i)
    assert lenet().model_bytes(1) == pytest.approx(131_568, rel=1e-12)  # bitmap: the default
    # without prunable_params, the bitmap covers every parameter (an upper bound)
    assert lenet(prunable=None).model_bytes(1) == pytest.approx(
        KEPT_50 * 4 + math.ceil(PARAMS / 8), rel=1e-12)


def test_a_variant_without_a_kind_costs_what_it_did_before():
    model = ModelSpec.model_validate({
        "params": 1e6, "bytes_per_param": 2, "train_flop_per_sample": 1e7,
        "variants": [{"name": "full", "params_fraction": 1.0, "flop_fraction": 1.0},
                     {"name": "pruned-90", "params_fraction": 0.1, "flop_fraction": 0.1}]})
    assert model.sparse_upload == "bitmap" and model.variants[1].kind is None
    assert model.model_bytes(1) == 1e6 * 0.1 * 2  # unchanged by any encoding
    for encoding in ("values", "dense"):
        assert model.model_copy(update={"sparse_upload": encoding}).model_bytes(1) == 2e5


BAD = {
    "encoding": (lambda m: m.update(sparse_upload="zip"), "model.sparse_upload", "'values'"),
    "kind": (lambda m: m["variants"][1].update(kind="pruned"), "model.variants[1].kind",
             "'unstructured'"),
    "prunable above params": (lambda m: m.update(prunable_params=2 * m["params"]), "model",
                              "prunable_params: 2e+06 is more than the model's params"),
    "prunable zero": (lambda m: m.update(prunable_params=0), "model.prunable_params",
                      "greater than 0"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_values_are_refused_naming_the_field(case, star, tmp_path, capsys):
    change, field, words = BAD[case]
    data = copy.deepcopy(star)
    data["model"]["variants"] = [
        {"name": "full", "params_fraction": 1.0, "flop_fraction": 1.0},
        {"name": "pruned-50", "params_fraction": 0.5, "flop_fraction": 1.0,
         "kind": "unstructured"}]
    change(data["model"])
    problems = validate_scenario(data).problems
    assert len(problems) == 1 and problems[0].path.startswith(field), problems
    assert words in problems[0].message, problems
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["validate", str(path)]) == 2
    assert f"{field}" in capsys.readouterr().err
