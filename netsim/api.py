"""The Python entry point: ``netsim.simulate(scenario, policy, seed)``."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import netsim.runloop as runloop
from netsim.filedigest import trace_digest
from netsim.gcpause import relaxed_gc
from netsim.policy import Policy, make_policy, policy_params
from netsim.results.recorder import Recorder
from netsim.results.store import write_run
from netsim.scenario.loading import TRACE_FIELDS, load_scenario, trace_parent
from netsim.scenario.schema import Scenario


@dataclass(frozen=True)
class SimulationResult:
    """The three result tables of one or more runs (columns: netsim.results.recorder)."""

    runs: pd.DataFrame
    epochs: pd.DataFrame
    devices: pd.DataFrame


#: Fields added after results were first stored, with the value that means "as before":
#: left out of the hashes at that value, so run ids and scenario hashes of static scenarios
#: stay what they were (finished runs are still found on resume).
_LATER_DEFAULTS: dict[str, Any] = {"dynamics": None, "media": [], "edges": [],
                                   "goodput_factor": 1.0, "record_phase_times": False}
_LATER_DEVICE_DEFAULTS = {"power_sleep_w": None, "battery_j": None, "battery_min_fraction": 0.2,
                          "edges": None}
_LATER_LINK_DEFAULTS = {"medium": None, "rx_energy_j_per_bit": 0.0, "radio_power_w": 0.0,
                        "tail_s": 0.0, "tail_power_w": 0.0, "goodput_factor": None}
#: generated networks: private links (0.3) are "as before"; shared media (the default since
#: 0.4) change the results, so they change the hashes
_LATER_GENERATE_DEFAULTS = {"shared_media": False, "edges": None}
#: training: local epochs and batch size (0.6.0, docs/curves.md); a model's loss parameters:
#: the local-training exponents and the accuracy map (0.6.0)
_LATER_TRAINING_DEFAULTS = {"local_epochs": 1, "batch_size": None, "target_accuracy": None,
                            "shards_per_device": None,  # (0.7.0: label shards)
                            "label_bias": None}  # (0.7.0: Async-HFL's bias split)
#: The model's fields of 0.7.0 (issue 55 item 4: how a sparse variant is sent), left out of
#: the hash at their defaults (a variant's ``kind`` likewise, where it has none).
_LATER_MODEL_DEFAULTS = {"sparse_upload": "bitmap", "prunable_params": None}
_LATER_LOSS_DEFAULTS = {"local_step_exponent": 0.0, "local_epoch_exponent": 0.0,
                        "accuracy": None,  # hierarchical rounds (0.7.0, docs/hierarchical.md)
                        "edge_round_efficiency": 1.0, "edge_heterogeneity": 0.0,
                        "edge_source": "",
                        # which data trained (0.7.0, netsim.training.coverage): off
                        "classes": 10, "reference_samples": None, "data_floor": 0.0,
                        "data_exponent": 0.5, "class_interference": 0.0,
                        "interference_exponent": 1.0, "coverage_source": ""}
#: The progress model's edge-round term (docs/hierarchical.md): it cannot change a run in a
#: world without edges, so such a run's id and scenario hash leave it out (fitting it kept
#: every star run's id, and the golden tables)
_EDGE_LOSS_FIELDS = ("edge_round_efficiency", "edge_heterogeneity", "edge_source")


def scenario_content(scenario: Scenario, exclude: set[str] | None = None) -> dict[str, Any]:
    """The validated scenario as JSON data for hashing, fields added later left out where
    they hold their "as before" value, and each trace file named by its content
    (:func:`trace_digest`) rather than its path: a project moved to another folder keeps its
    run ids, and a trace whose rows change gets new ones."""
    data = scenario.model_dump(mode="json", exclude=exclude)
    for key, default in _LATER_DEFAULTS.items():
        if key in data and data[key] == default:
            del data[key]
    model = data.get("model")
    loss = model.get("loss") if isinstance(model, dict) else None
    if isinstance(model, dict):  # (a PyTorch model's files by their content)
        from netsim.scenario.torch_model import hashed_source

        hashed_source(model)
        for key, default in _LATER_MODEL_DEFAULTS.items():
            if key in model and model[key] == default:
                del model[key]
        for variant in model.get("variants") or []:
            if isinstance(variant, dict) and "kind" in variant and variant["kind"] is None:
                del variant["kind"]  # (0.7.0: a variant's kind, issue 55 item 4)
    for entries, defaults in ((data.get("devices"), _LATER_DEVICE_DEFAULTS),
                              (data.get("links"), _LATER_LINK_DEFAULTS),
                              ([data.get("generate")], _LATER_GENERATE_DEFAULTS),
                              ([data.get("training")], _LATER_TRAINING_DEFAULTS),
                              ([loss], _LATER_LOSS_DEFAULTS)):
        for entry in entries or []:
            for key, default in defaults.items():
                if entry is not None and key in entry and entry[key] == default:
                    del entry[key]
    generate = data.get("generate")
    if not data.get("edges") and not (isinstance(generate, dict) and generate.get("edges")) \
            and isinstance(loss, dict):  # a star world: the edge-round term plays no part
        for key in _EDGE_LOSS_FIELDS:
            loss.pop(key, None)
    for keys in TRACE_FIELDS:
        node = trace_parent(data, keys)
        if node is not None and isinstance(node.get(keys[-1]), str):
            node[keys[-1]] = trace_digest(node[keys[-1]])
    return data


#: What :func:`scenario_hash` leaves out of the scenario's content (the run's own)
_NOT_HASHED = frozenset({"name", "seed", "policies"})


def run_id(scenario: Scenario, policy_name: str, params: Mapping[str, Any], seed: int) -> str:
    """Hash of the validated scenario, the policy with its parameters, and the seed."""
    return _run_id_of(scenario_content(scenario), policy_name, params, seed)


def _run_id_of(content: dict[str, Any], policy_name: str, params: Mapping[str, Any],
               seed: int) -> str:
    """:func:`run_id` of a scenario's :func:`scenario_content`. A parameter that names a
    file by its absolute path (the baechi policy's ``graph``, resolved from the scenario's
    folder) counts by the file's content, as trace files do: the same run has the same id in
    any checkout."""
    if isinstance(content.get("policies"), dict):  # (the scenario's own parameters too)
        content = {**content, "policies": {
            name: {k: _file_by_content(v) for k, v in block.items()}
            if isinstance(block, dict) else block
            for name, block in content["policies"].items()}}
    payload = json.dumps({"scenario": content, "policy": policy_name,
                          "params": {k: _file_by_content(v) for k, v in dict(params).items()},
                          "seed": int(seed)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _file_by_content(value: Any) -> Any:
    """A parameter value for the run id: an absolute path to a file as its digest."""
    if isinstance(value, str) and Path(value).is_absolute() and Path(value).is_file():
        return {"file": Path(value).name, "content": trace_digest(value)}
    return value


def scenario_hash(scenario: Scenario) -> str:
    """Hash of the validated scenario's content: everything but its ``name``, its default
    ``seed`` and its ``policies`` block (runs record their own seed and policy parameters).
    Two files that simulate the same network, model and training share it; two different
    scenarios that share a name do not (``netsim compare`` groups runs by it)."""
    return _scenario_hash_of(scenario_content(scenario))


def _scenario_hash_of(content: dict[str, Any]) -> str:
    """:func:`scenario_hash` of a scenario's :func:`scenario_content`: the fields it leaves
    out (:data:`_NOT_HASHED`) are dropped here (each top-level field's content is its own, so
    leaving them out of the content is leaving them out of the dump)."""
    kept = {k: v for k, v in content.items() if k not in _NOT_HASHED}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:12]


def resolve_policy(scenario: Scenario, policy: str | Policy,
                   params: Mapping[str, Any] | None = None) -> Policy:
    """A policy instance: a registered name (parameters from the scenario's ``policies`` block,
    overridden by ``params``) or an object implementing the Policy interface."""
    if not isinstance(policy, str):
        return policy
    merged = {**scenario.policies.get(policy, {}), **dict(params or {})}
    return make_policy(policy, merged)


@relaxed_gc()  # (reading and validating a large scenario allocates as much as a run)
def simulate(scenario: str | Path | dict | Scenario, policy: str | Policy = "fedavg-all",
             seed: int | None = None, params: Mapping[str, Any] | None = None,
             out: str | Path | None = None, progress: Any = None,
             raise_errors: bool = False, fast_epochs: bool = True) -> SimulationResult:
    """Simulate one run and return its tables.

    Parameters
    ----------
    scenario: a file path, a built-in scenario name, a mapping, or a Scenario.
    policy: a registered policy name (``netsim policies``) or a Policy object.
    seed: the run's seed (default: the scenario's ``seed``).
    params: policy parameters (override the scenario's ``policies.NAME`` block).
    out: if given, the tables are also written there atomically (see netsim.results.store).
    raise_errors: re-raise a failure inside the run (it is recorded as ``failed`` either way).
    fast_epochs: play plain epochs forward in arrays where they can be (netsim.fastepoch); False
        runs every epoch as SimPy events, the reference path (same tables to rounding).

    A scenario whose model is the PyTorch model itself (``model: {torch: ...}``) has it
    measured first (:func:`netsim.measuring.measured_scenario`; its factory is
    imported as named, unless an import gate is in force).

    Raises
    ------
    ScenarioError
        For an invalid scenario or policy parameters, or a PyTorch model that cannot be
        measured (nothing is simulated).
    """
    from netsim.measuring import measured_scenario

    sc = measured_scenario(load_scenario(scenario))  # (a PyTorch model measured, once)
    pol = resolve_policy(sc, policy, params)
    seed = sc.seed if seed is None else int(seed)
    pparams = policy_params(pol)
    content = scenario_content(sc)  # (once: a scenario of 10,000 devices dumps in 0.05 s)
    rid = _run_id_of(content, pol.name, pparams, seed)
    rec = Recorder(rid, sc.name, pol.name, seed, pparams, sc.training.target_loss,
                   sc.training.deadline_s)
    runloop.run(sc, pol, seed, rec, progress=progress, raise_errors=raise_errors,
               fast_epochs=fast_epochs)
    runs, epochs, devices = rec.tables()
    runs["scenario_hash"] = _scenario_hash_of(content)  # what netsim compare groups runs by
    runs["target_probability"] = (math.nan if sc.training.target_probability is None
                                  else float(sc.training.target_probability))
    # a target given as accuracy: the run's target_loss is its equivalent (the model's map)
    runs["target_accuracy"] = (math.nan if sc.training.target_accuracy is None
                               else float(sc.training.target_accuracy))
    if out is not None:
        write_run(out, runs, epochs, devices)
    return SimulationResult(runs, epochs, devices)
