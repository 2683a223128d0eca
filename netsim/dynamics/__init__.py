"""A world that changes over time (spec: dynamics.md): availability sessions and traces,
link capacity over time, per device-epoch compute speed, power states and batteries.

- :mod:`netsim.dynamics.traces`: trace files (CSV, Parquet): reading, checking, writing.
- :mod:`netsim.dynamics.availability`: who is online when (bernoulli, markov, trace).
- :mod:`netsim.dynamics.bandwidth`: link capacity over time (constant, lognormal, trace).
- :mod:`netsim.dynamics.world`: one run's dynamics, on their own seeded stream.
- :mod:`netsim.dynamics.sample`: the markov/lognormal world of a run written as traces.
"""
