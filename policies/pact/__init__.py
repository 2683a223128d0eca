"""PACT: joint compression, node and data selection for minimum-energy cooperative training.

Modules, one job each: ``problem`` (the planning problem), ``candidates`` (candidate epochs),
``graph`` (the time-expanded graph's grids and edges), ``dp`` (dynamic programming over it),
``planner`` (putting them together), ``policy`` (the registered policies), ``optimum`` (the
exact reference). The policies are declared under the entry-point group netsim.policies.
"""

from policies.pact import optimum, policy  # noqa: F401  (the policy classes, by entry point)
