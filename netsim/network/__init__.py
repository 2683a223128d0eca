"""The network: topology, sharing, flows in motion, array playback, media and radio energy.

One package, one job per module, imports running down this list:

- :mod:`netsim.network.topology`: links, shared media as constraints, routes (what a transfer
  crosses and with which air-time coefficient).
- :mod:`netsim.network.sharing`: the sharing core: max-min fair rates over weighted
  constraints (wired link directions with coefficient 1, media with 1/station rate), the rules
  and the tolerance every path uses.
- :mod:`netsim.network.playback`: one constraint's flows played forward in arrays (the epoch
  fast path), built on the sharing core's water-filling.
- :mod:`netsim.network.ledger`: bytes, communication energy and air time of transfers.
- :mod:`netsim.network.radio`: radio energy (base power while active, tails).
- :mod:`netsim.network.flows`: the event-driven flow network (SimPy) over the same core, in
  parts that share its state (:mod:`netsim.network.flowbase`, :mod:`netsim.network.flowstate`):
  :mod:`~netsim.network.groups` (decomposed groups), :mod:`~netsim.network.nesting` (nested
  groups), :mod:`~netsim.network.neverbind` (books left out), :mod:`~netsim.network.resharing`
  (every flow re-shared) and :mod:`~netsim.network.wakeups` (completions).
"""

from netsim.network.flows import FlowNetwork
from netsim.network.topology import LinkLike, Route, Topology

__all__ = ["FlowNetwork", "LinkLike", "Route", "Topology"]
