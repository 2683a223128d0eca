"""The Python API for sweeps and comparisons: ``netsim.sweep``, ``netsim.load_results``,
``netsim.compare``.

>>> import netsim
>>> results = netsim.sweep({"name": "demo", "base": "two-phones",            # doctest: +SKIP
...                         "policies": ["fedavg-all", "fastest-k"], "seeds": 3}, out="res/")
>>> table = netsim.compare(results, baseline="fedavg-all")                   # doctest: +SKIP
>>> table[["point_label", "policy", "success", "energy_j_all", "d_energy_j"]]  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from netsim.scenario.errors import Problem, ScenarioError, problems_from_validation
from netsim.sweep.compare import compare_table
from netsim.sweep.plan import SweepPlan, build_plan, load_plan
from netsim.sweep.results import Results, load_results
from netsim.sweep.runner import run_sweep
from netsim.sweep.spec import SweepSpec


def plan_of(spec: str | Path | Mapping[str, Any] | SweepSpec | SweepPlan,
            strict: bool = False) -> SweepPlan:
    """A validated plan from a sweep file, a mapping with a sweep file's fields (``base`` and
    relative paths resolved from the current folder; ``name`` defaults to ``sweep``), a
    :class:`SweepSpec` or a plan.

    Raises
    ------
    ScenarioError
        Listing every problem of the sweep, its points and its policies.
    """
    if isinstance(spec, SweepPlan):
        return spec
    if isinstance(spec, str | Path):
        return load_plan(spec, strict=strict)
    if isinstance(spec, Mapping):
        spec = with_policy_objects(spec)
        try:
            spec = SweepSpec.model_validate({"name": "sweep", **dict(spec)})
        except ValidationError as exc:
            raise ScenarioError(problems_from_validation(exc, model=SweepSpec), "sweep") from None
    return build_plan(spec, Path.cwd(), strict=strict)


def policy_objects(spec: Mapping[str, Any]) -> list[int]:
    """The indices of the entries of a sweep mapping's ``policies`` that are Policy objects
    (neither a name nor a mapping)."""
    policies = spec.get("policies")
    if not isinstance(policies, list | tuple):
        return []
    return [i for i, p in enumerate(policies) if not isinstance(p, str | Mapping)]


def with_policy_objects(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec`` with each Policy object of its ``policies`` (an instance, as
    ``netsim.simulate`` takes one) made an entry ``{"name", "params"}`` of a policy
    registered in this process (:func:`netsim.policy.registry.register_local`): its class's
    registration where the class is decorated with ``netsim.policy.register`` (runs built
    from its parameters), else the object itself (each run a fresh copy of it).

    Raises
    ------
    ScenarioError
        Naming each entry (``policies[i]``) that is no Policy (``name``, ``reset``,
        ``decide``) or whose name is taken by an installed policy.
    """
    indices = policy_objects(spec)
    if not indices:
        return spec
    import copy

    from pydantic import BaseModel

    from netsim.policy import NoParams, Policy, PolicyEntry, policy_params
    from netsim.policy.registry import ENTRY_ATTRIBUTE, register_local

    policies, problems = list(spec["policies"]), []
    for i in indices:
        obj = policies[i]
        name = getattr(obj, "name", None)
        if not isinstance(obj, Policy) or not isinstance(name, str) or not name:
            problems.append(Problem(f"policies[{i}]", f"{obj!r} is no policy: expected a "
                                    "registered name, a mapping {name, params, label} or a "
                                    "Policy object (with a name, reset and decide)"))
            continue
        entry = vars(type(obj)).get(ENTRY_ATTRIBUTE)
        if not isinstance(entry, PolicyEntry):  # (a plain object: each run a fresh copy)
            params = getattr(obj, "params", None)
            entry = PolicyEntry(name, lambda _p, o=obj: copy.deepcopy(o),
                                (type(obj).__doc__ or "").strip().split("\n")[0],
                                type(params) if isinstance(params, BaseModel) else NoParams)
        try:
            register_local(entry)
        except ValueError as exc:
            problems.append(Problem(f"policies[{i}]", str(exc)))
            continue
        policies[i] = {"name": entry.name, "params": policy_params(obj)}
    if problems:
        raise ScenarioError(problems, "sweep")
    return {**spec, "policies": policies}


def sweep(spec: str | Path | Mapping[str, Any] | SweepSpec | SweepPlan, out: str | Path,
          workers: int = 1, scheduler: str | None = None, progress: bool = False,
          retry_failed: bool = False, strict: bool = False) -> Results:
    """Run a sweep (every point x policy x seed not yet stored under ``out``) and return its
    results, as ``netsim sweep FILE --out DIR`` does: this sweep's runs (stored now or
    before), not those of other sweeps stored in the same folder (``load_results(out)``
    gives the whole folder).

    Parameters
    ----------
    spec: a sweep file, a mapping with its fields, a SweepSpec or a plan (see :func:`plan_of`);
        a mapping's ``policies`` may hold Policy objects (``CheapestK(Params(k=2))``,
        :func:`with_policy_objects`), run in this process (``workers=1``, no scheduler).
    out: the results folder (created; runs already there are skipped, never recomputed).
    workers: local processes (1: this process); ignored with ``scheduler``.
    scheduler: a Dask scheduler address (``tcp://HOST:PORT``).
    progress: show a progress bar on stderr.
    retry_failed: recompute runs stored as ``failed``.
    strict: treat scenario warnings (implausible magnitudes) as errors.

    Raises
    ------
    ScenarioError
        For an invalid sweep (nothing runs).
    """
    if (workers != 1 or scheduler is not None) and isinstance(spec, Mapping) \
            and policy_objects(spec):
        raise ScenarioError([Problem(f"policies[{i}]", "a Policy object runs in this process "
                                     "only: run with workers=1 and no scheduler, or install its "
                                     "class as an entry point (docs/writing-a-policy.md) and "
                                     "give its name") for i in policy_objects(spec)], "sweep")
    plan = plan_of(spec, strict=strict)
    run_sweep(plan, out, workers=workers, scheduler=scheduler, progress=progress,
              retry_failed=retry_failed)
    results = load_results(out)
    mine = {t.run_id for t in plan.tasks}
    if set(results.runs["run_id"]) <= mine:
        return results
    own = results.select(results.runs["run_id"].isin(mine))
    axes = tuple(a for a in own.axes if a in own.runs and own.runs[a].notna().any())
    runs = own.runs.drop(columns=[a for a in own.axes if a not in axes and a in own.runs])
    return Results(runs, own.epochs, own.devices, axes)


def compare(results: Results | str | Path, baseline: str | None = None) -> pd.DataFrame:
    """The comparison table of ``netsim compare`` (one row per scenario point and policy; the
    columns are described in :mod:`netsim.sweep.compare`: success first, energy in J and time in
    s over successful and over all runs with 95 % intervals, ratios to the best policy that
    meets the required share, paired differences to ``baseline``).

    A results folder is loaded first. Scenarios that share a name but differ are shown apart
    and reported with a :class:`UserWarning`.

    Raises
    ------
    ValueError
        If ``baseline`` names no policy of the results.
    ScenarioError
        If a folder holds no complete run.
    """
    if not isinstance(results, Results):
        results = load_results(results)
    for clash in results.name_clashes():
        warnings.warn(clash, UserWarning, stacklevel=2)
    return compare_table(results.runs, baseline=baseline)


__all__ = ["compare", "load_results", "plan_of", "sweep"]
