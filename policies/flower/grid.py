"""netsim's Flower Grid: the messages a strategy or ServerApp pushes become phases of netsim
epochs, each message and reply charged what it carries.

How Flower's concepts map (docs/flower.md):

- node = device. ``get_node_ids`` lists the devices available now (the changing world
  decides: online, battery above its floor, volunteering) that hold samples and whose memory
  holds the model; node ids are :func:`.records.node_id` of the device ids.
- round = epoch, as Flower defines its rounds: the messages' ``group_id`` where the strategy
  or ServerApp sets one, else their config's ``server-round`` (Flower's strategies put it in
  every train and evaluate message), else each push is a round of its own. Every push of a
  round (train, evaluate, query) is a phase of its epoch; the epoch is recorded when the
  next round's first push comes, when ``start`` ends the round (its evaluate_fn: the
  policy's hook), or when the run ends. The phases are recorded in ``epochs.phases``.
- a phase in the world: each destination downloads its message's bytes, computes, and
  uploads its reply's bytes (:func:`.records.message_bytes`: arrays, metrics and configs;
  an error reply its code and reason), on the shared media and radios as any transfer. The
  compute: surrogate mode, the device's samples x the model's training FLOP per sample (an
  evaluation: x ``evaluate_flop_fraction``; a query: nothing); real mode, the reply's
  ``num-examples`` in place of the samples, or with ``client_compute: measured`` the call's
  seconds on this host x the host's FLOP/s. A ClientApp that fails computed nothing (its
  measured seconds with ``measured``) and uploads its error reply. The aggregator spends 2
  FLOP per array element of each training update it takes. Dropouts, batteries,
  stragglers and the deadline apply as to any epoch.
- a reply that does not arrive (dropped out, late past the timeout, its node unavailable, or
  its ClientApp raised) reaches the strategy as Flower's error reply; the epochs table
  records who (``phases``, ``dropped_ids``, ``late_ids``, ``info``'s ``flower_errors``). The
  first traceback of each distinct ClientApp error is logged (logger ``netsim.flower``,
  warning; the others at debug level), and a phase in which every call failed ends the run
  as failed, naming the error.
- timeout = simulated deadline: a ``timeout`` (s) given to ``send_and_receive`` (3,600 s in
  ``Strategy.start``) is the phase's ``epoch_deadline_s``: replies later than that are lost.

Nothing waits in real time: a strategy that asks for more nodes than are available gets a
clear error in the run (Flower's own ``sample_nodes`` would sleep until they connect).
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import logging
import math
import operator
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import flwr.app as app
import numpy as np
from flwr.app import Array
from flwr.common.constant import ErrorCode
from flwr.proto.node_pb2 import NodeInfo
from flwr.serverapp import Grid
from flwr.supercore.run import Run as FlowerRun

from netsim.policy import Decision, Observation
from netsim.runloop import Run, RunOver
from netsim.training.progress import EpochProgress
from netsim.workload import DeviceWork, Workload
from policies.baselines import FitMemo
from policies.flower.loading import RunConfig
from policies.flower.records import (
    NUMBER_BYTES,
    array_bytes,
    array_elements,
    message_bytes,
    metric_names,
    node_id,
    reply_bytes,
    value_bytes,
)

#: A strategy waits for nodes when it asks for them again, with no push between, after
#: sleeping: Flower's ``sample_nodes`` sleeps 1 s between its calls. Calls in a row within
#: WAITING_GAP_S (s, wall clock) are one round's reads (Flower's FedAvg asks twice per
#: round; the ClientManager of LegacyContext and DefaultWorkflow asks at every
#: ``num_available``, ``all`` and ``sample``, several times a round).
WAITING_GAP_S = 0.5
#: More calls than this in a row with no push between: a strategy waiting without sleeping.
WAITING_CALLS = 1000
#: Where a real run's loss comes from: ``auto``, the ServerApp's evaluate_fn (centralized
#: evaluation) where one carries the loss metric, else the clients' aggregated evaluate
#: metric; ``server``, the evaluate_fn's only; ``clients``, the clients' only; ``train``, the
#: clients' training replies' metric aggregated (as Flower aggregates fit metrics: an app that
#: evaluates nothing, fl-dp-sa, whose clients report their ``val_loss`` after training).
LOSS_SOURCES = ("auto", "server", "clients", "train")
#: The metric a legacy reply (LegacyContext: FitRes, EvaluateRes as records) keeps its example
#: count in, in a MetricRecord of its own (``fitres.num_examples``).
LEGACY_EXAMPLES = "num_examples"
#: The ConfigRecord and key in which SecAgg+ (Flower's SecAggPlusWorkflow and
#: secaggplus_mod) names the stage a message belongs to (setup, share_keys,
#: collect_masked_vectors, unmask).
SECAGG_CONFIGS, SECAGG_STAGE, SECAGG_SHARES = "secaggplus_configs", "stage", "share_num"
#: The compute of one SecAgg+ mask per model element (FLOP-equivalents: its seconds per
#: element on a host x that host's FLOP/s as netsim's host benchmark measures it), charged at
#: the device's FLOP/s: a device draws ``share_num`` masks (its private one, one per
#: neighbour) over its update, the server one per surviving node. Measured on netsim's
#: development host (2 cores, shared; flwr 1.42's ``pseudo_rand_gen``, a seeded NumPy
#: ``RandomState.randint`` of int64, then the modular addition, over 10^6 elements): 7.5 to
#: 9.0 ns an element at 5.8e10 to 6.2e10 FLOP/s, 465 to 527 FLOP-equivalents, so 500.
#: Measure yours: ``OMP_NUM_THREADS=1 python benchmarks/secagg_masking.py``.
SECAGG_MASK_FLOP_PER_ELEMENT = 500.0
#: netsim's log of a Flower run: ClientApp failures, a loss metric nobody reports.
LOG = logging.getLogger("netsim.flower")
#: A phase's compute per sample as a share of training's, by message type (evaluate: the
#: policy's evaluate_flop_fraction).
KIND_COMPUTE = {"train": 1.0, "query": 0.0}


class DecodedArray(Array):
    """A Flower Array that keeps its decoded values: ``numpy()`` returns a copy of them
    rather than parsing the bytes again (a surrogate round's replies share one set of
    arrays; Flower's aggregation decodes every reply's)."""

    @classmethod
    def of(cls, array: Array) -> DecodedArray:
        """The same array (dtype, shape, serialization, bytes)."""
        return cls(dtype=array.dtype, shape=tuple(array.shape), stype=array.stype,
                   data=array.data)

    def numpy(self) -> Any:
        values = self.__dict__.get("_decoded")
        if values is None:
            values = super().numpy()
            self.__dict__["_decoded"] = values
        return values.copy()


@dataclass
class EpochLog:
    """What the epoch under way records (a live record: the phases of the round fill it
    until it is recorded): ``info`` (``epochs.info``), the round's key, each phase's
    record, and the counts of its main phase (its training; else its first)."""

    info: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    phases: list[dict[str, Any]] = field(default_factory=list)
    main: dict[str, Any] | None = None
    trained: bool = False
    progress: EpochProgress | None = None
    evaluated: EpochProgress | None = None
    trained_metric: EpochProgress | None = None
    centralized: EpochProgress | None = None
    """A legacy strategy's centralized evaluation of the round (DefaultWorkflow calls its
    ``evaluate``; netsim.policies.flower.policy's hook records it here)."""


@dataclass(frozen=True)
class Pushed:
    """One push's messages and what is read of each once: its metadata, its content, and the
    id the grid gave it."""

    msgs: list[Any]
    metas: list[Any]
    contents: list[Any]
    ids: list[str]


def protocol_stage(contents: list[Any]) -> str | None:
    """The protocol stage a push's messages belong to (``contents``: their contents): the
    SecAgg+ stage they name (``secaggplus_configs``' ``stage``), ``secaggplus:STAGE``, where
    they all name one; None: no stage (a plain train, evaluate or query push)."""
    stages = set()
    for content in {id(c): c for c in contents}.values():
        configs = content.config_records
        rec = configs[SECAGG_CONFIGS] if SECAGG_CONFIGS in configs else None
        stages.add(rec.get(SECAGG_STAGE) if rec is not None else None)
    if len(stages) == 1 and isinstance(stage := stages.pop(), str):
        return f"secaggplus:{stage}"
    return None


def round_key(metas: list[Any], contents: list[Any]) -> str | None:
    """The Flower round a push belongs to (``metas``, ``contents``: its messages' metadata
    and contents): their common ``group_id``, else the common ``server-round`` of their
    configs; None: neither (the push is a round of its own)."""
    groups = {m.group_id for m in metas}
    if len(groups) == 1 and (group := groups.pop()):
        return f"group {group}"
    distinct = {id(c): c for c in contents}  # (strategies send one to all)
    rounds = {rec["server-round"] for c in distinct.values()
              for rec in c.config_records.values() if "server-round" in rec}
    if len(rounds) == 1 and len(groups) <= 1:
        return f"server-round {rounds.pop()}"
    return None


class NetsimGrid(Grid):
    """A ``flwr.serverapp.Grid`` over a netsim :class:`~netsim.runloop.Run` (module docstring).

    Parameters
    ----------
    run: the netsim run it steps; policy_name: for decision errors; client_app: the user's
    ClientApp (real mode) or None (surrogate: netsim answers for the clients, the loss is the
    progress model's); loss_metric: the metric that is the run's loss; evaluate_flop_fraction:
    an evaluation's FLOP per sample as a share of training's; weighted_by_key: the metric
    replies carry their example count in; strategy: read for the nodes it needs before it
    samples (so that it never waits); run_config: each node's Context ``run_config``;
    host_flop_per_s: this host's FLOP/s when each ClientApp call is charged its measured
    seconds (None: its reply's examples x the model's FLOP per sample); loss_source: where
    the run's loss comes from in real mode (:data:`LOSS_SOURCES`).
    """

    def __init__(self, run: Run, policy_name: str, client_app: Any, loss_metric: str,
                 evaluate_flop_fraction: float, weighted_by_key: str, strategy: Any,
                 run_config: dict[str, Any], host_flop_per_s: float | None = None,
                 loss_source: str = "auto") -> None:
        if loss_source not in LOSS_SOURCES:
            raise ValueError(f"loss_source: {loss_source!r} is not one of "
                             f"{', '.join(LOSS_SOURCES)}")
        self._run = run
        self.loss_source = loss_source
        """Where the run's loss comes from (real mode): :data:`LOSS_SOURCES`."""
        self.evaluate_fns = 0
        """evaluate_fns (centralized evaluation) netsim saw given to Flower's start()."""
        self._name = policy_name
        self._client_app = client_app
        self._loss_metric = loss_metric
        self._eval_fraction = evaluate_flop_fraction
        self._weight_key = weighted_by_key
        self._strategy = strategy
        self._run_config = run_config
        self._host_flops = host_flop_per_s
        devices = run.world.devices
        self._devices = devices
        self._node_ids = np.fromiter((node_id(d) for d in devices.ids), dtype=np.int64,
                                     count=devices.n)
        self._order = np.argsort(self._node_ids, kind="stable")
        self._sorted_ids = self._node_ids[self._order]
        trainers = devices.trainers
        self._partition = {int(r): k for k, r in enumerate(trainers.tolist())}
        self._fits = FitMemo()
        self._obs: Observation | None = None
        self._nodes_now: list[int] | None = None
        # the node ids of the last trainers that fit the memo handed (the same read-only
        # array while the world's availability is the same one: a static world's)
        self._listed: tuple[np.ndarray | None, list[int]] = (None, [])
        self._calls = 0
        self._last_call_s = 0.0  # (wall clock, s: the last get_node_ids call's)
        self._thread = threading.get_ident()  # (the thread that steps the run)
        self._secagg_shares = 1  # (SecAgg+'s share_num, read from its setup stage)
        self._secagg_elements = 0  # (the elements of its masked vectors)
        self._replies: dict[str, Any] = {}
        # per going message of the phase under way whose reply netsim built (surrogate): its
        # reply's bytes, array elements and example count (records.py's counts of it)
        self._known: dict[int, tuple[int, int, int]] = {}
        # the phase's (download bytes, upload bytes, array elements) when netsim built every
        # reply to one content sent (all alike: one Workload), else None
        self._uniform: tuple[int, int, int] | None = None
        self._contexts: dict[int, Any] = {}
        self._pushes = 0
        self._errors_seen: set[str] = set()
        self._metrics_seen: set[str] = set()  # (the clients' evaluate replies' metrics)
        self._train_metrics: set[str] = set()  # (the clients' training replies' metrics)
        self._server_metrics: set[str] = set()  # (the evaluate_fns' metrics)
        self._warned_loss = False
        self.calls = 0
        """ClientApp calls made in the run (real mode)."""
        self.failed_calls = 0
        """ClientApp calls that failed in the run (raised, an error reply, no examples)."""
        self.epoch = EpochLog()
        self.flower_run_id = int(run.recorder.run_id, 16) & ((1 << 63) - 1)
        self._timeout_s: float | None = None  # (the phase under way's, in simulated s)

    # -- flwr.serverapp.Grid -----------------------------------------------------------------
    def set_run(self, run: Any) -> None:
        """Flower's run (unused: netsim's run is this grid's)."""

    @property
    def run(self) -> Any:
        """Flower's view of the run (its id: derived from netsim's run id)."""
        return FlowerRun.create_empty(self.flower_run_id)

    def create_message(self, content: Any, message_type: str, dst_node_id: int,
                       group_id: str, ttl: float | None = None) -> Any:
        """A new message (as Flower's own grids make it)."""
        return app.Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> list[int]:
        """The nodes available now (module docstring); the same list until the next push.
        A call from another thread (the thread in which Flower's DefaultWorkflow refreshes
        its ClientManager every 5 s of wall time) gets the last list read, without stepping
        the world (netsim's run is stepped from the thread that drives it)."""
        if threading.get_ident() != self._thread:
            return list(self._nodes_now if self._nodes_now is not None else self._listed[1])
        if self._nodes_now is None:
            self._obs = self._run.observe()
            fits = self._fits(self._obs)
            if fits is not self._listed[0]:
                self._listed = (fits, self._node_ids[fits].tolist())
            self._nodes_now = list(self._listed[1])  # (its own: a strategy may change it)
            self._check_enough(len(self._nodes_now))
        self._calls += 1
        now = time.perf_counter()
        slept = self._calls > 1 and now - self._last_call_s >= WAITING_GAP_S
        self._last_call_s = now
        if slept or self._calls >= WAITING_CALLS:
            raise RuntimeError(
                f"{self._name}: the strategy keeps asking for nodes ({self._calls} calls "
                f"without a message{', the last after a wait' if slept else ''}; "
                f"{len(self._nodes_now)} available now): it waits for more nodes than are "
                "available, which Flower does in real time and netsim does not (lower its "
                "min_*_nodes or fractions)")
        return self._nodes_now

    def push_messages(self, messages: Iterable[Any]) -> list[str]:
        """Run the messages as one phase of their round's epoch (module docstring); their
        replies wait for :meth:`pull_messages`. Returns the messages' ids."""
        msgs = list(messages)
        if not msgs:
            return []
        metas = [m.metadata for m in msgs]
        contents = [m.content for m in msgs]
        kinds = {t.split(".")[0] for t in {m.message_type for m in metas}}
        if len(kinds) != 1:
            raise ValueError(f"{self._name}: one push mixes message types {sorted(kinds)} "
                             "(a phase of an epoch is one kind of message)")
        kind = kinds.pop()
        key = round_key(metas, contents)
        log = self.epoch
        stage = protocol_stage(contents)  # (a protocol's stages are phases of one round)
        if log.phases and (key is None or key != log.key or (
                kind == "train" and log.trained and stage is None)):
            self.close_epoch()  # (the previous round is over)
            self._stop_if_over()
        obs = self._obs if self._obs is not None else self._run.observe()
        self._obs, self._nodes_now, self._calls = None, None, 0
        rows = self._rows_of(metas)
        prefix = f"{self._run.epoch}.{self._pushes}."
        ids = [f"{prefix}{k}" for k in range(len(msgs))]
        for meta, message_id in zip(metas, ids, strict=True):
            meta.__dict__["_message_id"] = message_id
        self._pushes += 1
        self.epoch.key = key
        self._phase(kind, Pushed(msgs, metas, contents, ids), rows, obs, key)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> list[Any]:
        """The replies to ``message_ids`` (each once)."""
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages: Iterable[Any], *,
                         timeout: float | None = None) -> list[Any]:
        """Push, then pull every reply: nothing waits, the phase ran in simulated time;
        ``timeout`` (s) is the phase's simulated deadline."""
        self._timeout_s = timeout
        try:
            return self.pull_messages(self.push_messages(messages))
        finally:
            self._timeout_s = None

    def get_nodes(self) -> Any:
        """Node infos of the available nodes."""
        return (NodeInfo(node_id=n) for n in self.get_node_ids())

    # -- epochs ------------------------------------------------------------------------------
    def close_epoch(self, measured: EpochProgress | None = None) -> EpochProgress | None:
        """Record the epoch under way. Surrogate mode: the progress model's loss. Real mode,
        by :attr:`loss_source`: ``measured`` (the ServerApp's evaluate_fn's loss: ``auto``,
        ``server``), else the clients' aggregated evaluate loss (``auto``, ``clients``);
        NaN without one, with a warning saying what was looked at when the round had train
        or evaluate messages (a query-only round, federated analytics, has no loss)."""
        log, self.epoch = self.epoch, EpochLog()
        if self._client_app is None:
            step = measured or log.progress
        elif self.loss_source == "train":
            step = log.trained_metric
        else:
            step = (measured or log.centralized) if self.loss_source != "clients" else None
            if step is None and self.loss_source != "server":
                step = log.evaluated
        if step is None and self._client_app is not None:
            step = EpochProgress(loss=math.nan)
            if any(phase["type"] in ("train", "evaluate") for phase in log.phases):
                self._warn_no_loss()
        if self._host_flops is not None and log.phases:
            log.info["host_flop_per_s"] = self._host_flops
        return self._run.close_epoch(step, self._columns(log) if log.phases else None)

    def saw_metrics(self, record: Any, source: str = "evaluate_fn") -> None:
        """Metric names an evaluate_fn returned (for the loss warning)."""
        self._server_metrics |= set(record)

    def _warn_no_loss(self) -> None:
        """Warn once that the run's loss is NaN, saying what was looked at: the evaluate_fns
        given to start() (or that none was) and the clients' evaluate replies, each with the
        metrics it carried, as :attr:`loss_source` selects them."""
        loss = self._loss_metric
        trains = self.loss_source == "train"
        servers = self.loss_source in ("auto", "server")
        clients = self.loss_source in ("auto", "clients")
        if self._warned_loss or (servers and loss in self._server_metrics) \
                or (clients and loss in self._metrics_seen) \
                or (trains and loss in self._train_metrics):
            return
        self._warned_loss = True

        def names(found: set[str]) -> str:
            return ", ".join(sorted(found)) or "none"

        looked = []
        if servers:
            looked.append(f"the evaluate_fn, Flower's centralized evaluation (metrics: "
                          f"{names(self._server_metrics)})" if self.evaluate_fns else
                          "an evaluate_fn, but none was given to Flower's start()")
        if clients:
            looked.append(f"the clients' evaluate replies (metrics: "
                          f"{names(self._metrics_seen)})")
        if trains:
            looked.append(f"the clients' training replies (metrics: "
                          f"{names(self._train_metrics)})")
        LOG.warning("%s: the run's loss is NaN: nothing carries the loss metric %r (loss_source "
                    "%s; looked at %s); name the loss with the flower policy's loss_metric "
                    "(--param %s.loss_metric=NAME) or choose its source with loss_source "
                    "(auto, server, clients, train)", self._name, loss, self.loss_source,
                    " and ".join(looked), self._name)

    def _stop_if_over(self) -> None:
        """The epoch just recorded ended the run (its target reached): stop the driver."""
        run = self._run
        if run.status != "target_missed" or run.error:
            raise RunOver(run.status, run.error)

    def _columns(self, log: EpochLog) -> dict[str, Any]:
        """The epoch row's columns only the grid knows: the main phase's replies aggregated
        (without error), their examples, who dropped out, was late or failed; each phase."""
        main = log.main or {}
        return {"updates_aggregated": len(main.get("replied", [])),
                "samples": int(sum(main.get("examples", {}).get(d, 0)
                                   for d in main.get("replied", []))),
                "dropped": len(main.get("dropped", [])), "late": len(main.get("late", [])),
                "dropped_ids": list(main.get("dropped", [])),
                "late_ids": list(main.get("late", [])), "failed": len(main.get("failed", [])),
                "phases": json.dumps(log.phases, sort_keys=True)}

    def _expecting(self) -> str:
        return "evaluate" if self.epoch.trained else "train"

    def _check_enough(self, available: int) -> None:
        """Raise when the strategy's own minimums (FedAvg's family: fraction_*, min_*_nodes,
        min_available_nodes) ask for more nodes than are available, before it samples."""
        s, phase = self._strategy, self._expecting()
        fraction = getattr(s, f"fraction_{phase}", None)
        minimum = getattr(s, f"min_{phase}_nodes", None)
        at_least = getattr(s, "min_available_nodes", None)
        if not isinstance(fraction, int | float) or fraction == 0.0 \
                or not isinstance(minimum, int) or not isinstance(at_least, int):
            return
        need = max(int(available * fraction), minimum, at_least)
        if need > available:
            raise RuntimeError(
                f"{self._name}: the strategy's {phase} round needs {need} nodes "
                f"(min_{phase}_nodes {minimum}, min_available_nodes {at_least}) but "
                f"{available} are available at {self._run.world.now_s:.6g} s (epoch "
                f"{self._run.epoch}); Flower would wait for them in real time, netsim stops")

    def _rows_of(self, metas: list[Any]) -> np.ndarray:
        """Each message's destination device row (``metas``: the messages' metadata); an
        unknown node id is an error."""
        dst = np.fromiter((m.dst_node_id for m in metas), dtype=np.int64, count=len(metas))
        pos = np.searchsorted(self._sorted_ids, dst)
        pos = np.minimum(pos, len(self._sorted_ids) - 1)
        bad = self._sorted_ids[pos] != dst
        if bad.any():
            raise ValueError(
                f"{self._name}: a message to node {int(dst[bad][0])}, which is no device of "
                "this scenario (node ids: policies.flower.records.node_id(device id))")
        rows = self._order[pos]
        if len(set(rows.tolist())) != len(rows):
            raise ValueError(f"{self._name}: two messages of one phase to the same node")
        return rows

    def _phase(self, kind: str, pushed: Pushed, rows: np.ndarray, obs: Observation,
               key: str | None) -> None:
        """One phase in the world and its replies."""
        t, run = self._devices, self._run
        can = self._fits.mask(obs)[rows].tolist()  # per message: its node fits now
        device_ids = t.ids
        dev = [device_ids[r] for r in rows.tolist()]  # per message: its device
        order = np.argsort(rows, kind="stable").tolist()  # concurrent: run in row order
        errors: dict[int, tuple[int, str | None]] = {}
        if not all(can):
            for k in order:
                if not can[k]:
                    errors[k] = (ErrorCode.NODE_UNAVAILABLE,
                                 f"device {dev[k]!r} is not available in epoch "
                                 f"{run.epoch} (offline, low battery, or its memory cannot "
                                 "hold the model)")
        unavailable = list(errors)
        going = [k for k in order if k not in errors]
        failed: set[int] = set()
        host_s: dict[int, float] = {}
        answers = self._answers(kind, pushed, rows, going, errors, failed, host_s, key)
        record: dict[str, Any] = {
            "type": kind, "round": key, "nodes": [dev[k] for k in order],
            "unavailable": [dev[k] for k in unavailable]}
        stage = protocol_stage(pushed.contents)
        if stage is not None:
            record["stage"] = stage
        if not going:
            self._reply_all(pushed, answers, errors)
            self._add_phase(kind, {**record, "replied": [], "failed": [], "dropped": [],
                                   "late": [], "examples": {}, "bytes_down": {},
                                   "bytes_up": {}})
            return
        work, examples = self._workload(kind, pushed.contents, rows, going, answers, errors,
                                        host_s, stage)
        samples = t.samples[rows].tolist()
        devices = [dev[k] for k in going]
        decision = Decision(participants={d: int(samples[k]) for d, k in zip(
                                devices, going, strict=True)},
                            variant=0, workload=work, epoch_deadline_s=self._timeout_s,
                            info=self.epoch.info)
        outcome = run.execute(decision, self._name, trains=kind == "train")
        if outcome.counted is not None:
            arrived = set(outcome.counted)
            dropped, late = set(outcome.dropped), set(outcome.late)
            for k in going:
                if dev[k] not in arrived and k not in failed:
                    why = "dropped out (offline or battery)" if dev[k] in dropped else \
                        "late (after the round's timeout)" if dev[k] in late else \
                        "did not arrive"
                    errors[k] = (ErrorCode.REPLY_MESSAGE_UNAVAILABLE,
                                 f"device {dev[k]!r}'s reply {why} in epoch {run.epoch}")
        if kind == "train":
            self.epoch.trained = True
            if self._client_app is None:
                self.epoch.progress = run.advance(decision, outcome)
        self._reply_all(pushed, answers, errors)
        if work.by_device is None:  # (every participant moves the same bytes)
            bytes_down = dict.fromkeys(devices, work.download_bytes)
            bytes_up = dict.fromkeys(devices, work.upload_bytes)
        else:
            moved = [work.bytes_of(d) for d in devices]
            bytes_down = {d: m[0] for d, m in zip(devices, moved, strict=True)}
            bytes_up = {d: m[1] for d, m in zip(devices, moved, strict=True)}
        record.update({
            "start_s": outcome.start_s, "end_s": outcome.end_s,
            "replied": [dev[k] for k in going if k not in errors],
            "failed": [dev[k] for k in going if k in failed],
            "dropped": list(outcome.dropped), "late": list(outcome.late),
            "examples": {dev[k]: n for k, n in examples.items() if k not in errors},
            "bytes_down": bytes_down, "bytes_up": bytes_up})
        if self._host_flops is not None:
            record["host_s"] = {dev[k]: s for k, s in host_s.items()}
        self._add_phase(kind, record)
        if kind == "evaluate" and self._client_app is not None:
            self.epoch.evaluated = self._evaluated(
                [answers[k] for k in going if k in answers and k not in errors])
        elif kind == "train" and self._client_app is not None and self.loss_source == "train":
            got = [answers[k] for k in going if k in answers and k not in errors]
            for reply in got:
                self._train_metrics |= metric_names(reply.content) | set(
                    _legacy_metrics(reply.content))
            trained = self._evaluated(got, legacy=True)
            if trained is not None:  # (SecAgg+: its collect stage's replies carry them)
                self.epoch.trained_metric = trained
        if failed and len(failed) == len(going):
            self._every_call_failed(kind, key, devices, errors, sorted(failed))

    def _add_phase(self, kind: str, record: dict[str, Any]) -> None:
        """Keep the phase's record; the main phase (the round's training, else its first)
        gives the epoch row's counts."""
        log = self.epoch
        log.phases.append(record)
        if log.main is None or (kind == "train" and log.main["type"] != "train") or (
                kind == "train" and not log.main.get("examples") and record.get("examples")):
            log.main = record  # (SecAgg+: its stage whose replies report their examples)

    def _every_call_failed(self, kind: str, key: str | None, devices: list[str],
                           errors: dict[int, tuple[int, str | None]], failed: list[int]
                           ) -> None:
        """Record the round and end the run: no call of the phase succeeded."""
        reason = errors[failed[0]][1]
        where = key or f"epoch {self._run.epoch}"
        self.close_epoch()
        raise RuntimeError(
            f"{self._name}: every ClientApp call of {where}'s {kind} messages failed "
            f"({len(failed)} of {len(devices)}; device {devices[0]!r}: {reason}); the first "
            "traceback of each error is logged (netsim run --debug: every one)")

    def _workload(self, kind: str, contents: list[Any], rows: np.ndarray, going: list[int],
                  answers: dict[int, Any], errors: dict[int, tuple[int, str | None]],
                  host_s: dict[int, float], stage: str | None = None
                  ) -> tuple[Workload, dict[int, int]]:
        """What each going message moves and computes (module docstring), one set of
        figures when all are alike; and each reply's examples (its ``num-examples``)."""
        t, model = self._devices, self._run.world.model
        fps = model.flop_per_sample(0) * KIND_COMPUTE.get(kind, self._eval_fraction)
        if self._uniform is not None:  # (netsim's replies to one content: all alike)
            down_bytes, up_bytes, elements = self._uniform
            return (Workload(float(down_bytes), float(up_bytes), fps,
                             2.0 * elements if kind == "train" else 0.0),
                    {k: facts[2] for k, facts in self._known.items()})
        down_of: dict[int, int] = {}
        down, up, flop, agg, examples = [], [], [], [], {}
        samples_of = t.samples[rows].astype(float).tolist()
        for k in going:
            content = contents[k]
            if id(content) not in down_of:  # (strategies send one content to all)
                down_of[id(content)] = message_bytes(content)
            down.append(float(down_of[id(content)]))
            samples = samples_of[k]
            reply = answers.get(k)
            facts = self._known.get(k)
            own_flop, own_agg = self._protocol_compute(stage, content)
            if reply is None:
                up.append(float(NUMBER_BYTES + len((errors[k][1] or "").encode())))
                agg.append(0.0)
            elif facts is not None:  # (a reply netsim built: its figures noted then)
                up.append(float(facts[0]))
                agg.append(2.0 * facts[1] if kind == "train" else 0.0)
                examples[k] = facts[2]
            else:
                up.append(float(reply_bytes(reply)))
                agg.append(2.0 * array_elements(reply.content) if kind == "train" else 0.0)
                agg[-1] += own_agg
                n = self._examples(reply)
                if n is not None:
                    examples[k] = n
            if self._client_app is None:
                flop.append(samples * fps)
            elif self._host_flops is not None:
                flop.append(host_s.get(k, 0.0) * self._host_flops)
            else:
                flop.append(float(examples.get(k, 0)) * fps)
            if reply is not None and self._host_flops is None:
                flop[-1] += own_flop
        same = len(set(down)) == 1 and len(set(up)) == 1 and len(set(agg)) == 1 and all(
            f == samples_of[k] * fps for f, k in zip(flop, going, strict=True))
        if same:
            return Workload(down[0], up[0], fps, agg[0]), examples
        own = {t.ids[int(rows[k])]: DeviceWork(d, u, f, a)
               for k, d, u, f, a in zip(going, down, up, flop, agg, strict=True)}
        return Workload(0.0, 0.0, fps, 0.0, by_device=own), examples

    def _protocol_compute(self, stage: str | None, content: Any) -> tuple[float, float]:
        """A protocol stage's own compute for one message (``content``: what it carries):
        (the device's FLOP, the aggregator's FLOP for its reply). SecAgg+
        (:data:`SECAGG_MASK_FLOP_PER_ELEMENT` a mask and element): the setup stage's
        ``share_num`` noted; collect_masked_vectors, the device's masks (its private one and
        one per neighbour: ``share_num`` masks) over the update's elements, and the
        aggregator's sum of the masked vector (2 FLOP an element); unmask, the aggregator
        regenerating the node's private mask. Key agreement and secret sharing (setup,
        share_keys) are left out: a few public-key operations a neighbour, not per element.
        Other stages and plain messages: nothing beyond their training (their examples)."""
        if stage is None:
            return 0.0, 0.0
        configs = content.config_records
        rec = configs[SECAGG_CONFIGS] if SECAGG_CONFIGS in configs else {}
        if stage == "secaggplus:setup":
            shares = rec.get(SECAGG_SHARES)
            if isinstance(shares, int):
                self._secagg_shares = shares
            return 0.0, 0.0
        if stage == "secaggplus:collect_masked_vectors":
            elements = array_elements(content)
            self._secagg_elements = elements
            return (float(self._secagg_shares * elements) * SECAGG_MASK_FLOP_PER_ELEMENT,
                    2.0 * elements)
        if stage == "secaggplus:unmask":
            return 0.0, float(self._secagg_elements) * SECAGG_MASK_FLOP_PER_ELEMENT
        return 0.0, 0.0

    def _examples(self, reply: Any) -> int | None:
        """The example count a reply reports: its first metric record's weight key, else a
        legacy reply's (LegacyContext's FitRes and EvaluateRes: a ``num_examples`` metric);
        None: none (a protocol reply, SecAgg+'s stages, which is charged its bytes)."""
        metrics = list(reply.content.metric_records.values())
        value = metrics[0].get(self._weight_key) if metrics else None
        if value is None:
            value = next((rec[LEGACY_EXAMPLES] for rec in metrics if LEGACY_EXAMPLES in rec),
                         None)
        return int(value) if isinstance(value, int | float) else None

    def _answers(self, kind: str, pushed: Pushed, rows: np.ndarray, going: list[int],
                 errors: dict[int, tuple[int, str | None]], failed: set[int],
                 host_s: dict[int, float], key: str | None) -> dict[int, Any]:
        """Each going message's reply: the ClientApp's (real mode; one that raises is an
        error of that client, ``failed``, its seconds in ``host_s``), or netsim's for the
        client (surrogate: what each reply moves and holds noted in ``_known``)."""
        self._known.clear()
        self._uniform = None
        if self._client_app is None:
            return self._surrogate_replies(kind, pushed, rows, going)
        t = self._devices
        out: dict[int, Any] = {}
        stage = protocol_stage(pushed.contents)
        for k in going:
            msg, row = pushed.msgs[k], int(rows[k])
            ctx = self._context(row)
            # its own copy, as a SuperNode delivers it (flwr's Message takes metadata as it
            # is, an argument its typed overloads leave out)
            own = app.Message(content=copy.deepcopy(msg.content),  # type: ignore[call-overload]
                              metadata=copy.copy(msg.metadata))
            self.calls += 1
            t0 = time.perf_counter()
            try:
                reply = self._client_app(message=own, context=ctx)
            except Exception as exc:  # the client's failure, not the run's
                host_s[k] = time.perf_counter() - t0
                errors[k] = (ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                             f"{type(exc).__name__}: {exc}")
                self._failure(k, t.ids[row], kind, key, errors[k][1] or "", exc)
                failed.add(k)
                continue
            host_s[k] = time.perf_counter() - t0
            if kind == "evaluate" and isinstance(reply, app.Message) and not reply.has_error():
                self._metrics_seen |= metric_names(reply.content)
            why = self._bad_reply(kind, reply, t.ids[row], stage)
            if why is not None:
                errors[k] = why
                self._failure(k, t.ids[row], kind, key, why[1] or "", None)
                failed.add(k)
                continue
            out[k] = reply
        for k, (_, reason) in errors.items():
            flower_errors = self.epoch.info.setdefault("flower_errors", {})
            flower_errors[t.ids[rows[k]]] = reason
        return out

    def _bad_reply(self, kind: str, reply: Any, device: str, stage: str | None = None
                   ) -> tuple[int, str | None] | None:
        """Why a ClientApp's reply is an error (None: it is not): an error reply, or a model
        update (a plain train message's reply with arrays) without its example count. A
        reply without one to a protocol stage's message (SecAgg+'s), or without arrays, is
        a protocol reply: charged its bytes, never a failure."""
        if not isinstance(reply, app.Message):
            return (ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                    f"the ClientApp returned {type(reply).__name__}, not a Message")
        if reply.has_error():
            return reply.error.code, reply.error.reason
        if kind == "train" and stage is None and reply.content.array_records \
                and self._examples(reply) is None:
            return (ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                    f"the reply of device {device!r} has no {self._weight_key!r} metric "
                    "(Flower's strategies weight updates by it)")
        return None  # (else one without an example count is a protocol reply: SecAgg+'s)

    def _failure(self, k: int, device: str, kind: str, key: str | None, reason: str,
                 exc: BaseException | None) -> None:
        """Count a failed call; log the first of each distinct error (an exception's type
        and where it was raised; an error reply's reason) as a warning, with its traceback,
        the others at debug level."""
        self.failed_calls += 1
        kind_of = reason if exc is None else _raised_at(exc)
        first = kind_of not in self._errors_seen
        self._errors_seen.add(kind_of)
        LOG.log(logging.WARNING if first else logging.DEBUG,
                "%s: the ClientApp failed on device %r (%s message, %s): %s%s", self._name,
                device, kind, key or f"epoch {self._run.epoch}", reason,
                " (the first of this error; the others are logged at debug level)"
                if first else "", exc_info=exc)

    def report_failures(self) -> None:
        """At the run's end (however it ends): the run's ClientApp calls and failed calls
        handed to its recorder (``runs.client_calls``, ``runs.client_calls_failed``: the sums
        of its phases' calls, ``nodes`` less ``unavailable``, and of their ``failed``), and a
        warning counting the failed ones (of how many, and their distinct errors), so that a
        run whose clients failed is not taken for one whose clients all trained
        (``epochs.failed`` has them per round)."""
        recorder = self._run.recorder
        recorder.client_calls, recorder.client_calls_failed = self.calls, self.failed_calls
        if self.failed_calls:
            LOG.warning("%s: %d of %d ClientApp calls failed in run %s (%d distinct "
                        "error%s; epochs.failed and epochs.phases say which, per round)",
                        self._name, self.failed_calls, self.calls, self._run.recorder.run_id,
                        len(self._errors_seen), "" if len(self._errors_seen) == 1 else "s")

    def _surrogate_replies(self, kind: str, pushed: Pushed, rows: np.ndarray,
                           going: list[int]) -> dict[int, Any]:
        """netsim's replies for the clients: a training reply carries the arrays it was sent
        (the model's size; its own ArrayRecord, since strategies pop what they aggregate, of
        arrays decoded once per phase: :class:`DecodedArray`) with its samples as the example
        count and the loss as ``train_loss``; an evaluate reply the progress model's loss.

        Each reply's records are shallow copies (what Flower's public ``copy`` makes, which
        validates nothing again) of records built and validated once per phase
        (:class:`_ReplyForm`): only the example count is set per reply. Where every reply
        answers one content, the phase's figures are noted once (``_uniform``)."""
        samples = self._devices.samples[rows].tolist()
        loss = self._current_loss()
        forms: dict[int, _ReplyForm] = {}  # per content sent (strategies send one to all)
        out: dict[int, Any] = {}
        known = self._known
        loss_key = "train_loss" if kind == "train" else self._loss_metric
        replies, loss_bytes = _Replies(), value_bytes(loss)
        msgs, metas, contents = pushed.msgs, pushed.metas, pushed.contents
        for k in going:
            sent = contents[k]
            n = int(samples[k])
            form = forms.get(id(sent))
            if form is None:
                form = _ReplyForm(sent if kind == "train" else None, self._weight_key,
                                  loss_key, loss)
                forms[id(sent)] = form
            nbytes, elements = form.sizes
            # (the example count: an int, NUMBER_BYTES on the wire: records.value_bytes)
            known[k] = (nbytes + NUMBER_BYTES + loss_bytes, elements, n)
            out[k] = replies(form.content(n), msgs[k], metas[k])
        if len(forms) == 1:  # (every reply's figures are the first's)
            up, elements, _ = known[going[0]]
            self._uniform = (message_bytes(contents[going[0]]), up, elements)
        return out

    def _current_loss(self) -> float:
        step = self.epoch.progress
        return float(step.loss) if step is not None else float(self._run.history[-1])

    def _reply_all(self, pushed: Pushed, answers: dict[int, Any],
                   errors: dict[int, tuple[int, str | None]]) -> None:
        """Keep each message's reply for :meth:`pull_messages`:
        its error reply, else its answer (a ClientApp's replies to the message it was sent;
        netsim's were built so)."""
        replies, built, msgs = self._replies, self._client_app is None, pushed.msgs
        for k, message_id in enumerate(pushed.ids):
            if k in errors:
                code, reason = errors[k]
                reply = app.Message(app.Error(code=code, reason=reason), reply_to=msgs[k])
            else:
                reply = answers[k]
                if not built:
                    reply.metadata.__dict__["_reply_to_message_id"] = message_id
            replies[message_id] = reply

    def _evaluated(self, replies: list[Any], legacy: bool = False) -> EpochProgress | None:
        """The example-weighted means of the loss metric and of ``accuracy`` over evaluate
        (or training) replies (None: no reply carries the loss metric); ``legacy``: a legacy
        reply's metrics count too (a FitRes's, kept in a ConfigRecord: :func:`_legacy_metrics`)."""
        loss = self._mean_metric(replies, self._loss_metric, legacy)
        if loss is None:
            return None
        return EpochProgress(loss=loss, accuracy=self._mean_metric(replies, "accuracy", legacy))

    def _mean_metric(self, replies: list[Any], name: str, legacy: bool = False
                     ) -> float | None:
        """The example-weighted mean of metric ``name`` over replies (None: none has it):
        each reply's first metric record holding ``name`` (``legacy``: or its legacy metrics'
        ConfigRecord), weighted by its example count (:meth:`_examples`: a legacy reply keeps
        it in a record of its own)."""
        total = weight = 0.0
        for r in replies:
            records: list[Any] = list(r.content.metric_records.values())
            if legacy:
                records.append(_legacy_metrics(r.content))
            for rec in records:
                if name in rec:
                    n = rec[self._weight_key] if self._weight_key in rec else \
                        self._examples(r)
                    if isinstance(n, int | float):
                        total += float(n) * float(rec[name])
                        weight += float(n)
                    break
        return total / weight if weight > 0 else None

    def _context(self, row: int) -> Any:
        """The node's Context, kept across rounds (its ``state`` persists): node_config carries
        Flower's ``partition-id`` and ``num-partitions`` and netsim's ``device-id``."""
        ctx = self._contexts.get(row)
        if ctx is None:
            ctx = app.Context(
                run_id=self.flower_run_id, node_id=int(self._node_ids[row]),
                node_config={"partition-id": self._partition.get(row, -1),
                             "num-partitions": len(self._partition),
                             "device-id": self._devices.ids[row]},
                state=app.RecordDict(), run_config=RunConfig(self._run_config))
            self._contexts[row] = ctx
        return ctx


#: The fields of a Flower 1.x record's ``__dict__`` (its ``TypedDict``'s), as its public
#: ``copy`` makes them: the key and value checks, and the dict of its entries.
RECORD_FIELDS = ("_check_key_fn", "_check_value_fn", "_data")


def _shell(record: Any) -> tuple[type, dict[str, Any], dict[str, Any]]:
    """A Flower record's class, its ``__dict__`` less its entries, and its entries: what
    :func:`_copied` needs to make what the record's ``copy`` makes (:data:`RECORD_STORAGE`)."""
    fields = record.__dict__
    return type(record), {f: fields[f] for f in RECORD_FIELDS[:2]}, fields["_data"]


def _copied(cls: Any, state: dict[str, Any], data: dict[str, Any]) -> Any:
    """A record of class ``cls`` with ``state`` (:func:`_shell`) holding ``data`` (its own
    dict): what Flower 1.x's ``TypedDict.copy`` makes, built as it builds it."""
    new = cls.__new__(cls)
    fields = new.__dict__
    fields.update(state)
    fields["_data"] = data
    return new


def _flower_major() -> int:
    """The installed Flower's major version (the layouts probed below are 1.x's)."""
    return int(importlib.metadata.version("flwr").split(".")[0])


def _records_laid_out_as_known() -> bool:
    """Whether this Flower's records keep their entries as 1.x's do (checked once: a major
    version 1; a copied RecordDict, ArrayRecord and MetricRecord whose ``__dict__`` holds
    exactly :data:`RECORD_FIELDS`, whose ``_data`` holds their entries, is their own, and is
    what their public reads see; and :func:`_copied` making what ``copy`` makes)."""
    try:
        if _flower_major() != 1:
            return False
        metrics = app.MetricRecord({"n": 1})
        arrays = app.ArrayRecord([np.zeros(2, dtype=np.float32)])
        content = app.RecordDict({"a": arrays, "m": metrics})
        copies = [content.copy(), arrays.copy(), metrics.copy()]
        if any(tuple(c.__dict__) != RECORD_FIELDS for c in copies):
            return False
        copied, _, counts = copies
        data, values = copied.__dict__.get("_data"), counts.__dict__.get("_data")
        if not isinstance(data, dict) or not isinstance(values, dict) \
                or data is content.__dict__.get("_data") \
                or values is metrics.__dict__.get("_data"):
            return False
        values["n"] = 2
        data["m"] = counts
        if not (metrics["n"] == 1 and counts["n"] == 2 and content["m"] is metrics
                and copied["m"] is counts and list(copied.metric_records) == ["m"]
                and list(copied.array_records) == ["a"]):
            return False
        for record in (content, arrays, metrics):
            cls, state, entries = _shell(record)
            made, flowers = _copied(cls, state, entries.copy()), record.copy()
            if type(made) is not type(flowers) or list(made.__dict__) != list(flowers.__dict__) \
                    or any(made.__dict__[f] is not flowers.__dict__[f] for f in RECORD_FIELDS[:2]) \
                    or made.__dict__["_data"] != flowers.__dict__["_data"]:
                return False
        return True
    except Exception:  # noqa: BLE001 (any other layout: the public path)
        return False


#: A Flower 1.x Metadata's fields (its ``__dict__``) and a Message's.
METADATA_FIELDS = frozenset({
    "_run_id", "_message_id", "_src_node_id", "_dst_node_id", "_src_task_id", "_dst_task_id",
    "_reply_to_message_id", "_group_id", "_created_at", "_ttl", "_message_type",
    "_delivered_at"})
MESSAGE_FIELDS = frozenset({"_metadata", "_content", "_error"})
#: The fields a reply takes from its message as they are (its phase's first reply's, checked
#: per message: :class:`_Replies`), and what reads them from a message's metadata fields.
_SHARED_FIELDS = ("_run_id", "_group_id", "_message_type", "_src_task_id", "_dst_task_id")
_shared_of = operator.itemgetter(*_SHARED_FIELDS)


def _messages_laid_out_as_known() -> bool:
    """Whether this Flower's messages hold what 1.x's do (checked once: a major version 1,
    and a reply's Message and Metadata whose ``__dict__`` holds exactly
    :data:`MESSAGE_FIELDS` and :data:`METADATA_FIELDS`)."""
    try:
        if _flower_major() != 1:
            return False
        msg = app.Message(content=app.RecordDict(),  # type: ignore[call-overload]
                          metadata=app.Metadata(
                              run_id=1, message_id="1", src_node_id=1, dst_node_id=2,
                              reply_to_message_id="", group_id="", created_at=time.time(),
                              ttl=3600.0, message_type="train"))
        reply = app.Message(app.RecordDict(), reply_to=msg)
        return (set(reply.__dict__) == MESSAGE_FIELDS
                and set(reply.metadata.__dict__) == METADATA_FIELDS)
    except Exception:  # noqa: BLE001 (any other layout: the public path)
        return False


#: Whether a phase's surrogate replies after its first are made from the first (checked
#: against Flower's own reply to that message, :class:`_Replies`) rather than by Flower's
#: reply constructor, which checks its arguments and builds metadata each time (half a
#: reply's cost); False: Flower's constructor for every reply. The same tables either way.
MESSAGE_LAYOUT = _messages_laid_out_as_known()


class _Replies:
    """Flower reply messages to one phase's messages, all stamped at its first reply's
    creation time (Flower stamps each; a reply's TTL is what its message has left then, as
    Flower's). The first is Flower's own ``Message(content, reply_to=msg)``; the others are
    copies of its metadata with what differs per message (the node ids swapped, the id
    replied to, the TTL left) where :data:`MESSAGE_LAYOUT` holds, the first's made so equals
    Flower's, and the message shares the first's run, group, type and tasks; else Flower's
    constructor."""

    def __init__(self) -> None:
        self._shared: tuple[Any, ...] | None = None  # (the first message's shared fields)
        self._base: dict[str, Any] = {}  # (the first reply's metadata fields)
        self._copies = MESSAGE_LAYOUT

    def __call__(self, content: Any, msg: Any, metadata: Any = None) -> Any:
        """The reply carrying ``content`` to ``msg`` (``metadata``: its metadata, read
        already)."""
        sent = (msg.metadata if metadata is None else metadata).__dict__
        if self._shared is None:
            reply = app.Message(content, reply_to=msg)
            if self._copies:
                self._shared, self._base = _shared_of(sent), reply.metadata.__dict__
                made = self._copy(content, sent)
                self._copies = (made.__dict__.keys() == reply.__dict__.keys()
                                and made.metadata.__dict__ == reply.metadata.__dict__)
            return reply
        if self._copies and _shared_of(sent) == self._shared:
            return self._copy(content, sent)
        return app.Message(content, reply_to=msg)

    def _copy(self, content: Any, sent: dict[str, Any]) -> Any:
        base = self._base
        meta = object.__new__(app.Metadata)
        meta.__dict__.update(base, _src_node_id=sent["_dst_node_id"],
                             _dst_node_id=sent["_src_node_id"],
                             _reply_to_message_id=sent["_message_id"],
                             _ttl=sent["_created_at"] + sent["_ttl"] - base["_created_at"])
        reply = object.__new__(app.Message)
        reply.__dict__.update(_metadata=meta, _content=content, _error=None)
        return reply


#: Whether surrogate replies copy their records as Flower's ``copy`` does, in one pass
#: (:func:`_copied`), and fill their storage directly (values of the types the records were
#: validated with once per phase), skipping the per-value validation of Flower's
#: ``__setitem__`` (a third of a reply's cost); False: the public path. The tables are the
#: same either way (tests/test_flower.py).
RECORD_STORAGE = _records_laid_out_as_known()


class _ReplyForm:
    """The records of a phase's surrogate replies to one content sent, built once: the
    arrays it carries (training: :class:`DecodedArray` of the content's, one ArrayRecord per
    record) and the metrics (``weight_key``: the example count, set per reply; ``loss_key``:
    ``loss``). :meth:`content` gives each reply its own RecordDict, ArrayRecords and
    MetricRecord (strategies may change what they get), as shallow copies."""

    def __init__(self, sent: Any, weight_key: str, loss_key: str, loss: float) -> None:
        self.metrics = app.MetricRecord({weight_key: 0, loss_key: loss})
        self.weight_key = weight_key if weight_key != loss_key else None
        form = app.RecordDict()
        every: list[Array] = []
        if sent is not None:
            for key, rec in sent.array_records.items():
                record = app.ArrayRecord()  # (its constructor would copy the arrays)
                for name, a in rec.items():
                    record[name] = DecodedArray.of(a)
                    every.append(record[name])
                form[key] = record
        form["metrics"] = self.metrics
        self.form = form
        self.array_keys = [key for key, rec in form.items() if isinstance(rec, app.ArrayRecord)]
        self.sizes = (sum(array_bytes(a) for a in every),
                      sum(int(math.prod(a.shape)) for a in every))
        """The arrays' bytes and elements (:mod:`.records`' counts)."""
        self._shells = None
        if RECORD_STORAGE:  # (the records and the int were validated as the form's)
            self._shells = (_shell(form), [(key, *_shell(form[key])) for key in self.array_keys],
                            _shell(self.metrics))

    def content(self, n: int) -> Any:
        """A reply's own content: the arrays, ``n`` examples, the loss."""
        if self._shells is not None:
            (cls, state, data), arrays, (m_cls, m_state, m_data) = self._shells
            data = data.copy()
            for key, a_cls, a_state, a_data in arrays:
                data[key] = _copied(a_cls, a_state, a_data.copy())
            values = m_data.copy()
            if self.weight_key is not None:
                values[self.weight_key] = n
            data["metrics"] = _copied(m_cls, m_state, values)
            return _copied(cls, state, data)
        content = self.form.copy()
        metrics = self.metrics.copy()
        for key in self.array_keys:
            content[key] = self.form[key].copy()
        if self.weight_key is not None:  # (None: it is the loss's key, and the loss wins)
            metrics[self.weight_key] = n
        content["metrics"] = metrics
        return content


def _legacy_metrics(content: Any) -> dict[str, float]:
    """The numeric metrics of a legacy reply's ConfigRecords named ``*.metrics`` (Flower's
    compat layer keeps a FitRes's metrics in ``fitres.metrics``, a ConfigRecord)."""
    return {name: float(value) for key, rec in content.config_records.items()
            if key.endswith(".metrics") for name, value in rec.items()
            if isinstance(value, int | float) and not isinstance(value, bool)}


def _raised_at(exc: BaseException) -> str:
    """An exception's type and the place it was raised (file:line of its innermost frame):
    the same error whatever its message says of the data."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""
    return f"{type(exc).__name__}@{where}"
