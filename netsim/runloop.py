"""One run, steppable from outside, and the two ways to drive it.

netsim's loop (:func:`run` with a :class:`~netsim.policy.Policy`): each epoch the run is
observed, the policy decides, the decision executes, the epoch is recorded. A *driver* (a
policy with a ``drive(run)`` method, :class:`Driver`: Flower's strategies, docs/flower.md)
owns its loop instead and steps the same :class:`Run`: ``observe()`` brings the world to now
and says who is available, ``execute(decision)`` runs one phase of the epoch in the world,
``close_epoch(progress)`` records it. The recorder, the tables and the stop rules are the
same for both (architecture spec, "Epoch kinds and drivers"); a driver never sees SimPy.

Stop rules (netsim's, for every run): the deadline is a hard stop (an epoch that cannot end
by it is not run, one that contention pushes past it is not recorded), at most
``training.max_epochs`` epochs, the target loss ends the run, and a decision's ``stop`` ends
it. When one applies, :meth:`Run.observe` or :meth:`Run.execute` raises :class:`RunOver`. A
driver that ends on its own before any of them (a Flower ServerApp that has run its
configured rounds) ends the run as ``completed`` (:meth:`Run.stop`).

An epoch may have several phases (a Flower round: its training messages, then its evaluate
messages): each is one world epoch; the first that ``trains`` gives the epoch's decision and
its progress, the others add their time and energy. An epoch's phases that did not all end
by the deadline are not recorded (their energy is in the run's totals).
"""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from netsim.costs import contention_free_time_s
from netsim.devices import DeviceTable
from netsim.dynamics.world import run_streams
from netsim.engine import EpochOutcome, World, resolve_scenario
from netsim.epochs import hierarchy
from netsim.gcpause import collect_large_world, frozen_heap, relaxed_gc
from netsim.policy import Decision, InvalidDecision, Observation, Policy, validate_decision
from netsim.policy.requirements import unmet
from netsim.results.recorder import Recorder
from netsim.scenario.schema import Scenario
from netsim.training.progress import EpochProgress


class RunOver(BaseException):  # noqa: N818 (control flow, like StopIteration)
    """The run has stopped by netsim's stop rules: ``status`` (a ``runs.status``) and
    ``error`` say why. Raised to whoever steps the run; a BaseException so that a driver's
    ``except Exception`` does not swallow it."""

    def __init__(self, status: str, error: str = "") -> None:
        super().__init__(error or status)
        self.status, self.error = status, error


@runtime_checkable
class Driver(Protocol):
    """A policy that owns its loop: netsim calls ``reset`` then ``drive(run)`` (in place of
    ``decide`` each epoch); it steps :class:`Run` until it is done or :class:`RunOver`."""

    name: str

    def reset(self, scenario: Scenario, rng: np.random.Generator) -> None:
        """Start a new run (the resolved scenario, the policy's own generator)."""

    def drive(self, run: Run) -> None:
        """Step ``run`` (observe, execute, close_epoch) until done."""


class Run:
    """The world, the training backend and the recorder of one run, stepped from outside.

    Parameters
    ----------
    scenario: the validated scenario; seed: the run's seed (its streams:
    :func:`netsim.dynamics.world.run_streams`); recorder: where the epochs go; progress: an
    optional callback ``(epoch, now_s)`` after each recorded epoch; fast_epochs: see
    :class:`netsim.engine.World`.
    """

    def __init__(self, scenario: Scenario, seed: int, recorder: Recorder,
                 progress: Any = None, fast_epochs: bool = True) -> None:
        streams = run_streams(seed)
        self.policy_rng, loss_rng, avail_rng = (np.random.default_rng(s) for s in streams[:3])
        """The policy's own generator (``policy.reset`` gets it)."""
        self.resolved = resolve_scenario(scenario, seed)
        self.world = World(self.resolved, avail_rng, fast_epochs=fast_epochs,
                           dynamics_seed=streams[3])
        self.training = self.resolved.training
        self.recorder = recorder
        recorder.start(self.world.node_ids, self.world.devices)
        self.backend = _make_backend(self.resolved, loss_rng, self.world.devices)
        self.history: list[float] = [self.backend.initial_loss()]
        """The loss after each recorded epoch, the initial loss first."""
        recorder.initial_loss = self.history[0]
        self.label_counts = _label_counts(self.backend)
        """Each device's label histogram (read-only; None: IID surrogate data): the
        recorder's devices table and every :class:`Observation` hold this one array."""
        recorder.label_counts = self.label_counts
        recorder.loss_source = loss_source(self.resolved)
        self.variant: int | None = None
        self.epoch = 0
        """Index of the epoch under way (or next)."""
        self.status, self.error = "target_missed", ""
        self._progress = progress
        self._bound_table = _contention_free(self.world.devices)
        self._obs: Observation | None = None
        self._phases: list[tuple[Decision, EpochOutcome, bool]] = []

    # -- what a driver sets before the first epoch --------------------------------------------
    def set_initial_loss(self, loss: float, source: str) -> None:
        """The loss before training and where the run's losses come from (``runs.loss_source``)
        when the driver measures them itself (a Flower app's evaluate_fn)."""
        if self.epoch or self._phases:
            raise RuntimeError("set_initial_loss: the run has already started")
        self.history = [float(loss)]
        self.recorder.initial_loss = float(loss)
        self.recorder.loss_source = source

    # -- stepping -------------------------------------------------------------------------------
    def observe(self) -> Observation:
        """Bring the world to now (sessions, batteries, capacities; wait while nobody who holds
        samples is available) and return what a policy sees. A later phase of an epoch under
        way observes again (who is available now). Raises :class:`RunOver` when the run is
        over (max epochs, deadline reached, or stopped earlier)."""
        if self.status != "target_missed" or self.error:
            raise RunOver(self.status, self.error)
        world, training = self.world, self.training
        if not self._phases:
            self._check_new_epoch()
        world.begin_epoch()
        available = world.draw_availability()
        while world.wait_for_someone(available, training.deadline_s):
            world.begin_epoch()
            available = world.draw_availability()
        measured = world.measured
        self._obs = Observation(
            self.epoch, world.now_s, training.deadline_s, self.recorder.energy_j,
            tuple(self.history), self.variant, world.devices, available, world.model,
            training, self.resolved, measured["flop_per_s"], measured["down_bps"],
            measured["up_bps"], world.busy, world.buffered_now, world.tiers,
            world.edges_busy, self.label_counts)
        return self._obs

    def execute(self, decision: Decision, policy_name: str, trains: bool = True) -> EpochOutcome:
        """Validate ``decision`` against the last observation and run it in the world as a
        phase of the epoch under way; ``trains``: whether its updates are the epoch's
        training (else it only adds time and energy: an evaluate round). Raises
        :class:`~netsim.policy.InvalidDecision` (nothing run) or :class:`RunOver` (a stop
        decision, or the deadline)."""
        obs, world, training = self._obs, self.world, self.training
        if obs is None:
            raise RuntimeError("execute: observe() first (each phase answers an observation)")
        validate_decision(decision, obs, policy_name)
        self._obs = None
        if not self._phases:  # (observed while the previous epoch was still open)
            self._check_new_epoch()
        if decision.stop:
            self._end("target_missed", decision.reason)
        late = None if world.dynamic or decision.buffer_updates is not None \
            or decision.workload is not None \
            else _ends_after(world, self._bound_table, decision, self.epoch, training)
        if late is not None:  # the deadline is a hard stop: nothing runs past it
            self._end("deadline", late)
        outcome = world.run_epoch(decision)
        if outcome.end_s > training.deadline_s:
            self._end("deadline", _late_message(self.epoch, outcome.end_s, training, True))
        self._phases.append((decision, outcome, trains))
        return outcome

    def close_epoch(self, progress: EpochProgress | None = None,
                    columns: dict[str, Any] | None = None) -> EpochProgress | None:
        """Record the epoch under way (its phases together) and return its progress:
        ``progress`` when the driver measured it, else the training backend's for the
        updates that counted. None when no phase ran. ``columns``: what the driver knows
        better than the merged phases (:data:`netsim.results.recorder.DRIVER_COLUMNS`: the
        updates it aggregated, their samples, the failed calls, each phase). Reaching the
        target loss ends the run (the next :meth:`observe` raises :class:`RunOver`)."""
        if not self._phases:
            return None
        decision, outcome = _merged(self._phases)
        self._phases = []
        world, history = self.world, self.history
        if progress is not None:
            step = progress
        else:
            step = self.advance(decision, outcome)
        history.append(float(step.loss))
        self.variant = decision.variant
        self.recorder.epoch(self.epoch, outcome, step, decision, world.model,
                            world.airtime_by_medium(), columns)
        if self._progress is not None:
            self._progress(self.epoch, world.now_s)
        self.epoch += 1
        if step.loss <= self.training.target_loss:
            self.status = "ok"
        return step

    def advance(self, decision: Decision, outcome: EpochOutcome) -> EpochProgress:
        """The training backend's progress for the counted updates of ``decision``'s phase
        (``outcome``: what :meth:`execute` returned); :meth:`close_epoch` calls it unless
        given the progress, a driver that needs it earlier passes it there."""
        backend, history = self.backend, self.history
        if outcome.tiers is not None:  # hierarchical: the edges' updates, per edge round
            if outcome.tiers.edge_updates:
                return backend.advance_tiers(outcome.tiers.edge_updates, decision.variant)
            return EpochProgress(loss=history[-1], accuracy=self.recorder.last_accuracy)
        if outcome.updates is not None:  # asynchronous: each update with its staleness
            if outcome.updates:
                return backend.advance_updates(outcome.updates, decision.variant)
            return EpochProgress(loss=history[-1], accuracy=self.recorder.last_accuracy)
        counted = _samples_by_device(decision) if outcome.counted is None else outcome.counted
        if counted:
            return backend.advance(counted, decision.variant, decision.local)
        # every participant dropped out or was late (or nothing trained): no progress
        return EpochProgress(loss=history[-1], accuracy=self.recorder.last_accuracy)

    def _check_new_epoch(self) -> None:
        """Whether another epoch may start: at most max_epochs, none at the deadline."""
        if self.epoch >= self.training.max_epochs:
            if self.status == "target_missed" and not self.error:  # (said, never silent)
                self.error = (f"stopped after training.max_epochs ({self.training.max_epochs}) "
                              "epochs, before the target loss")
            raise RunOver(self.status, self.error)
        if self.world.now_s >= self.training.deadline_s:
            self._end("deadline")

    def _end(self, status: str, error: str = "") -> None:
        """Stop the run now (the epoch under way is not recorded) and raise RunOver."""
        self._phases = []
        self.status, self.error = status, error
        raise RunOver(status, error)

    def stop(self) -> None:
        """A driver is done: the epoch under way, if any, is recorded, and a run that no stop
        rule ended (fewer than ``training.max_epochs`` epochs, target not reached) ends as
        ``completed``: the driver ran what it was configured to run."""
        if self._phases:
            self.close_epoch()
        if self.status == "target_missed" and not self.error \
                and self.epoch < self.training.max_epochs:
            self.status = "completed"


def _merged(phases: list[tuple[Decision, EpochOutcome, bool]]) -> tuple[Decision, EpochOutcome]:
    """One epoch of its phases: the training phase's decision and counted updates (the first
    phase if none trains, then nothing counted), the interval from the first phase's start
    to the last one's end, energy and losses of every phase."""
    training = [(d, o) for d, o, trains in phases if trains]
    if len(phases) == 1 and training:
        return training[0]
    decision, first = training[0] if training else (phases[0][0], phases[0][1])
    counted = first.counted if training else {}
    if training and counted is None:
        counted = _samples_by_device(decision)
    outcomes = [o for _, o, _ in phases]
    energy = outcomes[0].energy
    wasted: dict[int, float] = {}
    for o in outcomes[1:]:
        energy = energy + o.energy
    for o in outcomes:
        for row, joules in o.wasted_j_by_row.items():
            wasted[row] = wasted.get(row, 0.0) + joules
    return decision, replace(
        first, start_s=outcomes[0].start_s, end_s=outcomes[-1].end_s, energy=energy,
        counted=counted, dropped=tuple(d for o in outcomes for d in o.dropped),
        late=tuple(d for o in outcomes for d in o.late), wasted_j_by_row=wasted)


@relaxed_gc()
def run(scenario: Scenario, policy: Policy, seed: int, recorder: Recorder,
        progress: Any = None, raise_errors: bool = False, fast_epochs: bool = True) -> None:
    """Simulate one run of ``policy`` on ``scenario`` with ``seed``, recording into ``recorder``.

    A :class:`Driver` steps the run itself (``drive``); any other policy is asked each epoch
    (``decide``). Failures inside the run (an invalid decision, a policy error) end the run
    with status ``failed`` and the error; they are recorded, and re-raised only if
    ``raise_errors``. ``fast_epochs=False`` runs every epoch as SimPy events (see
    :class:`netsim.engine.World`).
    """
    wall0 = time.perf_counter()
    status, error = "target_missed", ""
    r: Run | None = None
    try:
        unmet_needs = unmet(policy, scenario)
        if unmet_needs:  # (nothing built: the run could never train)
            raise InvalidDecision("; ".join(unmet_needs))
        r = Run(scenario, seed, recorder, progress, fast_epochs)
        policy.reset(r.resolved, r.policy_rng)
        try:
            # the world built: not traversed by the epochs' collections (netsim.gcpause)
            with frozen_heap() as freeze_built:
                if isinstance(policy, Driver):
                    policy.drive(r)
                    r.stop()
                else:
                    while True:
                        obs = r.observe()
                        r.execute(policy.decide(obs), policy.name)
                        r.close_epoch()
                        if r.epoch == 1:  # what the first epoch built lives as long (gcpause)
                            freeze_built()
        except RunOver:
            pass
        status, error = r.status, r.error
    except InvalidDecision as exc:
        status, error = "failed", str(exc)
        if raise_errors:
            raise
    except Exception as exc:  # a policy or backend bug: recorded, the caller decides
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        if raise_errors:
            raise
    finally:
        world = r.world if r is not None else None
        if world is not None:
            world.cut_in_flight()  # asynchronous jobs still running stop with the run
        recorder.finish(status, error, world, time.perf_counter() - wall0)
        n_devices = world.devices.n if world is not None else 0
        world = r = None
        collect_large_world(n_devices)  # (before the caller builds the devices table)


def _make_backend(resolved: Scenario, rng: np.random.Generator, devices: DeviceTable):
    model, training = resolved.model, resolved.training
    if training.backend in ("real", "torch"):
        ids = [d.id for d in resolved.devices or []]
        samples = [d.samples for d in resolved.devices or []]
        if training.backend == "torch":
            from netsim.torchnet import require_torch

            require_torch()  # (missing: the pip install line, before torch is imported)
            from netsim.torchnet.backend import TorchBackend

            return TorchBackend(model, ids, samples, training, rng)
        from netsim.training.real import RealBackend

        return RealBackend(model, ids, samples, training, rng)
    from netsim.training.coverage import coverage_for
    from netsim.training.loss import SurrogateLoss

    # the label histograms' draws: a stream of its own (spawning leaves rng's draws as they were)
    coverage = coverage_for(model, training, devices.index, devices.samples, rng.spawn(1)[0])
    return SurrogateLoss(model, training, rng, coverage)  # type: ignore[arg-type]


def _label_counts(backend) -> np.ndarray | None:
    """The devices' label histograms the backend holds (rows by device; None: IID
    surrogate data, where every device holds the population's mix)."""
    counts = getattr(backend, "label_counts", None)
    out = None if counts is None else counts()
    if out is None:
        return None
    out = np.asarray(out)
    if out.flags.writeable:  # (a real backend counts its shards afresh: frozen once here)
        out.setflags(write=False)
    return out


def loss_source(resolved: Scenario) -> str:
    """Where the run's training curve comes from: real training, or the surrogate's loss
    parameters' ``source`` (fitted to measured curves, or an illustrative placeholder)."""
    if resolved.training.backend == "real":
        return "real training (netsim.training.real)"
    if resolved.training.backend == "torch":
        from netsim.torchnet import torch_version

        return f"real training (netsim.torchnet, torch {torch_version()})"
    loss = resolved.model.loss  # type: ignore[union-attr]
    return (loss.source if loss is not None else "") or "explicit loss parameters"


def _samples_by_device(decision: Decision) -> dict[str, int]:
    if not decision.clusters:
        return dict(decision.participants)
    out = dict(decision.participants)
    for cluster in decision.clusters:
        out[cluster.devices[0]] = out.get(cluster.devices[0], 0) + cluster.samples
    return out


def _late_message(epoch: int, end_s: float, training: Any, ran: bool = False) -> str:
    what = ("ended (contention) at {:.6g} s, after the deadline ({:g} s); not recorded, its "
            "energy is in the run's totals") if ran else \
        "would end at {:.6g} s at the earliest, after the deadline ({:g} s); not run"
    return f"epoch {epoch} " + what.format(end_s, training.deadline_s)


def _contention_free(table: DeviceTable) -> DeviceTable:
    """The device table without its routes: :func:`estimate_epoch` then times each transfer
    alone on its route, a lower bound of the engine's epoch, at a fraction of the cost."""
    routed = {"down_routes", "up_routes", "capacity_bps"} & {f.name for f in fields(table)}
    cleared: dict[str, Any] = dict.fromkeys(routed)
    return replace(table, **cleared) if routed else table


def _ends_after(world: World, table: DeviceTable, decision: Decision, epoch: int,
                training: Any) -> str | None:
    """Why a data-parallel epoch (or a synchronous cloud round of edge rounds) cannot end by
    the deadline (its contention-free time, a lower bound of the engine's, already passes
    it), or None when it may."""
    if decision.clusters or not decision.participants:
        return None
    if decision.edge_rounds is not None:  # a synchronous cloud round (netsim.epochs.hierarchy)
        end = world.now_s + hierarchy.lower_bound_s(world, decision)
        return None if end <= training.deadline_s * (1.0 + 1e-9) \
            else _late_message(epoch, end, training)
    n, index = len(decision.participants), table.index
    rows = np.fromiter((index[d] for d in decision.participants), dtype=np.intp, count=n)
    samples = np.fromiter(decision.participants.values(), dtype=float, count=n)
    end = world.now_s + contention_free_time_s(table, world.model, decision.variant, rows,
                                               samples)
    if end <= training.deadline_s * (1.0 + 1e-9):
        return None
    return _late_message(epoch, end, training)
