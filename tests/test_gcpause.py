"""Relaxed GC thresholds during runs and placements: raised inside, restored after."""

import gc

import pytest

from netsim.gcpause import RUN_GEN0_THRESHOLD, relaxed_gc


def test_threshold_raised_inside_and_restored_after_also_on_error():
    before = gc.get_threshold()
    with relaxed_gc():
        assert gc.get_threshold()[0] == max(before[0], RUN_GEN0_THRESHOLD)
        assert gc.get_threshold()[1:] == before[1:]
    assert gc.get_threshold() == before

    @relaxed_gc()
    def fails():
        assert gc.get_threshold()[0] >= RUN_GEN0_THRESHOLD
        raise ValueError("boom")

    with pytest.raises(ValueError):
        fails()
    assert gc.get_threshold() == before


def test_an_engine_run_executes_under_the_relaxed_threshold(monkeypatch):
    import netsim
    from netsim import engine

    seen = []
    original = engine.World.run_epoch

    def spy(self, decision):
        seen.append(gc.get_threshold()[0])
        return original(self, decision)

    monkeypatch.setattr(engine.World, "run_epoch", spy)
    before = gc.get_threshold()
    netsim.simulate("two-phones", "fedavg-all")
    assert seen and min(seen) >= RUN_GEN0_THRESHOLD and gc.get_threshold() == before


def frozen_per_epoch(monkeypatch, epochs: int = 4) -> list[int]:
    """Run two-phones (fedavg-all); the collector's frozen count as each of its first
    ``epochs`` epochs begins (counting the frozen objects visits every one of them: in a
    long test session, millions)."""
    import netsim
    from netsim import engine

    seen = []
    original = engine.World.run_epoch

    def spy(self, decision):
        if len(seen) < epochs:
            seen.append(gc.get_freeze_count())
        return original(self, decision)

    monkeypatch.setattr(engine.World, "run_epoch", spy)
    netsim.simulate("two-phones", "fedavg-all")
    return seen


def test_a_run_freezes_its_built_world_and_unfreezes_it_after(monkeypatch):
    before = gc.get_freeze_count()
    seen = frozen_per_epoch(monkeypatch)
    assert seen and min(seen) > before  # (the world, at least, was frozen during the epochs)
    assert gc.get_freeze_count() == 0


def test_a_run_freezes_again_after_its_first_epoch_only(monkeypatch):
    """What the first epoch built (routes, plans) is frozen with the world: the second epoch
    runs with more frozen objects than the first, and no later freeze adds any (frozen
    objects may only die)."""
    seen = frozen_per_epoch(monkeypatch)
    assert len(seen) >= 3
    assert seen[1] > seen[0]
    assert all(later <= earlier for earlier, later in zip(seen[1:], seen[2:], strict=False))
    assert gc.get_freeze_count() == 0
