"""A world that changes over time (docs/dynamics.md): availability sessions and traces,
link capacity over time, per device-epoch compute speed, power states and batteries.

- :mod:`netsim.dynamics.traces`: trace files (CSV, Parquet): reading, checking, writing.
- :mod:`netsim.dynamics.trace_types`: the trace types, their columns and ``TraceError``.
- :mod:`netsim.dynamics.trace_parsing`: a trace file's table, checked row by row, into a trace.
- :mod:`netsim.dynamics.availability`: who is online when (bernoulli, markov, trace).
- :mod:`netsim.dynamics.bandwidth`: link capacity over time (constant, lognormal, trace).
- :mod:`netsim.dynamics.world`: one run's dynamics, on their own seeded stream.
- :mod:`netsim.dynamics.epoch`: an epoch whose participants can drop out, keep the first
  updates or stop at an epoch deadline (SimPy callbacks).
- :mod:`netsim.dynamics.sample`: the markov/lognormal world of a run written as traces.
- :mod:`netsim.dynamics.catalog`: per device class session lengths and power states.
- :mod:`netsim.dynamics.traceplot`: drawing a trace file (``netsim traces plot``).
"""
