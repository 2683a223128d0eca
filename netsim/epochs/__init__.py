"""The kinds of epoch, each a module with one entry point (architecture spec, "Epoch kinds and
drivers"); :meth:`netsim.engine.World.run_epoch` picks the kind from the decision and the world:

- :mod:`.arrays`: a plain static epoch played forward in arrays (``play``), when it can be;
- :mod:`.events`: a static epoch as SimPy events (``run``), the reference path;
- :mod:`.clusters`: model-parallel clusters (``cluster``, a process inside either epoch);
- :mod:`.guarded`: an epoch of the changing world (``run``): arrays when nothing changes, else
  guarded events in which participants drop out;
- :mod:`.buffered`: a buffered asynchronous epoch (``run``), jobs outliving epochs.

Each returns (or contributes to) an :class:`.outcome.EpochOutcome`. The World keeps the
world's state and what every epoch shares (aggregation, measurements, route tables, capacity
ticks, batteries); a driver of the run (netsim.runloop) never sees these.
"""
