"""A scenario's PyTorch model measured (``model: {torch: ...}``, docs/byo-model.md): the one
place above both the scenario layer and netsim.torchnet that joins them, so that neither
imports the other back (netsim has no import circles: tests/test_import_graph.py).

netsim.torchnet is imported only for a scenario that names a PyTorch model; any other model
passes through untouched (a surrogate run never imports torch).
"""

from __future__ import annotations

from netsim.scenario.schema import ModelSpec, Scenario, TorchModelSpec
from netsim.training.models import resolve_model


def resolved_model(ref: str | ModelSpec | TorchModelSpec) -> ModelSpec:
    """The model a scenario names, with its loss parameters: a PyTorch model measured
    (:func:`netsim.torchnet.scenario.measure_model`), else
    :func:`netsim.training.models.resolve_model`."""
    if isinstance(ref, TorchModelSpec):
        from netsim.torchnet.scenario import measure_model

        return measure_model(ref)
    return resolve_model(ref)


def measured_scenario(scenario: Scenario) -> Scenario:
    """``scenario`` with a PyTorch model (``model: {torch: ...}``) measured
    (:func:`netsim.torchnet.scenario.measure_model`; with the torch backend, its data's labels
    checked against the model's outputs); the scenario itself for any other model.

    Raises
    ------
    ScenarioError
        As :func:`measure_model`.
    """
    if not isinstance(scenario.model, TorchModelSpec):
        return scenario
    from netsim.torchnet.scenario import check_labels, measure_model

    model = measure_model(scenario.model)
    if scenario.training.backend == "torch":
        check_labels(model.torch)  # type: ignore[arg-type]
    return scenario.model_copy(update={"model": model})
