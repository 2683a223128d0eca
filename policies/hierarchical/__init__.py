"""Hierarchical federated learning policies (docs/hierarchical.md): devices -> edge
aggregators -> cloud. ``hierfavg`` (synchronous tiers), ``cloud-only`` (a star with the edges
as relays, for side-by-side comparisons), ``rfl-ha`` (synchronous edges, asynchronous cloud)
and ``async-hfl`` (asynchronous at both tiers)."""
