"""Random small planning instances and the problem of a whole scenario (for tests, the
benchmark and the experiments; nothing here is used by the policies themselves)."""

from __future__ import annotations

from typing import Any

import numpy as np

from netsim.devices import build_device_table
from netsim.engine import resolve_scenario
from netsim.scenario.loading import load_scenario
from netsim.training.loss import CurveParams, LossPredictor, LossState
from policies.pact.problem import PlanningProblem, effective_target

VARIANTS = [{"name": "full", "params_fraction": 1.0, "flop_fraction": 1.0},
            {"name": "pruned-50", "params_fraction": 0.5, "flop_fraction": 0.5},
            {"name": "pruned-75", "params_fraction": 0.25, "flop_fraction": 0.25},
            {"name": "pruned-90", "params_fraction": 0.1, "flop_fraction": 0.1}]


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def small_instance(rng: np.random.Generator, n_devices: int = 4, n_variants: int = 3,
                   max_epochs: int = 6, floor_prune: float | None = None,
                   deadline_factor: tuple[float, float] = (1.5, 6.0)) -> dict[str, Any]:
    """A random star scenario (mapping) whose plans need a few epochs.

    Devices: log-uniform FLOP/s (1e9-2e10), power, samples (100-800) and links; the loss
    curve's samples_half and target are drawn relative to the data so that reaching the target
    takes about 1.5-3.5 all-device epochs of the full model; the deadline is a random multiple
    of one all-device full-model epoch (``deadline_factor``), binding in some draws.
    """
    devices = [{"id": "agg", "flop_per_s": 1e12, "memory_bytes": 6.4e10,
                "power_busy_w": 100.0, "power_idle_w": _log_uniform(rng, 2.0, 30.0)}]
    links = []
    total, slowest = 0, 0.0
    params = _log_uniform(rng, 2e5, 2e6)
    flop = _log_uniform(rng, 1e6, 1e7)
    for i in range(n_devices):
        f = _log_uniform(rng, 1e9, 2e10)
        busy = _log_uniform(rng, 2.0, 20.0)
        samples = int(rng.integers(100, 800))
        bw = _log_uniform(rng, 5e6, 1e8)
        lat = _log_uniform(rng, 0.005, 0.05)
        devices.append({"id": f"d{i}", "flop_per_s": f, "memory_bytes": 8e9,
                        "power_busy_w": busy, "power_idle_w": busy * rng.uniform(0.05, 0.3),
                        "samples": samples})
        links.append({"a": "agg", "b": f"d{i}", "bandwidth_bps": bw, "latency_s": lat,
                      "energy_j_per_bit": _log_uniform(rng, 5e-8, 5e-7)})
        total += samples
        slowest = max(slowest, 2 * (32 * params / bw + lat) + samples * flop / f)
    half = total * rng.uniform(0.5, 2.0)
    fp = rng.uniform(0.1, 0.6) if floor_prune is None else floor_prune
    curve = CurveParams(2.303, 0.05, half, 0.7)
    target = float(curve.mean(total * rng.uniform(1.5, 3.5)))
    return {
        "name": "pact-small", "seed": 0, "devices": devices, "links": links, "aggregator": "agg",
        "model": {"name": "small", "params": params, "bytes_per_param": 4,
                  "train_flop_per_sample": flop, "variants": VARIANTS[:n_variants],
                  "loss": {"initial_loss": 2.303, "floor_full": 0.05, "floor_prune": fp,
                           "samples_half": half, "exponent": 0.7, "prune_progress_loss": 1.0}},
        "training": {"target_loss": target, "max_epochs": max_epochs,
                     "deadline_s": slowest * rng.uniform(*deadline_factor)},
    }


def scenario_problem(scenario: Any, seed: int = 0, variants: list[int] | None = None,
                     allow_unprune: bool = False) -> PlanningProblem:
    """The planning problem of a scenario before its first epoch (all devices available)."""
    resolved = resolve_scenario(load_scenario(scenario), seed)
    table = build_device_table(resolved)
    model, training = resolved.model, resolved.training
    predictor = LossPredictor(model, training)  # type: ignore[arg-type]
    usable = table.samples > 0
    usable[table.aggregator] = False
    n_var = len(model.variants)  # type: ignore[union-attr]
    return PlanningProblem(
        table=table, model=model, predictor=predictor,  # type: ignore[arg-type]
        target_loss=effective_target(training, predictor), time_left_s=float(training.deadline_s),
        epochs_left=int(training.max_epochs), start=LossState(), usable=usable,
        variants=tuple(variants if variants is not None else range(n_var)),
        allow_unprune=allow_unprune, memory_overhead=float(training.memory_overhead))
