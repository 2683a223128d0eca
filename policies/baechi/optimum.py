"""placement-optimum: an exact CP-SAT model of placement + schedule + memory for small graphs.

Same semantics as the list scheduler and the executor (faithful or heterogeneous costs): each
operator on one device, one operator at a time per device; a tensor crossing devices is one
transfer per (operator, destination device) after the producer ends, occupying the sender's and
the receiver's channel (no overlap per channel); memory per device, as cumulative intervals:
persistent all step, temporary while running, output from the start until its local consumers
and outgoing transfers end, received tensors from the transfer's start until their consumers on
that device end. Times are integers in units of ``unit_s``. Minimises the step's makespan.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
from ortools.sat.python import cp_model

from netsim.opgraph.costs import CostModel, DeviceLike, IndexedGraph

MAX_OPERATORS = 16
MAX_DEVICES = 3


@dataclass
class OptimumResult:
    """status: ``optimal``, ``feasible`` (time limit hit), ``infeasible`` or ``unknown``;
    ``step_time_s`` the best step found (s), ``lower_bound_s`` the proven bound (s),
    ``placement`` node -> device index."""

    status: str
    step_time_s: float
    lower_bound_s: float
    placement: dict
    unit_s: float


def placement_optimum(
    graph: nx.DiGraph,
    devices: Sequence[DeviceLike],
    mode: str = "faithful",
    topology=None,
    time_limit_s: float = 20.0,
    seed: int = 0,
) -> OptimumResult:
    """Optimal step time of ``graph`` on ``devices`` (about a dozen operators, 2-3 devices).

    Raises
    ------
    ValueError
        If the instance has more than ``MAX_OPERATORS`` operators or ``MAX_DEVICES`` devices.
    """
    if graph.number_of_nodes() > MAX_OPERATORS or len(devices) > MAX_DEVICES:
        raise ValueError(
            f"placement-optimum handles at most {MAX_OPERATORS} operators and {MAX_DEVICES} devices "
            f"(got {graph.number_of_nodes()} operators, {len(devices)} devices): use m-etf or m-sct"
        )
    ig = IndexedGraph(graph, per_tensor=False)
    cost = CostModel(ig, devices, mode, topology)
    n, nd = len(ig), len(devices)
    comm = [[[cost.comm_s(ig.send_bytes[u], e, d) for d in range(nd)] for e in range(nd)] for u in range(n)]
    horizon_s = sum(max(r) for r in cost.compute_s) + sum(max(max(x) for x in c) for c in comm) * nd
    unit = max(horizon_s / 2e6, 1e-12)
    horizon = int(math.ceil(horizon_s / unit)) + 1
    dur = [[round(t / unit) for t in row] for row in cost.compute_s]
    cu = [[[round(t / unit) for t in row] for row in c] for c in comm]

    m = cp_model.CpModel()
    a = [[m.new_bool_var(f"a{i}_{d}") for d in range(nd)] for i in range(n)]
    s = [m.new_int_var(0, horizon, f"s{i}") for i in range(n)]
    e = [m.new_int_var(0, horizon, f"e{i}") for i in range(n)]
    free = [m.new_int_var(0, horizon, f"f{i}") for i in range(n)]
    dev_iv: list[list[cp_model.IntervalVar]] = [[] for _ in range(nd)]
    chan_iv: list[list[cp_model.IntervalVar]] = [[] for _ in range(nd)]
    mem: list[tuple[list[cp_model.IntervalVar], list[int]]] = [([], []) for _ in range(nd)]  # (intervals, demands)

    def add_mem(d, iv, demand):
        if demand > 0:
            mem[d][0].append(iv)
            mem[d][1].append(int(math.ceil(demand)))

    for i in range(n):
        m.add_exactly_one(a[i])
        m.add(free[i] >= e[i])
        for d in range(nd):
            m.add(e[i] == s[i] + dur[i][d]).OnlyEnforceIf(a[i][d])
            dev_iv[d].append(m.new_optional_interval_var(s[i], dur[i][d], e[i], a[i][d], f"c{i}_{d}"))
            add_mem(d, m.new_optional_fixed_size_interval_var(0, horizon, a[i][d], f"p{i}_{d}"), ig.memory_bytes[i])
            add_mem(d, m.new_optional_interval_var(s[i], dur[i][d], e[i], a[i][d], f"t{i}_{d}"), ig.temporary_bytes[i])
            size = m.new_int_var(0, horizon, f"os{i}_{d}")
            add_mem(d, m.new_optional_interval_var(s[i], size, free[i], a[i][d], f"o{i}_{d}"), ig.output_bytes[i])
    groups: dict[int, int] = {}
    for i in range(n):
        g = ig.group[i]
        if g >= 0:
            if g in groups:
                for d in range(nd):
                    m.add(a[i][d] == a[groups[g]][d])
            else:
                groups[g] = i
    for u in range(n):
        for v in ig.succs[u]:
            m.add(s[v] >= e[u])
            for d in range(nd):
                m.add(free[u] >= e[v]).OnlyEnforceIf([a[u][d], a[v][d]])
        if not ig.succs[u]:
            continue
        for d in range(nd):
            need = m.new_bool_var(f"need{u}_{d}")
            m.add_max_equality(need, [a[v][d] for v in ig.succs[u]])
            for src in range(nd):
                if src == d:
                    continue
                x = m.new_bool_var(f"x{u}_{src}_{d}")
                m.add_bool_and([a[u][src], need]).OnlyEnforceIf(x)
                m.add_bool_or([a[u][src].Not(), need.Not()]).OnlyEnforceIf(x.Not())
                xs = m.new_int_var(0, horizon, f"xs{u}_{src}_{d}")
                xe = m.new_int_var(0, horizon, f"xe{u}_{src}_{d}")
                iv = m.new_optional_interval_var(xs, cu[u][src][d], xe, x, f"x{u}_{src}_{d}")
                chan_iv[src].append(iv)
                chan_iv[d].append(iv)
                m.add(xs >= e[u]).OnlyEnforceIf(x)
                m.add(free[u] >= xe).OnlyEnforceIf(x)
                held = m.new_int_var(0, horizon, f"g{u}_{src}_{d}")
                rsize = m.new_int_var(0, horizon, f"rs{u}_{src}_{d}")
                add_mem(d, m.new_optional_interval_var(xs, rsize, held, x, f"r{u}_{src}_{d}"), ig.send_bytes[u])
                for v in ig.succs[u]:
                    m.add(s[v] >= xe).OnlyEnforceIf([x, a[v][d]])
                    m.add(held >= e[v]).OnlyEnforceIf([x, a[v][d]])
    for d in range(nd):
        m.add_no_overlap(dev_iv[d])
        m.add_no_overlap(chan_iv[d])
        if mem[d][0]:
            m.add_cumulative(mem[d][0], mem[d][1], int(math.floor(cost.memory_bytes[d])))
    makespan = m.new_int_var(0, horizon, "makespan")
    m.add_max_equality(makespan, e)
    m.minimize(makespan)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = 2
    solver.parameters.random_seed = seed
    code = solver.Solve(m)
    status = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible",
              cp_model.INFEASIBLE: "infeasible"}.get(code, "unknown")
    if status in ("optimal", "feasible"):
        placement = {ig.nodes[i]: next(d for d in range(nd) if solver.Value(a[i][d])) for i in range(n)}
        return OptimumResult(status, solver.ObjectiveValue() * unit, solver.BestObjectiveBound() * unit, placement, unit)
    return OptimumResult(status, math.nan, math.nan, {}, unit)
