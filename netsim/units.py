"""Quantities with units in scenario files, converted to netsim's SI units with pint.

A field named ``..._bps`` takes a number (bit/s) or a string such as ``"20 Mbit/s"``; a string
of the wrong dimension (``"20 ms"`` for a bandwidth) is an error naming the expected unit.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

import pint
from pydantic import BeforeValidator

#: netsim's unit for each field-name suffix, in pint's notation.
SI_UNITS = {
    "s": "second",
    "j": "joule",
    "w": "watt",
    "bytes": "byte",
    "bps": "bit / second",
    "j_per_bit": "joule / bit",
    "flop": "flop",
    "flop_per_s": "flop / second",
}


@lru_cache(maxsize=1)
def registry() -> pint.UnitRegistry:
    """The process's pint registry (built once on first use: pint takes ~0.3 s to load)."""
    ureg = pint.UnitRegistry()
    ureg.define("flop = [computation] = FLOP")
    ureg.define("FLOPS = flop / second")
    return ureg


def to_si(value: Any, unit: str) -> Any:
    """Convert ``value`` to a float in ``unit`` (a key of :data:`SI_UNITS`).

    Numbers pass through unchanged; strings are parsed with pint. Anything else is returned
    as is, for the field's own type check to reject.

    Raises
    ------
    ValueError
        On an unparsable string or one of the wrong dimension.
    """
    if isinstance(value, bool) or not isinstance(value, str):
        return value
    target = SI_UNITS[unit]
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    ureg = registry()
    try:
        quantity = ureg.Quantity(text)
    except Exception as exc:  # pint raises several exception types for bad text
        raise ValueError(f"cannot read {value!r} as a quantity in {target}") from exc
    if not isinstance(quantity, pint.Quantity):
        return float(quantity)
    try:
        return float(quantity.to(target).magnitude)
    except pint.DimensionalityError as exc:
        raise ValueError(
            f"{value!r} has the wrong dimension: expected a quantity in {target}"
        ) from exc


def _unit(unit: str) -> BeforeValidator:
    return BeforeValidator(lambda v: to_si(v, unit))


Seconds = Annotated[float, _unit("s")]
Joules = Annotated[float, _unit("j")]
Watts = Annotated[float, _unit("w")]
Bytes = Annotated[float, _unit("bytes")]
BitsPerSecond = Annotated[float, _unit("bps")]
JoulesPerBit = Annotated[float, _unit("j_per_bit")]
Flop = Annotated[float, _unit("flop")]
FlopPerSecond = Annotated[float, _unit("flop_per_s")]
