"""Dynamics figures of the generator's device classes (netsim/data/edge_catalog.yaml).

Each class gives ``mean_online_s`` and ``mean_offline_s`` (the mean lengths of an online
session and an offline gap of the markov availability model, s), ``power_sleep_w`` (W; null:
no low-power state) and ``battery_j`` (J; null: mains powered), each with its source in the
class's ``source`` text.
"""

from __future__ import annotations

from typing import Any

#: Session lengths (s) of a device without a class, or of a class without the figures:
#: 30 min online, 2 h offline (the phone class's figures).
DEFAULT_MEAN_ONLINE_S = 1800.0
DEFAULT_MEAN_OFFLINE_S = 7200.0


def _class(device_class: str | None) -> dict[str, Any]:
    from netsim.scenario.generator import edge_catalog

    if device_class is None:
        return {}
    entry = edge_catalog()["device_classes"].get(device_class)
    return entry if isinstance(entry, dict) else {}


def _positive(value: Any, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


def session_lengths(device_class: str | None) -> tuple[float, float]:
    """The class's (mean_online_s, mean_offline_s) in seconds; (1800, 7200) for an unknown
    class, None, or a class without the figures."""
    entry = _class(device_class)
    return (_positive(entry.get("mean_online_s"), DEFAULT_MEAN_ONLINE_S),
            _positive(entry.get("mean_offline_s"), DEFAULT_MEAN_OFFLINE_S))


def power_states(device_class: str | None) -> tuple[float | None, float | None]:
    """The class's (power_sleep_w in W, battery_j in J); None where the catalog gives none
    (no low-power state; mains powered) or the class is unknown."""
    entry = _class(device_class)
    sleep, battery = entry.get("power_sleep_w"), entry.get("battery_j")
    return (float(sleep) if isinstance(sleep, int | float) and sleep >= 0 else None,
            float(battery) if isinstance(battery, int | float) and battery > 0 else None)
