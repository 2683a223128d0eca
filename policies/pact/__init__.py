"""PACT: joint compression, node and data selection for minimum-energy cooperative training.

Modules, one job each: ``problem`` (the planning problem), ``candidates`` (candidate epochs),
``graph`` (the time-expanded graph's grids and edges), ``dp`` (dynamic programming over it),
``planner`` (putting them together), ``policy`` (the registered policies), ``optimum`` (the
exact reference). Importing this package registers the policies.
"""

from policies.pact import optimum, policy  # noqa: F401  (registers the policies)
