"""Cross-field checks of a scenario, run on the raw mapping so that they run even where some
fields are invalid: every problem is reported in one pass, field problems (the schema's) and
cross-field ones (these) together.

Each check uses the parts of the scenario that are valid on their own (a device whose fields
validate, a link with two ends, a model that resolves) and leaves out what it cannot judge.
The checks: duplicate device ids, idle power above busy power, links joining a node to itself,
unknown link ends (an id that is neither a device nor a network node joining two links),
unknown or missing aggregator, devices without a route to the aggregator, a network in which
no device can ever train (none holds samples, none can hold the model, none reaches the
aggregator), unknown built-in models, the real or torch backend on a model it cannot train
(torch: or without torch installed), unknown generator classes and link types, shared
media (ids, member links, contention figures), the ``policies:`` block (names and parameters), and the
trace files of the ``dynamics:`` block (a missing or unreadable file, every bad row, devices
and links the network does not have).
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ValidationError

from netsim.scenario.errors import Problem, problems_from_validation
from netsim.scenario.schema import DeviceSpec, GenerateSpec, ModelSpec, TrainingSpec


def name_hint(name: str, known: Sequence[str], none: str = "there are none") -> str:
    """``; did you mean 'x'?`` for a close match, else the list of known names (at most 12);
    ``; NONE`` when there are no names at all (never an empty ``(one of: )``)."""
    if not known:
        return f"; {none}"
    close = difflib.get_close_matches(name, list(known), n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    shown = ", ".join(list(known)[:12]) + (", ..." if len(known) > 12 else "")
    return f" (one of: {shown})"


def _valid(model: type[BaseModel], raw: Any) -> Any:
    """``raw`` validated as ``model``, or None when it is not valid on its own."""
    if isinstance(raw, model):
        return raw
    if not isinstance(raw, dict):
        return None
    try:
        return model.model_validate(raw)
    except ValidationError:
        return None


def _field(obj: Any, key: str) -> Any:
    """``obj[key]`` of a raw mapping or ``obj.key`` of a validated object (None if absent)."""
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _as_list(raw: Any) -> list[Any]:
    """A list, tuple or other sequence (a resolved fleet's lazy devices) as a list."""
    if isinstance(raw, str | bytes | dict):
        return []
    return list(raw) if isinstance(raw, list | tuple | Sequence) else []


def resolved_model(raw: Any) -> ModelSpec | None:
    """The model a raw ``model`` field names (a built-in or a valid explicit spec), or None."""
    from netsim.training.models import builtin_models

    if isinstance(raw, str):
        return builtin_models().get(raw)
    return _valid(ModelSpec, raw)


def with_target_loss(data: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """The raw scenario with ``training.target_loss`` filled in from ``target_accuracy`` by
    the model's accuracy map (its inverse), and the problems: both targets given, a model
    without a map, an accuracy the map never reaches. Unchanged without target_accuracy."""
    training = data.get("training")
    if not isinstance(training, dict) or training.get("target_accuracy") is None:
        return data, []
    path, accuracy = "training.target_accuracy", training["target_accuracy"]
    if "target_loss" in training:
        return data, [Problem(path, "give target_loss or target_accuracy, not both")]
    raw = data.get("model")
    if isinstance(raw, dict) and raw.get("torch") is not None:  # (a PyTorch model's own loss)
        from netsim.scenario.schema import TorchModelSpec

        torch_model = _valid(TorchModelSpec, raw)
        if torch_model is None or not isinstance(accuracy, int | float) \
                or isinstance(accuracy, bool):
            return data, []  # (the model's or the field's own problem is reported)
        if torch_model.loss is None or torch_model.loss.accuracy is None:
            return data, [Problem(path, "a PyTorch model (model: {torch: ...}) has no accuracy "
                                        "map unless model.loss.accuracy gives one (fitted to "
                                        "it: netsim calibrate); give training.target_loss "
                                        "instead")]
        model = None
        amap = torch_model.loss.accuracy
        name = torch_model.name or "the PyTorch model"
    else:
        model = resolved_model(raw)
        if model is None or not isinstance(accuracy, int | float) or isinstance(accuracy, bool):
            return data, []  # (the model's or the field's own problem is reported)
        amap = model.loss.accuracy if model.loss is not None else None
        name = model.name
    if amap is None:
        return data, [Problem(path, f"model {name!r} has no accuracy map (its loss "
                                    "parameters' accuracy); give target_loss instead")]
    if not amap.chance < accuracy < amap.top:
        return data, [Problem(path, f"{accuracy!r} outside ({amap.chance:g}, {amap.top:g}), "
                                    f"the accuracies model {name!r}'s map spans")]
    return {**data, "training": {**training, "target_loss": amap.loss_for(float(accuracy))}}, []


def _training(data: dict[str, Any]) -> TrainingSpec | None:
    return _valid(TrainingSpec, data.get("training"))


def _memory_need(model: ModelSpec, training: TrainingSpec | None) -> tuple[float, str]:
    """Bytes the smallest variant needs to train (model bytes x memory_overhead), its name."""
    overhead = training.memory_overhead if training is not None else \
        TrainingSpec.model_fields["memory_overhead"].default
    v = min(range(len(model.variants)), key=model.model_bytes)
    return model.model_bytes(v) * overhead, model.variants[v].name


def model_problems(data: dict[str, Any]) -> list[Problem]:
    """Unknown built-in model; the real or torch backend on a model it does not train."""
    from netsim.training.models import builtin_models

    raw, out = data.get("model"), []
    if isinstance(raw, str) and raw not in builtin_models():
        out.append(Problem("model", f"unknown built-in model {raw!r}"
                                    + name_hint(raw, sorted(builtin_models()))))
    if _field(data.get("training"), "backend") == "real":
        from netsim.training.real import REAL_MODELS

        model = resolved_model(raw)
        if model is not None and model.name not in REAL_MODELS:
            out.append(Problem("training.backend", f"the real backend trains only "
                               f"{', '.join(sorted(REAL_MODELS))}; model is {model.name!r}"))
    from netsim.scenario.torch_model import is_torch_form, torch_model_problems

    if _field(data.get("training"), "backend") == "torch" and not is_torch_form(raw):
        out += _torch_problems(resolved_model(raw))
    out += torch_model_problems(data)  # (model: {torch: ...}: netsim.torchnet.scenario)
    shards = _field(data.get("training"), "shards_per_device")
    model = resolved_model(raw) if isinstance(shards, int) else None
    classes = model.loss.classes if model is not None and model.loss is not None else None
    if classes is not None and isinstance(shards, int) and shards > classes:
        out.append(Problem("training.shards_per_device",
                           f"{shards} shards a device, but model {model.name!r} has "  # type: ignore[union-attr]
                           f"{classes} classes: at most {classes}"))
    return out


def _torch_problems(model: ModelSpec | None) -> list[Problem]:
    """The torch backend on a model it cannot build, or without torch (or its data set's
    package) installed; found without importing torch."""
    from netsim.torchnet import MISSING_TORCH, TORCH_MODEL_DATA, missing_packages

    if model is not None and model.name not in TORCH_MODEL_DATA:
        return [Problem("model.name", f"the torch backend trains {sorted(TORCH_MODEL_DATA)}, "
                                      f"got {model.name!r}")]
    missing = missing_packages(model.name if model is not None else "")
    if "torch" in missing:
        return [Problem("training.backend", MISSING_TORCH)]
    return [Problem("training.backend", f"torch's data set for {model.name!r} needs {name}: "
                                        'pip install -e ".[torch]"')
            for name in missing if model is not None]


def policy_problems(data: dict[str, Any]) -> list[Problem]:
    """The ``policies:`` block: each name registered, its parameters valid for that policy."""
    from netsim.plugins import POLICIES, broken_plugin
    from netsim.policy import registered
    from netsim.policy.requirements import reasons, requirements_of

    block = data.get("policies")
    if not isinstance(block, dict):
        return []
    entries, out = registered(), []
    for name, params in block.items():
        if not isinstance(name, str) or name not in entries:
            broken = broken_plugin(POLICIES, name) if isinstance(name, str) else None
            out.append(Problem(f"policies.{name}", broken.unavailable() if broken else
                               f"unknown policy {name!r}" + name_hint(str(name), list(entries))))
            continue
        out += [Problem(f"policies.{name}", reason) for reason in reasons(
            requirements_of(entries[name].factory), name, _declares_edges(data),
            data.get("dynamics") is not None)]
        if not isinstance(params, dict):
            continue  # the schema reports it
        try:
            entries[name].params.model_validate(params)
        except ValidationError as exc:
            out += problems_from_validation(exc, prefix=f"policies.{name}",
                                            model=entries[name].params)
    return out


def _declares_edges(data: dict[str, Any]) -> bool:
    """Whether the raw scenario has edge aggregators (``edges:`` or ``generate.edges``)."""
    generate = data.get("generate")
    return bool(_as_list(data.get("edges"))) or (
        generate is not None and _field(generate, "edges") is not None)


def generate_problems(data: dict[str, Any]) -> list[Problem]:
    """Generator classes and link types from the catalog; a network that can never train."""
    from netsim.scenario.generator import edge_catalog

    raw = data.get("generate")
    if isinstance(raw, GenerateSpec):
        raw = raw.model_dump()
    if not isinstance(raw, dict):
        return []
    catalog = edge_catalog()
    classes, links = catalog["device_classes"], catalog["access_links"]
    out = []
    for field, table in (("mix", classes), ("access", links)):
        shares = raw.get(field)
        if not isinstance(shares, dict):
            continue
        for key in shares:
            if key not in table:
                out.append(Problem(f"generate.{field}.{key}",
                                   f"unknown {field} entry" + name_hint(str(key), list(table))))
        numbers = [v for v in shares.values() if isinstance(v, int | float)]
        if len(numbers) == len(shares) and not any(v > 0 for v in numbers):
            out.append(Problem(f"generate.{field}", "needs at least one positive share"))
    for field, table in (("aggregator_class", classes), ("backhaul", links)):
        value = raw.get(field)
        if isinstance(value, str) and value not in table:
            out.append(Problem(f"generate.{field}", f"unknown entry {value!r}"
                                                    + name_hint(value, list(table))))
    spec = _valid(GenerateSpec, raw)
    if spec is None:
        return out
    if spec.samples_mean == 0:
        out.append(Problem("generate.samples_mean", "0: no generated device holds samples, so "
                                                    "none can ever train (allowed: > 0)"))
    model = resolved_model(data.get("model"))
    mix = [k for k, v in spec.mix.items() if v > 0 and k in classes]
    if model is not None and mix:
        need, variant = _memory_need(model, _training(data))
        largest = max(max(classes[k]["memory_bytes"]) for k in mix)
        if need > largest:
            out.append(Problem("model", f"even its smallest variant ({variant!r}) needs "
                               f"{need:.3g} bytes to train (model bytes x "
                               f"training.memory_overhead), more than any generated device "
                               f"holds (largest: {largest:.3g} bytes)"))
    return out


def explicit_problems(data: dict[str, Any], devices: Sequence[DeviceSpec] | None = None
                      ) -> list[Problem]:
    """Ids, link ends, the aggregator, routes, and whether any device can ever train.
    ``devices``: the raw devices already validated, in their order (a valid scenario's),
    else each is validated here on its own."""
    import networkx as nx

    raw_devices, raw_links = _as_list(data.get("devices")), _as_list(data.get("links"))
    if data.get("devices") is None and data.get("links") is None:
        return []
    out: list[Problem] = []
    specs: Sequence[DeviceSpec | None] = devices if devices is not None \
        and len(devices) == len(raw_devices) else [_valid(DeviceSpec, d) for d in raw_devices]
    seen: dict[str, int] = {}
    for i, d in enumerate(raw_devices):
        dev_id = _field(d, "id")
        if not isinstance(dev_id, str) or not dev_id:
            continue
        if dev_id in seen:
            out.append(Problem(f"devices[{i}].id", f"duplicate id {dev_id!r} "
                                                   f"(first at devices[{seen[dev_id]}])"))
        seen.setdefault(dev_id, i)
        spec = specs[i]
        if spec is not None and spec.power_idle_w > spec.power_busy_w:
            out.append(Problem(f"devices[{i}].power_idle_w",
                               f"must be <= power_busy_w ({spec.power_busy_w} W)"))
        if spec is not None and spec.power_sleep_w is not None \
                and spec.power_sleep_w > spec.power_idle_w:
            out.append(Problem(f"devices[{i}].power_sleep_w",
                               f"must be <= power_idle_w ({spec.power_idle_w} W)"))
    ends: list[tuple[int, str, str]] = []
    for i, link in enumerate(raw_links):
        pair = (_field(link, "a"), _field(link, "b"))
        if isinstance(pair[0], str) and pair[0] and pair[0] == pair[1]:
            out.append(Problem(f"links[{i}].b", f"a link joins two different nodes "
                                                f"(both {pair[0]!r})"))
        ends += [(i, key, end) for key, end in zip("ab", pair, strict=True)
                 if isinstance(end, str) and end]
    uses = Counter(end for _, _, end in ends)
    for i, key, end in ends:
        if end not in seen and uses[end] == 1:
            out.append(Problem(f"links[{i}].{key}", f"{end!r} is not a device id, and as a "
                               "network node it would join no other link (a typo?)"
                               + name_hint(end, list(seen))))
    graph = nx.Graph()
    graph.add_nodes_from(seen)
    by_link: dict[int, list[str]] = {}
    for j, _, end in ends:  # one pass: links x ends was quadratic in the network's size
        by_link.setdefault(j, []).append(end)
    for link_ends in by_link.values():
        if len(link_ends) == 2:
            graph.add_edge(*link_ends)
    agg = data.get("aggregator")
    if agg is None:
        out.append(Problem("aggregator", "required: the id of the device that aggregates"))
        return out
    if not isinstance(agg, str):
        return out
    if agg not in seen:
        out.append(Problem("aggregator", f"{agg!r} is not a device id"
                           + name_hint(agg, list(seen))))
        return out
    reach = nx.node_connected_component(graph, agg)
    for i, d in enumerate(raw_devices):
        dev_id = _field(d, "id")
        if isinstance(dev_id, str) and dev_id and dev_id not in reach and seen.get(dev_id) == i:
            out.append(Problem(f"devices[{i}].id", f"{dev_id!r} has no route to the aggregator"))
    if all(s is not None for s in specs):
        out += _can_train_problems(data, [s for s in specs if s is not None], agg, reach)
    return out


def _can_train_problems(data: dict[str, Any], specs: list[DeviceSpec], agg: str,
                        reach: set[str]) -> list[Problem]:
    """A network where no device ever can train: none holds samples, or none of those that do
    reaches the aggregator, or none of those can hold even the smallest variant."""
    holders = [(i, d) for i, d in enumerate(specs) if d.samples > 0 and d.id != agg]
    if not holders:
        return [Problem("devices", "no device other than the aggregator holds samples "
                                   "(samples >= 1 on at least one): none can ever train")]
    reachable = [(i, d) for i, d in holders if d.id in reach]
    if not reachable:
        return [Problem("links", "no device holding samples has a route to the aggregator: "
                                 "none can ever train")]
    model = resolved_model(data.get("model"))
    if model is None:
        return []
    need, variant = _memory_need(model, _training(data))
    i, best = max(reachable, key=lambda item: item[1].memory_bytes)
    if need > best.memory_bytes:
        return [Problem("model", f"even its smallest variant ({variant!r}) needs {need:.3g} "
                                 f"bytes to train (model bytes x training.memory_overhead), more "
                                 f"than any device holding samples has (largest: "
                                 f"devices[{i}] {best.id!r}, {best.memory_bytes:.3g} bytes)")]
    return []


def _network_for_traces(data: dict[str, Any]) -> tuple[list[str], list[tuple[str, str]],
                                                        str] | None:
    """Device ids and link ends the traces are checked against (None: cannot be known), and
    a note for problems: a generated network's ids depend on its seed (``generate.seed``,
    else the scenario's ``seed``: the class prefix of each index and the cells' members)."""
    raw_gen = data.get("generate")
    if raw_gen is None:
        ids = [i for i in (_field(d, "id") for d in _as_list(data.get("devices")))
               if isinstance(i, str) and i]
        links = [(a, b) for a, b in ((_field(x, "a"), _field(x, "b"))
                                     for x in _as_list(data.get("links")))
                 if isinstance(a, str) and isinstance(b, str)]
        return ids, links, ""
    from netsim.scenario.generator import edge_catalog

    spec = _valid(GenerateSpec, raw_gen.model_dump() if isinstance(raw_gen, GenerateSpec)
                  else raw_gen)
    if spec is None:
        return None
    catalog = edge_catalog()
    if any(k not in catalog["device_classes"] for k in spec.mix) \
            or any(k not in catalog["access_links"] for k in spec.access) \
            or spec.aggregator_class not in catalog["device_classes"] \
            or spec.backhaul not in catalog["access_links"]:
        return None
    seed = data.get("seed", 0)
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 else 0
    try:
        gen_ids, gen_links = _generated_ids(spec.model_dump_json(), seed)
    except (ValueError, KeyError):
        return None
    note = "" if spec.seed is not None else (
        f" (checked against the network generated with seed {seed}; a generated network's "
        "device ids and cells change with the seed: set generate.seed to replay a trace)")
    return list(gen_ids), list(gen_links), note


@lru_cache(maxsize=8)
def _generated_ids(spec_json: str, seed: int
                   ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Device ids and link ends of a generated network (cached: a sweep validates each of
    its runs' scenarios, and generating a large network takes a while)."""
    from netsim.scenario.network import generated_network

    net = generated_network(GenerateSpec.model_validate_json(spec_json), seed)
    return tuple(d.id for d in net.devices), tuple((x.a, x.b) for x in net.links)


def dynamics_problems(data: dict[str, Any]) -> list[Problem]:
    """Trace files of ``dynamics.availability`` / ``dynamics.bandwidth`` (model: trace): a
    missing or unreadable file, every bad row (file, row, column), unknown devices and links.
    Paths are as given (a scenario file's relative paths are already resolved against its
    folder by :func:`netsim.scenario.loading.scenario_data`)."""
    from netsim.dynamics.traces import (
        AvailabilityTrace,
        BandwidthTrace,
        TraceError,
        availability_problems,
        bandwidth_problems,
        read_availability_trace,
        read_bandwidth_trace,
    )

    dynamics = data.get("dynamics")
    if dynamics is None:
        return []
    out: list[Problem] = []
    network: Any = False  # not yet resolved
    for kind in ("availability", "bandwidth"):
        block = _field(dynamics, kind)
        path = _field(block, "trace")
        if _field(block, "model") != "trace" or not isinstance(path, str) or not path:
            continue
        field = f"dynamics.{kind}.trace"
        avail: AvailabilityTrace | TraceError | None = None
        band: BandwidthTrace | TraceError | None = None
        try:
            avail = read_availability_trace(path) if kind == "availability" else None
            band = read_bandwidth_trace(path) if kind == "bandwidth" else None
        except TraceError as exc:
            for p in exc.problems:
                hint = " (a relative path is read from the scenario file's folder, or the " \
                       "current directory for a scenario given as a mapping)" \
                    if p.message == "no such file" else ""
                out.append(Problem(field, f"{p}{hint}"))
            if exc.keys is None:
                continue
            avail, band = (exc, None) if kind == "availability" else (None, exc)
        if network is False:
            network = _network_for_traces(data)
        if network is None:
            continue
        ids, links, note = network
        found = availability_problems(avail, ids) if avail is not None \
            else bandwidth_problems(band, links) if band is not None else []
        out += [Problem(field, f"{p}{note}") for p in found]
    return out


def media_problems(data: dict[str, Any]) -> list[Problem]:
    """Shared media: duplicate or unknown ids, media beside a generated network, contention
    figures on a cellular medium, member links without a device end, a device on two media."""
    raw_media, raw_links = _as_list(data.get("media")), _as_list(data.get("links"))
    out: list[Problem] = []
    if raw_media and data.get("generate") is not None:
        out.append(Problem("media", "a generated network builds its own media "
                                    "(generate.shared_media); give media with explicit links"))
    kinds: dict[str, str | None] = {}
    for i, medium in enumerate(raw_media):
        mid, kind = _field(medium, "id"), _field(medium, "kind")
        if not isinstance(mid, str) or not mid:
            continue
        if mid in kinds:
            out.append(Problem(f"media[{i}].id", f"duplicate medium id {mid!r}"))
        kinds.setdefault(mid, kind if isinstance(kind, str) else None)
        if kind == "cellular":
            given = medium.model_fields_set if isinstance(medium, BaseModel) else \
                {k for k, v in medium.items() if v is not None}
            for key in ("contention_onset_flows", "contention_loss_per_flow"):
                if key in given:
                    out.append(Problem(f"media[{i}].{key}", "contention figures apply to a "
                                       "wifi medium only (cellular: no decay; allowed: absent)"))
    device_ids = {i for i in (_field(d, "id") for d in _as_list(data.get("devices")))
                  if isinstance(i, str)}
    on_medium: dict[str, tuple[str, int]] = {}
    for i, link in enumerate(raw_links):
        mid = _field(link, "medium")
        if mid is None:
            continue
        if not isinstance(mid, str) or mid not in kinds:
            out.append(Problem(f"links[{i}].medium", f"unknown medium {mid!r}"
                               + name_hint(str(mid), list(kinds), "no media are defined "
                                           "(define them in a top-level media: block)")))
            continue
        ends = [e for e in (_field(link, "a"), _field(link, "b")) if isinstance(e, str)]
        stations = [e for e in ends if e in device_ids]
        if len(ends) == 2 and not stations:
            out.append(Problem(f"links[{i}].medium", f"a member link needs a device end "
                               f"(a station); {ends[0]!r} and {ends[1]!r} are network nodes"))
            continue
        for station in stations[:1]:
            first = on_medium.setdefault(station, (mid, i))
            if first[0] != mid:
                out.append(Problem(f"links[{i}].medium", f"device {station!r} is already on "
                                   f"medium {first[0]!r} (links[{first[1]}]); a device "
                                   "joins one medium"))
    return out


def cross_problems(data: dict[str, Any], devices: Sequence[DeviceSpec] | None = None
                   ) -> list[Problem]:
    """Every cross-field problem of a raw scenario mapping (see the module docstring);
    ``devices``: its explicit devices already validated (a valid scenario's), if known."""
    out = model_problems(data)
    out += generate_problems(data) if data.get("generate") is not None \
        else explicit_problems(data, devices)
    out += media_problems(data)
    out += policy_problems(data)
    out += dynamics_problems(data)
    return out
