"""netsim's own figures, each a :class:`netsim.figures.FigureEntry` declared under the
entry-point group ``netsim.figures`` in setup.cfg (one line there per figure here).

To add a figure: write its plot function (Results -> figure) in a module of plots/, add one
entry below, and one line under ``netsim.figures`` in setup.cfg; reinstall (``pip install -e
.``) so the metadata is rewritten. ``netsim figures`` and ``netsim report`` then draw it.
"""

from __future__ import annotations

from netsim.figures import figure
from plots import compare, timeline

ENERGY_BY_POLICY = figure("energy-by-policy", compare.energy_by_policy)
ENERGY_VS_TIME = figure("energy-vs-time", compare.energy_time)
ENERGY_VS_AXIS = figure("energy-vs-axis", compare.metric_vs_axis)
TIME_VS_AXIS = figure("time-vs-axis", lambda r: compare.metric_vs_axis(r, "time_s"),
                      description="Training time (s) vs each numeric sweep axis, a line per policy")
LOSS_VS_TIME = figure("loss-vs-time", compare.loss_vs_time)
TIMELINE = figure("timeline", timeline.timeline_figure)
