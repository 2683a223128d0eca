"""Running a sweep: skip finished runs, fan the rest out, record every outcome, summarise.

Runs go to a local process pool (``workers`` processes; 1 runs them in this process) or, given a
scheduler address, to a Dask distributed cluster (:mod:`netsim.sweep.dask_runner`). Both store
the same tables. Each run is written atomically under its run_id as soon as it ends, so a
sweep killed at any moment (SIGINT, SIGKILL) resumes where it stopped: finished runs are
neither lost nor recomputed.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from netsim.results.store import completed_runs
from netsim.sweep.plan import RunTask, SweepPlan
from netsim.sweep.results import stored_status, write_manifest
from netsim.sweep.worker import RunOutcome, execute, init_worker

WINDOW_PER_WORKER = 4  # runs queued per worker: bounded memory, quick interruption


@dataclass
class SweepSummary:
    """What a sweep did: runs planned, skipped (already stored), computed, and the failures."""

    name: str
    total: int
    skipped: int = 0
    computed: int = 0
    computed_ids: list[str] = field(default_factory=list)
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # run_id, what, error
    statuses: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0

    def text(self) -> str:
        """A few lines for the terminal: counts, statuses, then each failure."""
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))
        lines = [f"sweep {self.name}: {self.total} runs ({self.skipped} already stored, "
                 f"{self.computed} computed in {self.wall_s:.1f} s); status: {counts or 'none'}"]
        if self.failures:
            lines.append(f"{len(self.failures)} failed run(s):")
            for rid, what, error in self.failures:
                first = error.strip().splitlines()[0] if error.strip() else "(no message)"
                lines.append(f"  {rid}  {what}: {first}")
        return "\n".join(lines)


class Progress:
    """The tqdm bar (done/total, failures, ETA) and the running summary."""

    def __init__(self, summary: SweepSummary, tasks: dict[str, RunTask], enabled: bool) -> None:
        self.summary, self.tasks = summary, tasks
        self.bar = tqdm(total=summary.total, initial=summary.skipped, unit="run",
                        desc=summary.name, disable=not enabled, dynamic_ncols=True,
                        smoothing=0.05)
        self.failed = 0

    def record(self, outcome: RunOutcome) -> None:
        """One run finished (and is stored)."""
        self.summary.computed += 1
        self.summary.computed_ids.append(outcome.run_id)
        if outcome.status == "failed":
            self.failed += 1
            self.bar.set_postfix(failed=self.failed, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()


def describe(task: RunTask) -> str:
    """``point 3 (n_devices=20) / fedavg-all / seed 4``."""
    return f"point {task.point} ({task.point_label}) / {task.policy_label} / seed {task.seed}"


def pending_tasks(plan: SweepPlan, out: Path, retry_failed: bool) -> list[RunTask]:
    """The plan's runs not yet stored under ``out`` (failed ones too when ``retry_failed``)."""
    done = completed_runs(out)
    if retry_failed:
        status = stored_status(out, [t.run_id for t in plan.tasks])
        done -= set(status.loc[status["status"] == "failed", "run_id"])
    return [t for t in plan.tasks if t.run_id not in done]


def run_sweep(plan: SweepPlan, out: str | Path, workers: int = 1, scheduler: str | None = None,
              progress: bool = True, retry_failed: bool = False) -> SweepSummary:
    """Run every run of ``plan`` not yet stored under ``out``; returns the summary.

    Parameters
    ----------
    plan: a validated sweep (:func:`netsim.sweep.plan.load_plan`).
    out: the results folder (created if needed).
    workers: local worker processes (1: in this process); ignored with ``scheduler``.
    scheduler: a Dask scheduler address (``tcp://HOST:PORT``) to run on instead.
    progress: show a progress bar (stderr).
    retry_failed: recompute runs stored as ``failed``.

    Raises
    ------
    KeyboardInterrupt
        On Ctrl-C, after stopping the workers; every run finished so far is stored.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_manifest(out, plan)
    todo = pending_tasks(plan, out, retry_failed)
    summary = SweepSummary(plan.name, len(plan.tasks), skipped=len(plan.tasks) - len(todo))
    bar = Progress(summary, {t.run_id: t for t in todo}, progress)
    start = time.perf_counter()
    try:
        if not todo:
            pass
        elif scheduler is not None:
            from netsim.sweep.dask_runner import run_dask

            run_dask(todo, out, scheduler, bar.record)
        elif workers <= 1:
            for task in todo:
                bar.record(execute(task, str(out)))
        else:
            run_pool(todo, out, workers, bar.record)
    finally:
        bar.close()
        summary.wall_s = time.perf_counter() - start
    _fill_statuses(summary, plan, out)
    return summary


def _fill_statuses(summary: SweepSummary, plan: SweepPlan, out: Path) -> None:
    status = stored_status(out, [t.run_id for t in plan.tasks])
    summary.statuses = {str(k): int(v) for k, v in status["status"].value_counts().items()}
    by_id = {t.run_id: t for t in plan.tasks}
    failed = status[status["status"] == "failed"]
    summary.failures = [(r.run_id, describe(by_id[r.run_id]), str(r.error))
                        for r in failed.itertuples()]


def run_pool(tasks: list[RunTask], out: Path, workers: int,
             record: Callable[[RunOutcome], None]) -> None:
    """Run ``tasks`` on ``workers`` local processes; each worker stores its runs itself."""
    ctx = _context()
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=init_worker,
                             initargs=(os.getpid(),)) as pool:
        try:
            _drain(pool, iter(tasks), str(out), workers * WINDOW_PER_WORKER, record)
        except BaseException:
            _stop(pool)
            raise


def _drain(pool: ProcessPoolExecutor, tasks: Iterator[RunTask], out: str, window: int,
           record: Callable[[RunOutcome], None]) -> None:
    pending: set[Future] = set()
    while True:
        for task in tasks:
            pending.add(pool.submit(execute, task, out))
            if len(pending) >= window:
                break
        if not pending:
            return
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for fut in done:
            record(fut.result())


def _context() -> multiprocessing.context.BaseContext:
    """forkserver where available: workers fork from a clean, netsim-preloaded server."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["netsim.sweep.worker", "netsim.sweep.warm"])
        return ctx
    return multiprocessing.get_context("spawn")


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel queued runs and end the workers now (their unfinished runs leave no file)."""
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        if proc.is_alive():
            proc.terminate()


def plan_frame(plan: SweepPlan) -> pd.DataFrame:
    """The plan as a table (run_id, point, point_label, policy_label, seed) for inspection."""
    return pd.DataFrame([{"run_id": t.run_id, "point": t.point, "point_label": t.point_label,
                          "policy_label": t.policy_label, "seed": t.seed} for t in plan.tasks])
