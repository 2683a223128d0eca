"""What privacy costs on an edge network (issue 52): Flower's SecAgg+ against plain FedAvg,
and central DP's effect on the loss, on simulated Wi-Fi and cellular fleets.

Run: OMP_NUM_THREADS=1 python benchmarks/secagg_cost.py [--quick]
     (about 45 s on 2 cores; --quick: 10 and 20 clients, one round, about 20 s)

(a) SecAgg+ against FedAvg. Flower's own flower-secure-aggregation example
    (tests/data/flower-apps/flower-secure-aggregation: LegacyContext, DefaultWorkflow,
    SecAggPlusWorkflow with num-shares 3 and reconstruction-threshold 2, secaggplus_mod on
    the clients, legacy FedAvg over every available node, its 62,006-parameter CNN trained
    for real on scikit-learn's digits) against the same app with secure aggregation off (a
    copy whose ServerApp runs ``DefaultWorkflow()``, Flower's plain fit, and whose ClientApp
    has no mods: :func:`fedavg_app`), with ``is-demo=false`` and ``fraction-evaluate=0`` (a
    round is its training only), at 10, 50 and 100 clients on two generated fleets
    (:func:`scenario`): ``wifi`` (phones and laptops in Wi-Fi cells of 25 stations, a static
    world) and ``cellular`` (phones in LTE cells of 50, with a dynamics block: devices go
    offline, markov sessions of 2 min online, 30 s offline on average, so some drop out
    during a round). Per round (the means over its rounds): the bytes the clients upload and download (every phase: the
    SecAgg+ stages' keys, shares, masked int64 vector and unmask shares, or FedAvg's fit),
    the round's simulated time (s) and the fleet's energy (J, every device and the server:
    compute, radio, idle), and the dropouts during the protocol (replies lost to a device
    going offline, by stage) and the rounds whose aggregate was lost (``lost``: SecAgg+
    gives a round up when a sampled node keeps fewer active neighbours than the
    reconstruction threshold). The model's compute is the CNN's (:data:`SECAGG_CNN`: its
    FLOP from the layer shapes), the masks' ``SECAGG_MASK_FLOP_PER_ELEMENT``
    (policies/flower/grid.py, benchmarks/secagg_masking.py).
(b) Central DP. Flower's fl-dp-sa example (DifferentialPrivacyClientSideFixedClipping:
    noise-multiplier 0.2, clipping-norm 10, num-sampled-clients 20; fixedclipping_mod and
    SecAgg+ on the clients; 3 rounds, fixed in its ServerApp) against the same app with DP
    off (``noise-multiplier=0``, ``clipping-norm=1e9``: no noise, no clipping; SecAgg+ kept),
    on the Wi-Fi fleet of 20 clients (4 sampled a round). The app evaluates nothing
    (fraction_evaluate 0): its loss is the clients' aggregated ``val_loss`` of their training
    replies (``loss_source: train``; what Flower logs as its aggregated fit metrics). Time to
    target (``DP_TARGET_LOSS``) where a run reaches it, else the loss after the 3 rounds
    (the table says which).

Every loop is bounded (fixed client counts and rounds); a run that fails is printed with its
error. The last line: SecAgg+ / FedAvg per round, bytes and time, at the largest fleet.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import netsim

ROOT = Path(__file__).resolve().parent.parent
APPS = ROOT / "tests" / "data" / "flower-apps"
SECAGG_APP, DPSA_APP = APPS / "flower-secure-aggregation", APPS / "fl-dp-sa"
#: The fleets' sizes and the rounds of each run ((a); --quick: the second pair).
CLIENTS, ROUNDS = (10, 50, 100), 2
QUICK_CLIENTS, QUICK_ROUNDS = (10, 20), 1
NETWORKS = ("wifi", "cellular")
#: flower-secure-aggregation's CNN (3 x 32 x 32 input: conv 6@5x5, pool, conv 16@5x5, pool, FC
#: 400-120-84-10): 62,006 parameters; 651,720 multiply-adds forward (352,800 + 240,000 +
#: 48,000 + 10,080 + 840, from the layer shapes), 1.303 MFLOP forward, 3.910 MFLOP training
#: a sample (3x forward, netsim's models.yaml convention).
SECAGG_CNN = {"name": "secagg-cnn", "params": 62_006, "train_flop_per_sample": 3.910e6}
#: fl-dp-sa's CNN (1 x 28 x 28 input: conv 6@3x3 padding 1, pool, conv 16@5x5, pool, FC
#: 400-120-84-10): 61,610 parameters; 341,256 multiply-adds forward (42,336 + 240,000 +
#: 48,000 + 10,080 + 840), 0.683 MFLOP forward, 2.048 MFLOP training a sample.
DPSA_CNN = {"name": "dpsa-cnn", "params": 61_610, "train_flop_per_sample": 2.048e6}
#: (b) the fleet, and the loss (the clients' aggregated val_loss) whose first reaching is the
#: time to target.
DP_CLIENTS, DP_TARGET_LOSS = 20, 1.0
#: (b) the seeds each setting runs (the DP noise and the sampling are drawn from them).
DP_SEEDS = (0, 1, 2)
#: A cellular device's online sessions and offline gaps (s, means of a markov process).
ONLINE_S, OFFLINE_S = 120.0, 30.0


def scenario(network: str, n: int, model: dict[str, Any] | None = None) -> dict[str, Any]:
    """A generated fleet of ``n`` clients and an edge server: ``wifi``, phones (60 %) and
    laptops in Wi-Fi cells of 25 stations, static; ``cellular``, phones in LTE cells of 50,
    devices going offline (:data:`ONLINE_S`, :data:`OFFLINE_S`). No stop rule ends a run
    early (the target loss is out of reach; the app's rounds end it)."""
    if network not in NETWORKS:
        raise ValueError(f"network: {network!r} is not one of {', '.join(NETWORKS)}")
    wifi = network == "wifi"
    out: dict[str, Any] = {
        "name": f"secagg-{network}-{n}", "seed": 0,
        "generate": {"n_devices": n, "mix": {"phone": 0.6, "laptop": 0.4} if wifi else
                     {"phone": 1.0}, "access": {"wifi": 1.0} if wifi else {"lte": 1.0},
                     "devices_per_cell": 25 if wifi else 50, "samples_mean": 600,
                     "seed": 1},
        "model": dict(model or SECAGG_CNN),
        "training": {"target_loss": 1e-9, "deadline_s": 1e9, "max_epochs": 1000}}
    if not wifi:
        out["dynamics"] = {"availability": {"model": "markov", "mean_online_s": ONLINE_S,
                                            "mean_offline_s": OFFLINE_S}}
    return out


#: The two edits that turn flower-secure-aggregation into plain FedAvg: (file, the original's
#: text, its replacement).
SECURE_OFF = (
    ("secaggexample/server_app.py", "workflow = DefaultWorkflow(fit_workflow=fit_workflow)",
     "workflow = DefaultWorkflow()"),
    ("secaggexample/client_app.py", "mods=[\n        secaggplus_mod,\n    ],", "mods=[],"),
)


def fedavg_app(folder: Path) -> Path:
    """flower-secure-aggregation with secure aggregation off, written under ``folder``: its
    ServerApp runs Flower's default fit workflow (plain legacy FedAvg, the same strategy,
    model, data and rounds) and its ClientApp has no secaggplus_mod; the rest unchanged.
    Returns the app folder."""
    app = folder / "flower-fedavg"
    shutil.copytree(SECAGG_APP, app, ignore=shutil.ignore_patterns("__pycache__"))
    for name, old, new in SECURE_OFF:
        path = app / name
        text = path.read_text()
        if text.count(old) != 1:
            raise RuntimeError(f"{path}: expected {old!r} once (has the example changed?)")
        path.write_text(text.replace(old, new))
    return app


@dataclass(frozen=True)
class RoundCost:
    """One run's figures per round (the means over its rounds)."""

    network: str
    clients: int
    protocol: str
    """``secagg+`` or ``fedavg``."""
    status: str
    rounds: int
    bytes_up: float
    """The clients' uploads in a round (bytes)."""
    bytes_down: float
    """The clients' downloads in a round (bytes)."""
    round_s: float
    """A round's simulated time (s)."""
    energy_j: float
    """The fleet's energy in a round (J)."""
    dropouts: float
    """Replies lost to a device going offline in a round (dropped out)."""
    dropped_at: str
    """Where they were lost: ``stage: count`` over the run."""
    lost_rounds: int
    """Rounds whose aggregate was lost: SecAgg+, no unmask stage (Flower's workflow gave up
    the round: a sampled node kept fewer active neighbours than the reconstruction
    threshold); FedAvg, no update aggregated."""
    wall_s: float
    """The run's wall-clock time (s)."""
    error: str = ""


#: Warnings hidden, by logger: netsim's NaN loss (the cost runs evaluate nothing on purpose),
#: and Flower's about the examples' own settings, repeated every run (no fit metrics
#: aggregation in flower-secure-aggregation; fl-dp-sa's min_available_clients and its 20
#: sampled clients of which 4 reply; secaggplus_mod's restart of a client whose last round
#: was given up). Every other warning (a ClientApp failure) still shows.
HIDDEN = {"netsim.flower": ("loss is NaN",),
          "flwr": ("No fit_metrics_aggregation_fn", "min_available_clients",
                   "number of clients returning parameters", "Restart from the setup stage")}


class _Hide(logging.Filter):
    def __init__(self, texts: tuple[str, ...]) -> None:
        super().__init__()
        self.texts = texts

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(text in message for text in self.texts)


def _quiet_loss_warning() -> None:
    """Hide the warnings of :data:`HIDDEN`."""
    for name, texts in HIDDEN.items():
        logging.getLogger(name).addFilter(_Hide(texts))


def measure(network: str, clients: int, app: Path, protocol: str, rounds: int,
            seed: int = 0) -> RoundCost:
    """Run ``app`` (``protocol``: what it is, for the table) for ``rounds`` rounds on
    :func:`scenario` and return its figures per round."""
    t0 = time.perf_counter()
    r = netsim.simulate(scenario(network, clients), policy="flower", seed=seed, params={
        "app": str(app), "quiet": True, "run_config": {
            "is-demo": False, "num-server-rounds": rounds, "fraction-evaluate": 0.0}})
    wall_s = time.perf_counter() - t0
    run = r.runs.iloc[0]
    epochs = r.epochs
    n = len(epochs)
    up = down = dropouts = 0.0
    where: dict[str, int] = {}
    lost = 0
    for text, aggregated in zip(epochs["phases"], epochs["updates_aggregated"], strict=True):
        phases = json.loads(text)
        stages = {phase.get("stage") for phase in phases}
        lost += int("secaggplus:unmask" not in stages if "secaggplus:setup" in stages
                    else aggregated == 0)
        for phase in phases:
            up += sum(phase.get("bytes_up", {}).values())
            down += sum(phase.get("bytes_down", {}).values())
            gone = len(phase.get("dropped", []))
            dropouts += gone
            if gone:
                stage = phase.get("stage", phase["type"]).removeprefix("secaggplus:")
                where[stage] = where.get(stage, 0) + gone
    per = 1.0 / n if n else math.nan
    return RoundCost(network, clients, protocol, str(run["status"]), n, up * per, down * per,
                     float(run["time_s"]) * per, float(run["energy_j"]) * per,
                     dropouts * per, ", ".join(f"{k}: {v}" for k, v in where.items()) or "-",
                     lost, wall_s, str(run["error"]))


@dataclass(frozen=True)
class DpOutcome:
    """fl-dp-sa's run with DP on or off: its loss per round and its time to target."""

    dp: str
    status: str
    losses: list[float]
    """The clients' aggregated val_loss after each round."""
    time_to_target_s: float
    """The simulated time at which the loss first reached DP_TARGET_LOSS (NaN: never)."""
    time_s: float
    energy_j: float
    error: str = ""


def dp_effect(dp: bool, clients: int = DP_CLIENTS, seed: int = 0) -> DpOutcome:
    """fl-dp-sa on the Wi-Fi fleet of ``clients``, DP on (the app's config) or off (no
    noise, no clipping)."""
    config: dict[str, Any] = {} if dp else {"noise-multiplier": 0.0, "clipping-norm": 1e9}
    sc = scenario("wifi", clients, DPSA_CNN)
    sc["training"]["target_loss"] = DP_TARGET_LOSS
    r = netsim.simulate(sc, policy="flower", seed=seed, params={
        "app": str(DPSA_APP), "quiet": True, "run_config": config,
        "loss_source": "train", "loss_metric": "val_loss"})
    run, epochs = r.runs.iloc[0], r.epochs
    losses = [float(v) for v in epochs["loss"]]
    hit = epochs[epochs["loss"] <= DP_TARGET_LOSS]
    return DpOutcome("on" if dp else "off", str(run["status"]), losses,
                     float(hit["end_s"].iloc[0]) if len(hit) else math.nan,
                     float(run["time_s"]), float(run["energy_j"]), str(run["error"]))


def cost_table(clients: tuple[int, ...], rounds: int, workdir: Path) -> list[RoundCost]:
    """(a): every network, fleet size and protocol, SecAgg+ first."""
    plain = fedavg_app(workdir)
    out = []
    for network in NETWORKS:
        for n in clients:
            for protocol, app in (("secagg+", SECAGG_APP), ("fedavg", plain)):
                out.append(measure(network, n, app, protocol, rounds))
                print(_row(out[-1]), flush=True)
    return out


HEADER = (f"{'network':>8} {'clients':>7} {'protocol':>8} {'rounds':>6} {'up_MB':>8} "
          f"{'down_MB':>8} {'round_s':>8} {'round_J':>9} {'dropouts':>8} {'lost':>4}  "
          f"{'wall_s':>6}  dropped at")


def _row(c: RoundCost) -> str:
    line = (f"{c.network:>8} {c.clients:>7} {c.protocol:>8} {c.rounds:>6} "
            f"{c.bytes_up / 1e6:>8.3f} {c.bytes_down / 1e6:>8.3f} {c.round_s:>8.3f} "
            f"{c.energy_j:>9.1f} {c.dropouts:>8.2f} {c.lost_rounds:>4}  {c.wall_s:>6.1f}  "
            f"{c.dropped_at}")
    return line + (f"  [{c.status}: {c.error[:120]}]" if c.status == "failed" else "")


def overhead(rows: list[RoundCost]) -> str:
    """SecAgg+ / FedAvg per round (bytes up + down, round time, energy) on each network at
    the largest fleet both ran."""
    parts = []
    for network in NETWORKS:
        both = {(c.clients, c.protocol): c for c in rows
                if c.network == network and c.status != "failed"}
        sizes = [n for n, p in both if p == "secagg+" and (n, "fedavg") in both]
        if not sizes:
            continue
        n = max(sizes)
        s, f = both[(n, "secagg+")], both[(n, "fedavg")]
        parts.append(f"{network} {n} clients: bytes x{(s.bytes_up + s.bytes_down) / (f.bytes_up + f.bytes_down):.2f}"
                     f" (up x{s.bytes_up / f.bytes_up:.2f}), time x{s.round_s / f.round_s:.2f}, "
                     f"energy x{s.energy_j / f.energy_j:.2f}")
    return "overhead SecAgg+ / FedAvg per round: " + ("; ".join(parts) or "none measured")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_CLIENTS} clients, {QUICK_ROUNDS} round(s)")
    args = parser.parse_args()
    clients, rounds = (QUICK_CLIENTS, QUICK_ROUNDS) if args.quick else (CLIENTS, ROUNDS)
    _quiet_loss_warning()
    t0 = time.perf_counter()
    print(f"(a) SecAgg+ against FedAvg: flower-secure-aggregation, {rounds} round(s) a run, "
          "per round (the clients' bytes; the fleet's time and energy)")
    print(HEADER)
    with tempfile.TemporaryDirectory() as tmp:
        rows = cost_table(clients, rounds, Path(tmp))
    print(f"\n(b) central DP: fl-dp-sa on the Wi-Fi fleet of {DP_CLIENTS} clients, loss: the "
          f"clients' aggregated val_loss, target {DP_TARGET_LOSS}")
    print(f"{'DP':>4} {'seed':>4} {'status':>10} {'loss after each round':>32} {'to_target_s':>12} "
          f"{'time_s':>8} {'energy_J':>9}")
    for dp, seed in ((dp, seed) for dp in (False, True) for seed in DP_SEEDS):
        o = dp_effect(dp, seed=seed)
        losses = ", ".join(f"{v:.3f}" for v in o.losses)
        target = f"{o.time_to_target_s:.3f}" if math.isfinite(o.time_to_target_s) else \
            "not reached"
        print(f"{o.dp:>4} {seed:>4} {o.status:>10} {losses:>32} {target:>12} {o.time_s:>8.3f} "
              f"{o.energy_j:>9.1f}" + (f"  [{o.error[:120]}]" if o.status == "failed" else ""))
    print(f"\nwall {time.perf_counter() - t0:.0f} s")
    print(overhead(rows))


if __name__ == "__main__":
    main()
