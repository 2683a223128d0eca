"""What a link's bandwidth carries: payload at ``bandwidth_bps x goodput_factor`` (bit/s).

netsim moves payload bytes (a model's parameters). A link's ``bandwidth_bps`` is what the
scenario says it is; ``goodput_factor`` (per link, else the scenario's ``goodput_factor``,
default 1: the bandwidth is already the payload rate, netsim's reading before 0.7.0) is the
share of it that payload gets once every protocol's framing is paid for. TCP over Ethernet
sends 1448 payload bytes per 1514-byte frame (Ethernet, IPv4 and TCP headers with
timestamps): 1448 / 1514 = 0.956 of a line rate, which is what benchmarks/tcp_netns.py
measures against the kernel's own TCP (issue 53; docs/semantics.md, "What a bandwidth
means"). SimGrid's LV08 network model multiplies every bandwidth by 0.97 for the same
reason (Velho and Legrand 2009).

Every capacity netsim derives from a link goes through :func:`payload_bps` once, where the
topology is built (explicit links: :class:`netsim.network.topology.Topology`; generated
fleets: :func:`netsim.devices.fleet_topology`; bandwidth traces: netsim.dynamics.bandwidth),
so flows, shared media, the arrays and every planner read the same rates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: TCP/IPv4 over Ethernet with timestamps: payload bytes per frame on the wire (1448 of 1514;
#: the 1500-byte MTU's 1448-byte segment plus 14 bytes of Ethernet header and 52 of IPv4 and
#: TCP headers with timestamps). Not counted: the preamble and inter-frame gap (20 bytes a
#: frame), which Linux's htb does not charge either (benchmarks/tcp_netns.py shapes with it).
TCP_ETHERNET_GOODPUT = 1448.0 / 1514.0


def payload_bps(bandwidth_bps: Any, goodput_factor: Any) -> Any:
    """The payload rate (bit/s) of a link of ``bandwidth_bps`` whose payload gets
    ``goodput_factor`` of it (vectorised)."""
    return np.multiply(bandwidth_bps, goodput_factor) if isinstance(
        bandwidth_bps, np.ndarray) or isinstance(goodput_factor, np.ndarray) \
        else float(bandwidth_bps) * float(goodput_factor)


def link_goodput(link: Any, default: float) -> float:
    """A link's goodput factor: its own ``goodput_factor``, else ``default`` (the
    scenario's)."""
    own = getattr(link, "goodput_factor", None)
    return float(default if own is None else own)
