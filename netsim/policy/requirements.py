"""What a policy needs of the world it runs in, checked before anything runs.

A policy class may declare ``requires``, a set of the names below; netsim checks them against
the scenario when the command line validates its inputs (exit 2, the policy named) and again
when a run starts (``runs.status`` ``failed`` with the reason, so that a sweep does not count
a run that could never train as a miss). A policy without ``requires`` needs nothing.

- ``"edges"``: edge aggregators (scenario ``edges:``, or ``generate.edges``): the
  hierarchical policies (docs/hierarchical.md).
- ``"static-world"``: no ``dynamics:`` block. None of netsim's policies declares it since
  issue 56 item 4: the synchronous (hierfavg; netsim.epochs.hierarchy) and the asynchronous
  (rfl-ha, async-hfl; netsim.epochs.tiered) hierarchical epochs play under sessions, traces
  and batteries (docs/hierarchical.md, "In a changing world"). It stays for plug-ins
  (docs/writing-a-policy.md) whose epochs or decisions assume a world that does not change: such a
  policy is refused under a ``dynamics:`` block with the reason rather than failing at its
  first epoch.
"""

from __future__ import annotations

from typing import Any

from netsim.scenario.errors import Problem
from netsim.scenario.schema import Scenario

EDGES = "edges"
STATIC_WORLD = "static-world"
KNOWN = frozenset({EDGES, STATIC_WORLD})


def requirements_of(policy: Any) -> frozenset[str]:
    """The requirements a policy (instance or class) declares (empty when none)."""
    declared = getattr(policy, "requires", None)
    return frozenset(declared) if declared else frozenset()


def has_edges(scenario: Scenario) -> bool:
    """Whether the scenario has edge aggregators, explicit or generated."""
    return bool(scenario.edges) or (scenario.generate is not None
                                    and scenario.generate.edges is not None)


def unmet(policy: Any, scenario: Scenario, name: str | None = None) -> list[str]:
    """Why ``policy`` (named ``name``, else its ``name``) cannot run on ``scenario``: one
    sentence per unmet requirement, empty when it can."""
    return reasons(requirements_of(policy),
                   name or getattr(policy, "name", None) or type(policy).__name__,
                   has_edges(scenario), scenario.dynamics is not None)


def reasons(needs: frozenset[str], label: str, edges: bool, dynamics: bool) -> list[str]:
    """:func:`unmet` from the scenario's facts: whether it has edges, a dynamics: block."""
    out = []
    if EDGES in needs and not edges:
        out.append(f"policy {label!r} needs edge aggregators; the scenario has none (add "
                   "edges: with explicit links, or generate.edges; docs/hierarchical.md)")
    if STATIC_WORLD in needs and dynamics:
        out.append(f"policy {label!r} runs in a static world only: it does not play under "
                   "a dynamics: block (sessions, traces, batteries); remove the block or "
                   "choose another policy")
    return out


def requirement_problems(policy: Any, scenario: Scenario, path: str = "policy",
                         name: str | None = None) -> list[Problem]:
    """:func:`unmet` as problems at ``path`` (the command line's ``--policy``, a scenario's
    ``policies.NAME``)."""
    return [Problem(path, reason) for reason in unmet(policy, scenario, name)]
