"""Mutation fuzzing at length: 10,000 mutated scenarios and sweep files (hypothesis, fixed
seed), the property of tests/test_fuzz.py checked on each (tests/scenario_fuzz.py): rejected
with a problem naming a related path, or run to a recorded status, a baseline never failing.

Prints the number of examples, how they ended (rejected, each run status), the failures (0
expected) with the first few, and the time per example.

    python benchmarks/fuzz.py                 # 10,000 examples
    python benchmarks/fuzz.py --examples 500  # quicker
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from scenario_fuzz import (  # noqa: E402
    BASELINES,
    JUNK,
    SWEEP_BASE,
    Mutation,
    bases,
    paths,
    scenario_outcome,
    sweep_outcome,
)

SWEEP_SHARE = 0.2  # share of examples that mutate a sweep file rather than a scenario


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="netsim-fuzz-"))
    warnings.simplefilter("ignore")

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def example(data: st.DataObject) -> None:
        is_sweep = data.draw(st.floats(0, 1)) < SWEEP_SHARE
        target = copy.deepcopy(SWEEP_BASE) if is_sweep else \
            bases()[data.draw(st.integers(0, 2))]
        mutated = []
        for _ in range(data.draw(st.integers(1, 2))):
            path = data.draw(st.sampled_from(paths(target) or [("name",)]))
            kind = data.draw(st.sampled_from(["replace"] * 8 + ["delete", "add"]))
            try:
                mutated.append(Mutation(kind, path, data.draw(st.sampled_from(JUNK))).apply(target))
            except (KeyError, IndexError, TypeError):
                continue
        try:
            if is_sweep:
                outcome = "sweep " + sweep_outcome(target, mutated, folder)
            else:
                policy = data.draw(st.sampled_from(BASELINES))
                outcome = scenario_outcome(target, mutated, policy, data.draw(st.integers(0, 9)))
        except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
            outcome = "FAILURE"
            failures.append(f"{'sweep' if is_sweep else 'scenario'} {mutated}: "
                            f"{type(exc).__name__}: {str(exc)[:300]}")
        outcomes[outcome] += 1

    start = time.perf_counter()
    example()
    wall = time.perf_counter() - start
    total = sum(outcomes.values())
    print(f"examples: {total:,} (seed {args.seed}), {wall:.1f} s, "
          f"{1e3 * wall / max(total, 1):.1f} ms per example")
    for name, count in sorted(outcomes.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<28} {count:>6,}")
    print(f"failures: {len(failures)}")
    for line in failures[:10]:
        print(f"  {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
