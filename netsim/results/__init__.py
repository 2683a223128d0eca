"""Recording runs and storing their tables."""

from netsim.results.recorder import DEVICE_COLUMNS, EPOCH_COLUMNS, RUN_COLUMNS, Recorder
from netsim.results.store import completed_runs, read_table, write_run

__all__ = ["DEVICE_COLUMNS", "EPOCH_COLUMNS", "RUN_COLUMNS", "Recorder", "completed_runs",
           "read_table", "write_run"]
