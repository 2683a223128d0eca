"""netsim: a discrete-event simulator of machine-learning training on heterogeneous edge networks.

>>> import netsim
>>> result = netsim.simulate("default", policy="fedavg-all", seed=0)
>>> result.runs[["policy", "energy_j", "time_s", "final_loss"]]  # doctest: +SKIP

``simulate`` and ``SimulationResult`` (defined in netsim/api.py) are imported on first use, so
that ``policies`` (which the engine imports) and ``netsim`` can be imported in either order.
"""

from typing import Any

from netsim.scenario import Scenario, ScenarioError, load_scenario

__version__ = "0.1.2"
__all__ = ["Scenario", "ScenarioError", "SimulationResult", "load_scenario", "simulate"]


def __getattr__(name: str) -> Any:
    if name in ("simulate", "SimulationResult"):
        import importlib

        return getattr(importlib.import_module("netsim.api"), name)
    raise AttributeError(f"module 'netsim' has no attribute {name!r}")
