"""The markov/log-normal world of a run, written out as trace tables (``netsim traces generate``).

The tables hold exactly what a run of the scenario with that seed sees (the same dynamics
stream, :func:`netsim.dynamics.world.run_streams`): replaying them with ``model: trace``
reproduces the sessions and link capacities, to be edited and replayed.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from netsim.devices import network_topology
from netsim.dynamics.world import Dynamics, run_streams
from netsim.scenario.network import ResolvedNetwork, resolve_network
from netsim.scenario.schema import Scenario

MAX_BANDWIDTH_ROWS = 5_000_000
"""Largest bandwidth table :func:`sample_traces` writes (rows)."""


def sample_traces(scenario: Scenario, seed: int, horizon_s: float
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(availability, bandwidth) tables of the run of ``scenario`` with ``seed`` up to
    ``horizon_s`` (s).

    availability: columns device, start_s, end_s: every online interval of every device but
    the aggregator (a session still running at the horizon ends there); a device offline
    throughout is listed with the empty interval (0, 0).
    bandwidth: columns a, b, time_s, bandwidth_up_bps (a to b), bandwidth_down_bps (b to a):
    one row per link and capacity piece (none when capacities are constant).

    Raises
    ------
    ValueError
        For a horizon that is not a positive finite number, or a bandwidth table that would
        pass :data:`MAX_BANDWIDTH_ROWS`.
    """
    if not (horizon_s > 0 and math.isfinite(horizon_s)):
        raise ValueError(f"horizon_s must be a positive finite number of seconds, got {horizon_s}")
    net: ResolvedNetwork = resolve_network(scenario, seed)
    topology = network_topology(net)
    ids = [d.id for d in net.devices]
    agg = ids.index(net.aggregator)
    dyn = Dynamics(scenario.dynamics, net.devices, net.links, agg, topology.capacity_bps,
                   run_streams(seed)[3], net.goodput_factor)
    dyn.timeline.advance(horizon_s)
    rows = []
    for d, flat in enumerate(dyn.timeline.intervals_s(horizon_s)):
        if d == agg:
            continue
        listed = False
        for start, end in zip(flat[0::2], flat[1::2], strict=True):
            if end > start:
                rows.append((ids[d], start, end))
                listed = True
        if not listed:
            rows.append((ids[d], 0.0, 0.0))
    availability = pd.DataFrame(rows, columns=["device", "start_s", "end_s"])
    pieces: list[tuple[float, np.ndarray]] = []
    t = 0.0
    while t < horizon_s and not dyn.capacity.static:
        if len(pieces) * max(len(net.links), 1) >= MAX_BANDWIDTH_ROWS:
            raise ValueError(f"the bandwidth trace up to {horizon_s:g} s would have more than "
                             f"{MAX_BANDWIDTH_ROWS:,} rows ({len(net.links)} links); give a "
                             "shorter horizon")
        caps = np.array(dyn.capacity.at(t), dtype=float)
        pieces.append((t, caps))
        t = dyn.capacity.next_change_s(t)
    cols: dict[str, list] = {"a": [], "b": [], "time_s": [], "bandwidth_up_bps": [],
                             "bandwidth_down_bps": []}
    if not dyn.capacity.static:
        for i, link in enumerate(net.links):
            for t, caps in pieces:
                cols["a"].append(link.a)
                cols["b"].append(link.b)
                cols["time_s"].append(t)
                cols["bandwidth_up_bps"].append(float(caps[2 * i]))
                cols["bandwidth_down_bps"].append(float(caps[2 * i + 1]))
    return availability, pd.DataFrame(cols)
