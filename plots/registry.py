"""netsim's own figures, each a :class:`netsim.figures.FigureEntry` declared under the
entry-point group ``netsim.figures`` in setup.cfg (one line there per figure here).

To add a figure: write its plot function (Results -> figure) in a module of plots/, add one
entry below, and one line under ``netsim.figures`` in setup.cfg; reinstall (``pip install -e
.``) so the metadata is rewritten. ``netsim figures`` and ``netsim report`` then draw it.
"""

from __future__ import annotations

from netsim.figures import figure
from plots import asynchronous, baechi, compare, curves, dynamics, families, media, timeline

ENERGY_BY_POLICY = figure("energy-by-policy", compare.energy_by_policy)
ENERGY_VS_TIME = figure("energy-vs-time", compare.energy_time)
ENERGY_VS_AXIS = figure("energy-vs-axis", compare.metric_vs_axis,
                        description="Energy (J) vs each numeric sweep axis, a line per policy")
TIME_VS_AXIS = figure("time-vs-axis", lambda r: compare.metric_vs_axis(r, "time_s"),
                      description="Training time (s) vs each numeric sweep axis, a line per policy")
LOSS_VS_TIME = figure("loss-vs-time", compare.loss_vs_time)
TIMELINE = figure("timeline", timeline.timeline_figure)

# Per policy family (experiments/pact/run.py, experiments/depl/run.py), from stored runs.
# (a family's figures only where the family ran: baselines alone draw none of them)
PACT = families.family_runs(families.PACT_FAMILY, families.PACT_OWN)
DEPL = families.family_runs(families.DEPL_FAMILY, families.DEPL_FAMILY)
PACT_ENERGY_VS_TARGET = figure("pact-energy-vs-target", families.pact_energy_vs_target, PACT)
PACT_ENERGY_VS_DEADLINE = figure("pact-energy-vs-deadline", families.pact_energy_vs_deadline,
                                 PACT)
PACT_ENERGY_VS_DEVICES = figure("pact-energy-vs-devices", families.pact_energy_vs_devices, PACT)
PACT_SCHEDULE = figure("pact-schedule", families.pact_schedule, {"policy": "pact"})
PACT_ENERGY_VS_EPSILON = figure("pact-energy-vs-epsilon", families.pact_energy_vs_epsilon, PACT)
DEPL_FINAL_LOSS_CDF = figure("depl-final-loss-cdf", families.depl_final_loss_cdf, DEPL)
DEPL_SUCCESS_VS_PI = figure("depl-success-vs-pi", families.depl_success_vs_pi, DEPL)
DEPL_COST_VS_PI = figure("depl-cost-vs-pi", families.depl_cost_vs_pi, DEPL)
DEPL_COST_VS_TARGET = figure("depl-cost-vs-target", families.depl_cost_vs_target, DEPL)
DEPL_MODEL_PER_EPOCH = figure("depl-model-per-epoch", families.depl_model_per_epoch, DEPL)
DEPL_COST_RATIO = figure("depl-cost-ratio", families.depl_cost_ratio, DEPL)

# Baechi placement (experiments/baechi/sweep.yaml): what the baechi policy placed, per run.
BAECHI = {"policy": "baechi"}
BAECHI_STEP_TIME = figure("baechi-step-time", baechi.step_time, BAECHI)
BAECHI_PEAK_MEMORY = figure("baechi-peak-memory", baechi.peak_memory, BAECHI)

# A time-varying world (experiments/dynamics): who was online, trained and dropped out, for any
# run whose devices went offline; energy and time static vs churn for that experiment's runs.
DYNAMICS_AVAILABILITY_MAP = figure("dynamics-availability-map", dynamics.availability_map)
DYNAMICS_ENERGY_TIME = figure("dynamics-energy-time", dynamics.energy_time,
                              dynamics.is_dynamics_experiment)

# Asynchronous training (docs/async.md, experiments/async): loss vs time and vs energy,
# synchronous beside asynchronous policies, per scenario point.
ASYNC_LOSS_TIME_ENERGY = figure("async-loss-time-energy", asynchronous.loss_time_energy,
                                asynchronous.is_async_experiment)

# Shared media (docs/wireless.md): each cell's air time in use over a run, any run with media.
AIRTIME_BY_CELL = figure("airtime-by-cell", media.airtime_by_cell)

# Recorded runs of real models against netsim's prediction (docs/curves.md): read from
# netsim/data/curves (never simulated) for runs whose model's constants were fitted to them
# (cnn-mnist, vgg11-cifar10: fedavg-mnist, fednova-cifar); one figure per recorded table.
RECORDED_CURVES = figure("recorded-curves", curves.recorded_curves_for, curves.uses_recorded_fit)
