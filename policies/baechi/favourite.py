"""m-SCT's soft favourite-child rule on top of m-ETF's list scheduler.

Followed from Baechi's public code (beomyeol/baechi, ``placer/m_sct.py``: ``SCTDevice``): only
the favourite child of the operator a device ran *last* is considered, and only once that child
is ready (all its inputs ended) and not placed yet (an operator is placed with the first of its
colocation group, ``'p' in fc_op`` there). If the device is the one where the child can start earliest
(ties count), the device is *awake*: it takes

1. the most urgent ready operator, if one can start on every device where it fits by the time
   the child could start here (urgency = the latest of its starts over those devices; ties by
   topological index; only in the ``urgent`` variant, see below), else
2. the favourite child, when it can start (the device idles until then, skipping other work).

Otherwise, or before the child is ready, plain m-ETF decides. Clause 1 is Baechi's: the faithful
mode's m-SCT uses :class:`UrgentFavouriteScheduler` (with Baechi's transfer rules and LP it then
places GNMT exactly as Baechi's code does); the heterogeneous mode leaves it out by default.
Nothing is pinned: another device may run the child first, and memory is checked as in m-ETF, so
the rule never makes a schedule infeasible that m-ETF would finish.

An operator's urgency is only computed when every device is free by the child's start (else
some device is busy past it, and an operator that fits there cannot be urgent; one that does not
fit there is not looked for). In the faithful mode the urgent operator is decided at its urgency
(the time every device could start it, Baechi's time step) and starts no earlier, as in Baechi's
time-stepped loop; otherwise as soon as it can on the device.
"""

from __future__ import annotations

from policies.baechi.listsched import _Scheduler


class SoftFavouriteScheduler(_Scheduler):
    """:class:`policies.baechi.listsched._Scheduler` with m-SCT's soft favourite-child rule
    (without Baechi's urgent-operator clause: see :class:`UrgentFavouriteScheduler`)."""

    def __init__(self, ig, cost, fixed=None, favourite=None) -> None:
        super().__init__(ig, cost, fixed, favourite)
        self.last = [-1] * self.nd  # operator each device ran last

    def _bound_to(self, i: int) -> int:
        """The device i must run on (pinned, or its colocation group placed), else -1."""
        if self.pin[i] >= 0:
            return self.pin[i]
        g = self.ig.group[i]
        return self.group_dev[g] if g >= 0 else -1

    def commit(self, c) -> None:
        self.last[c[2]] = c[1]
        super().commit(c)

    def choose(self, d: int, c):
        """Device d's next operator under the soft rule, given m-ETF's candidate ``c``."""
        last = self.last[d]
        f = self.fav[last] if last >= 0 else -1
        if f < 0 or self.dev[f] >= 0 or self.missing[f] or self._bound_to(f) >= 0:
            return c  # no child, or not ready, or placed already (with its group or pinned)
        inputs = self.inputs[f]  # sorted by end: the last one ends when f becomes ready
        ready_s = max(self.dev_free[d], max((x[3] for x in inputs), default=0.0))
        if c is not None and c[0] < ready_s:
            return c  # m-ETF's operator starts before the favourite child is ready
        cf = self.evaluate(f, d)
        if cf is None:
            return c
        start_f = cf[0]
        arrival, dev_free = self.arrival, self.dev_free
        for x in self.devices_for(f):
            if x == d or dev_free[x] >= start_f:
                continue
            bound = dev_free[x]  # lower bound of f's start on x: inputs without channel waits
            for _, un, du, eu, _, comm in inputs:
                a = eu if du == x else arrival[un + x]
                if a is None:
                    a = eu + comm[x]
                if a > bound:
                    bound = a
            if bound >= start_f:
                continue
            cx = self.evaluate(f, x)
            if cx is not None and max(cx[0], ready_s) < start_f:
                return c  # another device starts the child earlier
        urgent = self._urgent(d, start_f)
        return urgent if urgent is not None else cf

    def _urgent(self, d: int, by_s: float):
        """No urgent-operator clause in the default rule."""
        return None


class UrgentFavouriteScheduler(SoftFavouriteScheduler):
    """The soft rule with Baechi's urgent-operator clause (1. in the module docstring): the
    ``m-sct-urgent`` variant, and the faithful mode's m-SCT (Baechi runs it). Outside the faithful
    mode it is off by default."""

    def __init__(self, ig, cost, fixed=None, favourite=None) -> None:
        super().__init__(ig, cost, fixed, favourite)
        self.free_ready: set[int] = set()  # ready, unplaced, allowed anywhere
        self.bound: list[set[int]] = [set() for _ in range(self.nd)]  # ready, unplaced, bound to a device
        self.members: list[list[int]] = [[] for _ in range(ig.n_groups)]
        for i, g in enumerate(ig.group):
            if g >= 0:
                self.members[g].append(i)

    def ready(self, i: int) -> None:
        super().ready(i)
        d = self._bound_to(i)
        if d >= 0:
            self.bound[d].add(i)
        else:
            self.free_ready.add(i)

    def commit(self, c) -> None:
        i, d = c[1], c[2]
        g = self.ig.group[i]
        newly_bound = g >= 0 and self.group_dev[g] < 0
        self.free_ready.discard(i)
        self.bound[d].discard(i)
        super().commit(c)
        if newly_bound:
            for j in self.members[g]:
                if j in self.free_ready:
                    self.free_ready.discard(j)
                    self.bound[d].add(j)

    @staticmethod
    def _may_start_everywhere(inputs, by_s: float, nd: int, arrival) -> bool:
        """False when some input cannot be on some device by ``by_s`` even without channel
        waits (a lower bound of the start: the operator is not urgent)."""
        for _, un, du, eu, _, comm in inputs:
            if eu > by_s:
                return False
            for x in range(nd):
                if x != du:
                    a = arrival[un + x]
                    if (eu + comm[x] if a is None else a) > by_s:
                        return False
        return True

    def _urgent(self, d: int, by_s: float):
        """The candidate on d of the most urgent operator startable everywhere by ``by_s``."""
        best, best_key = None, None
        for i in self.bound[d]:
            ci = self.evaluate(i, d)
            if ci is not None and ci[0] <= by_s and (best_key is None or (ci[0], i) < best_key):
                best, best_key = ci, (ci[0], i)
        if max(self.dev_free) > by_s:
            return best
        nd, inputs, arrival = self.nd, self.inputs, self.arrival
        rank = self._rank_baechi if self.baechi else self._rank
        urgent_free, urgent_latest = -1, 0.0  # the winner and its urgency (s)
        # The result is the smallest (urgency, index); these orders only find it sooner: by
        # index, a later operator must be strictly more urgent to win, and the device free last
        # usually shows at once that it is not.
        dev_free = self.dev_free
        order = sorted(range(nd), key=lambda x: -dev_free[x])
        for i in sorted(self.free_ready):
            latest: float | None = None
            fits_here = False
            for x in order:
                r = rank(i, x)
                if r is None:
                    continue
                if r > by_s or (best_key is not None and (r, i) > best_key):
                    break  # not urgent, or less urgent than the best so far
                if latest is None or r > latest:
                    latest = r
                if x == d:
                    fits_here = True
            else:
                if (fits_here and latest is not None and (best_key is None or (latest, i) < best_key)
                        and self._may_start_everywhere(inputs[i], by_s, nd, arrival)):
                    urgent_free, urgent_latest, best_key = i, latest, (latest, i)
        if urgent_free < 0:
            return best
        here = self.evaluate(urgent_free, d)  # fits: its rank on d was found
        if not self.baechi:
            return here
        # faithful: Baechi runs it when every device could have started it
        return (urgent_latest, urgent_free, d, here[3], max(here[4], urgent_latest))

    def _rank(self, i: int, x: int) -> float | None:
        """i's start on x as :meth:`evaluate` ranks it, or None where it does not fit."""
        cx = self.evaluate(i, x)
        return None if cx is None else cx[0]

    def _rank_baechi(self, i: int, x: int) -> float | None:
        """:meth:`_rank` in the faithful mode without building the transfers (the full
        evaluation only where the memory check's fast path fails)."""
        rank, recv = self._baechi_rank(i, x)
        return rank if self._fits_surely(i, x, recv) else self._rank(i, x)

