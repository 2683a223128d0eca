"""The flow network's per-route plans (what a transfer loads, kept per route while the
capacities do not change): reused while they hold, rebuilt after a capacity change."""

from __future__ import annotations

import pytest

from tests.test_network import link, make


def test_a_route_plan_is_reused_until_a_capacity_changes() -> None:
    env, _, net = make(["a", "b"], [link("a", "b", 8e6)])
    route = net.topology.route("a", "b")
    first = net.send_on(route, 1e6, lambda _at: None)
    second = net.send_on(route, 1e6, lambda _at: None)
    assert first is not None and second is not None
    assert first.plan is second.plan and first.cap == 8e6
    env.run()
    net.set_capacities([route.hops[0]], [4e6])
    third = net.send_on(route, 1e6, lambda _at: None)
    assert third is not None and third.plan is not first.plan
    assert third.cap == pytest.approx(4e6)
    done: list[float] = []
    net.send_on(route, 1e6, done.append)
    env.run()
    assert done and done[0] == pytest.approx(env.now)
    assert net.active_flows == 0
