"""Checking a policy's Decision before anything runs: every bad field named, nothing simulated."""

from __future__ import annotations

import math

import numpy as np

from netsim.policy.contract import Decision, InvalidDecision, Observation


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
    if not decision.participants and not decision.clusters:
        out.append("participants: no participant and no cluster (use stop=True to end training)")
    out += _waiting_problems(decision)
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


def _participants_ok(decision: Decision, obs: Observation, need: float) -> bool:
    """Whether every participant is valid, checked in bulk (numpy); messages come from
    :func:`_participant_problems` only when something is wrong."""
    if not decision.participants:
        return True
    table = obs.devices
    idx = [table.index.get(dev, -1) for dev in decision.participants]
    samples = list(decision.participants.values())
    if -1 in idx or any(type(x) is not int for x in samples):
        return False
    i, held = np.array(idx), np.array(samples)
    return bool(np.all((held >= 1) & (held <= table.samples[i]) & obs.available[i]
                       & (need <= table.memory_bytes[i])))


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
