"""Recording a run into the three result tables (column names are part of the contract).

- runs: run_id, scenario, policy, seed, status, error, epochs, time_s, energy_j, final_loss,
  target_reached, wall_s  (+ policy_params, target_loss, deadline_s, initial_loss,
  final_accuracy, loss_source: where the training curve comes from; planned_epochs,
  planned_energy_j, planned_time_s: the first decision's plan of a planning policy, NaN for
  others, so plan and outcome sit side by side; plan_status, plan_gap: what an exact
  reference proved about that plan, "optimal" or "time_limit" with its relative gap;
  client_calls, client_calls_failed: a driven run's ClientApp calls (a Flower app's, real
  mode) and those that failed (raised, an error reply, an update without its example count),
  over the whole run, 0 for netsim's own policies and Flower's surrogate mode)
- epochs: run_id, epoch, start_s, end_s, energy_compute_j, energy_comm_j, energy_idle_j, loss,
  variant, participants, samples  (+ variant_name, accuracy, participant_ids, info; the
  changing world's (docs/dynamics.md) dropped, late, energy_wasted_j, energy_sleep_j, and
  dropped_ids, late_ids; airtime_by_medium_s: JSON {medium id: air time (s) used in the
  epoch} over the media the epoch used (a medium left out used none; "{}" without media,
  docs/wireless.md); updates_aggregated, staleness_mean,
  staleness_max, started, in_flight: asynchronous aggregation (docs/async.md), for a
  synchronous epoch the participants, 0, 0, the participants, 0; an asynchronous epoch's
  participants are the devices its decision started and its ``late`` the updates discarded
  as too stale; updates_ids, updates_samples, updates_staleness: each aggregated update's
  device, samples and staleness in arrival order, empty lists for a synchronous epoch;
  failed, phases: a driven run's (a Flower round, docs/flower.md) client calls that failed
  and its phases as JSON [{type, round, nodes, replied, failed, dropped, late, ...}], 0 and
  "[]" for netsim's own epochs but hierarchical ones, whose phases give each its tier;
  bytes_backhaul, energy_backhaul_j, energy_edges_j, energy_cloud_j, edge_rounds, edges,
  edge_staleness_mean, edge_staleness_max: the edge tier (docs/hierarchical.md; a star
  epoch's bytes and energy on the backhaul, 0 without edges, 0 edge rounds); ``samples`` counts the updates that counted (a driven
  round: the examples its replies report); when nobody could
  train and the world waited for someone to come online, that wait's energy is in the next
  epoch's, whose ``start_s`` is after the wait)
- devices: run_id, device, energy_compute_j, energy_comm_j, energy_idle_j, busy_s, bytes_sent,
  bytes_received  (+ energy_radio_j: the radios' base power and tails, a part of
  energy_comm_j; airtime_s: air time the device used on shared media (docs/wireless.md);
  device_class, network_node; dropouts, energy_wasted_j, energy_sleep_j,
  online_s, battery_end_j (NaN: mains powered), online_intervals_s: the device's online
  intervals as a flat list [start0, end0, start1, end1, ...] (s); label_counts: the labels
  the device holds, one count per class, where the data is skewed or trained for real (the
  real backends' shards; the surrogate's drawn histograms, rounded), absent for the
  surrogate's IID data; phase_times_s, where the scenario says ``record_phase_times``: per
  static star epoch the device took part in, seven numbers in a flat list: the epoch, its
  download start and end, training start and end, upload start and end (s))

Energy categories: compute, comm, idle and sleep; their sum is ``runs.energy_j``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from netsim.dynamics.buffered import Update

RUN_COLUMNS = ["run_id", "scenario", "policy", "seed", "status", "error", "epochs", "time_s",
               "energy_j", "final_loss", "target_reached", "wall_s"]
EPOCH_COLUMNS = ["run_id", "epoch", "start_s", "end_s", "energy_compute_j", "energy_comm_j",
                 "energy_idle_j", "loss", "variant", "participants", "samples"]
DEVICE_COLUMNS = ["run_id", "device", "energy_compute_j", "energy_comm_j", "energy_idle_j",
                  "busy_s", "bytes_sent", "bytes_received"]
DYNAMIC_EPOCH_COLUMNS = ["dropped", "late", "energy_wasted_j", "energy_sleep_j"]
DYNAMIC_DEVICE_COLUMNS = ["dropouts", "energy_wasted_j", "energy_sleep_j", "online_s",
                          "battery_end_j"]
TIER_EPOCH_COLUMNS = ["bytes_backhaul", "energy_backhaul_j", "energy_edges_j", "energy_cloud_j",
                      "edge_rounds", "edges", "edge_staleness_mean", "edge_staleness_max"]
ASYNC_EPOCH_COLUMNS = ["updates_aggregated", "staleness_mean", "staleness_max", "started",
                       "in_flight", "updates_ids", "updates_samples", "updates_staleness"]
STATUSES = ("ok", "target_missed", "deadline", "oom", "failed", "completed")
#: The epoch columns a driver may set itself (``Run.close_epoch(columns=...)``): what it knows
#: better than the merged phases (a Flower round: the replies its strategy aggregated, their
#: examples, the failed calls, each phase of the round).
DRIVER_COLUMNS = frozenset({"samples", "updates_aggregated", "dropped", "late", "dropped_ids",
                            "late_ids", "failed", "phases"})
PLAN_KEYS = ("planned_epochs", "planned_energy_j", "planned_time_s", "plan_gap")
_INFO_JSON = json.JSONEncoder(sort_keys=True, default=str)
"""``json.dumps(info, sort_keys=True, default=str)``'s encoder, made once (dumps makes one
per call when given options)."""


class Recorder:
    """Collects one run's rows; :meth:`tables` returns them as DataFrames."""

    def __init__(self, run_id: str, scenario: str, policy: str, seed: int,
                 policy_params: dict[str, Any], target_loss: float, deadline_s: float) -> None:
        self.run_id, self.scenario, self.policy, self.seed = run_id, scenario, policy, seed
        self.policy_params = json.dumps(policy_params, sort_keys=True)
        self.target_loss, self.deadline_s = target_loss, deadline_s
        self.initial_loss = math.nan
        self.label_counts: Any = None
        """Each device's label histogram (rows by device) where the backend holds them."""
        self._phase_times: dict[int, list[float]] | None = None
        """Per device row, the flat phase times of the epochs it took part in (where the
        scenario keeps them: ``record_phase_times``)."""
        self.loss_source = ""
        self.energy_j = 0.0
        self._epochs: list[dict[str, Any]] = []
        self._run: dict[str, Any] = {}
        self._devices: pd.DataFrame | None = None
        self._device_columns: dict[str, Any] | None = None  # (finish: the devices table's)
        self._node_ids: list[str] = []
        self._row: dict[str, int] = {}
        self._classes: list[str | None] = []
        self._n_devices = 0
        self._first_plan: dict[str, float] = {}
        self._plan_status = ""
        self._dropouts: dict[int, int] = {}
        self._wasted: dict[int, float] = {}
        self._asynchronous = False
        self.client_calls = 0
        """A driven run's ClientApp calls (``runs.client_calls``; the driver counts them)."""
        self.client_calls_failed = 0
        """Those of them that failed (``runs.client_calls_failed``)."""

    @property
    def last_accuracy(self) -> float | None:
        """The latest recorded epoch's accuracy (None if none or not measured)."""
        if not self._epochs or math.isnan(self._epochs[-1]["accuracy"]):
            return None
        return float(self._epochs[-1]["accuracy"])

    def start(self, node_ids: list[str], devices) -> None:
        """The run's nodes (devices first, then network nodes)."""
        self._node_ids = list(node_ids)
        self._row = {d: i for i, d in enumerate(self._node_ids)}
        self._classes = list(devices.device_class) + [None] * (len(node_ids) - devices.n)
        self._n_devices = devices.n

    def epoch(self, epoch: int, outcome, step, decision, model,
              airtime_by_medium: dict[str, float] | None = None,
              columns: dict[str, Any] | None = None) -> None:
        """Record one finished epoch; ``airtime_by_medium``: the air time (s) each shared
        medium was used in it, by medium id (media left out used none, and the table leaves
        them out too: an epoch's record follows what it used, not the fleet's cells);
        ``columns``: a driver's own values of :data:`DRIVER_COLUMNS`."""
        unknown = set(columns or {}) - DRIVER_COLUMNS
        if unknown:
            raise ValueError(f"epoch columns {sorted(unknown)}: a driver sets only "
                             f"{sorted(DRIVER_COLUMNS)}")
        e = outcome.energy
        self._asynchronous |= outcome.updates is not None or outcome.started is not None
        compute, comm, idle = e.compute_j, e.communication_j, e.idle_j
        sleep = e.sleep_j
        self.energy_j += compute + comm + idle + sleep
        ids = list(decision.participants) + [d for c in decision.clusters for d in c.devices]
        samples = sum(decision.participants.values()) + sum(c.samples for c in decision.clusters)
        if outcome.counted is not None:
            samples = sum(outcome.counted.values())
        tiers = outcome.tiers
        if tiers is not None:
            samples = sum(tiers.counted.values())
        for row, joules in outcome.wasted_j_by_row.items():
            self._wasted[row] = self._wasted.get(row, 0.0) + joules
        if outcome.phase_times is not None:
            kept = self._phase_times if self._phase_times is not None else {}
            self._phase_times = kept
            rows, times = outcome.phase_times
            for row, (d0, d1, u0, u1) in zip(rows.tolist(), times.tolist(), strict=True):
                kept.setdefault(row, []).extend((float(epoch), d0, d1, d1, u0, u0, u1))
        for dev in outcome.dropped:
            row = self._row[dev]
            self._dropouts[row] = self._dropouts.get(row, 0) + 1
        if not self._epochs:
            self._first_plan = {k: float(decision.info[k]) for k in PLAN_KEYS
                                if isinstance(decision.info.get(k), int | float)}
            self._plan_status = str(decision.info.get("plan_status", ""))
        self._epochs.append({
            "run_id": self.run_id, "epoch": epoch, "start_s": outcome.start_s,
            "end_s": outcome.end_s, "energy_compute_j": compute, "energy_comm_j": comm,
            "energy_idle_j": idle, "loss": float(step.loss), "variant": int(decision.variant),
            "participants": len(ids), "samples": int(samples),
            "variant_name": model.variants[decision.variant].name,
            "accuracy": math.nan if step.accuracy is None else float(step.accuracy),
            "participant_ids": ids,
            "info": _INFO_JSON.encode(dict(decision.info)),
            "dropped": len(outcome.dropped), "late": len(outcome.late),
            "energy_wasted_j": outcome.wasted_j, "energy_sleep_j": sleep,
            "dropped_ids": list(outcome.dropped), "late_ids": list(outcome.late),
            "airtime_by_medium_s": dict(airtime_by_medium or {}),
            **_async_columns(outcome, len(ids)), "failed": 0,
            "phases": json.dumps(list(outcome.phases)) if outcome.phases else "[]",
            **_tier_columns(outcome), **(columns or {}),
        })

    def finish(self, status: str, error: str, world, wall_s: float) -> None:
        """Close the run: totals per device and the run row."""
        last = self._epochs[-1] if self._epochs else None
        final_loss = last["loss"] if last else self.initial_loss
        time_s = last["end_s"] if last else 0.0
        reached = bool(last is not None and final_loss <= self.target_loss
                       and time_s <= self.deadline_s)
        if world is not None:
            snap = world.meter.snapshot(world.now_s)
            net = world.network
            n = len(self._node_ids)
            nd = self._n_devices
            battery = np.full(n, np.nan)
            battery[:nd] = world.battery_left_j(world.now_s)
            online = np.full(n, world.now_s)
            intervals: list[list[float]] = [[0.0, float(world.now_s)]] * n
            timeline = world.dynamics.timeline
            if world.tracks_online:
                online[:nd] = timeline.online_time_s(world.now_s)
                intervals = timeline.intervals_s(world.now_s) + intervals[nd:]
            self._device_columns = {  # (the table itself is built when asked for: by then a
                # large world has been freed, netsim.runloop.run)
                "run_id": [self.run_id] * n, "device": self._node_ids,
                "energy_compute_j": snap.compute_j, "energy_comm_j": snap.communication_j,
                "energy_idle_j": snap.idle_j, "busy_s": snap.busy_s,
                "bytes_sent": net.bytes_sent, "bytes_received": net.bytes_received,
                "energy_radio_j": snap.radio_j, "airtime_s": net.ledger.airtime_s,
                "device_class": self._classes,
                "network_node": np.arange(n) >= self._n_devices,
                "dropouts": _filled(n, self._dropouts, 0),
                "energy_wasted_j": _filled(n, self._wasted, 0.0),
                "energy_sleep_j": snap.sleep_j, "online_s": online,
                "battery_end_j": battery, "online_intervals_s": intervals,
            }
            if self._phase_times is not None:  # (record_phase_times: what each one did)
                kept = self._phase_times
                self._device_columns["phase_times_s"] = [kept.get(i, []) for i in range(n)]
            counts = self.label_counts
            if counts is not None:  # skewed or real data: what each device held
                rounded = np.rint(np.asarray(counts, dtype=float)).astype(np.int64).tolist()
                empty = [0] * (len(rounded[0]) if rounded else 0)
                self._device_columns["label_counts"] = (
                    rounded + [empty] * (n - len(rounded)))
            if self._asynchronous and self._epochs:
                # an asynchronous epoch is charged the bits sent in it; what the jobs cut at
                # the stop book then (their radios' periods and tails) goes to the last epoch,
                # so the epochs still sum to the run's energy
                self._epochs[-1]["energy_comm_j"] += snap.total_j - self.energy_j
            self.energy_j = snap.total_j
        self._run = {
            "run_id": self.run_id, "scenario": self.scenario, "policy": self.policy,
            "seed": self.seed, "status": status, "error": error, "epochs": len(self._epochs),
            "time_s": float(time_s), "energy_j": float(self.energy_j),
            "final_loss": float(final_loss), "target_reached": reached, "wall_s": wall_s,
            "policy_params": self.policy_params, "target_loss": self.target_loss,
            "deadline_s": self.deadline_s, "initial_loss": float(self.initial_loss),
            "final_accuracy": last["accuracy"] if last else math.nan,
            "loss_source": self.loss_source,
            **{k: self._first_plan.get(k, math.nan) for k in PLAN_KEYS},
            "plan_status": self._plan_status,
            "client_calls": int(self.client_calls),
            "client_calls_failed": int(self.client_calls_failed),
        }

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """(runs, epochs, devices) DataFrames of this run."""
        runs = pd.DataFrame([self._run])
        epochs = pd.DataFrame([{**row, "airtime_by_medium_s": json.dumps(
            row["airtime_by_medium_s"], sort_keys=True) if row["airtime_by_medium_s"] else "{}"}
            for row in self._epochs]) if self._epochs else _empty_epochs()
        if self._device_columns is not None:
            self._devices = pd.DataFrame(self._device_columns)
            self._device_columns = None
        devices = self._devices if self._devices is not None else pd.DataFrame(columns=DEVICE_COLUMNS)
        return runs, epochs, devices


def _async_columns(outcome, participants: int) -> dict[str, Any]:
    """updates_aggregated, staleness_mean, staleness_max, started, in_flight of an epoch
    (docs/async.md); a synchronous epoch's: the participants, 0, 0, the participants, 0."""
    updates = outcome.updates
    if outcome.tiers is not None:  # the cloud's updates are the edges' models
        updates = tuple(Update(e.edge, e.samples, e.staleness)
                        for e in outcome.tiers.edge_updates)
        stale = [u.staleness for u in updates]
        return {"updates_aggregated": len(updates),
                "staleness_mean": float(np.mean(stale)) if stale else math.nan,
                "staleness_max": int(max(stale, default=0)),
                "started": participants if outcome.started is None else int(outcome.started),
                "in_flight": int(outcome.in_flight), "updates_ids": [u.device for u in updates],
                "updates_samples": [int(u.samples) for u in updates],
                "updates_staleness": stale}
    if updates is None:
        return {"updates_aggregated": participants, "staleness_mean": 0.0, "staleness_max": 0,
                "started": participants, "in_flight": 0, "updates_ids": [],
                "updates_samples": [], "updates_staleness": []}
    stale = [u.staleness for u in updates]
    return {"updates_aggregated": len(updates),  # (integers: their sum exact, as numpy's)
            "staleness_mean": sum(stale) / len(stale) if stale else math.nan,
            "staleness_max": int(max(stale, default=0)), "started": int(outcome.started),
            "in_flight": int(outcome.in_flight), "updates_ids": [u.device for u in updates],
            "updates_samples": [int(u.samples) for u in updates], "updates_staleness": stale}


def _tier_columns(outcome) -> dict[str, Any]:
    """bytes_backhaul, energy_backhaul_j, energy_edges_j, energy_cloud_j, edge_rounds, edges,
    edge_staleness_mean, edge_staleness_max of an epoch (docs/hierarchical.md); a star epoch's:
    its bytes and energy on the backhaul (0 without edges), 0 edge rounds and edges, 0, 0."""
    tiers = outcome.tiers
    out = {"bytes_backhaul": float(outcome.bytes_backhaul),
           "energy_backhaul_j": float(outcome.energy_backhaul_j),
           "energy_edges_j": float(outcome.energy_edges_j),
           "energy_cloud_j": float(outcome.energy_cloud_j), "edge_rounds": 0, "edges": 0,
           "edge_staleness_mean": 0.0, "edge_staleness_max": 0}
    if tiers is not None:
        stale = tiers.staleness()
        out.update({"edge_rounds": int(tiers.edge_rounds), "edges": len(tiers.edge_updates),
                    "edge_staleness_mean": float(np.mean(stale)) if stale else math.nan,
                    "edge_staleness_max": int(max(stale, default=0))})
    return out


def _filled(n: int, values: dict[int, Any], default: int | float) -> np.ndarray:
    """An array of ``n`` entries: ``values`` at their rows, ``default`` elsewhere."""
    out = np.full(n, default)
    if values:
        out[np.fromiter(values, dtype=np.intp, count=len(values))] = list(values.values())
    return out


def _empty_epochs() -> pd.DataFrame:
    cols = EPOCH_COLUMNS + ["variant_name", "accuracy", "participant_ids", "info"] \
        + DYNAMIC_EPOCH_COLUMNS + ["dropped_ids", "late_ids", "airtime_by_medium_s"] \
        + ASYNC_EPOCH_COLUMNS + ["failed", "phases"] + TIER_EPOCH_COLUMNS
    numeric = ({c for c in cols if c.endswith(("_s", "_j"))} - {"airtime_by_medium_s"}) \
        | {"staleness_mean", "edge_staleness_mean", "bytes_backhaul"}
    return pd.DataFrame({c: pd.Series(dtype="float64" if c in numeric or c in
                                      {"loss", "accuracy"} else "object") for c in cols})
