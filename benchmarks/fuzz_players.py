"""Differential fuzzing of the array players against the flow network, at length (issue 44).

Draws cases from seeded numpy Generators (tests/player_fuzz.py: small networks of wired
devices and Wi-Fi/cellular cells, ties within ulps, caps at a fair share, coefficients near
1/cap, capacity changes at starts and last bits, zero and tiny sizes, times up to a year),
plays each through a player (``piece``, ``pieces``, ``online``, ``fluid``, ``stops``, in
turn) and through the flow network, and counts agreements, declines (the player hands the
case to the events), disagreements, errors and hangs (a case past ``--timeout-s``). Each
worker process draws its own stream (numpy SeedSequence(seed).spawn). Failing cases are
written to ``--out`` with the generator state that draws them (``--replay FILE`` plays them
again).

    python benchmarks/fuzz_players.py                          # 1,000,000 cases, 2 workers
    python benchmarks/fuzz_players.py --cases 20000            # a quick look
    python benchmarks/fuzz_players.py --replay fuzz-failures.json

Exit status 1 when any case disagreed, failed or hung.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import player_fuzz as pf  # noqa: E402


class _Hang(Exception):
    pass


def _alarm(_signum, _frame):
    raise _Hang


def _one(rng: np.random.Generator, player: str, timeout_s: int) -> tuple[str, str | None]:
    """(verdict, details) of one case drawn from ``rng``."""
    signal.alarm(timeout_s)
    try:
        outcome = pf.check(pf.RngDraws(rng), player)
    except _Hang:
        return "hang", traceback.format_exc(limit=-4)
    except Exception:  # noqa: BLE001 (every failure is counted and reported)
        return "error", traceback.format_exc(limit=-4)
    finally:
        signal.alarm(0)
    if outcome.declined:
        return "declined", None
    if outcome.agrees:
        return "agreed", None
    return "disagreed", pf.describe(outcome)


def _worker(args: tuple[int, int, int, int, int]) -> tuple[Counter, list[dict], float]:
    index, seed, workers, cases, timeout_s = args
    signal.signal(signal.SIGALRM, _alarm)
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(workers)[index])
    counts: Counter = Counter()
    failures: list[dict] = []
    t0 = time.perf_counter()
    for k in range(cases):
        player = pf.PLAYERS[k % len(pf.PLAYERS)]
        state = rng.bit_generator.state
        verdict, details = _one(rng, player, timeout_s)
        counts[player, verdict] += 1
        if verdict in ("hang", "error", "disagreed") and len(failures) < 20:
            failures.append({"worker": index, "case": k, "player": player,
                             "verdict": verdict, "state": state, "details": details})
    return counts, failures, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout-s", type=int, default=20, help="per case, then a hang")
    parser.add_argument("--out", default="fuzz-failures.json")
    parser.add_argument("--replay", help="a failures file to play again")
    args = parser.parse_args(argv)
    if args.replay:
        return _replay(Path(args.replay), args.timeout_s)
    t0 = time.perf_counter()
    share = [args.cases // args.workers + (i < args.cases % args.workers)
             for i in range(args.workers)]
    jobs = [(i, args.seed, args.workers, n, args.timeout_s) for i, n in enumerate(share)]
    with mp.get_context("fork").Pool(args.workers) as pool:
        results = pool.map(_worker, jobs)
    wall = time.perf_counter() - t0
    counts: Counter = Counter()
    failures: list[dict] = []
    for c, f, _ in results:
        counts.update(c)
        failures += f
    print(f"differential fuzzing of the array players: {args.cases:,} cases, seed {args.seed}, "
          f"{args.workers} workers, {wall:.0f} s wall ({args.cases / wall:,.0f} cases/s)")
    verdicts = ("agreed", "declined", "disagreed", "error", "hang")
    print(f"{'player':>8} " + " ".join(f"{v:>10}" for v in verdicts))
    for p in pf.PLAYERS:
        print(f"{p:>8} " + " ".join(f"{counts[p, v]:>10,}" for v in verdicts))
    bad = sum(counts[p, v] for p in pf.PLAYERS for v in ("disagreed", "error", "hang"))
    print(f"failures: {bad}")
    if failures:
        Path(args.out).write_text(json.dumps(failures, indent=1))
        print(f"the first {len(failures)} written to {args.out}; first:\n"
              f"{failures[0]['details']}")
    return 1 if bad else 0


def _replay(path: Path, timeout_s: int) -> int:
    signal.signal(signal.SIGALRM, _alarm)
    bad = 0
    for f in json.loads(path.read_text()):
        rng = np.random.default_rng()
        rng.bit_generator.state = f["state"]
        verdict, details = _one(rng, f["player"], timeout_s)
        print(f"worker {f['worker']} case {f['case']} ({f['player']}): {verdict}")
        if details:
            print(details)
        bad += verdict in ("hang", "error", "disagreed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
