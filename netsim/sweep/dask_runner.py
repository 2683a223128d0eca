"""Running sweep tasks on a Dask distributed cluster (optional extra: ``pip install netsim[dask]``).

Workers simulate and send each run's tables back; this process stores them (atomically, as
the local pool's workers do), so the workers need no shared filesystem and both paths store
identical tables. Short runs are batched (up to 8 per Dask task, while leaving at least 16 tasks
per worker thread) to amortise Dask's per-task overhead. Dask is imported only here, only when
a scheduler address is given.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from netsim.results.store import write_run
from netsim.sweep.plan import RunTask
from netsim.sweep.worker import RunOutcome, execute

WINDOW_PER_THREAD = 4  # Dask tasks in flight per worker thread
MAX_CHUNK = 8  # runs per Dask task at most (short runs are batched to amortise Dask's overhead)
CONNECT_TIMEOUT_S = 15


class DaskUnavailable(RuntimeError):
    """dask[distributed] is not installed, or the scheduler cannot be reached."""


def _import_distributed():
    try:
        import distributed
    except ImportError as exc:
        raise DaskUnavailable("running on a Dask cluster (--scheduler) needs dask[distributed]: "
                              "pip install 'netsim[dask]'") from exc
    return distributed


def connect(scheduler: str):
    """A Dask client connected to ``scheduler`` (``tcp://HOST:PORT``).

    Raises
    ------
    DaskUnavailable
        If Dask is missing or the scheduler does not answer within 15 s.
    """
    distributed = _import_distributed()
    try:
        return distributed.Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s",
                                  set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise DaskUnavailable(f"cannot connect to the Dask scheduler at {scheduler}: {exc}") \
            from exc


def execute_chunk(tasks: list[RunTask]) -> list[RunOutcome]:
    """Run several tasks in one Dask task; their tables come back to be stored by the client."""
    return [execute(task, None) for task in tasks]


def chunk_size(n_tasks: int, threads: int) -> int:
    """Runs per Dask task: enough tasks for 16 per thread, at most :data:`MAX_CHUNK`."""
    return max(1, min(MAX_CHUNK, n_tasks // (threads * 16)))


def run_dask(tasks: list[RunTask], out: Path, scheduler: str,
             record: Callable[[RunOutcome], None]) -> None:
    """Run ``tasks`` on the cluster at ``scheduler``, storing each run under ``out`` as it ends."""
    distributed = _import_distributed()
    client = connect(scheduler)
    inflight: set = set()
    try:
        threads = max(1, sum(client.nthreads().values()))
        size = chunk_size(len(tasks), threads)
        chunks = iter([tasks[i:i + size] for i in range(0, len(tasks), size)])

        def submit(chunk: list[RunTask]):
            fut = client.submit(execute_chunk, chunk, key=f"netsim-runs-{chunk[0].run_id}-"
                                f"{len(chunk)}", pure=False, retries=1)
            inflight.add(fut)
            return fut

        first = [submit(c) for _, c in zip(range(threads * WINDOW_PER_THREAD), chunks,
                                           strict=False)]
        queue = distributed.as_completed(first, loop=client.loop)
        for fut in queue:
            outcomes: list[RunOutcome] = fut.result()
            inflight.discard(fut)
            fut.release()
            nxt = next(chunks, None)
            if nxt is not None:
                queue.add(submit(nxt))
            for outcome in outcomes:
                assert outcome.tables is not None
                write_run(out, *outcome.tables)
                record(RunOutcome(outcome.run_id, outcome.status, outcome.error,
                                  outcome.wall_s))
    except BaseException:
        if inflight:
            client.cancel(list(inflight))
        raise
    finally:
        client.close()
