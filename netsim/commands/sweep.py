"""``netsim sweep FILE --out DIR [--workers N | --scheduler tcp://HOST:PORT]``.

Validates every point of the sweep file first (nothing runs on an invalid one, exit code 2),
then runs every run not already stored under DIR: on N local processes (default: all cores),
or on a Dask distributed cluster. Killed or interrupted, it resumes on the next call without
recomputing a finished run. A run that fails is stored as ``failed`` with its error; the
summary lists the failures. Exit code 0 even when runs failed (see ``--strict``, which also
makes scenario warnings errors). The ``module:attr`` names the sweep file (or its scenarios)
gives are imported only with ``--allow-imports`` (netsim.scenario.trust); the workers must
find them on their Python path (PYTHONPATH). ``--app PATH`` (and ``--run-config``) give a
Flower app folder to every entry of a policy that takes one (flower), as ``netsim run --app``
does: its modules may be imported, and each worker puts PATH on its Python path.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from netsim.commands.info import print_warnings
from netsim.commands.run import add_app_folder_arguments, app_flag_values, policies_taking
from netsim.outputs import dir_problems
from netsim.scenario.errors import Problem, ScenarioError
from netsim.scenario.trust import ALLOW_FLAG, import_gate


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim sweep``."""
    p = sub.add_parser("sweep", help="run a sweep file (points x policies x seeds), resumable",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="sweep file (YAML)")
    p.add_argument("--out", required=True, help="results folder (runs already there are skipped)")
    p.add_argument("--workers", type=int, default=None,
                   help=f"local worker processes (default: all cores, here {os.cpu_count()})")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="run on this Dask distributed scheduler instead (needs netsim[dask])")
    p.add_argument("--retry-failed", action="store_true", help="recompute runs stored as failed")
    p.add_argument("--dry-run", action="store_true", help="validate and count runs; run nothing")
    p.add_argument("--strict", action="store_true",
                   help="treat scenario warnings (implausible magnitudes) as errors (unit "
                        "traps always are), and exit code 1 if any run failed")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(ALLOW_FLAG, action="store_true",
                   help="import the module:attr names the sweep file gives: a file is data, "
                        "and without this flag netsim refuses to run its code")
    add_app_folder_arguments(p)
    p.add_argument("--quiet", action="store_true",
                   help="hide Flower's and the app's log lines in the workers (the flower "
                        "policy's quiet; ClientApp failures still show)")
    p.set_defaults(func=sweep_command)


def _arg_problems(args: argparse.Namespace) -> list[Problem]:
    problems = dir_problems(args.out)
    if args.workers is not None and not 1 <= args.workers <= 1024:
        problems.append(Problem("--workers", f"must be in 1..1024 (got {args.workers})"))
    if args.scheduler is not None and "://" not in args.scheduler:
        problems.append(Problem("--scheduler", f"expected an address like tcp://HOST:PORT "
                                               f"(got {args.scheduler!r})"))
    return problems


def sweep_command(args: argparse.Namespace) -> int:
    """Validate, run what is missing, print the summary (under the command's import gate);
    returns the exit code."""
    app = getattr(args, "app", None)
    with import_gate(allow_all=bool(getattr(args, "allow_imports", False)),
                     roots=(app,) if app else ()):
        return _sweep(args)


def _app_params(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``--app`` / ``--run-config`` / ``--quiet`` as parameters of every policy that takes
    them."""
    out: dict[str, dict[str, Any]] = {}
    given = [(field, value) for _, field, value in app_flag_values(args)]
    if getattr(args, "quiet", False):
        given.append(("quiet", True))
    for field, value in given:
        for name in policies_taking(field):
            out.setdefault(name, {})[field] = value
    return out


def _sweep(args: argparse.Namespace) -> int:
    from netsim.sweep.dask_runner import DaskUnavailable
    from netsim.sweep.plan import load_plan
    from netsim.sweep.runner import run_sweep

    problems = _arg_problems(args)
    warnings: list[Problem] = []
    extra = _app_params(args)
    plan = None
    try:
        plan = load_plan(args.file, strict=args.strict, warnings=warnings, extra_params=extra)
    except ScenarioError as exc:
        problems += exc.problems
    given = [f for f, field in (("--app", "app"), ("--run-config", "run_config"))
             if getattr(args, field, None) is not None]
    if plan is not None and given and not any(t.policy in extra for t in plan.tasks):
        flag = given[0]
        problems.append(Problem(flag, "none of the sweep's policies takes a Flower app (the "
                                      "flower policy does: add it to the sweep's policies)"))
    print_warnings(warnings)
    if problems or plan is None:
        raise ScenarioError(problems, "sweep or command line")
    print(f"sweep {plan.name}: {plan.n_points} point(s), {len(plan.tasks)} runs"
          + (f" ({plan.duplicates} duplicate runs merged)" if plan.duplicates else ""))
    if args.dry_run:
        return 0
    workers = args.workers or os.cpu_count() or 1
    try:
        summary = run_sweep(plan, args.out, workers=workers, scheduler=args.scheduler,
                            progress=not args.no_progress, retry_failed=args.retry_failed)
    except DaskUnavailable as exc:
        print(f"netsim: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"netsim: interrupted; finished runs are stored in {args.out}; "
              "run the same command again to resume", file=sys.stderr)
        return 130
    print(summary.text())
    calls = failed_client_calls(args.out, [t.run_id for t in plan.tasks])
    if calls:
        print(calls)
    print(f"results in {args.out}  (netsim compare {args.out}; netsim report {args.out})")
    return 1 if args.strict and summary.failures else 0


def failed_client_calls(out: str, run_ids: list[str]) -> str | None:
    """The summary's line on driven runs whose client calls failed (``runs.client_calls``
    and ``client_calls_failed``: a Flower ClientApp that raised, say), among ``run_ids``
    stored under ``out``: how many runs, how many of their calls, and the first few runs;
    None when no run had a failed call (runs stored before the columns existed count as
    none)."""
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.dataset as ds

    from netsim.results.store import completed_runs

    done = completed_runs(out)
    files = [str(Path(out) / "runs" / f"{r}.parquet") for r in run_ids if r in done]
    if not files:
        return None
    schema = pa.schema([("run_id", pa.string()), ("policy", pa.string()),
                        ("seed", pa.int64()), ("client_calls", pa.int64()),
                        ("client_calls_failed", pa.int64())])
    runs = ds.dataset(files, format="parquet", schema=schema).to_table().to_pandas()
    hit = runs[runs["client_calls_failed"].fillna(0) > 0]
    if hit.empty:
        return None
    driven = runs[runs["client_calls"].fillna(0) > 0]
    shown = ", ".join(f"{r.run_id} ({r.policy} seed {r.seed}: {int(r.client_calls_failed)} "
                      f"of {int(r.client_calls)})" for r in hit.head(3).itertuples())
    more = f", ... and {len(hit) - 3} more" if len(hit) > 3 else ""
    return (f"{len(hit)} of {len(driven)} driven run(s) had failed client calls "
            f"({int(hit['client_calls_failed'].sum())} of {int(hit['client_calls'].sum())} "
            f"calls; runs.client_calls_failed): {shown}{more}")
