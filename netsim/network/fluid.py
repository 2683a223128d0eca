"""A fluid replay of flows over any routes, in arrays and without SimPy (netsim's).

The general case the decomposed playback (:mod:`netsim.network.playback`) leaves out: flows
that cross several constraints that can bind (a saturated cell behind a saturated backhaul),
a Wi-Fi cell whose uploads start while some downloads still take air time, a contended cell
past its onset. Between two events (a flow starting or its last bit leaving) the rates are
the sharing core's max-min rates of the flows present
(:func:`netsim.network.sharing.progressive_filling`, a contended medium's budget from
:func:`netsim.network.sharing.medium_budget` with its flows present), so the replay is the
flow network's (:mod:`netsim.network.flows`) without its event queue, to rounding.

A flow may wait for another: it starts ``delay_s`` after its predecessor's last bit has left
(an epoch's upload after its download's latency and the participant's training). Used by
:func:`netsim.costs.estimate_epoch` where the fast path hands an epoch to the event engine,
so the planners' estimate is the simulated epoch on every network. Cost: one progressive
filling per event, O(events x hops x log constraints): for planning, not for the engine's
large epochs (those are the fast path's or the event engine's).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netsim import loopguard
from netsim.network.sharing import medium_budget, progressive_filling
from netsim.network.tolerances import CAPACITY_TOLERANCE, due_limit_s

_INF = float("inf")


def replay(hops: Sequence[Sequence[int]], coefs: Sequence[Sequence[float]],
           bits: np.ndarray, start_s: np.ndarray, capacity: np.ndarray,
           after: np.ndarray | None = None, delay_s: np.ndarray | None = None,
           onset_flows: np.ndarray | None = None,
           loss_per_flow: np.ndarray | None = None) -> np.ndarray:
    """When each flow's last bit leaves (s).

    Flow f crosses constraints ``hops[f]`` with coefficients ``coefs[f]`` and carries
    ``bits[f]`` bits; it starts at ``start_s[f]``, or, where ``after[f] >= 0``, ``delay_s[f]``
    after flow ``after[f]``'s last bit has left (``start_s[f]`` is then ignored).
    ``capacity``: per constraint (bit/s, or a medium's air-time budget);
    ``onset_flows``/``loss_per_flow``: per constraint, a contended medium's figures (inf/0:
    none), its budget shrinking with the flows present (:func:`medium_budget`).
    """
    n = len(hops)
    done = np.full(n, np.nan)
    left = np.asarray(bits, dtype=float).copy()
    begin = np.asarray(start_s, dtype=float).copy()
    waits = np.zeros(n, dtype=bool) if after is None else np.asarray(after) >= 0
    begin[waits] = _INF
    successors: dict[int, list[int]] = {}
    if after is not None:
        for f in np.flatnonzero(waits).tolist():
            successors.setdefault(int(after[f]), []).append(f)
    contended = None
    if onset_flows is not None and np.isfinite(onset_flows).any():
        contended = np.flatnonzero(np.isfinite(onset_flows))
    size = np.asarray(bits, dtype=float)
    pending: list[int] = []

    def finish(f: int, at: float) -> None:
        """Flow f's last bit has left at ``at``: its successors are due."""
        done[f] = at
        left[f] = 0.0
        for g in successors.get(f, ()):
            begin[g] = at + float(delay_s[g])  # type: ignore[index]
            if size[g] <= 0.0:
                finish(g, begin[g])
            else:
                pending.append(g)

    for f in range(n):
        if not waits[f]:
            if size[f] <= 0.0:
                finish(f, float(begin[f]))
            else:
                pending.append(f)
    active: list[int] = []
    now = min((float(begin[f]) for f in pending), default=_INF)
    # Termination: every pass starts a flow, finishes one (the one whose end set the instant
    # is due within due_limit_s) or jumps to a start: at most 3n passes
    passes, most = 0, loopguard.bound(3 * n + 3)
    while True:
        passes += 1
        if passes > most:
            loopguard.stuck("netsim.network.fluid.replay", most, {
                "hops": [list(h) for h in hops], "coefs": [list(c) for c in coefs],
                "bits": np.asarray(bits, dtype=float), "start_s": np.asarray(start_s, dtype=float),
                "capacity": np.asarray(capacity, dtype=float), "after": after,
                "delay_s": delay_s, "onset_flows": onset_flows, "loss_per_flow": loss_per_flow})
        if pending:  # starts due now
            due = [f for f in pending if begin[f] <= now]
            if due:
                active += due
                pending = [f for f in pending if begin[f] > now]
        if not active:
            if not pending:
                break
            now = min(float(begin[f]) for f in pending)
            continue
        cap = capacity
        if contended is not None:
            count = np.zeros(len(capacity))
            for f in active:
                for h in hops[f]:
                    count[h] += 1
            cap = np.array(capacity, dtype=float)
            for h in contended.tolist():
                if count[h]:
                    cap[h] *= medium_budget(int(count[h]), int(onset_flows[h]),  # type: ignore[index]
                                            float(loss_per_flow[h]))  # type: ignore[index]
        rates: np.ndarray = np.asarray(progressive_filling([hops[f] for f in active], cap,
                                                           [coefs[f] for f in active]),
                                       dtype=float)
        act = np.array(active)
        with np.errstate(divide="ignore"):
            ends = np.where(rates > 0.0, now + left[act] / rates, _INF)
        first_end = float(ends.min())
        nxt = min(first_end, min((float(begin[f]) for f in pending), default=_INF))
        if nxt == _INF:
            raise RuntimeError("fluid replay: flows present and none can move")
        left[act] -= rates * (nxt - now)
        now = nxt
        # (a flow ends within the time slack of a finish's instant, as the flow network's
        # wake-ups; at a start before every end, only what has no bits left)
        gone = (left[act] <= size[act] * CAPACITY_TOLERANCE)
        if first_end <= now:
            gone |= ends <= due_limit_s(now)
        for f in act[gone].tolist():
            finish(f, now)
        active = [f for f in active if left[f] > 0.0]
    return done
