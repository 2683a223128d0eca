"""netsim: a discrete-event simulator of machine-learning training on heterogeneous edge networks.

>>> import netsim
>>> result = netsim.simulate("default", policy="fedavg-all", seed=0)
>>> result.runs[["policy", "energy_j", "time_s", "final_loss"]]  # doctest: +SKIP
"""

from netsim.scenario import Scenario, ScenarioError, load_scenario
from netsim.simulate import SimulationResult, simulate

__version__ = "0.1.0"
__all__ = ["Scenario", "ScenarioError", "SimulationResult", "load_scenario", "simulate"]
