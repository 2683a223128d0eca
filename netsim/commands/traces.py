"""``netsim traces generate SCENARIO --out DIR`` and ``netsim traces plot FILE``.

``generate`` samples the scenario's world (its markov availability and lognormal bandwidth,
:func:`netsim.dynamics.sample.sample_traces`) over a horizon and writes it as trace files
(``DIR/availability.<fmt>``, ``DIR/bandwidth.<fmt>``) to edit and replay with
``model: trace``. ``plot`` draws a trace file (the kind told by its columns). Formats and
rules: docs/traces.md. Registered under the entry-point group ``netsim.commands``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from netsim.commands.info import print_warnings
from netsim.outputs import dir_problems, file_problems
from netsim.scenario.errors import Problem, ScenarioError
from netsim.scenario.schema import MAX_SEED

if TYPE_CHECKING:
    import pandas as pd

    from netsim.scenario.schema import Scenario

#: Longest default horizon of ``traces generate`` (s): 7 days.
MAX_DEFAULT_HORIZON_S = 7 * 86400.0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim traces`` with its actions ``generate`` and ``plot``."""
    p = sub.add_parser("traces", help="write a scenario's dynamics as trace files, or plot one",
                       description="Trace files of availability (who is online when) and "
                       "bandwidth (link capacity over time): `netsim traces generate` samples "
                       "a scenario's dynamics and writes them, to edit and replay with "
                       "`model: trace`; `netsim traces plot` draws one. Formats: "
                       "docs/traces.md.")
    actions = p.add_subparsers(dest="traces_action", metavar="ACTION", parser_class=type(p))
    g = actions.add_parser("generate", help="sample a scenario's availability and bandwidth "
                           "and write them as trace files",
                           description="Sample the scenario's world (markov availability, "
                           "lognormal bandwidth; with their defaults where the scenario has "
                           "no dynamics block) and write DIR/availability.<fmt> and "
                           "DIR/bandwidth.<fmt>, then print the dynamics block that replays "
                           "them.")
    g.add_argument("scenario", help="scenario file or built-in name")
    g.add_argument("--out", required=True, metavar="DIR", help="folder to write the traces in")
    g.add_argument("--seed", type=int, metavar="N",
                   help="seed of the sampled world and of a generated network "
                        "(default: the scenario's seed)")
    g.add_argument("--horizon-s", type=float, metavar="S",
                   help="length of the traces in seconds (default: the scenario's "
                        "training.deadline_s, at most 7 days)")
    g.add_argument("--format", choices=["csv", "parquet"], default="csv",
                   help="file format (default csv)")
    g.set_defaults(func=generate_command)
    pl = actions.add_parser("plot", help="draw a trace file (availability or bandwidth)",
                            description="Draw an availability trace (devices x time, online "
                            "intervals as bars) or a bandwidth trace (capacity over time, the "
                            "first 20 links); the kind is told by the file's columns.")
    pl.add_argument("file", help="trace file (.csv or .parquet)")
    pl.add_argument("--out", metavar="PNG", help="figure to write (format by suffix: .png, "
                    ".pdf, .svg; default: FILE with the suffix .png)")
    pl.set_defaults(func=plot_command)

    def _usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=_usage)


def default_horizon_s(deadline_s: float) -> float:
    """The horizon of ``traces generate`` without ``--horizon-s`` (s): the deadline, at most
    7 days."""
    return min(deadline_s, MAX_DEFAULT_HORIZON_S)


def generate_command(args: argparse.Namespace) -> int:
    """Validate everything first, then sample and write the two trace files."""
    from netsim.scenario.loading import validate_scenario

    result = validate_scenario(args.scenario)
    print_warnings(result.warnings)
    problems = list(result.problems)
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        problems.append(Problem("--seed", f"{args.seed} outside 0..{MAX_SEED}"))
    if args.horizon_s is not None and not (math.isfinite(args.horizon_s)
                                           and args.horizon_s > 0):
        problems.append(Problem("--horizon-s", f"{args.horizon_s:g}: a positive number of "
                                               "seconds"))
    problems += dir_problems(args.out)
    scenario = result.scenario
    if problems or scenario is None:
        raise ScenarioError(problems, "scenario or command line")
    from netsim.dynamics.sample import sample_traces
    from netsim.dynamics.traces import (
        read_availability_trace,
        read_bandwidth_trace,
        write_availability_trace,
        write_bandwidth_trace,
    )

    seed = scenario.seed if args.seed is None else args.seed
    horizon = args.horizon_s if args.horizon_s is not None \
        else default_horizon_s(scenario.training.deadline_s)
    if scenario.dynamics is None:
        from netsim.scenario.schema import AvailabilitySpec, BandwidthSpec, DynamicsSpec

        scenario = scenario.model_copy(update={"dynamics": DynamicsSpec(
            availability=AvailabilitySpec(model="markov"),
            bandwidth=BandwidthSpec(model="lognormal"))})
        print("the scenario has no dynamics block: sampling markov availability (each device "
              "class's session lengths) and lognormal bandwidth with their defaults")
    try:
        availability, bandwidth = sample_traces(scenario, seed, horizon)
    except ValueError as exc:  # a table too large for the horizon
        raise ScenarioError([Problem("--horizon-s", str(exc))], "command line") from None
    out = Path(args.out)
    written: dict[str, Path] = {}
    if len(availability):
        path = write_availability_trace(availability, out / f"availability.{args.format}")
        avail = read_availability_trace(path)  # read back: what a replay will see
        print(f"wrote {path}: {len(availability)} online intervals of {len(avail.intervals)} "
              f"devices, span {avail.span_s:g} s")
        written["availability"] = path
    else:
        print("availability: nothing to write (no device was online in the horizon)")
    _warn_never_online(scenario, seed, availability)
    if len(bandwidth):
        path = write_bandwidth_trace(bandwidth, out / f"bandwidth.{args.format}")
        band = read_bandwidth_trace(path)
        print(f"wrote {path}: {len(bandwidth)} rows of {len(band.links)} links, "
              f"span {band.span_s:g} s")
        written["bandwidth"] = path
    else:
        print("bandwidth: nothing to write (no rows sampled)")
    print(f"(seed {seed}, horizon {horizon:g} s)")
    if written:
        print(replay_snippet(args.scenario, written))
    if scenario.generate is not None and scenario.generate.seed is None:
        print(f"note: the scenario's network is generated and its device ids and cells change "
              f"with the seed; to replay these traces, set `generate: {{seed: {seed}}}` in "
              "the scenario (or run it with this seed).")
    return 0


def _warn_never_online(scenario: Scenario, seed: int, availability: pd.DataFrame) -> None:
    """Say which devices were never online in the horizon: a trace lists only devices with
    an interval, and a device it does not list is always online when replayed."""
    from netsim.scenario.network import resolve_network

    net = resolve_network(scenario, seed)
    listed = set(availability["device"]) if len(availability) else set()
    never = [d.id for d in net.devices if d.id != net.aggregator and d.id not in listed]
    if never:
        shown = ", ".join(never[:10]) + (f" and {len(never) - 10} more" if len(never) > 10
                                         else "")
        print(f"warning: {len(never)} device(s) were offline for the whole horizon ({shown}); "
              "a trace cannot list a device without an online interval, and replayed, a "
              "device it does not list is always online (give a longer --horizon-s, or "
              "another --seed)", file=sys.stderr)


def replay_snippet(scenario: str, written: dict[str, Path]) -> str:
    """The dynamics block that replays the written traces, with paths relative to the
    scenario file's folder where they lie under it (else, or for a built-in, absolute)."""
    folder = Path(scenario).parent if Path(scenario).is_file() else None
    lines = ["To replay them, put this in the scenario (paths relative to the scenario "
             "file; keep the rest of its dynamics block, e.g. compute):", "dynamics:"]
    for kind, path in written.items():
        shown = str(path.absolute())
        if folder is not None:
            relative = os.path.relpath(path.absolute(), folder.absolute())
            shown = shown if relative.startswith("..") else relative
        lines.append(f"  {kind}: {{model: trace, trace: {shown}}}")
    return "\n".join(lines)


def plot_command(args: argparse.Namespace) -> int:
    """Draw a trace file; problems (unreadable file, bad rows, output path) exit 2."""
    from netsim.dynamics.traceplot import plot_trace

    out = Path(args.out) if args.out else Path(args.file).with_suffix(".png")
    problems = file_problems(out)
    if problems:
        raise ScenarioError(problems, "command line")
    kind, path = plot_trace(args.file, out)
    print(f"wrote {path} ({kind} trace {args.file})")
    return 0
