"""Running one sweep task, in whichever process or Dask worker it lands on.

A run that raises (a policy bug, an infeasible scenario) becomes a ``failed`` run with its error,
stored like any other, so the sweep goes on and a resumed sweep does not retry it (unless asked).
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from netsim.results.recorder import Recorder
from netsim.results.store import write_run
from netsim.sweep.plan import RunTask

Tables = tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]


@dataclass(frozen=True)
class RunOutcome:
    """What a worker reports back: the run's id, status, error, wall time (s), maybe its tables."""

    run_id: str
    status: str
    error: str
    wall_s: float
    tables: Tables | None = None


def failed_tables(task: RunTask, error: str, wall_s: float) -> Tables:
    """The tables of a run that raised before or outside the engine's own failure handling."""
    training = task.scenario.get("training") or {}
    rec = Recorder(task.run_id, str(task.scenario.get("name", "scenario")), task.policy,
                   task.seed, dict(task.params), _number(training.get("target_loss")),
                   _number(training.get("deadline_s")))
    rec.finish("failed", error, None, wall_s)
    return rec.tables()


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def execute(task: RunTask, out: str | None) -> RunOutcome:
    """Simulate ``task``; write its tables under ``out`` (atomically), or return them if None.

    Never raises for a failure of the run itself: that is recorded as status ``failed``.
    """
    from netsim.api import simulate

    start = time.perf_counter()
    try:
        result = simulate(task.scenario, policy=task.policy, seed=task.seed, params=task.params)
        tables: Tables = (result.runs, result.epochs, result.devices)
        got = str(result.runs["run_id"].iloc[0])
        if got != task.run_id:
            raise RuntimeError(f"run id mismatch: planned {task.run_id}, simulated {got} "
                               "(the scenario or policy resolved differently in the worker)")
    except Exception as exc:  # recorded, never raised: the sweep goes on
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)}"
        tables = failed_tables(task, error, time.perf_counter() - start)
    run = tables[0].iloc[0]
    outcome = RunOutcome(task.run_id, str(run["status"]), str(run["error"] or ""),
                         float(run["wall_s"]))
    if out is None:
        return RunOutcome(outcome.run_id, outcome.status, outcome.error, outcome.wall_s, tables)
    write_run(Path(out), *tables)
    return outcome


def init_worker(main_pid: int) -> None:
    """Pool-worker set-up: leave Ctrl-C to the main process, and exit if it dies (SIGKILL).

    A watcher thread ends this worker within 0.2 s once the main process is gone, so a killed
    sweep leaves no orphan computing (and writing) runs behind.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.2)
            try:
                os.kill(main_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="netsim-orphan-watch", daemon=True).start()
