"""Quantities with units in scenario files, converted to netsim's SI units with pint.

A field named ``..._bps`` takes a number (bit/s) or a string such as ``"20 Mbit/s"``; a string
of the wrong dimension (``"20 ms"`` for a bandwidth) is an error naming the expected unit and
the unit pint understood (``"20 Mb/s"`` is 20 megabarn per second to pint).

Unit traps: :func:`unit_warnings` walks a raw scenario mapping and warns, field by field, of
values of the right dimension but an implausible magnitude (:data:`PLAUSIBLE`), naming what was
understood and, where swapping a case-sensitive prefix (m for M) gives a plausible value, what
was probably meant: ``'20 mbps' was read as 0.02 bit/s; did you mean 20 Mbit/s?``.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator

if TYPE_CHECKING:
    import pint  # (imported on first use: pint takes ~0.3 s to load)

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

#: How each unit of :data:`SI_UNITS` is shown to the user (``netsim schema``, docs/reference.md).
UNIT_LABELS = {
    "s": "s",
    "j": "J",
    "w": "W",
    "bytes": "bytes",
    "bps": "bit/s",
    "j_per_bit": "J/bit",
    "flop": "FLOP",
    "flop_per_s": "FLOP/s",
}

#: Plausible magnitudes (SI, inclusive; None: unbounded) per scenario field name. A value
#: outside is accepted but warned about (``--strict`` makes it an error): it is a typo or a
#: unit trap far more often than a real edge network.
PLAUSIBLE: dict[str, tuple[float | None, float | None, str]] = {
    "bandwidth_bps": (1e3, 1e13, "a link between 1 kbit/s and 10 Tbit/s"),
    "flop_per_s": (1e6, 1e18, "a device between 1 MFLOP/s and 1 EFLOP/s"),
    "power_busy_w": (None, 1e4, "an edge device's power at most 10 kW"),
    "power_idle_w": (None, 1e4, "an edge device's power at most 10 kW"),
    "memory_bytes": (1e3, 1e15, "a device's memory between 1 kB and 1 PB"),
    "latency_s": (None, 100.0, "a link's latency at most 100 s"),
    "energy_j_per_bit": (None, 1e-3, "at most 1 mJ per bit"),
}

_NUMBER_UNIT = re.compile(r"^\s*([-+]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")
_BARE_B = re.compile(r"(?<![A-Za-z])([kKMGTPmunp]?)b(?![A-Za-z])")


@lru_cache(maxsize=1)
def registry() -> pint.UnitRegistry:
    """The process's pint registry (built once on first use: pint takes ~0.3 s to load)."""
    import pint

    ureg: pint.UnitRegistry = pint.UnitRegistry()
    ureg.define("flop = [computation] = FLOP")
    ureg.define("FLOPS = flop / second")
    return ureg


def _quantity(text: str) -> Any:
    """pint's reading of ``text`` (a Quantity or a plain number); raises ValueError."""
    try:
        return registry().Quantity(text)
    except Exception as exc:  # pint raises several exception types for bad text
        raise ValueError(str(exc)) from exc


def _suggest(number: str, unit_text: str, target: str) -> str | None:
    """A spelling of ``unit_text`` with the target's dimension (``Mb/s`` -> ``Mbit/s``)."""
    import pint

    for word in ("B", "bit") if target == "byte" else ("bit", "B"):
        def spell(m: re.Match[str], w: str = word) -> str:
            return m.group(1) + w

        candidate = _BARE_B.sub(spell, unit_text)
        if candidate == unit_text:
            continue
        try:
            _quantity(f"{number} {candidate}").to(target)
        except (ValueError, pint.DimensionalityError, AttributeError):
            continue
        return f"{number} {candidate}"
    return None


def to_si(value: Any, unit: str) -> Any:
    """Convert ``value`` to a float in ``unit`` (a key of :data:`SI_UNITS`).

    Numbers pass through unchanged; strings are parsed with pint. Anything else is returned
    as is, for the field's own type check to reject.

    Raises
    ------
    ValueError
        On an unparsable string or one of the wrong dimension (naming what pint understood).
    """
    if isinstance(value, bool) or not isinstance(value, str):
        return value
    return _string_to_si(value, unit)


@lru_cache(maxsize=4096)
def _string_to_si(value: str, unit: str) -> float:
    """:func:`to_si` of a string, cached (pint parses a string in about 0.1 ms)."""
    import pint

    target = SI_UNITS[unit]
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        quantity = _quantity(text)
    except ValueError:
        raise ValueError(f"cannot read {value!r} as a quantity in {target}") from None
    if not isinstance(quantity, pint.Quantity):
        return float(quantity)
    try:
        return float(quantity.to(target).magnitude)
    except pint.DimensionalityError:
        understood = f"{quantity.magnitude:g} {quantity.units} ({quantity.dimensionality})"
        hint = ""
        match = _NUMBER_UNIT.match(text)
        if match:
            better = _suggest(match.group(1), match.group(2), target)
            hint = f"; did you mean {better!r}?" if better else ""
        raise ValueError(f"{value!r} has the wrong dimension: pint read it as {understood}, "
                         f"expected a quantity in {target}{hint}") from None


def human(value: float, unit: str) -> str:
    """``value`` (SI, in ``unit``, a key of :data:`SI_UNITS`) with a readable prefix:
    ``human(2e7, "bps") == "20 Mbit/s"``."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g} {registry().Unit(SI_UNITS[unit]):~P}"
    q = registry().Quantity(value, SI_UNITS[unit]).to_compact()
    return f"{q.magnitude:.4g} {q.units:~P}"


@lru_cache(maxsize=512)
def unit_of_field(name: str) -> str | None:
    """The :data:`SI_UNITS` key a field name ends with (longest suffix), or None."""
    for suffix in sorted(SI_UNITS, key=len, reverse=True):
        if name == suffix or name.endswith("_" + suffix):
            return suffix
    return None


def unit_label(name: str) -> str:
    """The unit a field's name carries, as shown to the user (:data:`UNIT_LABELS`):
    ``latency_s`` -> ``s``, ``flop_per_s`` -> ``FLOP/s`` (the whole name is the suffix there,
    not ``_s``); ``""`` for a name without a unit suffix."""
    unit = unit_of_field(name)
    return UNIT_LABELS[unit] if unit is not None else ""


def _walk(data: Any, path: str, out: list[tuple[str, str, Any]]) -> None:
    """Append (path, field, value) of every field of ``data`` named in :data:`PLAUSIBLE` to
    ``out``, in the mapping's order (a path is spelled only where it is kept or walked into:
    a scenario of ten thousand explicit devices has some 300,000 values)."""
    if isinstance(data, dict):
        for key, value in data.items():
            plausible = isinstance(key, str) and key in PLAUSIBLE
            nested = isinstance(value, dict | list | tuple)
            if plausible or nested:
                sub = f"{path}.{key}" if path else str(key)
                if plausible:
                    out.append((sub, key, value))
                if nested:
                    _walk(value, sub, out)
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):
            if isinstance(value, dict | list | tuple):
                _walk(value, f"{path}[{i}]", out)


def _swapped(text: str, unit: str) -> tuple[str, float] | None:
    """The same text with its leading m/M prefix swapped, and its SI value, if it parses."""
    match = _NUMBER_UNIT.match(text)
    if not match or match.group(2)[:1] not in ("m", "M"):
        return None
    number, rest = match.group(1), match.group(2)
    alt = ("M" if rest[0] == "m" else "m") + rest[1:]
    try:
        return f"{number} {alt}", float(to_si(f"{number} {alt}", unit))
    except (ValueError, TypeError):
        return None


def plausibility_warning(field: str, value: Any) -> str | None:
    """A warning for one field's raw value (number or string with a unit) whose SI magnitude is
    outside :data:`PLAUSIBLE`, or None (also for values the schema will reject anyway)."""
    if field not in PLAUSIBLE or isinstance(value, bool):
        return None
    unit = unit_of_field(field)
    assert unit is not None
    try:
        si = float(to_si(value, unit))
    except (ValueError, TypeError, OverflowError):
        return None
    low, high, what = PLAUSIBLE[field]
    if not math.isfinite(si) or si < 0 or (si == 0 and low is None):
        return None
    if (low is None or si >= low) and (high is None or si <= high):
        return None
    plain = f"{si:g} {registry().Unit(SI_UNITS[unit]):~P}"
    read = f"{value!r} was read as {plain}" if isinstance(value, str) else f"{value!r} means {plain}"
    hint = ""
    if isinstance(value, str):
        alt = _swapped(value.strip(), unit)
        if alt and (low is None or alt[1] >= low) and (high is None or alt[1] <= high):
            hint = f"; did you mean {human(alt[1], unit)} ({alt[0]!r}: m is milli, M mega)?"
    return f"{read}, outside the plausible range ({what}){hint}"


def unit_warnings(data: Any) -> list[tuple[str, str]]:
    """(field path, message) for every implausible magnitude in a raw scenario mapping."""
    out = []
    fields: list[tuple[str, str, Any]] = []
    _walk(data, "", fields)
    for path, field, value in fields:
        msg = plausibility_warning(field, value)
        if msg:
            out.append((path, msg))
    return out


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
