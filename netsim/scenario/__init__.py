"""Scenarios: schema, loading and validation, built-in scenarios, network generation."""

from netsim.scenario.errors import Problem, ScenarioError
from netsim.scenario.loading import builtin_scenarios, load_scenario, scenario_to_yaml
from netsim.scenario.schema import (
    DeviceSpec,
    GenerateSpec,
    LinkSpec,
    ModelSpec,
    Scenario,
    TrainingSpec,
    VariantSpec,
)

__all__ = [
    "DeviceSpec",
    "GenerateSpec",
    "LinkSpec",
    "ModelSpec",
    "Problem",
    "Scenario",
    "ScenarioError",
    "TrainingSpec",
    "VariantSpec",
    "builtin_scenarios",
    "load_scenario",
    "scenario_to_yaml",
]
