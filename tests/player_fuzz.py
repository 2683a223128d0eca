"""Differential fuzzing of the array players against the flow network (issue 44).

The flow network (netsim.network.flows, the event path, ``fast_epochs=False``) is the
reference. A *case* is a small tree network (wired devices behind a switch, Wi-Fi and
cellular cells behind their backhauls, all behind an uplink to the server ``srv``) and a set
of transfers, one per device, all uploads or all downloads, each with its start time and
size; optionally the link capacities change at known instants. The same transfers go through
the flow network (SimPy events) and through a player:

- ``piece``: netsim.fastepoch's one-piece dispatcher (``_play_piece``: one water-filling per
  binding constraint, :func:`netsim.network.playback.last_bit_times_until`, or the nested
  cells, :func:`netsim.network.nested.nested_last_bit_times_until`), sizes per transfer;
- ``pieces``: :func:`netsim.fastepoch.play_phase` across capacity changes
  (:class:`netsim.fastepoch.CapacityPieces`), one size for every transfer as in a model's
  epoch, or (three cases in ten) each transfer its own, as a Flower round's messages;
- ``online``: the buffered arrays' core, :class:`netsim.network.online.SharedConstraint`,
  played as :class:`netsim.epochs.buffered_arrays.BufferedPlayer` plays it (starts and
  finishes in time order per binding constraint);
- ``fluid``: the planners' fluid replay (:func:`netsim.network.fluid.replay`: progressive
  filling at every start and finish, any routes; it never declines);
- ``stops``: :func:`netsim.fastepoch.play_phase_stopping`, transfers stopped mid-way (a
  participant's session ends, its battery empties, its epoch closes: netsim.epochs.stopping),
  with or without capacity changes, one size for every transfer, against the flow network's
  ``cancel`` at the same instants: each transfer's last bit, or the bits it had left when
  stopped (:func:`stop_disagreement`).

The cases are drawn to break fluid players: starts equal or a few ulps apart up to 1e-9
relative, caps just above and below a fair share, station rates whose medium coefficient is
within rounding of 1/cap, capacity changes at transfer starts and at (the reference's) last
bits, zero-size and tiny transfers, absolute times up to a year. Drawing goes through
:class:`Draws`, backed by hypothesis (tests/test_player_fuzz.py: shrinking) or by a seeded
numpy Generator (benchmarks/fuzz_players.py: a million cases).

Agreement: each last-bit time within ``1e-9`` of the time since the first start (a tie of a
cap with a share decided the other way inside the capacity tolerance moves rates by that
much) plus the network's time slack at that instant (netsim.network.tolerances), eight times
over. A player that declines (returns None: the case needs the event path) is counted, not
compared; a player that raises, or runs past its bound (netsim.loopguard), is a failure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Protocol, TypeVar

import numpy as np
import simpy

from netsim.energy import EnergyMeter
from netsim.fastepoch import (
    CapacityPieces,
    RouteTable,
    _play_piece,
    hop_coefficients,
    play_phase,
    play_phase_stopping,
)
from netsim.network import FlowNetwork, Topology
from netsim.network.online import SharedConstraint
from netsim.network.sharing import can_bind
from netsim.network.tolerances import CAPACITY_TOLERANCE, time_slack_s
from netsim.simclock import fire_after

T = TypeVar("T")
PLAYERS = ("piece", "pieces", "online", "fluid", "stops")


class Draws(Protocol):
    """Where a case's choices come from."""

    def integer(self, lo: int, hi: int) -> int: ...  # lo..hi inclusive
    def real(self, lo: float, hi: float) -> float: ...
    def pick(self, options: Sequence[T]) -> T: ...
    def chance(self, p: float) -> bool: ...


class RngDraws:
    """Draws from a seeded numpy Generator (the long run)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def real(self, lo: float, hi: float) -> float:
        return float(self.rng.uniform(lo, hi))

    def pick(self, options: Sequence[T]) -> T:
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)


class DataDraws:
    """Draws from hypothesis' ``data`` (the tests: failures shrink)."""

    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))

    def real(self, lo: float, hi: float) -> float:
        return self.data.draw(self.st.floats(lo, hi, allow_nan=False, allow_infinity=False))

    def pick(self, options: Sequence[T]) -> T:
        return options[self.data.draw(self.st.integers(0, len(options) - 1))]

    def chance(self, p: float) -> bool:
        return self.data.draw(self.st.integers(0, 999)) >= 1000 - round(1000 * p)


@dataclass
class Case:
    """A network, transfers and capacity changes (module docstring)."""

    player: str
    nodes: list[str]
    n_devices: int
    links: list[SimpleNamespace]
    media: list[SimpleNamespace]
    senders: list[str]
    receivers: list[str]
    start_s: np.ndarray
    bits: np.ndarray
    changes: list[tuple[float, np.ndarray]] = field(default_factory=list)
    """(instant (s), every link direction's capacity from then on (bit/s))."""
    stops: np.ndarray | None = None
    """When each transfer is stopped (s; inf: never; a ``stops`` case)."""

    def topology(self) -> Topology:
        return Topology(self.nodes, self.links, self.media, n_devices=self.n_devices)


@dataclass
class Outcome:
    """One case's verdict: ``declined`` (the player asked for events), or the times."""

    case: Case
    declined: bool
    reference: np.ndarray | None = None
    played: np.ndarray | None = None
    reference_cut: np.ndarray | None = None
    played_cut: np.ndarray | None = None
    """A ``stops`` case's bits each transfer had left when stopped (NaN: not stopped)."""
    worst: float = 0.0
    """The largest disagreement over its allowance (agreement: <= 1)."""

    @property
    def agrees(self) -> bool:
        return self.declined or self.worst <= 1.0


# -- drawing ---------------------------------------------------------------------------------
_EPS = (0.0, 0.0, 1e-16, -1e-16, 1e-15, -1e-15, 1e-12, -1e-12, 1e-10, -1e-10, 1e-9, -1e-9,
        2e-9, -2e-9, 1e-6, -1e-6, 0.1, -0.1)
_RATES = (6e6, 24e6, 54e6, 80e6, 1.5e8, 55151979.780429736, 139352893.16540694)


def _near(d: Draws, x: float) -> float:
    """``x`` or a value within a few ulps or a relative 1e-16 .. 0.1 of it."""
    kind = d.integer(0, 3)
    if kind == 0:
        return x
    if kind == 1:
        for _ in range(d.integer(1, 4)):
            x = math.nextafter(x, math.inf if d.chance(0.5) else -math.inf)
        return x
    return x * (1.0 + d.pick(_EPS))


def _link(a: str, b: str, bps: float, medium: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(a=a, b=b, bandwidth_bps=float(bps), latency_s=0.0,
                           energy_j_per_bit=0.0, medium=medium)


def draw_case(d: Draws, player: str) -> Case:
    """A case for ``player`` (one of :data:`PLAYERS`)."""
    devices: list[str] = []
    others = ["srv", "sw"]
    links: list[SimpleNamespace] = []
    media: list[SimpleNamespace] = []
    flow_devices: list[str] = []
    fair = d.pick((1e6, 1e7, 5.5e7, 1e8))  # the scale of a fair share (bit/s)
    n_wired = d.integer(0, 6)
    n_cells = d.integer(0 if n_wired else 1, 3)
    for i in range(n_wired):  # wired devices behind the switch, caps near a fair share
        name = f"w{i}"
        devices.append(name)
        flow_devices.append(name)
        k = d.integer(1, 4)
        links.append(_link(name, "sw", _near(d, fair / k) if d.chance(0.8)
                           else d.real(0.05, 3.0) * fair))
    cell_load = 0.0
    for c in range(n_cells):
        kind = d.pick(("wifi", "wifi", "cellular"))
        contended = kind == "wifi" and d.chance(0.1)
        media.append(SimpleNamespace(id=f"m{c}", kind=kind,
                                     contention_onset_flows=d.integer(1, 4) if contended else None,
                                     contention_loss_per_flow=0.05 if contended else 0.0))
        ap = f"ap{c}"
        others.append(ap)
        rates = []
        for s in range(d.integer(1, 6)):
            st = f"s{c}_{s}"
            devices.append(st)
            rate = _near(d, d.pick(_RATES)) if d.chance(0.7) else d.real(1e6, 2e8)
            rates.append(rate)
            links.append(_link(st, ap, rate, medium=f"m{c}"))
            if d.chance(0.25):  # a device behind the station: a cap near 1/coefficient
                dev = f"x{c}_{s}"
                devices.append(dev)
                links.append(_link(dev, st, _near(d, rate)))
                flow_devices.append(dev)
            else:
                flow_devices.append(st)
        level = 1.0 / sum(1.0 / r for r in rates)  # the cell's throughput with all present
        cell_load += level
        backhaul = 1e12 if d.chance(0.5) else _near(d, level * d.pick((0.3, 0.5, 1.0, 2.0)))
        links.append(_link(ap, "sw", backhaul))
    total = cell_load + sum(float(x.bandwidth_bps) for x in links[:n_wired])
    uplink = 1e12 if d.chance(0.3) else _near(d, total * d.pick((0.2, 0.5, 0.9, 1.0, 1.5)))
    links.append(_link("sw", "srv", uplink))
    # the transfers: a subset of the devices, one each
    m = d.integer(1, len(flow_devices))
    chosen = [flow_devices[i] for i in sorted(_subset(d, len(flow_devices), m))]
    upload = d.chance(0.6)
    senders = chosen if upload else ["srv"] * m
    receivers = ["srv"] * m if upload else chosen
    base = d.pick((0.0, 1e-6, 1.0, 29.760701469594366, 1e3, 1e5, 1e6, 3.15e7))
    span = d.pick((0.0, 1e-9, 1e-6, 1e-3, 0.1, 10.0))
    instants = [base + d.real(0.0, span) for _ in range(d.integer(1, 4))]
    start = np.array([_near(d, d.pick(instants)) if d.chance(0.5) else d.pick(instants)
                      for _ in range(m)])
    start = np.maximum(start, 0.0)
    size = d.pick((153920.0, 8e6, 1e3, 1.6e7))
    if player == "stops" or (player == "pieces" and d.chance(0.7)):  # (one size for all,
        # as a model's epoch; a pieces case otherwise as a Flower round's messages)
        bits = np.full(m, size if d.chance(0.95) else d.pick((0.0, 1.0, 1e-3)))
    else:  # (each its own: any player; pieces as a Flower round's messages)
        bits = np.array([size if d.chance(0.6) else
                         d.pick((0.0, 1e-3, 1.0, 8.0, _near(d, size), d.real(1.0, 2.0 * size)))
                         for _ in range(m)])
    nodes = devices + others
    return Case(player, nodes, len(devices), links, media, senders, receivers, start, bits)


def _subset(d: Draws, n: int, m: int) -> list[int]:
    pool = list(range(n))
    out = []
    for _ in range(m):
        out.append(pool.pop(d.integer(0, len(pool) - 1)))
    return out


def draw_changes(d: Draws, case: Case, reference: np.ndarray) -> None:
    """Capacity changes for a ``pieces`` case: at transfer starts, at the reference's last
    bits (exactly or within ulps) and elsewhere, each scaling some links."""
    topo = case.topology()
    base = np.array(topo.capacity_bps, dtype=float)
    marks = [float(x) for x in case.start_s] + [float(x) for x in reference if np.isfinite(x)]
    lo, hi = float(case.start_s.min()), max(marks)
    instants = set()
    for _ in range(d.integer(1, 6)):
        if d.chance(0.7):
            t = _near(d, d.pick(marks))
        else:
            t = lo + d.real(0.0, 1.0) * (hi - lo)
        if t > 0.0:
            instants.add(t)
    caps = base
    for t in sorted(instants):
        caps = caps.copy()
        for i in range(len(case.links)):
            if d.chance(0.5):
                f = d.pick((0.5, 0.9, 1.0 + 1e-12, 1.1, 2.0)) if d.chance(0.8) else d.real(0.2, 3)
                caps[2 * i] = caps[2 * i + 1] = base[2 * i] * f
        case.changes.append((t, caps))


def draw_stops(d: Draws, case: Case, reference: np.ndarray) -> None:
    """Stop instants for a ``stops`` case: about half the transfers stopped, at their start,
    at (or within ulps of) a last bit of the reference, at a capacity change, or anywhere
    between their start and their last bit; never before their start."""
    marks = [float(x) for x in reference if np.isfinite(x)] + [t for t, _ in case.changes]
    m = len(case.start_s)
    stops = np.full(m, np.inf)
    for j in range(m):
        if not d.chance(0.5):
            continue
        start = float(case.start_s[j])
        end = float(reference[j]) if np.isfinite(reference[j]) else start + 1.0
        kind = d.integer(0, 3)
        if kind == 0:
            t = _near(d, start)
        elif kind == 1 and marks:
            t = _near(d, d.pick(marks))
        elif kind == 2:
            t = _near(d, end)
        else:
            t = start + d.real(0.0, 1.0) * (end - start)
        stops[j] = max(t, start)
    case.stops = stops


# -- the reference ---------------------------------------------------------------------------
def reference_times(case: Case) -> np.ndarray:
    """Each transfer's last-bit time (s) through the flow network (links without latency:
    arrival = last bit), capacity changes set by ``set_capacities`` at their instants."""
    topo = case.topology()
    env = simpy.Environment()
    n = len(case.nodes)
    net = FlowNetwork(env, topo, EnergyMeter([0.0] * n, [0.0] * n))
    m = len(case.senders)
    out = np.full(m, np.nan)
    directions = list(range(len(topo.capacity_bps)))
    for t, caps in case.changes:
        fire_after(env, t, lambda _e, caps=caps: net.set_capacities(directions, caps.tolist()))
    for i in range(m):
        fire_after(env, float(case.start_s[i]), lambda _e, i=i: net.send(
            case.senders[i], case.receivers[i], float(case.bits[i]) / 8.0,
            lambda at, i=i: out.__setitem__(i, at)))
    env.run()
    return out


def reference_stopped(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """A ``stops`` case through the flow network: (each transfer's last-bit time (s; inf:
    stopped first), the bits each had left when :meth:`FlowNetwork.cancel` stopped it (NaN:
    it was not))."""
    topo = case.topology()
    env = simpy.Environment()
    n = len(case.nodes)
    net = FlowNetwork(env, topo, EnergyMeter([0.0] * n, [0.0] * n))
    m = len(case.senders)
    out, cut = np.full(m, np.inf), np.full(m, np.nan)
    flows: list[Any] = [None] * m
    directions = list(range(len(topo.capacity_bps)))
    routes = [topo.route(s, r) for s, r in zip(case.senders, case.receivers, strict=True)]
    for t, caps in case.changes:
        fire_after(env, t, lambda _e, caps=caps: net.set_capacities(directions, caps.tolist()))
    for i in range(m):
        fire_after(env, float(case.start_s[i]), lambda _e, i=i: flows.__setitem__(i, net.send_on(
            routes[i], float(case.bits[i]) / 8.0, lambda at, i=i: out.__setitem__(i, at))))

    def stop(i: int) -> None:
        if np.isinf(out[i]):  # (its last bit has not left)
            cut[i] = net.cancel(flows[i])

    stops = case.stops if case.stops is not None else np.full(m, np.inf)
    for i in np.flatnonzero(np.isfinite(stops)).tolist():
        fire_after(env, float(stops[i]), lambda _e, i=i: stop(i))
    env.run()
    return out, cut


def played_stopped(case: Case) -> tuple[np.ndarray, np.ndarray] | None:
    """A ``stops`` case through :func:`netsim.fastepoch.play_phase_stopping`: (last bits,
    bits left when stopped), or None (declined)."""
    topo = case.topology()
    m = len(case.senders)
    table = RouteTable.of([topo.route(s, r) for s, r in zip(case.senders, case.receivers,
                                                            strict=True)])
    rows = np.arange(m)
    capacity = np.array(topo.constraint_capacity, dtype=float)
    pieces = _pieces_of(case, capacity) if case.changes else None
    played = play_phase_stopping(case.start_s, rows, table, float(case.bits[0]), capacity,
                                 table.hops_of(rows), _onset(topo), pieces, case.stops)
    return None if played is None else (played.last_bit_s, played.cut_bits)


def _pieces_of(case: Case, capacity: np.ndarray) -> CapacityPieces:
    """The case's capacity changes as :class:`CapacityPieces` (links' directions changed,
    media budgets kept)."""
    n_dir = len(case.topology().capacity_bps)
    instants = [t for t, _ in case.changes]
    vectors = [capacity] + [np.concatenate([caps, capacity[n_dir:]]) for _, caps in case.changes]

    def capacity_at(t: float) -> np.ndarray:
        return vectors[int(np.searchsorted(instants, t, side="right"))]

    def next_change_s(t: float) -> float:
        k = int(np.searchsorted(instants, t, side="right"))
        return instants[k] if k < len(instants) else math.inf

    return CapacityPieces(capacity_at, next_change_s)


# -- the players -----------------------------------------------------------------------------
def played_times(case: Case) -> np.ndarray | None:
    """Each transfer's last-bit time (s) through the case's player, or None (declined)."""
    topo = case.topology()
    m = len(case.senders)
    table = RouteTable.of([topo.route(s, r) for s, r in zip(case.senders, case.receivers,
                                                            strict=True)])
    rows = np.arange(m)
    hops = table.hops_of(rows)
    capacity = np.array(topo.constraint_capacity, dtype=float)
    onset = _onset(topo)
    if case.player == "pieces":
        n_dir = len(topo.capacity_bps)
        instants = [t for t, _ in case.changes]
        vectors = [capacity] + [np.concatenate([caps, capacity[n_dir:]])
                                for _, caps in case.changes]

        def capacity_at(t: float) -> np.ndarray:
            return vectors[int(np.searchsorted(instants, t, side="right"))]

        def next_change_s(t: float) -> float:
            k = int(np.searchsorted(instants, t, side="right"))
            return instants[k] if k < len(instants) else math.inf

        played = play_phase(case.start_s, rows, table, case.bits, vectors[0], hops, onset,
                            CapacityPieces(capacity_at, next_change_s))
        return None if played is None else played[0]
    if case.player == "fluid":
        return fluid_times(case)
    if case.player == "online":
        return _online(case.start_s, table.cap_bps[rows], case.bits, capacity, hops, onset)
    out = _play_piece(case.start_s, table.cap_bps[rows], case.bits, capacity, hops, onset,
                      math.inf)
    return None if out is None else out[0]


def _onset(topo: Topology) -> np.ndarray | None:
    out = np.full(len(topo.constraint_capacity), np.inf)
    n_dir = len(topo.capacity_bps)
    for k, med in enumerate(topo.constraint_medium):
        onset = topo.media[med].contention_onset_flows
        if onset is not None:
            out[n_dir + k] = onset
    return out if np.isfinite(out).any() else None


def _online(start_s: np.ndarray, caps: np.ndarray, bits: np.ndarray, capacity: np.ndarray,
            owner_hops: tuple[np.ndarray, np.ndarray, np.ndarray],
            onset: np.ndarray | None) -> np.ndarray | None:
    """The buffered arrays' way: flows on no binding constraint at their caps, those on one
    kept by a :class:`SharedConstraint` each; None where a flow crosses two (events)."""
    owner, hops, refs = owner_hops
    if onset is not None and len(hops):
        crossed, flows_on = np.unique(hops, return_counts=True)
        if np.any(flows_on > onset[crossed]):
            return None
    coef = hop_coefficients(refs, capacity)
    binding = can_bind(owner, hops, coef, caps, capacity)
    hit = binding[hops]
    if len(owner) and hit.any() and np.bincount(owner[hit]).max() > 1:
        return None
    out = np.where(bits > 0.0, start_s + bits / caps, start_s)
    for b in np.unique(hops[hit]).tolist():
        at = hit & (hops == b)
        f = owner[at]
        out[f] = play_online(start_s[f], caps[f], bits[f], float(capacity[b]), coef[at])
    return out


def play_online(start_s: np.ndarray, cap_bps: np.ndarray, bits: np.ndarray,
                capacity_bps: float, coef: np.ndarray) -> np.ndarray:
    """Flows started in time order on one :class:`SharedConstraint`, finishes played as they
    come (as the buffered player's heap does): when each last bit leaves (s)."""
    c = SharedConstraint(capacity_bps)
    order = np.argsort(start_s, kind="stable").tolist()
    out = np.full(len(start_s), np.inf)
    k = 0
    while k < len(order) or c.flows:
        at = c.next_finish_s()
        if k < len(order) and start_s[order[k]] <= at:
            j = order[k]
            if bits[j] <= 0.0:  # (the buffered player: arrives at once, nothing moves)
                out[j] = float(start_s[j])
            else:
                c.add(j, float(bits[j]), float(cap_bps[j]), float(coef[j]), float(start_s[j]))
            k += 1
            continue
        for j in c.finish_due(at):
            out[j] = at
    return out


# -- one case --------------------------------------------------------------------------------
def check(d: Draws, player: str) -> Outcome:
    """Draw a case for ``player``, play it both ways and compare (module docstring)."""
    case = draw_case(d, player)
    reference = reference_times(case)
    if player == "pieces" or (player == "stops" and d.chance(0.5)):
        draw_changes(d, case, reference)
        reference = reference_times(case)
    if player == "stops":
        draw_stops(d, case, reference)
        reference, reference_cut = reference_stopped(case)
        both = played_stopped(case)
        if both is None:
            return Outcome(case, True)
        played, played_cut = both
        return Outcome(case, False, reference, played, reference_cut, played_cut,
                       stop_disagreement(case, reference, reference_cut, played, played_cut))
    played = played_times(case)
    if played is None:
        return Outcome(case, True)
    return Outcome(case, False, reference, played, disagreement(case, reference, played))


def disagreement(case: Case, reference: np.ndarray, played: np.ndarray) -> float:
    """The largest ``|played - reference|`` over its allowance (module docstring); inf where
    one finishes and the other does not."""
    if np.isnan(reference).any() or np.isnan(played).any():
        return math.inf
    same_inf = np.isinf(reference) & np.isinf(played)
    if np.any(np.isinf(reference) != np.isinf(played)):
        return math.inf
    r, p = reference[~same_inf], played[~same_inf]
    t0 = float(case.start_s.min())
    allow = 8.0 * (CAPACITY_TOLERANCE * (r - t0)
                   + np.vectorize(time_slack_s, otypes=[float])(r))
    off = np.abs(p - r)
    return float(np.max(np.where(off > 0.0, off / np.maximum(allow, 5e-324), 0.0))) \
        if len(r) else 0.0


def stop_disagreement(case: Case, reference: np.ndarray, reference_cut: np.ndarray,
                      played: np.ndarray, played_cut: np.ndarray) -> float:
    """:func:`disagreement` of a ``stops`` case: transfers that finished both ways by their
    last bits; those stopped both ways by the bits left (within what the transfer's cap moves
    in the time allowance at its stop, plus 1e-9 of its size, eight times over); one that
    finished one way and was stopped the other only where it finished within the allowance
    of its stop with no more than that many bits left (a tie of a stop with a last bit)."""
    assert case.stops is not None
    topo = case.topology()
    table = RouteTable.of([topo.route(s, r) for s, r in zip(case.senders, case.receivers,
                                                            strict=True)])
    caps = table.cap_bps
    t0 = float(case.start_s.min())
    worst = 0.0
    for j in range(len(played)):
        r_cut, p_cut = not np.isnan(reference_cut[j]), not np.isnan(played_cut[j])
        if not r_cut and not p_cut:
            sub = Case(case.player, case.nodes, case.n_devices, case.links, case.media,
                       case.senders[j:j + 1], case.receivers[j:j + 1], case.start_s, case.bits)
            worst = max(worst, disagreement(sub, reference[j:j + 1], played[j:j + 1]))
            continue
        at = float(case.stops[j])
        time_allow = 8.0 * (CAPACITY_TOLERANCE * (at - t0) + time_slack_s(at))
        rate = float(caps[j]) if np.isfinite(caps[j]) else 0.0
        bits_allow = 8.0 * CAPACITY_TOLERANCE * float(case.bits[j]) + rate * time_allow
        if r_cut and p_cut:
            off = abs(float(played_cut[j]) - float(reference_cut[j]))
        else:  # (a tie: finished at its stop one way, stopped with ~0 bits the other)
            done = float(played[j]) if r_cut else float(reference[j])
            left = float(reference_cut[j]) if r_cut else float(played_cut[j])
            if abs(done - at) > time_allow:
                return math.inf
            off = left
        worst = max(worst, off / max(bits_allow, 5e-324) if off > 0.0 else 0.0)
    return worst


def describe(outcome: Outcome) -> str:
    """A disagreement as text (floats exact), to paste into a regression test."""
    c = outcome.case
    return "\n".join([
        f"player={c.player} worst={outcome.worst:.3g}",
        f"nodes={c.nodes} n_devices={c.n_devices}",
        "links=" + repr([(x.a, x.b, x.bandwidth_bps.hex(), x.medium) for x in c.links]),
        "media=" + repr([(x.id, x.kind, x.contention_onset_flows) for x in c.media]),
        f"senders={c.senders} receivers={c.receivers}",
        "start_s=" + repr([float(x).hex() for x in c.start_s]),
        "bits=" + repr([float(x).hex() for x in c.bits]),
        "changes=" + repr([(t.hex(), [float(x).hex() for x in caps]) for t, caps in c.changes]),
        "stops=" + repr(None if c.stops is None else [float(x).hex() for x in c.stops]),
        f"reference_cut={None if outcome.reference_cut is None else outcome.reference_cut.tolist()}",
        f"played_cut={None if outcome.played_cut is None else outcome.played_cut.tolist()}",
        f"reference={None if outcome.reference is None else outcome.reference.tolist()}",
        f"played={None if outcome.played is None else outcome.played.tolist()}",
    ])


def fluid_times(case: Case) -> np.ndarray:
    """Each transfer's last-bit time (s) by the planners' fluid replay (netsim.network.fluid:
    progressive filling at every start and finish, capacity changes left out): a third
    opinion where the player and the flow network disagree."""
    from netsim.network.fluid import replay

    topo = case.topology()
    routes = [topo.route(s, r) for s, r in zip(case.senders, case.receivers, strict=True)]
    capacity = np.array(topo.constraint_capacity, dtype=float)
    onset = _onset(topo)
    loss = None
    if onset is not None:
        loss = np.zeros(len(capacity))
        n_dir = len(topo.capacity_bps)
        for k, med in enumerate(topo.constraint_medium):
            loss[n_dir + k] = topo.media[med].contention_loss_per_flow
    return replay([list(r.flow_hops) for r in routes],
                  [list(r.coefficients(capacity) or [1.0] * len(r.flow_hops)) for r in routes],
                  case.bits, case.start_s, capacity, onset_flows=onset, loss_per_flow=loss)


# -- cases as data (tests/data/player_cases.json) ------------------------------------------
def case_to_json(case: Case) -> dict:
    """``case`` as JSON data, floats exact (``float.hex``)."""
    return {
        "player": case.player, "nodes": case.nodes, "n_devices": case.n_devices,
        "links": [[x.a, x.b, float(x.bandwidth_bps).hex(), x.medium] for x in case.links],
        "media": [[x.id, x.kind, x.contention_onset_flows, x.contention_loss_per_flow]
                  for x in case.media],
        "senders": case.senders, "receivers": case.receivers,
        "start_s": [float(x).hex() for x in case.start_s],
        "bits": [float(x).hex() for x in case.bits],
        "changes": [[float(t).hex(), [float(x).hex() for x in caps]] for t, caps in case.changes],
    }


def case_from_json(data: dict) -> Case:
    """The case :func:`case_to_json` wrote."""
    def floats(xs: list[str]) -> np.ndarray:
        return np.array([float.fromhex(x) for x in xs], dtype=float)

    return Case(data["player"], list(data["nodes"]), int(data["n_devices"]),
                [_link(a, b, float.fromhex(bps), medium) for a, b, bps, medium in data["links"]],
                [SimpleNamespace(id=i, kind=k, contention_onset_flows=onset,
                                 contention_loss_per_flow=loss)
                 for i, k, onset, loss in data["media"]],
                list(data["senders"]), list(data["receivers"]), floats(data["start_s"]),
                floats(data["bits"]),
                [(float.fromhex(t), floats(caps)) for t, caps in data["changes"]])
