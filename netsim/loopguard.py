"""Bounds on the loops that advance a clock, and the report a loop past its bound leaves.

Every loop in netsim that advances a simulated clock over flows or events (the array
players: netsim.network.playback, netsim.network.nested, netsim.fastepoch's pieces,
netsim.epochs.buffered_arrays; the flow network's wake-ups) states a bound on its passes that
follows from why it ends (each pass starts or finishes a flow; a rebalance moves each flow at
most twice; a capacity piece ends strictly after it begins). Past its bound the loop has met a
case its proof does not cover, a bug in netsim: rather than spin forever at 100% of a core, it
calls :func:`stuck`, which writes the loop's inputs to a JSON file (floats exactly, as
``float.hex``) and raises :class:`StuckLoopError` naming the function and the file. A user
then has a report to send in seconds, and :func:`load_report` turns the file back into the
call's arguments for a regression test.

The reports go to ``$NETSIM_REPORT_DIR`` when it is set, else to the system's temporary
folder. :func:`forced_bound` lowers every bound for a test (tests/test_loopguard.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

_forced: int | None = None


class StuckLoopError(RuntimeError):
    """A loop that advances a clock passed its bound (an internal error of netsim): its
    message names the function, the bound and the report file with the loop's inputs."""

    def __init__(self, function: str, bound: int, report: Path | None,
                 reason: str | None = None) -> None:
        self.function, self.bound, self.report = function, bound, report
        where = f"its inputs are in {report}" if report is not None else \
            "its inputs could not be written"
        what = reason or f"did not finish within {bound} passes"
        super().__init__(
            f"internal error: {function} {what} (a loop that should end did not; this is a "
            f"bug in netsim, not in your input): {where}; please report it with that file")


def bound(passes: int) -> int:
    """The bound a loop states (``passes``, from its proof of termination), or the one
    :func:`forced_bound` sets for a test."""
    return passes if _forced is None else _forced


@contextlib.contextmanager
def forced_bound(passes: int) -> Iterator[None]:
    """Every loop's bound is ``passes`` inside the block (tests force a loop past it)."""
    global _forced
    before, _forced = _forced, passes
    try:
        yield
    finally:
        _forced = before


def stuck(function: str, passes: int, inputs: Mapping[str, Any],
          reason: str | None = None) -> NoReturn:
    """A loop of ``function`` passed its bound of ``passes`` (or, ``reason``, cannot go on:
    what it found): write ``inputs`` (the call's arguments: numbers, arrays, sequences,
    mappings) to a report and raise :class:`StuckLoopError` naming it."""
    folder = Path(os.environ.get("NETSIM_REPORT_DIR") or tempfile.gettempdir())
    stamp = time.strftime("%Y%m%dT%H%M%S")
    name = re.sub(r"[^A-Za-z0-9_]+", "-", function.rsplit(".", 1)[-1]).strip("-")
    path: Path | None = folder / f"netsim-stuck-{name}-{stamp}-{os.getpid()}.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"function": function, "bound": passes, "reason": reason,
                           "inputs": {k: _encode(v) for k, v in inputs.items()}}, indent=1)
        tmp = path.with_suffix(".part")  # type: ignore[union-attr]
        tmp.write_text(text)
        os.replace(tmp, path)  # type: ignore[arg-type]
    except (OSError, TypeError, ValueError):
        path = None
    raise StuckLoopError(function, passes, path, reason)


def load_report(path: str | Path) -> tuple[str, dict[str, Any]]:
    """A report :func:`stuck` wrote: (the function's dotted name, its inputs as they were:
    arrays as float or int arrays, floats exact)."""
    data = json.loads(Path(path).read_text())
    return data["function"], {k: _decode(v) for k, v in data["inputs"].items()}


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            return {"float_hex": [float(x).hex() for x in value.ravel().tolist()],
                    "shape": list(value.shape)}
        return {"array": value.tolist()}
    if isinstance(value, float | np.floating):
        return {"float_hex": float(value).hex()}
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, Mapping):
        return {"mapping": {str(k): _encode(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {"list": [_encode(v) for v in value]}
    return {"repr": repr(value)}


def _decode(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    if "float_hex" in value:
        hexes = value["float_hex"]
        if isinstance(hexes, str):
            return float.fromhex(hexes)
        return np.array([float.fromhex(x) for x in hexes], dtype=float).reshape(value["shape"])
    if "array" in value:
        return np.array(value["array"])
    if "mapping" in value:
        return {k: _decode(v) for k, v in value["mapping"].items()}
    if "list" in value:
        return [_decode(v) for v in value["list"]]
    return value.get("repr")
