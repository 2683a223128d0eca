"""What every kind of epoch reads of the world (:class:`EpochWorld`): the contract between
:class:`netsim.engine.World`, which keeps the world's state, and the epoch modules, which run
epochs in it. Typed as a Protocol so that the epoch modules do not import the engine (the
engine imports them: imports run one way)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

import numpy as np
import simpy

from netsim.devices import DeviceTable
from netsim.dynamics.buffered import UpdateBuffer
from netsim.dynamics.world import Dynamics
from netsim.energy import EnergyMeter, EnergySnapshot
from netsim.fastepoch import RouteTable
from netsim.network import FlowNetwork
from netsim.policy import Decision
from netsim.scenario.schema import ModelSpec, Scenario
from netsim.workload import Workload


class EpochWorld(Protocol):
    """The world as an epoch sees it (netsim.engine.World implements it)."""

    scenario: Scenario
    model: ModelSpec
    env: simpy.Environment
    devices: DeviceTable
    meter: EnergyMeter
    network: FlowNetwork
    dynamics: Dynamics
    buffer: UpdateBuffer
    dynamic: bool
    fast_epochs: bool
    epochs_by_path: dict[str, int]
    keeps_phase_times: bool
    phase_times: Any
    events_why: dict[str, int]
    routes_down: Any
    """Each device's route from the aggregator, by device row (routes built when asked)."""
    routes_up: Any
    """Each device's route to the aggregator, by device row."""
    @property
    def flops(self) -> list[float]:
        """Each device's FLOP/s, by row."""
    aggregator_id: str
    own_up_j_per_bit: np.ndarray
    """Per device, the J/bit its own upload costs itself."""
    caps_now: np.ndarray
    """Every constraint's capacity in force (bit/s; media after the links)."""
    caps_until: float
    """When the capacities in force change next (s)."""
    buffered_player: Any
    """The run's buffered epochs in arrays (netsim.epochs.buffered_arrays; None: not asked
    yet; False: they cannot play there)."""
    aggregator_row: int
    tiers: Any
    """The edge tier (netsim.tiers.Tiers; None without edges)."""
    tier_routes: Any
    """Routes between the tiers (netsim.tiers.TierRoutes; None without edges)."""

    busy: np.ndarray
    """Devices with a job in flight (read-only view)."""

    def edges_of(self, decision: Decision, rows: np.ndarray) -> np.ndarray: ...

    def tiered(self) -> Any: ...

    def workload_of(self, decision: Decision) -> Workload: ...

    def aggregate(self, work: Workload, updates: int,
                  play_until: Callable[[float], None] | None = None,
                  devices: Iterable[str] | None = None) -> None: ...

    def measure(self, rows: np.ndarray | list[int], flop_per_s: np.ndarray | list[float],
                down_bps: np.ndarray | list[float], up_bps: np.ndarray | list[float]) -> None: ...

    def take_wait(self) -> tuple[EnergySnapshot | None, float]: ...

    def check_batteries_next(self, rows: np.ndarray) -> None: ...

    def battery_left_of(self, rows: np.ndarray, now_s: float,
                        node_j: np.ndarray | None = None) -> np.ndarray: ...

    def arm_capacity_ticks(self) -> None: ...

    def end_capacity_ticks(self) -> None: ...

    def change_capacities(self, at_s: float) -> float: ...

    def static_tables(self) -> tuple[RouteTable, RouteTable, np.ndarray, np.ndarray]: ...

    def current_tables(self) -> tuple[RouteTable, RouteTable]: ...

    def tables_under(self, caps: np.ndarray) -> tuple[RouteTable, RouteTable]: ...

    def constraint_caps(self, link_caps: np.ndarray) -> np.ndarray: ...
