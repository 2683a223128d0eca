"""Digests of the result tables of the built-in and experiment scenarios (tests/data/
golden_tables.json): what tests/test_golden_tables.py compares against, so work on the
engine's internals (issue 26: fleets in arrays) is seen to change no table.

Regenerate only for a change that is meant to change results (say why in the changelog):
``python tests/golden_tables.py``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pandas as pd

import netsim
from netsim.scenario.loading import scenario_data

HERE = Path(__file__).parent
GOLDEN = HERE / "data" / "golden_tables.json"
ROOT = HERE.parent
VOLATILE = {"wall_s"}  # wall-clock columns
# the asynchronous columns (0.5.0, docs/async.md) came after the digests were recorded: left out
# here so the digests show every older column unchanged; tests/test_async.py checks their
# synchronous values (participants, 0, 0, participants, 0) on these same cases
ADDED_LATER = {"updates_aggregated", "staleness_mean", "staleness_max", "started", "in_flight",
               "updates_ids", "updates_samples", "updates_staleness",
               "target_accuracy",  # (0.6.0: NaN unless the target is an accuracy)
               "failed", "phases",  # (0.7.0: a driven run's; 0 and "[]" here, test_flower.py)
               # (0.7.0: a driven run's ClientApp calls; 0 here, tests/test_flower_apps.py)
               "client_calls", "client_calls_failed",
               # (0.7.0: the edge tier, docs/hierarchical.md; a star run without edges: 0,
               # tests/test_hierarchy.py)
               "bytes_backhaul", "energy_backhaul_j", "energy_edges_j", "energy_cloud_j",
               "edge_rounds", "edges", "edge_staleness_mean", "edge_staleness_max"}
VOLATILE_INFO = {"planning_s"}  # wall-clock keys of a decision's info


def _cases() -> dict[str, tuple[dict, str, int, dict]]:
    """name -> (scenario mapping, policy, seed, params)."""
    default = scenario_data("default")
    big = copy.deepcopy(default)
    big["generate"]["n_devices"] = 300
    private = copy.deepcopy(default)
    private["generate"]["shared_media"] = False
    churn = scenario_data(str(ROOT / "experiments" / "dynamics" / "churn.yaml"))
    out = {}
    for pol, params in (("fedavg-all", {}), ("random-k", {"k": 5}), ("pact", {})):
        for seed in (0, 1):
            out[f"default/{pol}/{seed}"] = (default, pol, seed, params)
    out["two-phones/fedavg-all/0"] = (scenario_data("two-phones"), "fedavg-all", 0, {})
    out["generated-300/random-k/0"] = (big, "random-k", 0, {"k": 50})
    out["private/fedavg-all/0"] = (private, "fedavg-all", 0, {})
    out["churn/random-k/0"] = (churn, "random-k", 0, {"k": 10})
    out["churn/fedavg-all/1"] = (churn, "fedavg-all", 1, {})
    return out


SIGNIFICANT = 12  # digits compared: sums regrouped (a fleet's running totals) move the 16th


def _rounded(value):
    """Floats to SIGNIFICANT digits, inside lists, dicts and JSON text too."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}") if value == value else "nan"
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    if hasattr(value, "tolist"):
        return _rounded(value.tolist())
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in sorted(value.items()) if k not in VOLATILE_INFO}
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return _rounded(json.loads(value))
        except ValueError:
            return value
    return value


def _used_media(text: str) -> str:
    """An epoch's air time by medium with the media it did not use left out: the column
    listed every medium until 0.6.0 and lists the media used since (issue 35), the same
    content."""
    return json.dumps({m: s for m, s in json.loads(text).items() if s != 0.0}, sort_keys=True)


def table_digest(frame: pd.DataFrame) -> str:
    """A digest of a table's content (columns sorted, wall-clock columns left out, floats
    to SIGNIFICANT digits, air time by medium over the media used)."""
    if "airtime_by_medium_s" in frame:
        frame = frame.assign(airtime_by_medium_s=frame["airtime_by_medium_s"].map(_used_media))
    cols = sorted(c for c in frame.columns if c not in VOLATILE | ADDED_LATER)
    rows = [[_rounded(v) for v in row] for row in frame[cols].itertuples(index=False)]
    text = json.dumps([cols, rows], default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def digests() -> dict[str, dict[str, str]]:
    """Per case, the digest of each table."""
    out = {}
    for name, (sc, pol, seed, params) in _cases().items():
        res = netsim.simulate(sc, pol, seed=seed, params=params)
        out[name] = {t: table_digest(getattr(res, t)) for t in ("runs", "epochs", "devices")}
    return out


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(digests(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
