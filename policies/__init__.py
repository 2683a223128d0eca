"""Orchestration policies, one package per family, each implementing ``netsim.policy.Policy``.

They are found by name through the entry-point group ``netsim.policies`` (declared in
setup.cfg); ``netsim policies`` lists them. To add a policy, decorate its class with
``netsim.policy.register`` and add a line under that group.
"""
