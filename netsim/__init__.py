"""netsim: a discrete-event simulator of machine-learning training on heterogeneous edge networks.

>>> import netsim
>>> result = netsim.simulate("default", policy="fedavg-all", seed=0)
>>> result.runs[["policy", "energy_j", "time_s", "final_loss"]]  # doctest: +SKIP
>>> results = netsim.sweep("experiments/sweeps/smoke.yaml", out="res/")  # doctest: +SKIP
>>> netsim.compare(netsim.load_results("res/"), baseline="fedavg-all")  # doctest: +SKIP

Policies live in their own packages and are found by name through the entry-point group
``netsim.policies``; the contract they implement is :mod:`netsim.policy`.
"""

from netsim.api import SimulationResult, simulate
from netsim.scenario import Scenario, ScenarioError, load_scenario
from netsim.sweep import Results, compare, load_results  # netsim.sweep: a callable module

__version__ = "0.7.0.dev0"
__all__ = ["Results", "Scenario", "ScenarioError", "SimulationResult", "compare", "load_results",
           "load_scenario", "simulate", "sweep"]
