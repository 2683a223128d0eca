"""Why netsim's async-hfl disagrees with its paper: one change at a time on the paper's mesh.

    python -m experiments.hierarchical.why            # both tables (about 10 min on one core)

async-hfl on experiments/hierarchical/nycmesh-paper.yaml with one thing changed at a time:
the data (the file's 0.8/0.2 label bias, or IID: the file without ``label_bias``), the
selection (netsim's data-per-second ``utility``, ``random``: the FedAsync-like server, or
``classes``) and the gateway throughput cap (the paper's 800 kbit/s with every device of a
gateway eligible, or none with 10 devices a gateway). Per row: how many seeds reached the
target, the mean time of those that did (hours) and the distinct devices that ever trained.
The tables of experiments/hierarchical/README.md ("Why netsim disagrees").
"""

from __future__ import annotations

import argparse

import yaml

import netsim
from experiments.hierarchical.run import (
    PAPER_CAP_BPS,
    PAPER_EVERY_DEVICE,
    PAPER_SCENARIO,
    own_devices,
)

#: (label bias on, selection, cap on) at gateway rounds 20, seeds 0-2
WHY_ROWS = [(True, "utility", True), (True, "random", True), (True, "utility", False),
            (True, "random", False), (False, "utility", True), (False, "random", True),
            (False, "utility", False)]
#: (selection, cap on) on the biased data at gateway rounds 5, seeds 0-4
CLASSES_ROWS = [("classes", True), ("utility", True), ("random", True), ("classes", False),
                ("utility", False), ("random", False)]
#: the cap column's two values
CAP_TEXT = {True: f"{PAPER_CAP_BPS / 1e3:.0f} kbit/s", False: "none, 10 per gateway"}


def outcomes(bias: bool, selection: str, cap: bool, edge_rounds: int,
             seeds: list[int]) -> list[tuple[bool, float, int, int]]:
    """Per seed: target reached, simulated time (h), devices that ever trained, devices."""
    data = yaml.safe_load(PAPER_SCENARIO.read_text(encoding="utf-8"))
    if not bias:
        data["training"].pop("label_bias")
    params = {"edge_rounds": edge_rounds, "participants_per_edge": PAPER_EVERY_DEVICE if cap else 10,
              "edge_buffer_updates": 1, "throughput_cap_bps": PAPER_CAP_BPS if cap else None,
              "reassociate_every": 1, "selection": selection}
    out = []
    for seed in seeds:
        result = netsim.simulate(data, policy="async-hfl", params=params, seed=seed)
        run = result.runs.iloc[0]
        own = own_devices(result.devices)
        out.append((bool(run["target_reached"]), float(run["time_s"]) / 3600.0,
                    int((own["busy_s"] > 0).sum()), len(own)))
    return out


def row_text(cells: list[str], runs: list[tuple[bool, float, int, int]]) -> str:
    """One Markdown row: the cells, seeds reaching, their mean time, devices trained."""
    reached = [t for ok, t, _, _ in runs if ok]
    mean = f"{sum(reached) / len(reached):.2f}" if reached else "never"
    seeds = ", ".join(f"{t:.2f}" if ok else "missed" for ok, t, _, _ in runs)
    devices = sorted({n for _, _, n, _ in runs})
    fleet = runs[0][3]
    trained = str(devices[0]) if len(devices) == 1 else f"{devices[0]}-{devices[-1]}"
    return (f"| {' | '.join(cells)} | {len(reached)} of {len(runs)} | {mean} ({seeds}) | "
            f"{trained} of {fleet} |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    print("| data | selection | cap | reached | time to target (h), mean (per seed) | "
          "devices trained |\n|---|---|---|---|---|---|")
    for bias, selection, cap in WHY_ROWS:
        print(row_text(["0.8/0.2 bias" if bias else "IID", selection, CAP_TEXT[cap]],
                       outcomes(bias, selection, cap, 20, [0, 1, 2])), flush=True)
    print("\n| selection | cap | reached | time to target (h), mean (per seed) | "
          "devices trained |\n|---|---|---|---|---|")
    for selection, cap in CLASSES_ROWS:
        print(row_text([selection, CAP_TEXT[cap]],
                       outcomes(True, selection, cap, 5, [0, 1, 2, 3, 4])), flush=True)


if __name__ == "__main__":
    main()
