"""Scenario loading and validation: units, field paths, all problems at once, generator."""

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.scenario import ScenarioError, load_scenario
from netsim.scenario.generator import generate_network
from netsim.scenario.loading import builtin_scenarios, resolve_network
from netsim.scenario.schema import GenerateSpec
from tests.conftest import STAR


def problems_of(data):
    with pytest.raises(ScenarioError) as err:
        load_scenario(data)
    return {p.path: p.message for p in err.value.problems}


def test_strings_with_units_are_converted_to_si(star):
    star["links"][0]["bandwidth_bps"] = "20 Mbit/s"
    star["links"][0]["latency_s"] = "30 ms"
    star["devices"][1]["memory_bytes"] = "4 GiB"
    star["devices"][1]["power_busy_w"] = "5000 mW"
    star["training"]["deadline_s"] = "1 hour"
    sc = load_scenario(star)
    assert sc.links[0].bandwidth_bps == 2e7 and sc.links[0].latency_s == pytest.approx(0.03)
    assert sc.devices[1].memory_bytes == 4 * 2**30 and sc.devices[1].power_busy_w == 5.0
    assert sc.training.deadline_s == 3600


def test_wrong_dimension_is_named_with_expected_unit(star):
    star["links"][1]["bandwidth_bps"] = "20 ms"
    probs = problems_of(star)
    assert "links[1].bandwidth_bps" in probs and "bit / second" in probs["links[1].bandwidth_bps"]


def test_every_problem_reported_at_once_with_path_and_range(star):
    star["devices"][2]["flop_per_s"] = -1
    star["links"][0]["latency_s"] = -0.5
    star["links"][2]["colour"] = "blue"
    star["training"]["target_loss"] = 0
    probs = problems_of(star)
    assert "greater than 0" in probs["devices[2].flop_per_s"]
    assert "greater than or equal to 0" in probs["links[0].latency_s"]
    assert "unknown field" in probs["links[2].colour"]
    assert "training.target_loss" in probs


def test_semantic_problems(star):
    star["devices"][2]["id"] = "d1"
    star["aggregator"] = "nobody"
    probs = problems_of(star)
    assert "duplicate id" in probs["devices[2].id"] and "not a device id" in probs["aggregator"]
    bad = copy.deepcopy(STAR)
    bad["links"] = bad["links"][:2]
    assert "no route to the aggregator" in problems_of(bad)["devices[3].id"]
    bad = copy.deepcopy(STAR)
    bad["model"] = "resnet-1000"
    assert "unknown built-in model" in problems_of(bad)["model"]


def test_model_branch_errors_name_model_fields(star):
    star["model"]["train_flop_per_sample"] = "lots"
    star["model"]["variants"][0]["params_fraction"] = 0.5
    probs = problems_of(star)
    assert "model.train_flop_per_sample" in probs
    assert not any(p == "model" and "valid string" in m for p, m in probs.items())


NUMERIC_FIELDS = [
    ("devices", 1, "flop_per_s"), ("devices", 2, "memory_bytes"), ("devices", 3, "power_busy_w"),
    ("devices", 0, "power_idle_w"), ("devices", 1, "samples"), ("links", 0, "bandwidth_bps"),
    ("links", 1, "latency_s"), ("links", 2, "energy_j_per_bit"), ("training", None, "target_loss"),
    ("training", None, "deadline_s"), ("training", None, "max_epochs"),
    ("model", None, "params"), ("model", None, "train_flop_per_sample"),
]
BAD_VALUES = st.sampled_from([-1, -1e9, "abc", "12 parsecs", None, [1, 2], {"x": 1}, float("nan")])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=st.lists(st.sampled_from(NUMERIC_FIELDS), min_size=1, max_size=4, unique=True),
       data=st.data())
def test_every_malformed_field_is_named(fields, data):
    scenario = copy.deepcopy(STAR)
    expected = set()
    for section, index, key in fields:
        value = data.draw(BAD_VALUES)
        if key in ("power_idle_w", "latency_s", "energy_j_per_bit", "samples") and value == -1e9:
            value = -1
        target = scenario[section] if index is None else scenario[section][index]
        target[key] = value
        expected.add(f"{section}[{index}].{key}" if index is not None else f"{section}.{key}")
    probs = problems_of(scenario)
    for path in expected:
        assert path in probs, (path, probs)


def test_builtin_scenarios_are_valid_and_resolve():
    names = builtin_scenarios()
    assert {"default", "two-phones"} <= set(names)
    for name in names:
        sc = load_scenario(name)
        net = resolve_network(sc, 0)
        # (a generated fleet's ids from its arrays: not a million specs built one by one)
        ids = net.fleet.ids if net.fleet is not None else [d.id for d in net.devices]
        assert net.devices and net.aggregator in set(ids)


def test_default_scenario_is_about_twenty_devices_on_wifi_lte_5g():
    sc = load_scenario("default")
    net = resolve_network(sc, 0)
    trainers = [d for d in net.devices if d.samples > 0]
    assert 15 <= len(trainers) <= 25
    assert {"wifi", "lte", "5g"} <= {link.link_type for link in net.links}


def test_generator_is_seeded_and_sized():
    spec = GenerateSpec(n_devices=300)
    import numpy as np

    a = generate_network(spec, np.random.default_rng(1))
    b = generate_network(spec, np.random.default_rng(1))
    c = generate_network(spec, np.random.default_rng(2))
    assert a == b and a != c
    devices, links, agg = a
    assert len(devices) == 301 and agg == "aggregator"
    classes = {d.device_class for d in devices}
    assert {"phone", "sbc", "jetson", "laptop", "edge-server"} == classes
    cells = [x for x in links if x.b == "core-router" and x.a != agg]
    assert all(x.link_type == "fibre" for x in cells) and len(cells) >= 300 // 32


def test_generated_scenario_errors_name_generate_fields():
    probs = problems_of({"generate": {"n_devices": 0, "mix": {"toaster": 1.0}},
                         "model": "small-cnn", "training": {"target_loss": 0.3, "deadline_s": 60}})
    assert "generate.n_devices" in probs
    probs = problems_of({"generate": {"n_devices": 5, "mix": {"toaster": 1.0}},
                         "model": "small-cnn", "training": {"target_loss": 0.3, "deadline_s": 60}})
    assert "generate.mix.toaster" in probs


def test_yaml_file_with_exponent_floats_loads(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("""
devices:
  - {id: s, flop_per_s: 1e12, memory_bytes: 6.4e10, power_busy_w: 1, power_idle_w: 1}
  - {id: p, flop_per_s: 2.0e10, memory_bytes: 4 GB, power_busy_w: 1, power_idle_w: 1, samples: 10}
links: [{a: s, b: p, bandwidth_bps: 1e7}]
aggregator: s
model: small-cnn
training: {target_loss: 0.3, deadline_s: 1e3}
""")
    sc = load_scenario(str(path))
    assert sc.devices[1].flop_per_s == 2e10 and sc.training.deadline_s == 1000
    path.write_text("devices: [unclosed")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(str(path))
