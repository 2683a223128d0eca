"""Checking a policy's Decision before anything runs: every bad field named, nothing simulated."""

from __future__ import annotations

import math

import numpy as np

from netsim.policy.contract import Decision, InvalidDecision, Observation
from netsim.policy.validate_tiers import tier_problems
from netsim.workload import Workload


def _problems(decision: Decision, obs: Observation) -> list[str]:
    model = obs.model
    out: list[str] = []
    n_variants = len(model.variants)
    if not isinstance(decision.variant, int) or not 0 <= decision.variant < n_variants:
        return [f"variant: {decision.variant!r} is not a variant index (0..{n_variants - 1})"]
    if decision.stop:
        return out
    need = model.model_bytes(decision.variant) * obs.training.memory_overhead
    if not _participants_ok(decision, obs, need):
        _participant_problems(decision, obs, need, out)
    for c, cluster in enumerate(decision.clusters):
        out += _cluster_problems(c, cluster, decision, obs, need)
    in_flight = _in_flight(obs)
    edges_working = 0 if obs.edges_busy is None else int(np.count_nonzero(obs.edges_busy))
    if not decision.participants and not decision.clusters and not (
            decision.buffer_updates is not None
            and in_flight + obs.buffered + edges_working > 0):
        out.append("participants: no participant and no cluster (use stop=True to end training)")
    out += _waiting_problems(decision)
    out += _async_problems(decision, obs, in_flight)
    out += _workload_problems(decision)
    out += tier_problems(decision, obs)
    return out


def _workload_problems(decision: Decision) -> list[str]:
    """A decision's own workload: a Workload, for a synchronous data-parallel epoch."""
    w = decision.workload
    if w is None:
        return []
    if not isinstance(w, Workload):
        return [f"workload: {type(w).__name__} is not a netsim.workload.Workload"]
    out = []
    if decision.clusters:
        out.append("workload: given with model-parallel clusters (a workload is what each "
                   "data-parallel participant moves and computes)")
    if decision.buffer_updates is not None:
        out.append("workload: given with buffer_updates (asynchronous epochs train the "
                   "variant)")
    if w.by_device is not None and set(w.by_device) != set(decision.participants):
        extra = sorted(set(w.by_device) - set(decision.participants))[:3]
        missing = sorted(set(decision.participants) - set(w.by_device))[:3]
        out.append(f"workload.by_device: its devices are not the participants (not "
                   f"participants: {extra}; without figures: {missing})")
    return out


def _in_flight(obs: Observation) -> int:
    """Devices with an outstanding update: training, or their update waiting in the buffer
    (``Observation.busy``)."""
    return 0 if obs.busy is None else int(np.count_nonzero(obs.busy))


def _async_problems(decision: Decision, obs: Observation, in_flight: int) -> list[str]:
    """Buffered asynchronous aggregation (docs/async.md): K within what can arrive, no
    negative staleness bound, nothing that only a synchronous epoch knows."""
    k, bound = decision.buffer_updates, decision.max_staleness
    out = []
    if bound is not None and (type(bound) is not int or bound < 0):
        out.append(f"max_staleness: {bound!r} is not a non-negative integer (aggregations)")
    if k is None:
        if bound is not None:
            out.append("max_staleness: given without buffer_updates (a synchronous epoch's "
                       "updates are never stale)")
        if in_flight:
            out.append(f"buffer_updates: None (synchronous) while {in_flight} devices still "
                       "train or wait to be aggregated from earlier asynchronous decisions "
                       "(keep buffer_updates until they have finished)")
        return out
    if decision.edge_rounds is not None:  # (asynchronous tiers: netsim.policy.validate_tiers)
        return out
    can_arrive = len(decision.participants) + in_flight  # (busy: buffered ones included)
    if type(k) is not int or not 1 <= k <= max(can_arrive, 1):
        out.append(f"buffer_updates: {k!r} outside 1..{can_arrive} (the concurrency: "
                   f"{len(decision.participants)} started + {in_flight - obs.buffered} still "
                   f"training + {obs.buffered} buffered)")
    if decision.clusters:
        out.append("clusters: model-parallel clusters are synchronous only (not with "
                   "buffer_updates)")
    if decision.keep_updates is not None or decision.epoch_deadline_s is not None:
        out.append("buffer_updates: not with keep_updates or epoch_deadline_s (a synchronous "
                   "epoch's waiting rules)")
    if in_flight and obs.variant is not None and decision.variant != obs.variant:
        out.append(f"variant: {decision.variant} while {in_flight} devices still train "
                   f"or wait with variant {obs.variant} (a variant changes once nobody is in "
                   "flight)")
    return out


def _waiting_problems(decision: Decision) -> list[str]:
    out = []
    deadline = decision.epoch_deadline_s
    if deadline is not None and (isinstance(deadline, bool) or not isinstance(deadline, int | float)
                                 or not 0 < deadline < math.inf):
        out.append(f"epoch_deadline_s: {deadline!r} is not a positive finite number of seconds")
    keep = decision.keep_updates
    n = len(decision.participants) + len(decision.clusters)
    if keep is not None and (type(keep) is not int or not 1 <= keep <= max(n, 1)):
        out.append(f"keep_updates: {keep!r} outside 1..{n} (the epoch's participants)")
    return out


_FEW = 8
"""Participants up to which :func:`_participants_ok` checks scalars rather than arrays."""


def _participants_ok(decision: Decision, obs: Observation, need: float) -> bool:
    """Whether every participant is valid, checked in bulk (numpy); messages come from
    :func:`_participant_problems` only when something is wrong."""
    if not decision.participants:
        return True
    table = obs.devices
    try:
        i = np.fromiter(map(table.index.__getitem__, decision.participants), dtype=np.intp,
                        count=len(decision.participants))
    except KeyError:
        return False
    samples = list(decision.participants.values())
    if not set(map(type, samples)) <= {int}:
        return False
    if len(samples) <= _FEW:  # (the same checks on scalars: a few participants, as an
        # asynchronous epoch tops its jobs up with)
        busy = obs.busy
        return all(1 <= held <= table.samples.item(k) and obs.available.item(k)
                   and need <= table.memory_bytes.item(k)
                   and (busy is None or not busy.item(k))
                   for k, held in zip(i.tolist(), samples, strict=True))
    held = np.array(samples)
    free = True if obs.busy is None else ~obs.busy[i]
    return bool(np.all((held >= 1) & (held <= table.samples[i]) & obs.available[i]
                       & (need <= table.memory_bytes[i]) & free))


def _participant_problems(decision: Decision, obs: Observation, need: float,
                          out: list[str]) -> None:
    table, index = obs.devices, obs.devices.index
    for dev, samples in decision.participants.items():
        where = f"participants[{dev!r}]"
        i = index.get(dev)
        if i is None:
            out.append(f"{where}: unknown device")
            continue
        if not isinstance(samples, int) or isinstance(samples, bool):
            out.append(f"{where}: samples must be an integer, got {samples!r}")
        elif not 1 <= samples <= table.samples[i]:
            out.append(f"{where}: samples {samples} outside 1..{int(table.samples[i])} (what it holds)")
        if not obs.available[i]:
            out.append(f"{where}: device is not available this epoch")
        if obs.busy is not None and obs.busy[i]:
            out.append(f"{where}: device is busy (still training from an earlier asynchronous "
                       "decision, or its update waits to be aggregated; a device holds one "
                       "outstanding update at a time)")
        if need > table.memory_bytes[i]:
            out.append(f"{where}: the variant needs {need:.3g} bytes (model x memory_overhead), "
                       f"the device has {table.memory_bytes[i]:.3g}")


def _cluster_problems(c, cluster, decision, obs, need) -> list[str]:
    table, out, where = obs.devices, [], f"clusters[{c}]"
    if len(cluster.devices) != len(cluster.flop_share) or not cluster.devices:
        return [f"{where}.flop_share: one share per device needed"]
    if not math.isclose(sum(cluster.flop_share), 1.0, rel_tol=1e-6) or min(cluster.flop_share) < 0:
        out.append(f"{where}.flop_share: shares must be >= 0 and sum to 1")
    held = 0
    for j, dev in enumerate(cluster.devices):
        i = table.index.get(dev)
        if i is None:
            out.append(f"{where}.devices[{j}]: unknown device {dev!r}")
            continue
        if dev in decision.participants:
            out.append(f"{where}.devices[{j}]: {dev!r} is also a data-parallel participant")
        if not obs.available[i]:
            out.append(f"{where}.devices[{j}]: {dev!r} is not available this epoch")
        if need * cluster.flop_share[j] > table.memory_bytes[i]:
            out.append(f"{where}.devices[{j}]: its share needs {need * cluster.flop_share[j]:.3g} "
                       f"bytes, {dev!r} has {table.memory_bytes[i]:.3g}")
        held += int(table.samples[i])
    if not 1 <= cluster.samples <= held:
        out.append(f"{where}.samples: {cluster.samples} outside 1..{held} (what its devices hold)")
    return out


def validate_decision(decision: Decision, obs: Observation, policy_name: str) -> None:
    """Raise :class:`InvalidDecision` naming the policy and every bad field; else return."""
    if not isinstance(decision, Decision):
        raise InvalidDecision(f"policy {policy_name!r} returned {type(decision).__name__}, "
                              "not a Decision")
    problems = _problems(decision, obs)
    if problems:
        raise InvalidDecision(f"policy {policy_name!r} returned an invalid decision: "
                              + "; ".join(problems))
