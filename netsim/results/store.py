"""Result storage: one Parquet file per run and table, written atomically.

Layout under an output folder DIR::

    DIR/epochs/<run_id>.parquet
    DIR/devices/<run_id>.parquet
    DIR/runs/<run_id>.parquet      written last: a run is complete iff this file exists

Each file is written to a temporary name in the same folder and renamed into place (atomic on
POSIX), so a killed process never leaves a half-written result, and a rerun skips finished
runs. Each table folder reads back as one Parquet dataset (pandas, pyarrow, DuckDB).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from netsim.outputs import write_atomic

TABLES = ("epochs", "devices", "runs")  # runs last: its file marks the run complete


def write_parquet_atomic(df: pd.DataFrame, path: Path) -> None:
    """Write ``df`` to ``path`` via a temporary file in the same folder and a rename; the file
    gets the user's normal mode (0666 less the umask), as a plain ``open()`` would give."""
    write_atomic(path, lambda tmp: df.to_parquet(tmp, index=False))


def write_run(out_dir: str | Path, runs: pd.DataFrame, epochs: pd.DataFrame,
              devices: pd.DataFrame) -> None:
    """Store one run's three tables under ``out_dir`` (the runs file last)."""
    run_id = str(runs["run_id"].iloc[0])
    out = Path(out_dir)
    for name, df in zip(TABLES, (epochs, devices, runs), strict=True):
        write_parquet_atomic(df, out / name / f"{run_id}.parquet")


def completed_runs(out_dir: str | Path) -> set[str]:
    """Run ids whose results are complete under ``out_dir``."""
    folder = Path(out_dir) / "runs"
    return {p.stem for p in folder.glob("*.parquet")} if folder.is_dir() else set()


def read_table(out_dir: str | Path, table: str) -> pd.DataFrame:
    """One table over every complete run under ``out_dir`` (empty if none)."""
    done = completed_runs(out_dir)
    files = sorted(p for p in (Path(out_dir) / table).glob("*.parquet") if p.stem in done)
    if not files:
        return pd.DataFrame()
    return pd.concat([pd.read_parquet(p) for p in files], ignore_index=True)
