"""Importing this module warms the process for sweep runs (forkserver preload).

The local pool's workers fork from a server process that imports this module once, so each
worker starts with netsim, the policies and the unit registry loaded instead of paying that
(about a second) on its first run. Its only effect is that warm-up: one one-epoch simulation
of the built-in two-phones scenario, nothing stored.
"""

from __future__ import annotations

from netsim.api import simulate
from netsim.policy import registered
from netsim.scenario.loading import scenario_data


def warm_up() -> None:
    """Load the policies and run every lazy import path of a run once."""
    registered()
    data = scenario_data("two-phones")
    simulate({**data, "training": {**data["training"], "max_epochs": 1}}, seed=0)


warm_up()
