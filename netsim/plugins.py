"""Plug-ins by entry point: the groups netsim loads and never imports by name.

A package adds policies, figures or commands by declaring them in its metadata (setup.cfg)::

    [options.entry_points]
    netsim.policies =
        cheapest-k = mypkg.policies:CheapestK
    netsim.figures =
        my-figure = mypkg.figures:MY_FIGURE
    netsim.commands =
        mycmd = mypkg.cli

netsim itself declares its own policies and figures the same way (policies/, plots/), so the
engine never imports them (pytest's ``pytest11`` and flake8's ``flake8.extension`` work alike).
After editing a package's entry points, reinstall it (``pip install -e .``) so the metadata
is rewritten.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

POLICIES = "netsim.policies"
FIGURES = "netsim.figures"
COMMANDS = "netsim.commands"


def group(name: str) -> dict[str, EntryPoint]:
    """The entry points declared under group ``name`` by every installed package, by name
    (sorted). Two packages declaring one name: the first found wins, as importlib returns them."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=name):
        found.setdefault(ep.name, ep)
    return dict(sorted(found.items()))
