"""Quantities with units in scenario files, converted to netsim's SI units with pint.

A field named ``..._bps`` takes a number (bit/s) or a string such as ``"20 Mbit/s"``; a string
of the wrong dimension (``"20 ms"`` for a bandwidth) is an error naming the expected unit and
the unit pint understood (``"20 Mb/s"`` is 20 megabarn per second to pint).

Unit traps (issue 54): :func:`unit_checks` walks a raw scenario mapping and, field by field,
finds values of the right dimension but an implausible magnitude (:data:`PLAUSIBLE`). Where the
value is a string and changing the case of its unit's letters gives a plausible value (m for M:
``'20 mbps'`` is 0.02 bit/s to pint, ``'20 Mbps'`` is 20 Mbit/s), it is an error naming what
was read and what to write; any other implausible magnitude is a warning (``--strict`` makes
warnings errors). A number is never a case mistake: ``0.02`` (bit/s) is only warned about, the
way to say an implausible value on purpose. A unit pint cannot read, or of the wrong dimension,
gets the same case hint where one exists: ``'5 w'`` -> ``'5 W'``, ``'4 gb'`` -> ``'4 GB'``.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from itertools import product
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, ValidationInfo

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
#: outside is warned about (``--strict`` makes it an error), and refused where it is a unit
#: trap (:func:`unit_trap`): it is a typo or a case mistake far more often than a real edge
#: network.
PLAUSIBLE: dict[str, tuple[float | None, float | None, str]] = {
    "bandwidth_bps": (1e3, 1e13, "a link between 1 kbit/s and 10 Tbit/s"),
    "flop_per_s": (1e6, 1e18, "a device between 1 MFLOP/s and 1 EFLOP/s"),
    "power_busy_w": (None, 1e4, "an edge device's power at most 10 kW"),
    "power_idle_w": (None, 1e4, "an edge device's power at most 10 kW"),
    "memory_bytes": (1e3, 1e15, "a device's memory between 1 kB and 1 PB"),
    "latency_s": (None, 100.0, "a link's latency at most 100 s"),
    "energy_j_per_bit": (None, 1e-3, "at most 1 mJ per bit"),
}

#: Smallest plausible value (SI) by unit, for fields without a :data:`PLAUSIBLE` range: no
#: size, rate or count of computation is below one unit (a millibyte is a case mistake).
UNIT_FLOOR: dict[str, float] = {"bytes": 1.0, "bps": 1.0, "flop": 1.0, "flop_per_s": 1.0}

#: At most this many letters of a unit have their case varied in every combination
#: (:func:`case_fix`); a longer unit has only its first letter and the whole text varied.
MAX_CASE_LETTERS = 8

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


def plausible(si: float, unit: str, field: str | None = None) -> bool:
    """Whether ``si`` (a value in ``unit``, a key of :data:`SI_UNITS`) is plausible for
    ``field`` (its :data:`PLAUSIBLE` range; else the unit's :data:`UNIT_FLOOR`, if any)."""
    if not math.isfinite(si) or si < 0:
        return False
    if field is not None and field in PLAUSIBLE:
        low, high, _ = PLAUSIBLE[field]
        return (low is None or si >= low) and (high is None or si <= high)
    floor = UNIT_FLOOR.get(unit)
    return floor is None or si == 0 or si >= floor


def _case_variants(unit_text: str) -> list[str]:
    """Spellings of ``unit_text`` that differ only in the case of letters, fewest changes
    first (every combination up to :data:`MAX_CASE_LETTERS` letters)."""
    letters = [i for i, c in enumerate(unit_text) if c.isalpha()]
    if len(letters) > MAX_CASE_LETTERS:
        first = letters[0]
        flipped = unit_text[:first] + unit_text[first].swapcase() + unit_text[first + 1:]
        found = [flipped, unit_text.upper(), unit_text.lower()]
        return [v for v in dict.fromkeys(found) if v != unit_text]
    out: list[tuple[int, str]] = []
    for flips in product((False, True), repeat=len(letters)):
        if not any(flips):
            continue
        chars = list(unit_text)
        for i, flip in zip(letters, flips, strict=True):
            if flip:
                chars[i] = chars[i].swapcase()
        out.append((sum(flips), "".join(chars)))
    out.sort(key=lambda x: x[0])  # (stable: the first letters' changes first among equals)
    return list(dict.fromkeys(v for _, v in out))


@lru_cache(maxsize=1024)
def case_fix(text: str, unit: str, field: str | None = None) -> tuple[str, float] | None:
    """The spelling of ``text`` (``"20 mbps"``) with its unit's letters in another case that
    pint reads in ``unit`` (a key of :data:`SI_UNITS`) as a plausible value for ``field``
    (:func:`plausible`), fewest changed letters first, and that value (SI); None if none.
    ``case_fix("20 mbps", "bps", "bandwidth_bps") == ("20 Mbps", 2e7)``."""
    import pint

    match = _NUMBER_UNIT.match(text)
    if not match or not match.group(2):
        return None
    number, unit_text = match.group(1), match.group(2)
    target = SI_UNITS[unit]
    for variant in _case_variants(unit_text):
        candidate = f"{number} {variant}"
        try:
            quantity = _quantity(candidate)
            if not isinstance(quantity, pint.Quantity):
                continue
            si = float(quantity.to(target).magnitude)
        except (ValueError, pint.DimensionalityError, AttributeError, TypeError):
            continue
        if plausible(si, unit, field):
            return candidate, si
    return None


def _case_hint(text: str, unit: str, field: str | None) -> str:
    """``"; did you mean '5 W' (units are case-sensitive)?"``, or ``""``."""
    fix = case_fix(text, unit, field)
    if fix is None:
        return ""
    return f"; did you mean {fix[0]!r}{_reading(fix, unit)}? (units are case-sensitive)"


def _reading(fix: tuple[str, float], unit: str) -> str:
    """`` (20 Mbit/s)``: a fix's value as netsim shows it, where that reads differently."""
    shown = human(fix[1], unit)
    return "" if shown.replace(" ", "") == fix[0].split(None, 1)[-1].replace(" ", "") \
        or shown == fix[0] else f" ({shown})"


def to_si(value: Any, unit: str, field: str | None = None) -> Any:
    """Convert ``value`` to a float in ``unit`` (a key of :data:`SI_UNITS`).

    Numbers pass through unchanged; strings are parsed with pint. Anything else is returned
    as is, for the field's own type check to reject. ``field`` (the field's name) only
    picks the plausible range that the hint of an error prefers (:func:`case_fix`).

    Raises
    ------
    ValueError
        On an unparsable string or one of the wrong dimension (naming what pint understood,
        and the spelling meant where another case of the unit's letters reads well:
        ``'5 w'`` -> ``'5 W'``).
    """
    if isinstance(value, bool) or not isinstance(value, str):
        return value
    return _string_to_si(value, unit, field)


@lru_cache(maxsize=4096)
def _string_to_si(value: str, unit: str, field: str | None = None) -> float:
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
        raise ValueError(f"cannot read {value!r} as a quantity in {target}"
                         f"{_case_hint(text, unit, field)}") from None
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
            if better is not None and not plausible(float(_quantity(better).to(target)
                                                          .magnitude), unit, field):
                better = None  # ('4 mb' -> '4 mB' is a millibyte: the case hint does better)
            hint = f"; did you mean {better!r}?" if better else _case_hint(text, unit, field)
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


def _implausible(field: str, value: Any) -> tuple[str, float, str] | None:
    """(unit key, SI value, plain reading) of a raw value outside the field's
    :data:`PLAUSIBLE` range, or None (also for values the schema will reject anyway)."""
    if field not in PLAUSIBLE or isinstance(value, bool):
        return None
    unit = unit_of_field(field)
    assert unit is not None
    try:
        si = float(to_si(value, unit, field))
    except (ValueError, TypeError, OverflowError):
        return None
    low, _, _ = PLAUSIBLE[field]
    if not math.isfinite(si) or si < 0 or (si == 0 and low is None) or plausible(si, unit, field):
        return None
    return unit, si, f"{si:g} {registry().Unit(SI_UNITS[unit]):~P}"


def unit_trap(field: str, value: Any) -> str | None:
    """The error for one field's raw value that is a unit trap, or None: a string whose
    magnitude is outside :data:`PLAUSIBLE` but plausible with its unit's letters in another
    case (``'20 mbps'``, 0.02 bit/s, for ``'20 Mbps'``). The message names what was read,
    what to write, and how to say the implausible value on purpose (the number, in SI)."""
    found = _implausible(field, value) if isinstance(value, str) else None
    if found is None:
        return None
    unit, si, plain = found
    fix = case_fix(value.strip(), unit, field)
    if fix is None:
        return None
    text = value.strip()
    changed = next((a for a, b in zip(text, fix[0], strict=False) if a != b), "")
    why = "m is milli, M is mega" if changed in ("m", "M") else "units are case-sensitive"
    return (f"{value!r} was read as {plain}, outside the plausible range "
            f"({PLAUSIBLE[field][2]}): {why}; write {fix[0]!r}{_reading(fix, unit)}, or "
            f"the number {si:g} ({UNIT_LABELS[unit]}) if you mean {plain}")


def plausibility_warning(field: str, value: Any) -> str | None:
    """A warning for one field's raw value (number or string with a unit) whose SI magnitude is
    outside :data:`PLAUSIBLE` and that is no :func:`unit_trap` (an error), or None (also for
    values the schema will reject anyway)."""
    found = _implausible(field, value)
    if found is None or unit_trap(field, value) is not None:
        return None
    _, _, plain = found
    read = f"{value!r} was read as {plain}" if isinstance(value, str) else f"{value!r} means {plain}"
    return f"{read}, outside the plausible range ({PLAUSIBLE[field][2]})"


def unit_checks(data: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(field path, message) of every unit trap (errors, :func:`unit_trap`) and of every other
    implausible magnitude (warnings, :func:`plausibility_warning`) in a raw scenario mapping."""
    errors, warnings = [], []
    fields: list[tuple[str, str, Any]] = []
    _walk(data, "", fields)
    for path, field, value in fields:
        trap = unit_trap(field, value)
        if trap:
            errors.append((path, trap))
            continue
        msg = plausibility_warning(field, value)
        if msg:
            warnings.append((path, msg))
    return errors, warnings


def unit_warnings(data: Any) -> list[tuple[str, str]]:
    """(field path, message) for every implausible magnitude in a raw scenario mapping that
    is no unit trap (those are errors: :func:`unit_checks`)."""
    return unit_checks(data)[1]


def _unit(unit: str) -> BeforeValidator:
    def convert(value: Any, info: ValidationInfo) -> Any:
        return to_si(value, unit, info.field_name)

    return BeforeValidator(convert)


Seconds = Annotated[float, _unit("s")]
Joules = Annotated[float, _unit("j")]
Watts = Annotated[float, _unit("w")]
Bytes = Annotated[float, _unit("bytes")]
BitsPerSecond = Annotated[float, _unit("bps")]
JoulesPerBit = Annotated[float, _unit("j_per_bit")]
Flop = Annotated[float, _unit("flop")]
FlopPerSecond = Annotated[float, _unit("flop_per_s")]
