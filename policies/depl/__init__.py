"""DepL: dependable distributed training through model switching and compression.

Source: Malandrino, Di Giacomo, Levorato, Chiasserini, "Dependable Distributed Training of
Compressed Machine Learning Models", IEEE WoWMoM 2024 (arXiv 2402.14346), and the TMC 2026
extension. Only the abstracts were available; netsim's formalization is in docs/depl.md,
and each module's docstring states its part:

* :mod:`policies.depl.predictor`: quantiles of the final loss of a trajectory;
* :mod:`policies.depl.placement`: min-cost clusters for one epoch;
* :mod:`policies.depl.graph`: the expanded graph (epoch, model, quantile level);
* :mod:`policies.depl.planner`: the outer loop over the amount of data;
* :mod:`policies.depl.policy`: the registered policies (depl and its baselines);
* :mod:`policies.depl.optimum`: the exact reference on small instances (depl-optimum);
* :mod:`policies.depl.plan_search`: the reference's exact best-first search over plan states;
* :mod:`policies.depl.plan_bounds`: the search's dominance slack and lower bounds;
* :mod:`policies.depl.plan_success`: a plan's success probability, and the enumeration.
"""

from policies.depl import optimum, policy  # noqa: F401  (the policy classes, by entry point)
