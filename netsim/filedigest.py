"""A file named by its content: ``sha256:<hex>`` of its bytes, for run ids and scenario
hashes (trace files, a PyTorch model's factory file and data). A module of its own, below the
scenario layer and the API, so both can name files without importing each other."""

from __future__ import annotations

import functools
import hashlib
import os


@functools.lru_cache(maxsize=64)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def trace_digest(path: str) -> str:
    """``sha256:<hex>`` of a trace file's bytes (cached while its size and modification time
    stay); the path itself where the file cannot be read (validation reports that)."""
    try:
        stat = os.stat(path)
        return "sha256:" + _file_digest(path, stat.st_mtime_ns, stat.st_size)
    except OSError:
        return path
