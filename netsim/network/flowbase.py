"""What the parts of :class:`netsim.network.flows.FlowNetwork` share: its state, declared once
here and defined in ``FlowNetwork.__init__``, and, for the type checker only, the primitives
one part calls in another (no runtime stubs: a stub in one part would hide the definition in
the next part of the network's method order).

The parts, each a mixin with one job (the module docstring of netsim.network.flows says how
rates are kept): :mod:`netsim.network.flows` (the public API, a transfer's start and end),
:mod:`netsim.network.groups` (decomposed water-filling groups, links turning unsafe and
safe), :mod:`netsim.network.nesting` (nested groups), :mod:`netsim.network.resharing`
(every flow re-shared at once: capacity changes, progressive filling) and
:mod:`netsim.network.wakeups` (completions). Units: bits, bit/s, seconds."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

import simpy

from netsim.network.flowstate import _Cell, _Feed, _Flow, _Group, _Nest, _Plan, _Timed
from netsim.network.neverbind import NeverBinding


class FlowNetworkBase:
    """The state every part of the flow network reads (see the module docstring)."""

    env: simpy.Environment
    _cap: list[float]                 # every constraint's capacity now (bit/s)
    _first_medium: int                # the first medium constraint (links come before)
    _caps_changed: bool
    _plans: dict[int, _Plan]
    _never_bind: NeverBinding
    _link_flows: defaultdict[int, dict[_Flow, None]]
    _empty_slack: list[float]
    _slack: list[float]
    _groups: dict[int, _Group]
    _feeds: dict[tuple[int, int], _Feed]
    _moving: dict[_Flow, None]
    _multi_unsafe: int
    _heap: list[tuple[float, int, _Flow]]
    _group_heap: list[tuple[float, int, _Timed]]
    _stamps: itertools.count
    _wakeup_at: float
    _wakeup_event: simpy.Event | None
    _wakeup_callback: Callable[[simpy.Event], None]
    _recompute_pending: bool
    _fallback: bool
    _batching: int
    _dirty: dict[_Group, None]
    _pending: list[tuple[_Flow, _Group]]
    _nests: dict[int, _Nest]
    _cells: dict[int, _Cell]
    _touched: dict[_Cell, None]
    _arrivals: list[tuple[Callable[[float], None], float]]
    _n_active: int
    _idle_wakeups: int                # wake-ups in a row at _idle_at that ended nothing
    _idle_at: float
    full_recomputations: int
    reshares: int
    nested_rebuilds: int
    nested_updates: int

    if TYPE_CHECKING:  # the primitives the parts call in one another
        # netsim.network.flows
        def _active(self) -> list[_Flow]: ...
        def _feed(self, feed: _Feed, medium: int, load: float, ratio: float,
                  joins: bool) -> float: ...
        def _leave(self, flow: _Flow, now: float, arrive: bool = True) -> None: ...
        # netsim.network.groups
        def _push_flow(self, flow: _Flow, now: float) -> None: ...
        def _progress(self, flow: _Flow, now: float) -> None: ...
        def _set_individual(self, flow: _Flow, rate: float, now: float) -> None: ...
        def _join(self, flow: _Flow, g: _Group, now: float) -> None: ...
        def _enroll(self, flow: _Flow, g: _Group, now: float) -> None: ...
        def _add_capped(self, flow: _Flow, g: _Group, now: float) -> None: ...
        def _touch(self, g: _Group, now: float) -> None: ...
        def _flush(self, now: float) -> None: ...
        def _rebalance(self, g: _Group, now: float) -> None: ...
        def _make_unsafe(self, h: int, now: float, starting: _Flow) -> None: ...
        def _make_safe(self, h: int, now: float) -> None: ...
        # netsim.network.nesting
        def _nested_live(self) -> bool: ...
        def _build_nests(self, flows: list[_Flow], now: float) -> bool: ...
        def _place_nested(self, flow: _Flow, now: float) -> bool: ...
        def _nest_cell(self, h: int, now: float, starting: _Flow) -> bool: ...
        def _nest_outer(self, o: int, now: float, starting: _Flow) -> bool: ...
        def _unnest(self, nest: _Nest, now: float) -> None: ...
        def _dissolve(self, cell: _Cell, now: float) -> None: ...
        def _exit(self, flow: _Flow, now: float) -> None: ...
        def _flush_nests(self, now: float) -> None: ...
        def _finish_sharing(self, nest: _Nest, now: float) -> None: ...
        def _finish_capped(self, cell: _Cell, now: float) -> None: ...
        # netsim.network.resharing
        def _reshare(self, now: float) -> None: ...
        def _request_recompute(self) -> None: ...
        def _progressive_filling(self, now: float) -> None: ...
        # netsim.network.wakeups
        def _arm(self, at: float, fired: simpy.Event | None = None) -> None: ...
        def _rearm(self, fired: simpy.Event | None = None) -> None: ...
