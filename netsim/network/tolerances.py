"""Every tolerance of netsim's flow arithmetic, in one place, and why each is what it is.

The flow network (netsim.network.flows, the event path) and the array players that must give
its times (netsim.network.playback, netsim.network.nested, netsim.network.online,
netsim.fastepoch's pieces, netsim.epochs.buffered_arrays) compare floats at three kinds of
places. Each kind has one rule, written here and called from every path, so that the paths
decide every tie alike and agree to rounding (tests/test_player_fuzz.py and
benchmarks/fuzz_players.py check them against each other).

1. **Rates against capacities and shares** (:data:`CAPACITY_TOLERANCE`, relative, 1e-9): a
   flow whose cap lies within 1e-9 of the fair share counts as sharing; caps that fill a
   constraint to within 1e-9 of its capacity fit. Rates are sums and quotients of a few
   hundred terms at most, so their rounding is far below 1e-9 and a tie is decided the same
   way wherever it is computed; a decision that goes the other way inside the band moves a
   rate by at most 1e-9 of itself.
2. **Bits served against a flow's size** (:func:`clock_reached`): a flow that shares a
   constraint finishes when the constraint's virtual clock (bits served per sharing flow) has
   reached its target, within 1e-9 of the clock (the clock is a running sum: its rounding
   grows with it) **or within what the flow's rate serves in twice the time slack below**.
   The second term is what makes every player end: at a large absolute time ``now`` the
   instant of a finish ``now + rest / rate`` cannot be told from ``now`` once ``rest / rate``
   is below an ulp of ``now`` (2.2e-16 x now), so a test on the clock alone could find the
   flow due at ``now`` and not yet finished, forever (0.6.0.dev0's array playback did, issue
   44). With the slack, the flow whose finish set the next instant always finishes at it; and
   twice the time slack, so that every finish the time test below lets happen now is reached
   by its clock too (else a finish due now and not reached would be put back at now again and
   again: the flow network's nests did, at 3.15e7 s).
3. **Instants against now** (:func:`due_limit_s`, :func:`time_slack_s`: 2^-52 of ``now``,
   1 to 2 ulps, plus 1e-12 s): a finish due within the slack of ``now`` happens at ``now``,
   and only at a finish's instant: a start (the players) or a wake-up armed for an entry
   superseded since (the flow network) ends nothing. The slack covers the rounding of
   ``now + rest / rate`` and of SimPy's ``now + delay`` (half an ulp each) and no more: a
   finish moved by the slack moves the flows it shares with, by the bits its rate serves in
   it, and a slower flow turns those bits into more time (a rate 70 times slower, 70 times
   more). So the slack is kept at rounding's size at every absolute time (0.6.0.dev0's 1e-12
   of ``now`` was 31.5 us after a year of simulated time, as long as whole transfers), and the
   paths decide alike which finishes fall together. The picosecond is for times near 0, where
   an ulp means nothing physical: transfers ending within 1e-12 s of each other end together.

The planners' fluid replay (netsim.network.fluid) uses the same time slack (until 0.6.0 it
counted a flow done within 1e-9 of the absolute time: 32 ms after a year of simulated time,
when whole phases last a few ms).
"""

from __future__ import annotations

CAPACITY_TOLERANCE = 1e-9
"""Relative tolerance of every comparison of rates with capacities and shares, and of a
virtual clock with a flow's target."""
TIME_SLACK_REL = 2.0 ** -52
"""Relative part of the time slack (2.2e-16, 1 to 2 ulps of ``now``): an instant within this
of ``now`` is ``now``."""
TIME_SLACK_ABS_S = 1e-12
"""Absolute part of the time slack (s), for instants near 0."""


def time_slack_s(now_s: float) -> float:
    """The time slack at ``now_s`` (s): a finish due within this many seconds of ``now_s``
    happens at ``now_s``."""
    return abs(now_s) * TIME_SLACK_REL + TIME_SLACK_ABS_S


def due_limit_s(now_s: float) -> float:
    """The latest instant (s) that counts as ``now_s`` (``now_s >= 0``) for a finish due at
    a known time (a flow at its cap, a capped group, a wake-up)."""
    return now_s * (1.0 + TIME_SLACK_REL) + TIME_SLACK_ABS_S


def clock_reached(clock: float, rate_bps: float, now_s: float) -> float:
    """The largest target (bits on a virtual clock) that counts as reached when the clock
    reads ``clock`` and advances at ``rate_bps`` (bit/s per sharing flow) at ``now_s`` (s):
    within :data:`CAPACITY_TOLERANCE` of the clock, or within what ``rate_bps`` serves in
    twice :func:`time_slack_s` (see the module: a finish closer than that cannot be
    scheduled later than ``now_s``). Twice, so that every finish :func:`due_limit_s` lets
    happen now is reached by its clock too, whatever the rounding of ``now + rest / rate``
    and of the limit itself (``1 + 1e-12`` is not exact: the limit's slack is 1.00009e-12 of
    ``now`` plus an ulp); were it not, a finish due now and not reached would be put back at
    now again and again (found by benchmarks/fuzz_players.py at 3.15e7 s)."""
    tol = (clock if clock > 1.0 else (-clock if clock < -1.0 else 1.0)) * CAPACITY_TOLERANCE
    slack = rate_bps * (2.0 * (abs(now_s) * TIME_SLACK_REL + TIME_SLACK_ABS_S))
    return clock + (tol if tol > slack else slack)
