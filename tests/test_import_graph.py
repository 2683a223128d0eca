"""Imports run one way (the developers' guide's design rules): netsim never imports policies/,
plots/, experiments/ or benchmarks/ (they reach it through entry points), and inside netsim no
module imports itself back through others, lazy imports inside functions included (only
``if TYPE_CHECKING:`` blocks are left out). Read from the source, not by importing it."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ("policies", "plots", "experiments", "benchmarks")


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "netsim").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules ``name`` imports, as dotted names (``from pkg import sub`` is ``pkg.sub``
    where sub is a module; a package a module belongs to is not an import of it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skipped = {id(sub) for node in ast.walk(tree)
               if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)
               for sub in ast.walk(node)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}"
            else:
                base = node.module
            subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules}
            out |= subs if len(subs) == len(node.names) else {base} | subs
    return {m for m in out if m != name and not name.startswith(m + ".")}


def test_netsim_never_imports_the_packages_above_it():
    modules = _modules()
    found = {(name, target) for name, path in modules.items()
             for target in _imports(name, path, modules)
             if target.split(".")[0] in OUTSIDE}
    assert not found, sorted(found)


def test_netsim_has_no_import_circles():
    modules = _modules()
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_edges_from((name, t) for t in _imports(name, path, modules) if t in modules)
    cycles = [" -> ".join(c) for c in nx.simple_cycles(graph)]
    assert not cycles, cycles[:10]
    assert graph.number_of_edges() > 300  # (the graph was read: netsim's modules import a lot)
