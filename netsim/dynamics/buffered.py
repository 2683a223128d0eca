"""Buffered asynchronous aggregation: training jobs that outlive an epoch, and the aggregator's
buffer (netsim's formalization of FedBuff and FedAsync; docs/async.md).

The aggregator holds a model version (0 at the start, +1 at each aggregation of at least one
update). A job started at version v downloads that version, trains, uploads (a
:class:`netsim.dynamics.epoch.GuardedParticipant`, so it drops out when its device goes
offline or its battery empties, exactly as in a synchronous epoch of the changing world). Its
update reaches the buffer when its last bit arrives and waits there for an aggregation. A
device holds at most one outstanding update (FedAsync's and FedBuff's client, and FedDES's):
it stays busy from its job's start until its update is aggregated or discarded, so it is not
started again while its update waits. An update's staleness is the number of aggregations
between its job's start and the aggregation that takes it: the versions between the model it
was trained from and the model it is applied to. An update staler than the epoch's
``max_staleness`` is discarded (its energy is wasted) as soon as it is: on arrival, or at the
end of an aggregation it waited through. An epoch closes when the buffer holds ``K`` updates
(the aggregation that follows takes the first ``K`` to arrive), when nothing is in flight any
more (the aggregation takes what the buffer holds, possibly nothing), or at the training
deadline. Updates that arrive while the aggregator averages wait in the buffer for the next
aggregation.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from netsim.simclock import fire_after

if TYPE_CHECKING:
    from netsim.energy import EnergyMeter


@dataclass(frozen=True)
class Update:
    """One update an aggregation takes: its device, the samples it trained on, its staleness
    (aggregations between its job's start and the aggregation that takes it)."""

    device: str
    samples: int
    staleness: int


@dataclass(eq=False)
class Job:
    """One device's training job: started at ``started_s`` (s) from model ``version``; the
    device's energy then (``node_before_j``, J) and its training speed (FLOP/s).
    ``ended_s``: when its update arrived or it stopped (s; None while in flight);
    ``staleness``: aggregations since its start (so far while its update waits; final once
    an aggregation takes it or it is discarded)."""

    key: int
    device: str
    row: int
    samples: int
    version: int
    started_s: float
    node_before_j: float
    flop_per_s: float
    participant: Any = None
    ended_s: float | None = None
    staleness: int = 0


class UpdateBuffer:
    """The jobs in flight and the updates waiting to be aggregated (module docstring).

    The participants report to it as to a synchronous epoch's barrier (``arrived`` when the
    last bit of an update leaves, ``dropped`` when a job stops); ``busy`` is the world's
    per-device array of devices with an outstanding update (a job in flight, or its update
    waiting in the buffer), kept up to date here.
    """

    def __init__(self, env: simpy.Environment, busy: np.ndarray) -> None:
        self.env, self.busy = env, busy
        self.version = 0
        self.jobs: dict[int, Job] = {}
        self.landed: deque[Job] = deque()  # the updates waiting, in arrival order
        self.taken: list[Job] = []  # the jobs whose updates the last aggregation took
        self.event: simpy.Event | None = None
        self._k = 1
        self._max_staleness: int | None = None
        self._next_key = 0
        self._token = 0
        self._aggregating = False
        # what happened since the last :meth:`drain` (the epoch's report)
        self.finished: list[Job] = []   # updates that arrived (kept or discarded)
        self.discarded: list[Job] = []
        self.dropped_jobs: list[Job] = []

    @property
    def in_flight(self) -> int:
        """Jobs started and not yet arrived or stopped."""
        return len(self.jobs)

    def add(self, job: Job) -> None:
        """A job starts (its key from :meth:`new_key`)."""
        self.jobs[job.key] = job
        self.busy[job.row] = True

    def new_key(self) -> int:
        """A key no other job of the run has."""
        self._next_key += 1
        return self._next_key

    def open(self, k: int, max_staleness: int | None, deadline_at_s: float) -> simpy.Event:
        """Start an epoch that closes at the K-th buffered update (module docstring); returns
        its event (already triggered when the buffer can close it now)."""
        self.event = simpy.Event(self.env)
        self.configure(k, max_staleness)
        if deadline_at_s < math.inf:
            token = self._token
            fire_after(self.env, max(deadline_at_s - self.env.now, 0.0),
                       lambda _e: self._deadline(token))
        self._check()
        return self.event

    def configure(self, k: int, max_staleness: int | None) -> None:
        """Start an epoch that closes at the K-th buffered update, without its event (the
        array path, netsim.epochs.buffered_arrays, watches :attr:`closable` itself)."""
        self._k, self._max_staleness = k, max_staleness
        self._token += 1

    @property
    def closable(self) -> bool:
        """The epoch can close: K updates are buffered, or nothing is in flight."""
        return len(self.landed) >= self._k or not self.jobs

    def take(self) -> list[Update]:
        """Close the epoch: the updates its aggregation takes (the first K to arrive), each
        stale by the versions aggregated since its job's start; their devices are free."""
        landed = self.landed
        taken = self.taken = [landed.popleft() for _ in range(min(self._k, len(landed)))]
        self.event = None
        self._token += 1
        self._aggregating = bool(taken)
        version, busy = self.version, self.busy
        for j in taken:
            j.staleness = version - j.version
            busy[j.row] = False
        return [Update(j.device, j.samples, j.staleness) for j in taken]

    def aggregated(self) -> None:
        """The aggregation of the taken updates has ended: the model's version moves on, and
        an update still waiting that is now staler than the epoch allows is discarded."""
        if self._aggregating:
            self.version += 1
            self._aggregating = False
            bound = self._max_staleness
            if bound is not None and self.landed:
                kept: deque[Job] = deque()
                for j in self.landed:
                    j.staleness = self.version - j.version
                    if j.staleness > bound:
                        self.busy[j.row] = False
                        self.discarded.append(j)
                    else:
                        kept.append(j)
                self.landed = kept

    def drain(self) -> tuple[list[Job], list[Job], list[Job]]:
        """(arrived, discarded, dropped) jobs since the last call."""
        out = self.finished, self.discarded, self.dropped_jobs
        self.finished, self.discarded, self.dropped_jobs = [], [], []
        return out

    # -- the participants' reports -----------------------------------------------------------
    def arrived(self, arrival_s: float, key: Any = None) -> None:
        """The update of job ``key`` has left its sender; it arrives at ``arrival_s`` (s)."""
        fire_after(self.env, max(arrival_s - self.env.now, 0.0), lambda _e: self._land(key))

    def dropped(self, key: Any = None) -> None:
        """Job ``key`` stopped (its device went offline or its battery emptied)."""
        self.drop(key, float(self.env.now))
        self._check()

    def drop(self, key: Any, now_s: float) -> None:
        """Job ``key`` stopped at ``now_s`` (s): it is in flight no more, and nothing of it
        counts."""
        job = self.jobs.pop(key)
        job.ended_s = now_s
        self.busy[job.row] = False
        self.dropped_jobs.append(job)

    def _land(self, key: int) -> None:
        self.land(key, float(self.env.now))
        self._check()

    def land(self, key: int, now_s: float) -> None:
        """The update of job ``key`` arrives at ``now_s`` (s): it waits in the buffer (its
        device stays busy until an aggregation takes it), or is discarded when already staler
        than the epoch allows (its staleness so far counts an aggregation under way: the
        update can be applied to its result at the earliest)."""
        job = self.jobs.pop(key)
        job.ended_s = now_s
        job.staleness = self.version + self._aggregating - job.version
        self.finished.append(job)
        if self._max_staleness is not None and job.staleness > self._max_staleness:
            self.busy[job.row] = False
            self.discarded.append(job)
        else:
            self.landed.append(job)

    def _check(self) -> None:
        event = self.event
        if event is None or event.triggered:
            return
        if self.closable:
            event.succeed()

    def _deadline(self, token: int) -> None:
        if token == self._token and self.event is not None and not self.event.triggered:
            self.event.succeed()

    def cut(self) -> list[Job]:
        """The run stops: every job still in flight stops now (what it drew counts); returns
        them."""
        cut = list(self.jobs.values())
        for job in cut:
            if job.participant is not None and job.participant.phase in ("down", "train", "up"):
                job.participant.stop()
            job.ended_s = float(self.env.now)
            self.busy[job.row] = False
        self.jobs.clear()
        self.event = None
        return cut


# -- a changing world's accounting of jobs (netsim.epochs.buffered; the asynchronous tiers,
# netsim.epochs.tiered, by the same two functions) ---------------------------------------------
def selected_s_of(jobs: Sequence[Job], start_s: float, end_s: float) -> np.ndarray:
    """How long each job's device was selected from ``start_s`` to ``end_s`` (s): from the
    job's start (or ``start_s``) to its end (or ``end_s``, or, if earlier, when its device
    went offline: an offline device draws nothing), never negative."""
    return np.array([max(min(end_s if j.ended_s is None else j.ended_s, end_s,
                             j.participant.offline_at_s) - max(j.started_s, start_s), 0.0)
                     for j in jobs])


def wasted_j_by_row(meter: EnergyMeter, jobs: Sequence[Job], end_s: float
                    ) -> dict[int, float]:
    """What the devices of ``jobs`` (dropped or discarded: nothing of them counts) drew from
    each job's start to ``end_s`` (J), summed per device row."""
    if not jobs:
        return {}
    rows = np.array([j.row for j in jobs], dtype=np.intp)
    spent = meter.node_j_of(rows, end_s) - np.array([j.node_before_j for j in jobs],
                                                     dtype=float)
    out: dict[int, float] = {}
    for r, joules in zip(rows.tolist(), spent.tolist(), strict=True):
        out[r] = out.get(r, 0.0) + joules
    return out
