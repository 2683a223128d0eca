"""The progress model fitted to recorded federated runs (netsim/data/curves/, docs/curves.md).

Two tables of real runs ship with netsim (copied from Flower's published baselines; source,
licence and changes in netsim/data/curves/SOURCE.md):

* ``mnist``: McMahan et al.'s MNIST CNN (``cnn-mnist``), FedAvg over 100 clients of 600
  examples each (two-shard label skew), every client every round, local batch B in {10, 50,
  inf} and local epochs E in {1, 5, 20}; one run per setting, 1,000 rounds.
* ``cifar``: VGG-11 on CIFAR-10 (``vgg11-cifar10``), 16 clients, Dirichlet(0.1) label skew,
  batch 32, E = 2 for every client or drawn uniformly in 2..5 per client and round, FedAvg or
  FedNova aggregation, vanilla / momentum / proximal local SGD; 3 to 6 seeds, 100 rounds.

How the progress model sees a recorded round (netsim.training.loss): one round is one epoch in
which every client trains its n samples, so the epoch adds ``gain = clients x n x
efficiency x clients ** -participant_exponent x steps ** local_step_exponent x E **
local_epoch_exponent`` effective samples (``steps = E x ceil(n / B)``). A setting whose clients
draw E per round (``variable_local_epochs``) adds the mean of that gain over the E values
(FedAvg averages the clients' updates; netsim's modelling choice). The rounds of a setting are
identical, so the state after k rounds is k gains, exactly what ``LossPredictor.replay`` of the
setting's schedule gives (a test checks it); the fit evaluates that vectorised.

Only one skew level is recorded per model, so its efficiency cannot be separated from
``samples_half``: the fit keeps ``heterogeneity`` and ``noise_heterogeneity`` at 0 (the skew is
in the curve itself) and every client participates, so ``participant_exponent`` stays 0.

The fit (:func:`fit_recorded`): scipy least squares on the log of the seed-mean test loss of
the settings fitted (rounds 1..``fit_rounds``; log-spaced rounds where there are many, so the
early rounds that decide when a target is reached weigh as much as the plateau), through
:meth:`LossPredictor.from_curves` and its gain and mean; unknowns: floor, samples_half,
exponent, local_step_exponent, local_epoch_exponent (and the initial loss when round 0 was not
recorded). Then the loss-to-accuracy map (:class:`AccuracyMap`, chance fixed at 1 / classes)
by robust least squares both ways on the fitted settings' (loss, accuracy) pairs
(:func:`fit_accuracy_map`), and the run-to-run spread of the fitted settings' runs around the
fitted curve (:func:`fit_spread`; with one run per setting, as for MNIST, that is the curve's
misfit: an upper bound). A run whose loss became NaN (diverged) is left out of every fit and
reported; a transient blow-up (the loss above 10 x its best so far) is reported and kept.

The prediction (:func:`predict`) uses the entry as written (rounded), through the class the
simulator builds, :class:`LossPredictor` of a :class:`ModelSpec` with those loss parameters.

Where each part lives (every public name is importable from here):
:mod:`netsim.training.recorded_data` (the tables, their settings, diverged and blown-up runs),
:mod:`netsim.training.recorded_fit` (the fit and the prediction) and
:mod:`netsim.training.recorded_report` (predicted against real, and the checks).
"""

from __future__ import annotations

from netsim.training.recorded_data import (  # noqa: F401  (re-exported: their old home)
    BLOW_UP,
    CIFAR_FILE,
    CURVES_DIR,
    LOADERS,
    MNIST_FILE,
    UNMEASURED_CNN,
    UNMEASURED_VGG,
    Incident,
    Recorded,
    Setting,
    cifar_label,
    clean_runs,
    incidents,
    load,
    load_cifar,
    load_mnist,
    mnist_label,
)
from netsim.training.recorded_fit import (  # noqa: F401  (re-exported: their old home)
    BAND,
    PARAMETERS,
    Constants,
    Prediction,
    RecordedFit,
    Spread,
    entry_predictor,
    fit_accuracy_map,
    fit_constants,
    fit_recorded,
    fit_rounds_grid,
    fit_spread,
    mean_curve,
    predict,
    round_gain,
)
from netsim.training.recorded_report import (  # noqa: F401  (re-exported: their old home)
    MapError,
    check_replay,
    coverage,
    first_round,
    map_error,
    report,
)
