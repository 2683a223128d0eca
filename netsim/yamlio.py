"""YAML reading: ``safe_load`` with YAML 1.2-style floats.

PyYAML follows YAML 1.1, where ``1e6`` and ``2.0e10`` are strings, not numbers; scenario files
are full of such numbers, so netsim's loader also resolves them as floats. Nothing executes:
this is PyYAML's SafeLoader with one more implicit resolver.
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)
                |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


def safe_load(text: str) -> Any:
    """Parse YAML text safely (no object construction), floats like ``1e6`` included."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
