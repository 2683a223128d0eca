"""Flower (``flwr``, the Message API) on a netsim scenario: a Flower app folder, or any Flower
strategy and a user's own ClientApp, run over netsim's network, time and energy
(docs/flower.md).

``flwr`` is the optional extra ``netsim[flower]``: nothing here imports it until a run asks
for the ``flower`` policy. The pieces: :mod:`.loading` (strategies, apps and arrays named by
import path, app folders, run configs), :mod:`.records` (node ids, the bytes a message's
records carry), :mod:`.grid` (netsim's Grid: each Flower round's messages become one epoch),
:mod:`.policy` (the ``flower`` policy, a driver of the run).
"""
