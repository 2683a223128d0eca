"""YAML reading: ``safe_load`` with YAML 1.2-style floats, and limits on what a file may hold.

PyYAML follows YAML 1.1, where ``1e6`` and ``2.0e10`` are strings, not numbers; scenario files
are full of such numbers, so netsim's loader also resolves them as floats. Nothing executes:
this is PyYAML's SafeLoader with one more implicit resolver.

Limits (a file beyond them is refused with a plain message, :class:`YamlLimitError`):
:data:`MAX_FILE_BYTES` per file, :data:`MAX_DEPTH` levels of nesting, :data:`MAX_ALIASES`
aliases (``*name``) and :data:`MAX_NODES` values once aliases are expanded, so that a file of
nested aliases (a "billion laughs") costs neither memory nor time.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

#: Largest scenario or sweep file read (bytes): 8 MiB, far above a 200,000-device network
#: written out explicitly in flow style.
MAX_FILE_BYTES = 8 * 1024 * 1024
#: Deepest nesting of mappings and lists.
MAX_DEPTH = 64
#: Most aliases (``*anchor``) in one file.
MAX_ALIASES = 1_000
#: Most values (scalars, lists, mappings) once every alias is expanded.
MAX_NODES = 2_000_000


class YamlLimitError(ValueError):
    """A file that is not readable YAML text within netsim's limits (plain message)."""


class _Loader(yaml.SafeLoader):
    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D102 - PyYAML's hook
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YamlLimitError(f"more than {MAX_ALIASES} aliases (*name)")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep (line {mark.line + 1})")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)
                |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


def expanded_size(data: Any, limit: int = MAX_NODES) -> int:
    """How many values ``data`` holds with shared (aliased) parts counted each time they
    appear; stops counting past ``limit``. Linear in the distinct objects."""
    memo: dict[int, int] = {}

    def size(node: Any) -> int:
        if not isinstance(node, dict | list):
            return 1
        key = id(node)
        if key not in memo:
            memo[key] = limit + 1  # a cycle (recursive alias) counts as too large
            children = list(node.items()) if isinstance(node, dict) else node
            total = 1
            for child in children:
                total += sum(size(c) for c in child) if isinstance(node, dict) else size(child)
                if total > limit:
                    break
            memo[key] = min(total, limit + 1)
        return memo[key]

    return size(data)


def safe_load(text: str, name: str | None = None) -> Any:
    """Parse YAML text safely (no object construction), floats like ``1e6`` included.

    ``name`` (the file's path) is what the positions in PyYAML's errors name, instead of
    ``<unicode string>``; :func:`describe_error` writes such an error as ``PATH:LINE:COLUMN``.

    Raises
    ------
    YamlLimitError
        Past :data:`MAX_DEPTH`, :data:`MAX_ALIASES` or :data:`MAX_NODES`.
    yaml.YAMLError
        On text that is not YAML.
    """
    loader = _Loader(text)
    if name is not None:
        loader.name = name  # the marks (line, column) of errors name the file
    try:
        data = loader.get_single_data()
    finally:
        loader.dispose()
    if expanded_size(data) > MAX_NODES:
        raise YamlLimitError(f"more than {MAX_NODES:,} values once aliases are expanded")
    return data


def describe_error(exc: yaml.YAMLError, name: str, text: str | None = None) -> str:
    """A YAML syntax error as ``NAME:LINE:COLUMN: not valid YAML: WHAT``, then the line with a
    caret under the column (PyYAML's own text names the string it parsed, ``"<unicode
    string>"``, where the user needs the file). ``text`` locates a bad character's line."""
    if isinstance(exc, yaml.reader.ReaderError):
        line = col = None
        if text is not None:
            before = text[:exc.position]
            line, col = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        where = f"{name}:{line}:{col}" if line is not None else name
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return f"{where}: not valid YAML: character #x{char:04x}: {exc.reason}"
    if not isinstance(exc, yaml.MarkedYAMLError):
        return f"{name}: not valid YAML: {exc}"
    mark = exc.problem_mark or exc.context_mark
    where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else name
    what = exc.problem or exc.context or type(exc).__name__
    if exc.problem and exc.context:
        context = exc.context
        cm = exc.context_mark
        if cm is not None and mark is not None and (cm.line, cm.column) != (mark.line, mark.column):
            context += f" (line {cm.line + 1}, column {cm.column + 1})"
        what = f"{context}: {exc.problem}"
    snippet = mark.get_snippet() if mark is not None else None
    return f"{where}: not valid YAML: {what}" + (f"\n{snippet}" if snippet else "")


def read_text(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a file of at most ``max_bytes`` bytes.

    Raises
    ------
    YamlLimitError
        With a plain message: missing, a folder, too large, empty, binary (NUL bytes) or not
        UTF-8.
    """
    path = Path(path)
    if not path.exists():
        raise YamlLimitError(f"no such file: {path}")
    if not path.is_file():
        raise YamlLimitError(f"{path} is not a file")
    size = path.stat().st_size
    if size > max_bytes:
        raise YamlLimitError(f"{path} is {size:,} bytes; the limit is {max_bytes:,} bytes")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise YamlLimitError(f"cannot read {path}: {exc.strerror}") from None
    if not raw.strip():
        raise YamlLimitError(f"{path} is empty")
    if b"\0" in raw:
        raise YamlLimitError(f"{path} is not a text file (it holds NUL bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlLimitError(f"{path} is not UTF-8 text (byte {raw[exc.start]:#04x} at offset "
                             f"{exc.start})") from None
