"""Sweeps: many runs (scenario points x policies x seeds), resumable, on a pool or Dask.

>>> from netsim.sweep import load_plan, run_sweep
>>> plan = load_plan("experiments/sweeps/smoke.yaml")          # doctest: +SKIP
>>> summary = run_sweep(plan, "results/smoke", workers=2)      # doctest: +SKIP
"""

from netsim.sweep.plan import RunTask, SweepPlan, build_plan, load_plan
from netsim.sweep.results import Results, load_results
from netsim.sweep.runner import SweepSummary, run_sweep
from netsim.sweep.spec import SweepSpec, read_sweep

__all__ = ["Results", "RunTask", "SweepPlan", "SweepSpec", "SweepSummary", "build_plan",
           "load_plan", "load_results", "read_sweep", "run_sweep"]
