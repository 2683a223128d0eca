"""Sweeps: many runs (scenario points x policies x seeds), resumable, on a pool or Dask.

The module is also callable: ``netsim.sweep(SPEC, out=DIR)`` runs a sweep and returns its
results (:func:`netsim.sweep.api.sweep`); the building blocks stay importable from it.

>>> import netsim
>>> results = netsim.sweep("experiments/sweeps/smoke.yaml", out="results/smoke")  # doctest: +SKIP
>>> from netsim.sweep import load_plan, run_sweep
>>> plan = load_plan("experiments/sweeps/smoke.yaml")          # doctest: +SKIP
>>> summary = run_sweep(plan, "results/smoke", workers=2)      # doctest: +SKIP
"""

import sys
import types
from typing import Any

from netsim.sweep.api import compare, plan_of, sweep
from netsim.sweep.plan import RunTask, SweepPlan, build_plan, load_plan
from netsim.sweep.results import Results, load_results
from netsim.sweep.runner import SweepSummary, run_sweep
from netsim.sweep.spec import SweepSpec, read_sweep


class _CallableModule(types.ModuleType):
    """``netsim.sweep(...)`` calls :func:`netsim.sweep.api.sweep`; attributes work as usual."""

    def __call__(self, *args: Any, **kwargs: Any) -> Results:
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["Results", "RunTask", "SweepPlan", "SweepSpec", "SweepSummary", "build_plan",
           "compare", "load_plan", "load_results", "plan_of", "read_sweep", "run_sweep", "sweep"]
