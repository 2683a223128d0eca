"""The policy contract (architecture spec, "The policy interface"): what a policy sees
(:class:`Observation`, read-only in fact), what it returns (:class:`Decision`), the
:class:`Policy` protocol, decision validation, and the registry of policies found through the
entry-point group ``netsim.policies``. Policies import from here; netsim never imports them.
"""

from netsim.policy.contract import (
    ClusterDecision,
    Decision,
    InvalidDecision,
    Observation,
    Policy,
)
from netsim.policy.registry import (
    NoParams,
    PolicyEntry,
    make_policy,
    policy_params,
    register,
    registered,
)
from netsim.policy.validate import validate_decision

__all__ = [
    "ClusterDecision", "Decision", "InvalidDecision", "NoParams", "Observation", "Policy",
    "PolicyEntry", "make_policy", "policy_params", "register", "registered", "validate_decision",
]
