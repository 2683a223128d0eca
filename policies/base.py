"""The policy interface: what a policy sees (Observation) and what it returns (Decision).

A policy never touches SimPy objects. Each epoch the engine builds an :class:`Observation`,
calls ``policy.decide(obs)``, validates the :class:`Decision` (an invalid one raises
:class:`InvalidDecision` naming the policy and the field) and executes it. ``reset`` is called
once per run, before the first epoch, with the *resolved* scenario (explicit devices, links and
aggregator; the model as a full spec with its loss parameters) and the policy's own seeded
generator: offline planning belongs there.

Who takes part: the devices listed in ``Decision.participants``, each with the samples it
trains on this epoch (at most what it holds); they must be available this epoch. What happens
on failure: nothing is simulated for an invalid decision; the run is recorded as failed with the
error. A policy ends training early with ``Decision(stop=True, reason=...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from netsim.devices import DeviceTable
from netsim.scenario.errors import Problem, ScenarioError, problems_from_validation
from netsim.scenario.schema import ModelSpec, Scenario, TrainingSpec


@dataclass(frozen=True)
class Observation:
    """What a policy knows at the start of an epoch (read-only).

    Attributes
    ----------
    epoch: index of the epoch about to run (0-based).
    now_s: simulated time now (s).
    deadline_s: the training deadline (s of simulated time).
    energy_j: energy spent so far by all nodes (J).
    loss_history: observed loss after each finished epoch, the initial loss first.
    variant: the variant of the last epoch (None before the first).
    devices: static per-device figures and routes to the aggregator (arrays).
    available: which devices can take part this epoch (bool array over devices).
    model: the model with its variants and loss parameters.
    training: the training goal (target_loss, deadline_s, max_epochs, ...).
    scenario: the resolved scenario.
    """

    epoch: int
    now_s: float
    deadline_s: float
    energy_j: float
    loss_history: tuple[float, ...]
    variant: int | None
    devices: DeviceTable
    available: np.ndarray
    model: ModelSpec
    training: TrainingSpec
    scenario: Scenario

    @property
    def loss(self) -> float:
        """The latest observed loss."""
        return self.loss_history[-1]


@dataclass(frozen=True)
class ClusterDecision:
    """A model-parallel cluster: devices that together train one replica on ``samples``.

    ``flop_share`` gives each member's share of the replica's compute (sums to 1);
    ``activation_bytes_per_sample`` the bytes a sample's activations and gradients cross
    between the first member (the head, which exchanges the model with the aggregator) and each
    other member.
    """

    devices: tuple[str, ...]
    samples: int
    flop_share: tuple[float, ...]
    activation_bytes_per_sample: float = 0.0


@dataclass(frozen=True)
class Decision:
    """What to do this epoch.

    participants: device id -> samples it trains on this epoch (data-parallel members).
    variant: index into the model's variants (0 = full model).
    clusters: optional model-parallel clusters, each training one replica.
    stop: end training now (nothing runs this epoch); ``reason`` says why.
    info: free-form annotations a policy wants recorded (planned loss, plan status...).
    """

    participants: Mapping[str, int] = field(default_factory=dict)
    variant: int = 0
    clusters: tuple[ClusterDecision, ...] = ()
    stop: bool = False
    reason: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)


class InvalidDecision(ValueError):
    """A decision the engine refuses: the message names the policy and the field."""


@runtime_checkable
class Policy(Protocol):
    """The interface every policy implements (see the module docstring)."""

    name: str

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        """Start a new run (offline planning allowed here)."""

    def decide(self, obs: Observation) -> Decision:
        """The decision for the epoch described by ``obs``."""


class NoParams(BaseModel):
    """Parameters of a policy that takes none."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class PolicyEntry:
    """A registered policy: its factory, one-line description and parameter model."""

    name: str
    factory: Callable[..., Policy]
    description: str
    params: type[BaseModel]


_REGISTRY: dict[str, PolicyEntry] = {}


def register(name: str, description: str, params: type[BaseModel] = NoParams) -> Callable:
    """Class decorator: register a policy class under ``name``.

    The class is built as ``cls(params_instance)`` and must set ``self.name``.
    """

    def wrap(cls: Callable[..., Policy]) -> Callable[..., Policy]:
        _REGISTRY[name] = PolicyEntry(name, cls, description, params)
        return cls

    return wrap


def registered() -> dict[str, PolicyEntry]:
    """Registered policies by name (importing the policy modules on first use)."""
    from policies import load_all

    load_all()
    return dict(sorted(_REGISTRY.items()))


def make_policy(name: str, params: Mapping[str, Any] | None = None) -> Policy:
    """A fresh policy instance by registered name, its parameters validated.

    Raises
    ------
    ScenarioError
        For an unknown name or invalid parameters (paths ``policies.NAME.FIELD``).
    """
    entries = registered()
    if name not in entries:
        raise ScenarioError([Problem("policy", f"unknown policy {name!r} "
                                               f"(registered: {', '.join(entries)})")], "policy")
    entry = entries[name]
    try:
        p = entry.params.model_validate(dict(params or {}))
    except ValidationError as exc:
        raise ScenarioError(problems_from_validation(exc, prefix=f"policies.{name}"), "policy") from None
    return entry.factory(p)


def policy_params(policy: Policy) -> dict[str, Any]:
    """A policy's parameters as plain data (for run ids and records)."""
    params = getattr(policy, "params", None)
    return params.model_dump(mode="json") if isinstance(params, BaseModel) else {}
