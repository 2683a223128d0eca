"""How well a fitted entry predicts the recorded runs: the report and its checks.

:func:`report` puts the entry's prediction against the real runs per setting (rounds to the
target accuracy, or the accuracy at the target rounds with the band's coverage of the seeds);
:func:`map_error` measures the accuracy map on recorded (loss, accuracy) pairs,
:func:`coverage` sums a report's coverage, and :func:`check_replay` checks that the fit's
vectorised curve is the simulator's replay. The data: :mod:`netsim.training.recorded_data`;
the fit and the prediction: :mod:`netsim.training.recorded_fit`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from netsim.scenario.schema import AccuracyMap, LossParams
from netsim.training.loss import LossState
from netsim.training.recorded_data import Incident, Setting, clean_runs, incidents
from netsim.training.recorded_fit import Constants, RecordedFit, mean_curve, predict


def first_round(accuracy: np.ndarray, rounds: np.ndarray, level: float) -> int | None:
    """The first round whose accuracy is at or above ``level`` (None: never)."""
    hit = np.flatnonzero(np.asarray(accuracy) >= level)
    return int(rounds[hit[0]]) if len(hit) else None


def _role(fit: RecordedFit, label: str, bad: dict[str, list[Incident]]) -> str:
    if label in fit.fit_settings:
        return "fit"
    if label in fit.held_out:
        return "held back"
    if not fit.data.settings[label].modelled:
        return "not modelled"
    return "not fitted" + (" (diverged)" if label in bad else "")


def report(fit: RecordedFit, entry: LossParams | None = None) -> pd.DataFrame:
    """Predicted against real per setting (rounds to the target accuracy, or the accuracy at
    the target rounds with the band and its coverage of the seeds); ``entry``: the constants
    to judge (default: the fit's, rounded as written)."""
    data = fit.data
    entry = entry or fit.entry()
    bad: dict[str, list[Incident]] = {}
    for i in incidents(data):
        bad.setdefault(i.setting, []).append(i)
    runs = clean_runs(data)
    rows = []
    for label, setting in data.settings.items():
        role = _role(fit, label, bad)
        runs_of = runs[runs["setting"] == label]
        if data.target == "rounds":
            # a diverged single run still reached the target before it diverged: judge that
            grp = data.table[data.table["setting"] == label]
            real = first_round(grp["accuracy"].to_numpy(), grp["round"].to_numpy(),
                               data.target_accuracy)
            last = int(data.table["round"].max())
            pred = predict(entry, setting, last)
            got = first_round(pred.accuracy, pred.rounds, data.target_accuracy)
            err = (got - real) / real if got is not None and real else math.nan
            rows.append({"setting": label, "B,E": setting.describe(), "role": role,
                         "real": real, "predicted": got, "rel_error": err,
                         "within": _yes(abs(err) <= 0.35) if role == "held back" else "-",
                         "note": _note(bad.get(label))})
            continue
        pred = predict(entry, setting, max(data.target_rounds))
        for r in data.target_rounds:
            at = runs_of[runs_of["round"] == r]
            acc, loss = at["accuracy"].to_numpy(float), at["loss"].to_numpy(float)
            if not len(acc):
                continue
            loss_in = (loss >= pred.loss_low[r - 1]) & (loss <= pred.loss_high[r - 1])
            p, lo, hi = (float(a[r - 1]) for a in (pred.accuracy, pred.accuracy_low,
                                                   pred.accuracy_high))
            inside = float(acc.min()) - 0.03 <= p <= float(acc.max()) + 0.03
            covered = int(np.sum((acc >= lo) & (acc <= hi)))
            rows.append({"setting": label, "E": setting.describe().split()[1], "role": role,
                         "round": r, "seeds": len(acc), "real_min": float(acc.min()),
                         "real_mean": float(acc.mean()), "real_max": float(acc.max()),
                         "predicted": p, "band_lo": lo, "band_hi": hi,
                         "within": _yes(inside) if role == "held back" else "-",
                         "covered": f"{covered}/{len(acc)}",
                         "loss_covered": f"{int(np.sum(loss_in))}/{len(loss)}",
                         "note": _note(bad.get(label))})
    return pd.DataFrame(rows)


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def _note(found: list[Incident] | None) -> str:
    if not found:
        return ""
    return "; ".join(f"seed {i.seed} {i.kind} at {i.round}" if i.seed or len(found) > 1
                     else f"{i.kind} at round {i.round}" for i in found)


@dataclass(frozen=True)
class MapError:
    """The accuracy map's error on recorded (loss, accuracy) pairs."""

    pairs: int
    rms: float
    mean_abs: float
    max_abs: float
    within: float  # fraction of pairs within 0.02


def map_error(amap: AccuracyMap, runs: pd.DataFrame) -> MapError:
    """:class:`MapError` of ``amap`` on every pair of ``runs`` with a loss and an accuracy."""
    rows = runs.dropna(subset=["loss", "accuracy"])
    got = np.asarray(amap.accuracy(rows["loss"].to_numpy(float)), dtype=float)
    err = np.abs(got - rows["accuracy"].to_numpy(float))
    return MapError(len(err), float(np.sqrt(np.mean(err ** 2))), float(err.mean()),
                    float(err.max()), float(np.mean(err <= 0.02)))


def coverage(table: pd.DataFrame, roles: Iterable[str], column: str = "covered"
             ) -> tuple[int, int]:
    """(covered, seeds) of a CIFAR report's rows with these roles (``column``: ``covered``,
    the accuracies in the accuracy band, or ``loss_covered``, the losses in the loss band)."""
    rows = table[table["role"].isin(list(roles))]
    pairs = [tuple(int(v) for v in c.split("/")) for c in rows[column]]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def check_replay(constants: Constants, setting: Setting, rounds: int) -> float:
    """Largest relative difference between :func:`mean_curve` and ``LossPredictor.replay``
    of the setting's schedule (fixed E; a test's check that the fit runs the model)."""
    predictor = constants.predictor()
    predictor.local = setting.locals()[0]
    states = predictor.replay(LossState(), setting.schedule(rounds))
    slow = np.array([predictor.mean(s) for s in states])
    fast = mean_curve(predictor, setting, np.arange(1, rounds + 1))
    return float(np.max(np.abs(fast / slow - 1.0)))
