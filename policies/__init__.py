"""Orchestration policies. Each module registers its policies by name (see policies/base.py).

``netsim policies`` lists them. To add a family, create its module (or package) and add its
import path to ``POLICY_MODULES``.
"""

from __future__ import annotations

import importlib

POLICY_MODULES = [
    "policies.baselines",
    "policies.pact",
    "policies.depl",
    "policies.baechi.policy",
]


def load_all() -> None:
    """Import every policy module so that its policies are registered."""
    for module in POLICY_MODULES:
        importlib.import_module(module)
