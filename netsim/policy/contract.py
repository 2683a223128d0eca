"""The policy interface: what a policy sees (Observation) and what it returns (Decision).

A policy never touches SimPy objects. Each epoch the engine builds an :class:`Observation`,
calls ``policy.decide(obs)``, validates the :class:`Decision` (an invalid one raises
:class:`InvalidDecision` naming the policy and the field, see :mod:`netsim.policy.validate`)
and executes it. ``reset`` is called once per run, before the first epoch, with the *resolved*
scenario (explicit devices, links and aggregator; the model as a full spec with its loss
parameters) and the policy's own seeded generator: offline planning belongs there.

Who takes part: the devices listed in ``Decision.participants``, each with the samples it
trains on this epoch (at most what it holds); they must be available this epoch. What happens
on failure: nothing is simulated for an invalid decision; the run is recorded as failed with the
error. A policy ends training early with ``Decision(stop=True, reason=...)``.

What a policy is given is read-only in fact: the Observation and everything it holds are frozen
dataclasses or frozen pydantic models with tuples for sequences, its numpy arrays have
``writeable=False`` (views of the world's own arrays, not per-epoch copies), and the device
index is a read-only mapping. Writing into any of them raises; the world never changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from netsim.devices import DeviceTable
from netsim.scenario.schema import ModelSpec, Scenario, TrainingSpec
from netsim.tiers import Tiers
from netsim.workload import LocalTraining, Workload


@dataclass(frozen=True)
class Observation:
    """What a policy knows at the start of an epoch (read-only, see the module docstring).

    Attributes
    ----------
    epoch: index of the epoch about to run (0-based).
    now_s: simulated time now (s).
    deadline_s: the training deadline (s of simulated time).
    energy_j: energy spent so far by all nodes (J).
    loss_history: observed loss after each finished epoch, the initial loss first.
    variant: the variant of the last epoch (None before the first).
    devices: static per-device figures and routes to the aggregator (read-only arrays).
    available: which devices can take part this epoch (read-only bool array over devices):
        online now, with enough battery, and (bernoulli availability) volunteering.
    model: the model with its variants and loss parameters.
    training: the training goal (target_loss, deadline_s, max_epochs, ...).
    scenario: the resolved scenario.
    measured_flop_per_s: per device, the training speed measured in the last epoch it took
        part in (FLOP/s, after that epoch's compute spread and stragglers); NaN before.
    measured_down_bps, measured_up_bps: per device, the throughput its download and upload
        achieved in the last epoch it took part in (bit/s: bits over the time the bits took,
        latency excluded; shared links included); NaN before. Measured in every epoch of a
        changing world and every static epoch played forward in arrays (a static epoch run as
        events, with clusters or on a mesh with two saturated links, leaves them as they were).
    busy: which devices hold an outstanding update from an earlier asynchronous decision
        (read-only bool array over devices; all False in synchronous runs): still training,
        or their update waiting in the aggregator's buffer. A device holds one outstanding
        update at a time, so a decision may not start a busy device (docs/async.md).
    buffered: updates that have arrived and wait in the aggregator's buffer for the next
        aggregation (asynchronous runs; 0 otherwise); their devices are ``busy``.
    The world's future (traces, sessions, bandwidth to come) is never shown.
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
    measured_flop_per_s: np.ndarray | None = None
    measured_down_bps: np.ndarray | None = None
    measured_up_bps: np.ndarray | None = None
    busy: np.ndarray | None = None
    buffered: int = 0
    tiers: Tiers | None = None
    """The edge aggregators and which device reaches which (netsim.tiers.Tiers, read-only;
    None without edges, docs/hierarchical.md)."""
    edges_busy: np.ndarray | None = None
    """Which edges still work from an earlier asynchronous hierarchical decision, or whose
    model waits in the cloud's buffer (read-only bool array over edges; None without edges)."""
    label_counts: np.ndarray | None = None
    """Each device's label histogram: samples of each class it holds, an (n, classes) array
    by the device table's rows (read-only; samples, float in the surrogate, whose rows sum
    to each device's ``samples``; int counts of its shard on a real backend). None where no
    histogram is kept: IID data in the surrogate, every device holding the population's mix.
    What a planner needs to know which classes a device set trains
    (:class:`netsim.training.loss.PlanningCoverage`, docs/curves.md)."""

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
    info: free-form annotations a policy wants recorded. Planning policies record their
        current plan's ``planned_epochs``, ``planned_energy_j``, ``planned_time_s`` (the whole
        plan from the run's start, this epoch included) and ``planned_loss`` (predicted loss
        after this epoch).
    epoch_deadline_s: optional, seconds after the epoch's start: updates that arrive later
        are discarded (late); the epoch ends at the deadline or when the last kept update has
        been aggregated, whichever is first.
    keep_updates: optional, keep the first this many updates to arrive: the epoch stops
        waiting at the arrival of that many; the participants still running are late
        (netsim's formalization of over-selection, with ``epoch_deadline_s`` or without).
    buffer_updates: optional, asynchronous (buffered) aggregation with K = this many updates
        (netsim's formalization of FedBuff, docs/async.md): the participants start now,
        devices still training from earlier decisions go on, and the epoch ends at the
        aggregation that follows the K-th update to reach the buffer. None: synchronous.
    max_staleness: optional, with ``buffer_updates``: updates staler than this many
        aggregations are discarded on arrival (their energy is wasted).
    workload: optional, what each participant moves and computes this epoch in place of
        the variant's training (:class:`netsim.workload.Workload`: bytes down and up, FLOP
        per sample, the aggregator's FLOP per update), as a driven run's message round does
        (docs/flower.md); synchronous data-parallel epochs only.
    local: optional, how the participants train this epoch (:class:`netsim.workload.
        LocalTraining`: E local passes in minibatches of B) in place of the scenario's
        ``training.local_epochs`` and ``training.batch_size``: their compute scales with E,
        their progress as the progress model says (docs/curves.md).
    edge_rounds: optional, a hierarchical epoch (docs/hierarchical.md): kappa_2 edge rounds
        (each participant trains with its edge, which aggregates), then the edges' models go
        to the cloud, which aggregates them and sends the result back; one epoch row per
        cloud round. None: a star epoch (edges, where the world has them, relay).
        With ``buffer_updates`` the cloud aggregates asynchronously: every K edge models.
    association: optional, with ``edge_rounds``: participant id -> the edge (``tiers.ids``)
        it works with this epoch, one it can reach; absent devices work with their default.
    edge_buffer_updates: optional, with ``edge_rounds`` and ``buffer_updates``: the edges
        aggregate asynchronously too, each every this many device updates (Async-HFL's
        tiers, netsim's formalization); None: edge rounds are synchronous.
    """

    participants: Mapping[str, int] = field(default_factory=dict)
    variant: int = 0
    clusters: tuple[ClusterDecision, ...] = ()
    stop: bool = False
    reason: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)
    epoch_deadline_s: float | None = None
    keep_updates: int | None = None
    buffer_updates: int | None = None
    max_staleness: int | None = None
    workload: Workload | None = None
    local: LocalTraining | None = None
    edge_rounds: int | None = None
    association: Mapping[str, str] | None = None
    edge_buffer_updates: int | None = None


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
