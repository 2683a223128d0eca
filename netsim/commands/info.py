"""``netsim validate``, ``netsim policies``, ``netsim scenarios [show NAME]``, ``netsim models``."""

from __future__ import annotations

import argparse
import sys
from typing import cast

from netsim.scenario.errors import Problem
from netsim.scenario.loading import (
    builtin_scenarios,
    scenario_data,
    surrogate_data_note,
    validate_scenario,
)
from netsim.scenario.schema import ModelSpec, TorchModelSpec
from netsim.scenario.trust import ALLOW_FLAG, imports_in


def print_warnings(warnings: list[Problem], where: str = "") -> None:
    """Each warning on stderr as ``netsim: warning: PATH: MESSAGE``."""
    for w in warnings:
        print(f"netsim: warning: {where}{w}", file=sys.stderr)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the information commands."""
    p = sub.add_parser("validate", help="check a scenario file; print each problem with its "
                       "path, and the code (module:attr) a run would import; imports nothing")
    p.add_argument("scenario", help="scenario file or built-in name")
    p.add_argument("--strict", action="store_true",
                   help="treat warnings (implausible magnitudes) as errors; unit traps (a case "
                        "mistake: '20 mbps') always are")
    p.set_defaults(func=_validate)
    p = sub.add_parser("policies", help="list registered policies, or one's parameters",
                       description="Without NAME: every registered policy with its description. "
                       "With NAME: its parameters with types, defaults, ranges and units (set "
                       "them with `netsim run --param NAME.KEY=VALUE` or a scenario's "
                       "`policies:` block).")
    p.add_argument("name", nargs="?", help="a policy whose parameters to print")
    p.set_defaults(func=_policies)
    p = sub.add_parser("scenarios", help="list built-in scenarios, or show one as YAML")
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("name", nargs="?", help="scenario to show")
    p.set_defaults(func=_scenarios)
    p = sub.add_parser("models", help="list built-in models, or measure your own PyTorch model "
                       "(inspect) and write its operator graph (graph)")
    from netsim.commands.models import add_arguments

    add_arguments(p)
    p.set_defaults(func=_models)


def _validate(args: argparse.Namespace) -> int:
    from netsim.engine import resolve_scenario
    from netsim.scenario.network import resolve_network
    from netsim.scenario.torch_model import default_name, model_imports

    result = validate_scenario(args.scenario)
    print_warnings(result.warnings)
    sc = result.raise_for(args.strict)
    if isinstance(sc.model, TorchModelSpec):  # (measured when run: validate imports nothing)
        net = resolve_network(sc, sc.seed)
        n_devices, n_links = len(net.devices or []), len(net.links or [])
        about = (f"model {sc.model.name or default_name(sc.model.torch.factory)} (PyTorch, "
                 "measured when run)")
    else:
        resolved = resolve_scenario(sc, sc.seed)
        n_devices, n_links = len(resolved.devices or []), len(resolved.links or [])
        model = cast(ModelSpec, resolved.model)  # resolve_scenario makes it a full spec
        about = f"model {model.name} ({len(model.variants)} variants)"
    print(f"ok: {sc.name}: {n_devices} devices, {n_links} links, {about}, "
          f"target loss {sc.training.target_loss}, deadline {sc.training.deadline_s:g} s")
    note = surrogate_data_note(sc)
    if note is not None:
        print(f"data: {note}")
    # (read, never imported: netsim.scenario.trust)
    imports = model_imports(sc.model) + imports_in(sc.policies)
    if imports:
        print(f"imports: a run imports this code only with {ALLOW_FLAG} (or --app FOLDER, "
              "for modules in FOLDER):")
        for path, name in imports:
            print(f"  {path}: {name}")
    return 0


def _policies(args: argparse.Namespace) -> int:
    from netsim.policy import registered

    entries = registered()
    if args.name:
        from netsim.commands.schema import with_units
        from netsim.reference import format_rows, policy_rows
        from netsim.scenario.errors import ScenarioError

        if args.name not in entries:
            from netsim.plugins import POLICIES, broken_plugin

            broken = broken_plugin(POLICIES, args.name)
            raise ScenarioError([Problem("NAME", f"policy {args.name!r}: {broken.unavailable()}"
                                         if broken else f"no policy {args.name!r}; one of: "
                                         f"{', '.join(entries)}")], "command line")
        print(f"{args.name}: {entries[args.name].description}")
        print(format_rows(with_units(policy_rows(args.name))), end="")
        return 0
    width = max(len(n) for n in entries)
    for name, entry in entries.items():
        print(f"{name:<{width}}  {entry.description}")
    return 0


def _scenarios(args: argparse.Namespace) -> int:
    builtins = builtin_scenarios()
    if args.action == "show":
        if not args.name or args.name not in builtins:
            from netsim.scenario.errors import ScenarioError

            raise ScenarioError([Problem("name", f"one of: {', '.join(sorted(builtins))}")])
        print(builtins[args.name].read_text(encoding="utf-8"), end="")
        return 0
    for name in sorted(builtins):
        text = builtins[name].read_text(encoding="utf-8")
        first = next((ln[1:].strip() for ln in text.splitlines() if ln.startswith("#")), "")
        data = scenario_data(name)
        size = data.get("generate", {}).get("n_devices") or len(data.get("devices", []))
        print(f"{name:<14} {size:>6} devices  {first}")
    return 0


def _models(args: argparse.Namespace) -> int:
    if getattr(args, "action", "list") != "list":
        from netsim.commands.models import run

        return run(args)
    from netsim.training.models import builtin_models

    for name, m in builtin_models().items():
        variants = ", ".join(v.name for v in m.variants)
        source = m.loss.source if m.loss is not None else ""
        curve = "fitted curve" if source.startswith("fitted") else "illustrative curve"
        print(f"{name:<12} {m.params:>12,.0f} params  {m.train_flop_per_sample:.3g} FLOP/sample  "
              f"[{variants}]  {curve}")
    return 0
