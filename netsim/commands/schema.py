"""``netsim schema [SECTION] [--markdown]``: the scenario's fields with types, defaults, ranges
and units, read from the schema itself (``netsim.reference``).

SECTION is one of scenario, generate, devices, links, model, variants, "model (PyTorch)",
model.torch, model.torch.data, training, training.real, dynamics, dynamics.availability,
dynamics.bandwidth, dynamics.compute;
without it, every section. ``--markdown`` prints the whole reference page (scenario sections
and every registered policy's parameters), the one at docs/reference.md.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``netsim schema``."""
    from netsim.reference import SECTIONS

    p = sub.add_parser("schema", help="scenario fields: types, defaults, ranges, units",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("section", nargs="?", choices=list(SECTIONS), metavar="SECTION",
                   help=f"one of: {', '.join(SECTIONS)} (default: all)")
    p.add_argument("--markdown", action="store_true",
                   help="print the whole reference page as Markdown (docs/reference.md)")
    p.set_defaults(func=schema_command)


def with_units(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Reference rows with each field's unit from :func:`netsim.units.unit_label` (the unit
    its name's suffix carries: ``flop_per_s`` is FLOP/s, not seconds)."""
    from netsim.units import unit_label

    return [{**row, "unit": unit_label(row["field"])} for row in rows]


def schema_command(args: argparse.Namespace) -> int:
    """Print the fields of one section or all; exit code 0."""
    from netsim.reference import SECTIONS, field_rows, format_rows, reference_markdown

    if args.markdown:
        print(reference_markdown(), end="")
        return 0
    for i, section in enumerate([args.section] if args.section else list(SECTIONS)):
        model = SECTIONS[section]
        doc = " ".join((model.__doc__ or "").split("\n\n")[0].split())
        print(("\n" if i else "") + f"{section}: {doc}")
        print(format_rows(with_units(field_rows(model, section))), end="")
    return 0
