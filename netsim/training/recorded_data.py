"""The recorded federated runs: the two tables, their settings, and the runs the fits leave out.

Reads netsim/data/curves/ (source, licence and changes in its SOURCE.md) into a
:class:`Recorded` table, one row per (setting, seed, round) with the test loss (cross-entropy,
nats) and accuracy, and the :class:`Setting` of each (clients, samples per client, B, E) as the
progress model sees a round; :func:`incidents` finds the runs that diverged or blew up and
:func:`clean_runs` drops the diverged ones. What the tables are and how the progress model is
fitted to them: :mod:`netsim.training.recorded`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from netsim.workload import LocalTraining

#: Where the recorded curves live in the package.
CURVES_DIR = os.path.join(os.path.dirname(__file__), "..", "data", "curves")
#: A run blew up where its loss exceeds this many times its best loss so far.
BLOW_UP = 10.0


@dataclass(frozen=True)
class Setting:
    """One recorded setting: how every round trains, as the progress model sees it.

    ``local_epochs`` holds one E, or several when each client draws one uniformly per round;
    ``group`` names what netsim does not model (aggregation and local optimizer), and
    ``modelled`` says whether the progress model covers it (plain local SGD under FedAvg)."""

    label: str
    clients: int
    samples_per_client: float
    batch_size: int | None
    local_epochs: tuple[int, ...]
    group: str = "fedavg"
    modelled: bool = True

    @property
    def samples(self) -> float:
        """Samples trained in a round (every client, all its samples)."""
        return self.clients * self.samples_per_client

    def locals(self) -> list[LocalTraining]:
        """The local training of each E a client may draw."""
        return [LocalTraining(e, self.batch_size) for e in self.local_epochs]

    def schedule(self, rounds: int) -> list[tuple[int, float, int]]:
        """``rounds`` rounds as :meth:`LossPredictor.replay` takes them (full model)."""
        return [(0, self.samples, self.clients)] * rounds

    def describe(self) -> str:
        """B and E in words."""
        b = "inf" if self.batch_size is None else str(self.batch_size)
        e = (str(self.local_epochs[0]) if len(self.local_epochs) == 1
             else f"{self.local_epochs[0]}..{self.local_epochs[-1]}")
        return f"B={b} E={e}"


@dataclass(frozen=True)
class Recorded:
    """A table of recorded runs and what the fit needs to know about it.

    ``table``: one row per (setting, seed, round) with ``loss`` (test cross-entropy, NaN
    where not kept or diverged) and ``accuracy``. ``target``: ``rounds`` (rounds to
    ``target_accuracy``) or ``accuracy`` (accuracy at ``target_rounds``)."""

    name: str
    model: str
    file: str
    table: pd.DataFrame
    settings: dict[str, Setting]
    hold_out: tuple[str, ...]
    chance: float
    fit_rounds: int
    target: Literal["rounds", "accuracy"]
    target_accuracy: float = 0.97
    target_rounds: tuple[int, ...] = (25, 50, 100)
    fixed: dict[str, float] = field(default_factory=dict)
    """Constants the data cannot identify, held at these values (and said why in ``notes``)."""
    unmeasured: dict[str, float] = field(default_factory=dict)
    """Constants no recorded run measures (pruning, staleness): the entry's values (said so in
    its ``source``)."""
    unmeasured_from: str = ""
    notes: tuple[str, ...] = ()

    @property
    def modelled(self) -> list[str]:
        """Settings the progress model covers (those a fit may use)."""
        return [k for k, s in self.settings.items() if s.modelled]

    @property
    def path(self) -> str:
        return os.path.join(CURVES_DIR, self.file)


# --- the two tables --------------------------------------------------------------------------

#: Pruning and staleness constants no recorded run measures (loss_params.yaml's small-cnn and
#: resnet18 pruning values, mlp-digits' fitted staleness exponent).
UNMEASURED_CNN = {"floor_prune": 0.5, "floor_exponent": 2.0, "prune_progress_loss": 1.0,
                  "staleness_exponent": 0.3354}
UNMEASURED_VGG = {"floor_prune": 0.8, "floor_exponent": 2.0, "prune_progress_loss": 1.0,
                  "staleness_exponent": 0.3354}
MNIST_FILE = "fedavg_mnist_cnn.csv"
CIFAR_FILE = "fednova_vgg11_cifar10.csv"


def mnist_label(batch_size: int | None, epochs: int) -> str:
    """``B10-E1``, ``Binf-E20``: a MNIST setting's label."""
    return f"B{'inf' if batch_size is None else batch_size}-E{epochs}"


def load_mnist(path: str | None = None) -> Recorded:
    """The MNIST CNN runs (FedAvg, 100 clients x 600 examples, all every round)."""
    path = path or os.path.join(CURVES_DIR, MNIST_FILE)
    raw = pd.read_csv(path)
    rows, settings = [], {}
    for (b, e), grp in raw.groupby(["batch_size", "local_epochs"], sort=True):
        batch = None if math.isinf(float(b)) else int(b)
        label = mnist_label(batch, int(e))
        settings[label] = Setting(label, 100, 600.0, batch, (int(e),))
        rows.append(pd.DataFrame({"setting": label, "seed": 0, "round": grp["round"].to_numpy(),
                                  "loss": grp["test_cross_entropy"].to_numpy(float),
                                  "accuracy": grp["accuracy"].to_numpy(float)}))
    order = sorted(settings, key=lambda k: (settings[k].batch_size or 10**9,
                                            settings[k].local_epochs))
    return Recorded(
        name="mnist", model="cnn-mnist", file=os.path.basename(path),
        table=pd.concat(rows, ignore_index=True), settings={k: settings[k] for k in order},
        hold_out=("B50-E1", "B10-E5"), chance=0.1, fit_rounds=300, target="rounds",
        unmeasured=UNMEASURED_CNN, unmeasured_from="small-cnn's illustrative values",
        notes=("B10-E5 kept accuracy only (no loss): it can only be predicted, never fitted",))


def cifar_label(strategy: str, optimizer: str, variable: bool, mu_file: float | None) -> str:
    """``fedavg-vanilla-fixed``, ``fedavg-proximal-var-mu0.001``: a CIFAR setting's label."""
    mu = "" if mu_file is None or (isinstance(mu_file, float) and math.isnan(mu_file)) \
        else f"-mu{mu_file:g}"
    return f"{strategy}-{optimizer}-{'var' if variable else 'fixed'}{mu}"


def load_cifar(path: str | None = None) -> Recorded:
    """The VGG-11 runs (16 clients of ~3,125 CIFAR-10 images, Dirichlet(0.1), batch 32)."""
    path = path or os.path.join(CURVES_DIR, CIFAR_FILE)
    raw = pd.read_csv(path)
    raw["variable_local_epochs"] = raw["variable_local_epochs"].astype(str).str.lower() == "true"
    keys = ["strategy", "local_optimizer", "variable_local_epochs", "proximal_mu_file"]
    rows, settings = [], {}
    for (strategy, optimizer, variable, mu), grp in raw.groupby(keys, sort=True, dropna=False):
        label = cifar_label(strategy, optimizer, bool(variable), mu)
        modelled = strategy == "fedavg" and optimizer in ("vanilla", "proximal")
        settings[label] = Setting(label, 16, 50_000 / 16, 32,
                                  (2, 3, 4, 5) if variable else (2,),
                                  group=f"{strategy}/{optimizer}", modelled=modelled)
        rows.append(pd.DataFrame({"setting": label, "seed": grp["seed"].to_numpy(int),
                                  "round": grp["round"].to_numpy(int),
                                  "loss": grp["test_cross_entropy"].to_numpy(float),
                                  "accuracy": grp["accuracy"].to_numpy(float)}))
    order = sorted(settings, key=lambda k: (not settings[k].modelled, k))
    return Recorded(
        name="cifar", model="vgg11-cifar10", file=os.path.basename(path),
        table=pd.concat(rows, ignore_index=True), settings={k: settings[k] for k in order},
        hold_out=("fedavg-vanilla-fixed",), chance=0.1, fit_rounds=100, target="accuracy",
        fixed={"local_epoch_exponent": 0.0},
        unmeasured=UNMEASURED_VGG, unmeasured_from="resnet18's illustrative values",
        notes=("B and n are the same in every run, so steps = E x 98 and only the sum of the two "
               "local exponents is identified: local_epoch_exponent is held at 0 and "
               "local_step_exponent carries E's effect",
               "momentum SGD and FedNova's aggregation are outside the progress model (it has "
               "no optimizer or aggregation rule): shown for comparison, never fitted",
               "proximal runs (FedProx term: mu 0.005 by the baseline's proximal config, 0.001 "
               "where the file names it) are plain SGD plus a small pull to the global model: "
               "fitted as plain SGD"))


LOADERS = {"mnist": load_mnist, "cifar": load_cifar}


def load(name: str) -> Recorded:
    """The recorded table ``mnist`` or ``cifar``."""
    if name not in LOADERS:
        raise ValueError(f"unknown recorded table {name!r}: one of {', '.join(LOADERS)}")
    return LOADERS[name]()


# --- runs that diverged or blew up ------------------------------------------------------------

@dataclass(frozen=True)
class Incident:
    """A run the fit leaves out: ``kind`` ``diverged`` (NaN loss from ``round`` on, accuracy
    ``accuracy_after`` at the end) or ``blew up`` (loss ``loss`` > 10 x its best so far at
    ``round``)."""

    setting: str
    seed: int
    kind: str
    round: int
    loss: float
    accuracy_after: float


def incidents(data: Recorded) -> list[Incident]:
    """Every diverged or blown-up run of ``data`` (settings where the loss was kept)."""
    out = []
    for (setting, seed), grp in data.table.groupby(["setting", "seed"], sort=False):
        grp = grp.sort_values("round")
        loss = grp["loss"].to_numpy(float)
        if np.isnan(loss).all():
            continue  # no loss kept (B10-E5): nothing to judge by
        rounds, acc = grp["round"].to_numpy(int), grp["accuracy"].to_numpy(float)
        bad = np.flatnonzero(np.isnan(loss))
        if len(bad):
            out.append(Incident(setting, int(seed), "diverged", int(rounds[bad[0]]),
                                math.nan, float(acc[-1])))
            continue
        best = np.minimum.accumulate(loss)
        jump = np.flatnonzero(loss[1:] > BLOW_UP * best[:-1])
        if len(jump):
            k = jump[0] + 1
            out.append(Incident(setting, int(seed), "blew up", int(rounds[k]), float(loss[k]),
                                float(acc[k])))
    return out


def clean_runs(data: Recorded) -> pd.DataFrame:
    """``data.table`` without the runs that diverged (a run that blew up and recovered
    stays: it is a run of the setting, however rough)."""
    bad = {(i.setting, i.seed) for i in incidents(data) if i.kind == "diverged"}
    keep = [(s, d) not in bad for s, d in zip(data.table["setting"], data.table["seed"],
                                               strict=True)]
    return data.table[keep]
