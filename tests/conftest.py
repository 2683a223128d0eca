"""Shared fixtures: small explicit scenarios built as plain mappings.

Property-based tests draw new examples on every local run (so they keep looking for bugs) but
a fixed set under CI (``CI=true``), so that a landing never depends on the luck of the draw.

The README's command runs the suite in two worker processes (pytest-xdist, ``-n 2 --dist
loadfile``: each test file on one worker, so a module's fixtures are built once and its tests
run in file order); ``-n 0`` or ``-p no:xdist`` runs it in this process, and one file
(``python -m pytest tests/test_x.py``) runs in this process unless ``-n`` is given. Every
test writes under its own ``tmp_path`` (per worker), never a fixed path, and none depends on
another file's tests having run (``--dist load``, test by test, passes too).
"""

from __future__ import annotations

import copy
import os

# One thread per process: torch (and numpy's BLAS) would otherwise start a thread per core,
# and two workers on a 2-core machine would share each core four ways. Set before anything
# imports torch or numpy (nothing has yet: pytest's plugins do not); xdist's workers and the
# tests' own child processes inherit it. An explicit setting (OMP_NUM_THREADS=4 ...) wins.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

STAR = {
    "name": "star",
    "seed": 0,
    "devices": [
        {"id": "server", "flop_per_s": 1.0e12, "memory_bytes": 6.4e10, "power_busy_w": 200.0,
         "power_idle_w": 50.0},
        {"id": "d1", "flop_per_s": 2.0e9, "memory_bytes": 4.0e9, "power_busy_w": 5.0,
         "power_idle_w": 1.0, "samples": 500},
        {"id": "d2", "flop_per_s": 1.0e9, "memory_bytes": 4.0e9, "power_busy_w": 4.0,
         "power_idle_w": 0.5, "samples": 300},
        {"id": "d3", "flop_per_s": 4.0e9, "memory_bytes": 4.0e9, "power_busy_w": 8.0,
         "power_idle_w": 2.0, "samples": 800},
    ],
    "links": [
        {"a": "server", "b": "d1", "bandwidth_bps": 2.0e7, "latency_s": 0.01, "energy_j_per_bit": 1e-7},
        {"a": "server", "b": "d2", "bandwidth_bps": 1.0e7, "latency_s": 0.03, "energy_j_per_bit": 2e-7},
        {"a": "server", "b": "d3", "bandwidth_bps": 5.0e7, "latency_s": 0.02, "energy_j_per_bit": 1e-7},
    ],
    "aggregator": "server",
    "model": {
        "params": 1.0e6, "bytes_per_param": 4, "train_flop_per_sample": 6.0e6,
        "variants": [
            {"name": "full", "params_fraction": 1.0, "flop_fraction": 1.0},
            {"name": "pruned-50", "params_fraction": 0.5, "flop_fraction": 0.5},
        ],
    },
    "training": {"target_loss": 0.3, "deadline_s": 3600, "max_epochs": 30},
}


@pytest.fixture
def star() -> dict:
    """A server and three devices on direct links (no shared link: contention-free)."""
    return copy.deepcopy(STAR)


@pytest.fixture
def add_entry_point(monkeypatch):
    """Declare an extra entry point for this test, as an installed package would:
    ``add_entry_point("netsim.policies", "my-policy", "tests.test_x:MyPolicy")``."""
    from importlib.metadata import EntryPoint

    import netsim.plugins
    from netsim.figures import registered_figures
    from netsim.policy.registry import _load

    extra: list[EntryPoint] = []
    real = netsim.plugins.entry_points

    def entry_points(group: str):
        return [*real(group=group), *(ep for ep in extra if ep.group == group)]

    def add(group: str, name: str, value: str) -> None:
        extra.append(EntryPoint(name, value, group))
        _load.cache_clear()
        registered_figures.cache_clear()

    monkeypatch.setattr(netsim.plugins, "entry_points", entry_points)
    yield add
    _load.cache_clear()
    registered_figures.cache_clear()


@pytest.fixture
def built_worlds(monkeypatch) -> list:
    """Every :class:`netsim.engine.World` built while the test runs, in order (to ask a run's
    world afterwards which path its epochs took: its buffered player, ``events_why``)."""
    from netsim import engine

    built: list = []
    original = engine.World.__init__

    def keep(self, *args, **kwargs):
        original(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(engine.World, "__init__", keep)
    return built
