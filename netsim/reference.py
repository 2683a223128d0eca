"""The user's reference, read from the code: scenario fields and policy parameters.

Every row comes from a pydantic model (the scenario schema, :mod:`netsim.scenario.schema`, or
a policy's parameter model): its type, default, allowed range (the model's own bounds) and
unit (from the unit suffix of the name: ``_s`` seconds, ``_bps`` bit/s...). ``netsim schema``
and ``netsim policies NAME`` print them; :func:`reference_markdown` writes the page the README
links (docs/reference.md, regenerated with ``netsim schema --markdown > docs/reference.md``;
a test keeps it equal to the code).
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable
from typing import Any, cast

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from netsim.scenario.schema import (
    AvailabilitySpec,
    BandwidthSpec,
    ComputeSpec,
    DeviceSpec,
    DynamicsSpec,
    EdgeSpec,
    GeneratedEdgesSpec,
    GenerateSpec,
    LabelBiasSpec,
    LinkSpec,
    MediumSpec,
    ModelSpec,
    RealTrainingSpec,
    Scenario,
    TorchDataSpec,
    TorchModelSpec,
    TorchSource,
    TrainingSpec,
    VariantSpec,
)
from netsim.units import unit_label

#: ``netsim schema SECTION``: the scenario's top level and its blocks.
SECTIONS: dict[str, type[BaseModel]] = {
    "scenario": Scenario, "generate": GenerateSpec, "devices": DeviceSpec, "links": LinkSpec,
    "media": MediumSpec, "edges": EdgeSpec, "generate.edges": GeneratedEdgesSpec,
    "model": ModelSpec, "variants": VariantSpec, "model (PyTorch)": TorchModelSpec,
    "model.torch": TorchSource, "model.torch.data": TorchDataSpec, "training": TrainingSpec,
    "training.label_bias": LabelBiasSpec, "training.real": RealTrainingSpec,
    "dynamics": DynamicsSpec,
    "dynamics.availability": AvailabilitySpec, "dynamics.bandwidth": BandwidthSpec,
    "dynamics.compute": ComputeSpec,
}

#: What each scenario field means (the schema holds types and ranges; this, the words).
DESCRIPTIONS = {
    "scenario.name": "free text; runs record it, comparisons group by content, not by name",
    "scenario.seed": "default run seed when none is given",
    "scenario.devices": "explicit devices (with links); or use generate",
    "scenario.links": "explicit links; an id not in devices is a network node (switch)",
    "scenario.generate": "a seeded generated network instead of devices/links",
    "scenario.media": "shared media (wireless cells) that links join with links[].medium; "
                      "[docs/wireless.md](wireless.md)",
    "scenario.aggregator": "the device that averages the updates (generated: the edge server)",
    "scenario.model": "a built-in model name (netsim models), an explicit model spec, or "
                      "the PyTorch model itself ({torch: ...}, measured: "
                      "[byo-model.md](byo-model.md))",
    "scenario.training": "the training goal and limits",
    "scenario.policies": "policy name -> parameters (netsim policies NAME lists them)",
    "scenario.dynamics": "a world that changes over time (sessions, bandwidth, speed); "
                         "absent: the static world",
    "scenario.edges": "edge aggregators between the devices and the cloud aggregator; "
                      "[docs/hierarchical.md](hierarchical.md)",
    "edges.id": "unique name",
    "edges.flop_per_s": "aggregation throughput",
    "edges.power_busy_w": "power while aggregating",
    "edges.power_idle_w": "power otherwise, for the whole run",
    "generate.edges": "edge aggregators on the generated cells; "
                      "[docs/hierarchical.md](hierarchical.md)",
    "dynamics.availability.model": "bernoulli: each device volunteers with its availability "
                                   "probability per epoch; markov: on/off sessions; trace: a file",
    "dynamics.bandwidth.model": "constant: each link's bandwidth_bps; lognormal: AR(1) pieces "
                                "around it; trace: a file",
    "dynamics.availability": "who is online when",
    "dynamics.bandwidth": "link capacity over time, per direction",
    "dynamics.compute": "device speed per device-epoch",
    "generate.n_devices": "devices that train (the aggregator and network nodes come on top)",
    "generate.mix": "device class -> share (netsim/data/edge_catalog.yaml)",
    "generate.access": "access link type -> share (netsim/data/edge_catalog.yaml)",
    "generate.aggregator_class": "device class of the aggregator",
    "generate.devices_per_cell": "devices behind one access point / base station",
    "generate.backhaul": "link type from each cell to the aggregator",
    "generate.samples_mean": "mean local training samples per device",
    "generate.samples_spread": "log-normal spread (sigma) of the samples per device",
    "generate.seed": "network seed; without it each run seed draws a new network",
    "devices.id": "unique name",
    "devices.flop_per_s": "sustained training throughput",
    "devices.memory_bytes": "memory available to training",
    "devices.power_busy_w": "power while computing",
    "devices.power_idle_w": "power otherwise, for the whole run",
    "devices.samples": "local training samples",
    "devices.availability": "probability the device can take part in an epoch",
    "devices.device_class": "free label (generated devices: their class)",
    "links.a": "one end (device or network node id)",
    "links.b": "the other end",
    "links.bandwidth_bps": "bandwidth per direction (full duplex)",
    "links.latency_s": "one-way latency",
    "links.energy_j_per_bit": "energy per bit sent, charged to the sender",
    "links.link_type": "free label (generated links: their access type)",
    "model.name": "shown in results",
    "model.params": "parameters of the full model",
    "model.bytes_per_param": "bytes per parameter on the wire and in memory",
    "model.train_flop_per_sample": "training FLOP per sample (forward + backward), full model",
    "model.variants": "model versions; index 0 is the full model",
    "model.loss": "surrogate loss-curve parameters (netsim/training/loss.py)",
    "model.source": "where the figures come from",
    "model (PyTorch).torch": "the model's factory, input shape, variants and data "
                             "(model.torch below)",
    "variants.name": "unique variant name",
    "variants.params_fraction": "share of the full model's parameters kept",
    "variants.flop_fraction": "share of the full model's FLOP kept",
    "training.backend": "surrogate loss model, real training (numpy MLP, scikit-learn "
                        "digits), or torch (PyTorch networks on shipped MNIST or digits)",
    "training.target_loss": "loss (nats) at which a run succeeds and stops",
    "training.deadline_s": "simulated time limit; a hard stop",
    "training.max_epochs": "epoch limit",
    "training.target_probability": "pi: required share of runs reaching the target "
                                   "(DepL plans for it; netsim compare's best must meet it)",
    "training.dirichlet_alpha": "label skew of the local data (smaller: more skewed)",
    "training.label_bias": "Async-HFL's preference-bias split: a primary and a secondary "
                           "label per device (exclusive with the other skews)",
    "training.label_bias.primary_labels": "how each device's primary label is drawn: "
                                          "uniform, or the paper's normal label weights",
    "training.truth_sample_efficiency": "ground truth learns this much per sample vs the "
                                        "policies' predictor (model-mismatch studies)",
    "training.memory_overhead": "training memory as a multiple of the model's bytes",
    "training.real": "hyper-parameters of the real and torch backends",
}

_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))


def unit_of(name: str) -> str:
    """The SI unit a field's name carries (``latency_s`` -> ``s``, ``flop_per_s`` ->
    ``FLOP/s``), or ``""``: :func:`netsim.units.unit_label`, the one reading of the names."""
    return unit_label(name)


def type_name(annotation: Any) -> str:
    """A short readable type: ``float``, ``int | None``, ``list[int]``, ``'a' | 'b'``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(annotation) if a is not Ellipsis)
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def range_of(info: FieldInfo) -> str:
    """The field's bounds as ``> 0, <= 1e+24`` (from its metadata and annotations)."""
    found: dict[str, Any] = {}
    pending = [*info.metadata, info.annotation]
    while pending:
        item = pending.pop(0)
        if typing.get_origin(item) is typing.Annotated:
            pending.extend(typing.get_args(item)[1:])
        elif typing.get_origin(item) in (typing.Union, types.UnionType):
            pending.extend(typing.get_args(item))
        elif isinstance(item, FieldInfo):
            pending.extend(item.metadata)
        else:
            for attr, _ in _BOUNDS:
                if getattr(item, attr, None) is not None:
                    found.setdefault(attr, getattr(item, attr))
            if getattr(item, "min_length", None):
                found.setdefault("min_length", item.min_length)
    parts = [f"{sym} {found[a]:g}" if isinstance(found[a], float) else f"{sym} {found[a]}"
             for a, sym in _BOUNDS if a in found]
    if "min_length" in found:
        parts.append(f"length >= {found['min_length']}")
    return ", ".join(parts)


def default_of(info: FieldInfo) -> str:
    """The default as text; ``required`` when there is none (``required unless
    target_accuracy`` where another field can stand in: ``json_schema_extra``'s
    ``required_unless``)."""
    if info.default is PydanticUndefined and info.default_factory is None:
        extra = info.json_schema_extra
        unless = extra.get("required_unless") if isinstance(extra, dict) else None
        return f"required unless {unless}" if unless else "required"
    # netsim's default factories take no arguments (pydantic also allows one of the data)
    factory = cast("Callable[[], Any] | None", info.default_factory)
    value = factory() if factory is not None else info.default
    if isinstance(value, BaseModel):
        return "(defaults)"
    if isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
        return ", ".join(getattr(v, "name", "...") for v in value)
    return "-" if value is None else str(value)


def docstring_fields(model: type[BaseModel]) -> dict[str, str]:
    """``name: text`` entries of a model's docstring: an entry starts a line, or follows
    ``;`` or a sentence's end within a paragraph (``a: ...; b: ...``), and runs to the next
    entry or the paragraph's end (a blank line); the separator ``;`` is left out."""
    names = sorted(model.model_fields, key=len, reverse=True)
    if not names:
        return {}
    entry = re.compile(r"(?:^|(?<=; )|(?<=\. ))(" + "|".join(map(re.escape, names)) + r"): ")
    out: dict[str, str] = {}
    for paragraph in re.split(r"\n\s*\n", model.__doc__ or ""):
        text = " ".join(paragraph.split())
        found = list(entry.finditer(text))
        for k, match in enumerate(found):
            body = text[match.end():found[k + 1].start() if k + 1 < len(found) else len(text)]
            out.setdefault(match.group(1), body.strip().removesuffix(";").strip())
    return out


def field_rows(model: type[BaseModel], section: str = "") -> list[dict[str, str]]:
    """One row per field: name, type, default, range, unit, description."""
    words = docstring_fields(model)
    return [{"field": name, "type": type_name(info.annotation), "default": default_of(info),
             "range": range_of(info), "unit": unit_of(name),
             "description": words.get(name) or DESCRIPTIONS.get(f"{section}.{name}", "")
             or " ".join((info.description or "").split())}
            for name, info in model.model_fields.items()]


COLUMNS = ("field", "type", "default", "range", "unit", "description")


def format_rows(rows: list[dict[str, str]]) -> str:
    """Rows as aligned text (the description last, unpadded)."""
    if not rows:
        return "(no parameters)\n"
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in COLUMNS[:-1]}
    lines = ["  ".join(c.ljust(widths[c]) for c in COLUMNS[:-1]) + "  description"]
    lines += ["  ".join(r[c].ljust(widths[c]) for c in COLUMNS[:-1]) + "  " + r["description"]
              for r in rows]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def markdown_rows(rows: list[dict[str, str]]) -> str:
    """Rows as a Markdown table."""
    if not rows:
        return "No parameters.\n"
    cell = lambda s: s.replace("|", "\\|") or " "  # noqa: E731
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(r[c]) if c != "field" else f"`{r[c]}`" for c in COLUMNS)
              + " |" for r in rows]
    return "\n".join(lines) + "\n"


def policy_rows(name: str) -> list[dict[str, str]]:
    """The parameter rows of a registered policy.

    Raises
    ------
    KeyError
        If no policy of that name is registered.
    """
    from netsim.policy import registered

    return field_rows(registered()[name].params)


def reference_markdown() -> str:
    """The whole reference page: every scenario section, then every policy's parameters."""
    from netsim.policy import registered

    out = ["# netsim reference", "",
           "Generated from the code by `netsim schema --markdown` (do not edit by hand). "
           "Units are SI, carried in each field's name; a string with a unit is converted "
           "(`50 Mbit/s`, `4 GB`, `30 ms`). Ranges are the bounds validation enforces.", "",
           "The models behind the fields: [wireless.md](wireless.md) (shared media, radio "
           "energy), [dynamics.md](dynamics.md) (a world that changes), "
           "[traces.md](traces.md) (trace files). The policies' formalizations: "
           "[pact.md](pact.md), [depl.md](depl.md), [baechi.md](baechi.md).", "",
           "## Scenario fields", ""]
    for section, model in SECTIONS.items():
        out += [f"### `{section}`", "", " ".join((model.__doc__ or "").split("\n\n")[0].split()),
                "", markdown_rows(field_rows(model, section))]
    out += ["## Policy parameters", "",
            "Set them in a scenario's `policies:` block, with `netsim run --param "
            "POLICY.KEY=VALUE`, or in a sweep's `policies:` list.", ""]
    for name, entry in registered().items():
        out += [f"### `{name}`", "", entry.description, "", markdown_rows(field_rows(entry.params))]
    return "\n".join(out).rstrip() + "\n"
