"""Where ``netsim calibrate`` writes and how: the curves table (Parquet, its settings in the
metadata, atomically), the loss-parameter file's entries (one block replaced, the rest kept),
and the paths (never into the installed package unless named). Shared by every way of
calibrating (netsim.commands.calibrate, calibrate_app, calibrate_recorded)."""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from importlib import resources

import pandas as pd

from netsim.outputs import file_problems, user_mode
from netsim.scenario.errors import Problem
from netsim.training import calibrate as cal
from netsim.yamlio import read_text

#: Where ``netsim calibrate`` writes by default: a folder in the working directory, never the
#: installed package.
DEFAULT_OUT = os.path.join("netsim-calibration", "curves.parquet")


def params_path(args: argparse.Namespace) -> str:
    """Where the fitted parameters go: ``--params``, else loss_params.yaml beside ``--out``."""
    if args.params:
        return str(args.params)
    out = args.out or DEFAULT_OUT
    return os.path.join(os.path.dirname(os.path.abspath(out)), "loss_params.yaml")


def params_problems(args: argparse.Namespace) -> list[Problem]:
    """Where the fitted parameters would go, unless ``--no-params``: never inside the
    installed package unless ``--params`` names it, and a file that can be written."""
    if args.no_params:
        return []
    out = []
    path = params_path(args)
    if not args.params and inside_package(path):
        out.append(Problem("--out", f"the fitted parameters would go to {path}, inside the "
                           "installed package; give --params with that path explicitly "
                           "(maintainers) or another --out"))
    return out + file_problems(path, "--params")


def inside_package(path: str) -> bool:
    package = os.path.realpath(str(resources.files("netsim")))
    return os.path.realpath(path).startswith(package + os.sep)


def repo_relative(path: str) -> str:
    root = os.path.normpath(os.path.join(os.path.dirname(cal.__file__), "..", ".."))
    full = os.path.abspath(path)
    return os.path.relpath(full, root) if full.startswith(root) else path


def write_curves(table: pd.DataFrame, path: str, metadata: dict) -> None:
    """Write the curves table as Parquet atomically, ``metadata`` as JSON in its schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = pa.Table.from_pandas(table, preserve_index=False)
    meta = dict(arrow.schema.metadata or {})
    meta[b"netsim.calibration"] = json.dumps(metadata).encode()
    arrow = arrow.replace_schema_metadata(meta)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".parquet.tmp")
    os.close(fd)
    try:
        pq.write_table(arrow, tmp)
        os.chmod(tmp, user_mode())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def format_entry(name: str, entry: dict) -> str:
    """A top-level YAML block ``name: {...}``: a mapping of mappings (variants) one line per
    inner mapping in flow style, a flat mapping (an accuracy map) in flow style, ``{}`` for
    an empty one."""
    lines = [f"{name}:"]
    for key, value in entry.items():
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            lines.append(f"  {key}:")
            for sub, subval in value.items():
                inner = ", ".join(f"{k}: {v}" for k, v in subval.items())
                lines.append(f"    {sub}: {{{inner}}}")
        elif isinstance(value, dict):
            lines.append(f"  {key}: {{{', '.join(f'{k}: {v}' for k, v in value.items())}}}")
        elif isinstance(value, str):
            lines.append(f"  {key}: {json.dumps(value, ensure_ascii=False)}")
        else:
            lines.append(f"  {key}: {value}")
    return "\n".join(lines) + "\n"


def write_entry(path: str, name: str, entry: dict) -> None:
    """Replace (or append) the top-level ``name`` block of a YAML file, keeping the rest."""
    text = read_text(path) if os.path.exists(path) else ""
    block = format_entry(name, entry)
    pattern = re.compile(rf"^{re.escape(name)}:.*?(?=^[^\s#]|\Z)", re.S | re.M)
    if pattern.search(text):
        def keep_gap(match: re.Match) -> str:  # the blank lines before the next entry stay
            old = match.group(0)
            return block + old[len(old.rstrip("\n")) + 1:]

        text = pattern.sub(keep_gap, text, count=1)
    else:
        text = text + ("" if text.endswith("\n") or not text else "\n") + block
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(path + ".tmp", path)
