"""Your own model against the machine: netsim's step time of a torch model's training graph
against the torch step measured on this CPU (issue 55 item 6).

Run: python benchmarks/torch_vs_profile.py [--quick] [--rounds N] [--repeats N]

1. For LeNet-5 (``small-cnn``) and McMahan's MNIST CNN (``cnn-mnist``), batch 32 on 1x28x28,
   and ResNet-18 (CIFAR form, ``experiments/byo_model/resnet18.py``), batch 16 on 3x32x32
   (8 with ``--quick``): the torch training step measured here (forward, cross entropy,
   backward, ``torch.optim.SGD`` with momentum 0.9, ``zero_grad(set_to_none=True)``; one
   thread; the median of the thread's CPU time over ``--repeats`` steps after 3 warm-up steps,
   the wall time's median beside it: on a shared machine the wall time counts other
   processes' time slices, which the profiler's per-operator medians mostly drop, as each
   lands in one operator of one step) against netsim's step on
   one device, executed by netsim (``policies.baechi.place.place(..., "single")`` and
   ``simulate``, the code of ``netsim place --algorithm single``) from

   (a) the training graph with each operator's profiled time
       (:func:`netsim.torchnet.graph.profile_times`: torch.profiler, each backward function
       matched to its forward operator by sequence number), faithful mode;
   (b) the graph's FLOP (:func:`netsim.torchnet.graph.training_graph`) on one device of a
       calibrated speed, heterogeneous mode: the speed is the median over the three models of
       (training FLOP / measured step), so the median model's error is 0 by construction.

   Each round measures the torch step, profiles, and measures the torch step again (so a
   busy spell slows both); ``--rounds`` rounds (default 3, ``--quick`` 1), medians reported.
2. The ResNet-18 graph with profiled times (written and read back as the profile JSON
   ``netsim place`` reads) placed by m-TOPO, m-ETF and m-SCT (faithful mode: Baechi's cost
   model, its fitted transfer line; with co-placement grouping and fusion, as ``netsim place``
   does, and without, ``--no-group``) on 2, 3 and 4 devices, each with memory
   ``MEMORY_FRACTION[k]`` of the single-device peak netsim simulates (so the model does not
   fit on one), each placement executed: its step time and each device's peak memory; and the
   same on 2 devices of ``FITS_FRACTION`` of that peak (one device holds it) for reference;
   beside torch's
   own account of one step's memory on one device (``torch.profiler.profile(
   profile_memory=True)``, its memory timeline by category).
3. The last line: ``worst single-device step error (profiled): X %``.

Not part of the tests. About 1 minute by default on a busy 2-core machine, 15-20 s with
``--quick``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from netsim.network import Topology  # noqa: E402
from netsim.opgraph import PlacementDevice, identical_devices, load_graph  # noqa: E402
from netsim.torchnet import require_torch  # noqa: E402
from netsim.torchnet.graph import (  # noqa: E402
    profile_times,
    training_graph,
    with_times,
    write_graph,
)
from netsim.torchnet.zoo import TORCH_MODELS  # noqa: E402
from policies.baechi.place import place, simulate  # noqa: E402

#: Memory per device in part 2, as a fraction of the single-device peak (netsim's).
MEMORY_FRACTION = {2: 0.8, 3: 0.6, 4: 0.45}
#: The reference row's memory per device (one device holds the model).
FITS_FRACTION = 1.05
ALGORITHMS = ("m-topo", "m-etf", "m-sct")
UNLIMITED_BYTES = 1e15
MIB = 2.0**20


@dataclass
class Link:
    a: str
    b: str
    bandwidth_bps: float = 10e9
    latency_s: float = 50e-6
    energy_j_per_bit: float = 0.0


def resnet18() -> torch.nn.Module:
    from experiments.byo_model.resnet18 import resnet18 as build

    return build()


def models(quick: bool) -> list[tuple[str, object, tuple[int, ...], int]]:
    return [("LeNet-5 (small-cnn)", TORCH_MODELS["small-cnn"], (1, 28, 28), 32),
            ("MNIST CNN (cnn-mnist)", TORCH_MODELS["cnn-mnist"], (1, 28, 28), 32),
            ("ResNet-18 (CIFAR)", resnet18, (3, 32, 32), 8 if quick else 16)]


def torch_steps(model: torch.nn.Module, shape, batch: int, repeats: int) -> list[dict]:
    """``repeats`` plain torch training steps after 3 warm-up steps; for each, the CPU time of
    this thread (``time.thread_time``; torch runs one thread, the CPU autograd engine runs in
    the caller's) of the step and of its phases (forward with the loss, backward, update:
    ``zero_grad`` and ``opt.step``), and its wall time (s)."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn((batch, *shape), generator=gen)
    y = torch.randint(0, 10, (batch,), generator=gen)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    clock = time.thread_time

    def step() -> dict:
        t0, c0 = time.perf_counter(), clock()
        opt.zero_grad(set_to_none=True)
        c1 = clock()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        c2 = clock()
        loss.backward()
        c3 = clock()
        opt.step()
        c4, t4 = clock(), time.perf_counter()
        return {"cpu": c4 - c0, "wall": t4 - t0, "forward": c2 - c1, "backward": c3 - c2,
                "update": (c1 - c0) + (c4 - c3)}

    for _ in range(3):
        step()
    return [step() for _ in range(repeats)]


def phases(graph) -> dict[str, float]:
    """The graph's operator times (s) summed by phase: forward (the loss's included),
    backward, update."""
    out = {"forward": 0.0, "backward": 0.0, "update": 0.0}
    for _, a in graph.nodes(data=True):
        name = str(a.get("name", ""))
        key = "backward" if name.startswith("grad:") else \
            "update" if name.startswith("update:") else "forward"
        out[key] += float(a["time_s"])
    return out


def single_step_faithful(graph) -> tuple[float, float]:
    """(step time s, peak memory bytes) of ``graph`` all on one device, faithful mode."""
    devices = identical_devices(1, UNLIMITED_BYTES)
    res = place(graph, devices, "single", "faithful", group=False)
    step = simulate(res, devices)
    assert step.status == "ok", step.reason
    return step.step_time_s, step.peak_memory_bytes[0]


def single_step_flop(graph, flop_per_s: float) -> float:
    """Step time (s) of ``graph`` by its FLOP on one device of ``flop_per_s``."""
    devices = [PlacementDevice("cpu0", UNLIMITED_BYTES, flop_per_s=flop_per_s)]
    topology = Topology(["cpu0", "switch"], [Link("cpu0", "switch")])
    res = place(graph, devices, "single", "heterogeneous", topology, group=False)
    step = simulate(res, devices, topology)
    assert step.status == "ok", step.reason
    return step.step_time_s


def torch_memory(model: torch.nn.Module, shape, batch: int) -> dict[str, float] | None:
    """torch.profiler's memory timeline of one training step (CPU), at its peak: bytes by
    category, and ``total``; None where torch's (private) timeline API fails."""
    from torch.profiler import ProfilerActivity, profile

    from netsim.torchnet.graph import _quiet_fd2

    x = torch.randn((batch, *shape))
    y = torch.randint(0, 10, (batch,))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    step()
    step()
    try:
        from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

        with _quiet_fd2(), profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                                   record_shapes=True, with_stack=True) as prof:
            step()
        _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline("cpu")
    except Exception as exc:  # a private API: report, do not fail
        print(f"  (torch's memory timeline unavailable: {type(exc).__name__}: {exc})")
        return None
    totals = [sum(row) for row in sizes]
    at = max(range(len(totals)), key=totals.__getitem__)
    out = {(c.name.lower() if c is not None else "unknown"): float(sizes[at][i + 1])
           for c, i in _CATEGORY_TO_INDEX.items()}
    out["total"] = float(totals[at])
    return out


def persistent_bytes(graph) -> dict[str, float]:
    """netsim's persistent memory (held all step, bytes): weights, gradient buffers (the
    ``grad:`` operators'), optimizer state (the ``update:`` operators')."""
    out = {"weights": 0.0, "gradients": 0.0, "optimizer": 0.0}
    for _, a in graph.nodes(data=True):
        name = str(a.get("name", ""))
        kind = "gradients" if name.startswith("grad:") else \
            "optimizer" if name.startswith("update:") else "weights"
        out[kind] += float(a.get("memory_bytes", 0.0))
    return out


def profiled_graph(model, factory, shape, batch: int, label: str, steps: int, folder: Path):
    """The training graph with profiled times, written as profile JSON and read back (what
    ``netsim models graph --profile`` writes and ``netsim place`` reads)."""
    graph = with_times(training_graph(factory(), shape, batch, label),
                       profile_times(model, shape, batch, steps=steps))
    path = folder / f"{label}.json"
    write_graph(graph, path)
    return load_graph(str(path))


def placement_cell(graph, devices, algorithm: str, group: bool, single_s: float) -> str:
    """``status | step | x one device | peaks (MiB)`` of one placement, executed."""
    placed = place(graph, devices, algorithm, "faithful", group=group)
    step = simulate(placed, devices) if placed.ok else None
    if step is not None and step.status == "ok":
        peaks = ", ".join(f"{p / MIB:.0f}" for p in step.peak_memory_bytes)
        return (f"{step.step_time_s * 1e3:.1f} ms | {step.step_time_s / single_s:.3f} | "
                f"{peaks}")
    status = placed.status if step is None else step.status
    reason = placed.reason or (step.reason if step else "")
    words = reason.split()
    if len(words) > 1 and words[0] == "operator" and words[1].isdigit() \
            and int(words[1]) in graph.nodes:  # the file's node id: name it
        words[1] = str(graph.nodes[int(words[1])].get("name", words[1]))
        reason = f"{words[1]} {reason.split(') ', 1)[1].split(';')[0]}" \
            if ") " in reason else " ".join(words)
    return f"{status}: {reason[:70]} | - | -"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="ResNet-18 at batch 8, one round")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 3, quick 1)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed torch steps per measurement (default 7, quick 5)")
    ap.add_argument("--steps", type=int, default=5, help="profiled steps a round (default 5)")
    args = ap.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    repeats = args.repeats or (5 if args.quick else 7)
    require_torch()
    torch.set_num_threads(1)
    t_start = time.perf_counter()
    load_before = os.getloadavg()[0]
    cpu = platform.processor() or platform.machine()
    if Path("/proc/cpuinfo").exists():
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh
                        if line.startswith("model name")), cpu)
    print(f"torch {torch.__version__}, 1 thread, {cpu}, {os.cpu_count()} cores, load "
          f"{load_before:.2f}; {rounds} round(s) of (torch step x {repeats}, profile "
          f"{args.steps} steps, torch step x {repeats})")
    folder = Path(tempfile.mkdtemp(prefix="torch_vs_profile-"))
    rows = []
    for label, factory, shape, batch in models(args.quick):
        torch.manual_seed(0)
        model = factory()
        name = label.split()[0]
        flop_graph = training_graph(factory(), shape, batch, name)
        flop = sum(float(a.get("flop", 0.0)) for _, a in flop_graph.nodes(data=True))
        measured, walls, simulated, ratios, graph, peak = [], [], [], [], None, 0.0
        steps: list[dict] = []
        for _ in range(rounds):
            before = torch_steps(model, shape, batch, repeats)
            graph = profiled_graph(model, factory, shape, batch, name, args.steps, folder)
            sim, peak = single_step_faithful(graph)
            both = before + torch_steps(model, shape, batch, repeats)
            steps += both
            real = statistics.median(s["cpu"] for s in both)
            measured.append(real)
            walls.append(statistics.median(s["wall"] for s in both))
            simulated.append(sim)
            ratios.append(sim / real)
        rows.append({"label": label, "batch": batch, "shape": shape, "flop": flop,
                     "real": statistics.median(measured), "wall": statistics.median(walls),
                     "sim": statistics.median(simulated),
                     "ratio": statistics.median(ratios), "ratios": ratios,
                     "graph": graph, "flop_graph": flop_graph, "peak": peak,
                     "factory": factory, "ops": flop_graph.number_of_nodes(),
                     "phases": {k: statistics.median(s[k] for s in steps)
                                for k in ("forward", "backward", "update")}})

    speeds = [r["flop"] / r["real"] for r in rows]
    calibrated = statistics.median(speeds)
    on = next(r["label"] for r, v in zip(rows, speeds, strict=True) if v == calibrated)
    print()
    print("1. One device: the torch step measured here against netsim's step executed from the "
          "graph")
    print(f"   (b)'s speed: the median over the three models of training FLOP / measured step "
          f"= {calibrated / 1e9:.1f} GFLOP/s ({on}'s, whose error is 0 by construction)")
    print()
    print("| model | batch | operators | torch step, measured (wall) | (a) profiled graph | "
          "(a) error (each round) | training GFLOP | measured GFLOP/s | (b) FLOP at the "
          "calibrated speed | (b) error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r, speed in zip(rows, speeds, strict=True):
        flop_step = single_step_flop(r["flop_graph"], calibrated)
        spread = ", ".join(f"{100 * (x - 1):+.1f}" for x in r["ratios"])
        print(f"| {r['label']} | {r['batch']} | {r['ops']} | {r['real'] * 1e3:.2f} ms "
              f"({r['wall'] * 1e3:.2f}) | "
              f"{r['sim'] * 1e3:.2f} ms | **{100 * (r['ratio'] - 1):+.1f} %** ({spread}) | "
              f"{r['flop'] / 1e9:.3f} | {speed / 1e9:.1f} | {flop_step * 1e3:.2f} ms | "
              f"{100 * (flop_step / r['real'] - 1):+.1f} % |")
    print()
    print("   By phase, the last round's profiled graph against the torch step's phases "
          "(thread CPU time, medians over every round):")
    print()
    print("| model | forward (the loss's included) | backward | update (zero_grad, step) |")
    print("| --- | ---: | ---: | ---: |")
    for r in rows:
        mine = phases(r["graph"])
        cells = " | ".join(f"{mine[k] * 1e3:.2f} / {r['phases'][k] * 1e3:.2f} ms "
                           f"({100 * (mine[k] / r['phases'][k] - 1):+.0f} %)"
                           for k in ("forward", "backward", "update"))
        print(f"| {r['label']} | {cells} |")

    res = rows[-1]
    graph, peak, single = res["graph"], res["peak"], res["sim"]
    single = single_step_faithful(graph)[0]
    print()
    print(f"2. {res['label']}, batch {res['batch']}, the last round's profiled graph "
          f"({graph.number_of_nodes()} operators; one device: step {single * 1e3:.1f} ms, peak "
          f"{peak / MIB:.1f} MiB), faithful mode, each placement executed")
    print()
    print("| devices | memory per device | algorithm | step | x one device | peak per device "
          "(MiB) | `--no-group`: step | x one device | peak per device (MiB) |")
    print("| ---: | ---: | --- | ---: | ---: | --- | ---: | ---: | --- |")
    cases = [*MEMORY_FRACTION.items(), (2, FITS_FRACTION)]
    for k, fraction in cases:
        memory = fraction * peak
        devices = identical_devices(k, memory)
        fits = place(graph, devices, "single", "faithful", group=False).ok
        if fits != (fraction >= 1.0):
            print(f"   (one device {'holds' if fits else 'does not hold'} the model at "
                  f"{fraction:.2f} of the peak)")
        for algo in ALGORITHMS:
            print(f"| {k} | {memory / MIB:.0f} MiB ({fraction:.2f}) | {algo} | "
                  f"{placement_cell(graph, devices, algo, True, single)} | "
                  f"{placement_cell(graph, devices, algo, False, single)} |")
    print()
    persistent = persistent_bytes(graph)
    held = sum(persistent.values())
    mem = torch_memory(res["factory"](), res["shape"], res["batch"])
    print("   One device, MiB at the peak: netsim's simulated step against torch's profiler "
          "(profile_memory=True, its memory timeline by category, CPU):")
    print(f"   netsim: {peak / MIB:.1f} = weights {persistent['weights'] / MIB:.1f} + gradients "
          f"{persistent['gradients'] / MIB:.1f} + optimizer state "
          f"{persistent['optimizer'] / MIB:.1f} (held all step) + live tensors "
          f"{(peak - held) / MIB:.1f} (forward outputs until their backward, gradients in "
          f"flight, the input)")
    if mem is not None:
        rest = mem["total"] - mem["parameter"] - mem["gradient"] - mem["optimizer_state"]
        print(f"   torch:  {mem['total'] / MIB:.1f} = parameters {mem['parameter'] / MIB:.1f} + "
              f"gradients {mem['gradient'] / MIB:.1f} + optimizer state "
              f"{mem['optimizer_state'] / MIB:.1f} + the rest {rest / MIB:.1f} (activations "
              f"{mem['activation'] / MIB:.1f}, autograd detail {mem['autograd_detail'] / MIB:.1f}"
              f", temporary {mem['temporary'] / MIB:.1f}, input {mem['input'] / MIB:.1f}, "
              f"uncategorised {mem['unknown'] / MIB:.1f})")
        print(f"   netsim / torch: {peak / mem['total']:.2f}x at the peak; live tensors against "
              f"the rest {(peak - held) / max(rest, 1.0):.2f}x")
    shutil.rmtree(folder, ignore_errors=True)
    print()
    print(f"   wall {time.perf_counter() - t_start:.0f} s, load {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    worst = max(abs(r["ratio"] - 1) for r in rows)
    print(f"worst single-device step error (profiled): {100 * worst:.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
