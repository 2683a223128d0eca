"""The ``nycmesh`` built-in scenario from Async-HFL's NYC mesh delays (netsim/data/nycmesh/,
SOURCE.md there: repository, commit, licence, what is transformed).

184 devices, 6 gateways with an edge aggregator each, 1 server: each device linked to every
gateway it can reach, at the rate that moves the paper's 1,600 kB model down and up in the
recorded round delay, and training at the speed that makes its local training last its
recorded computational delay (netsim's transformation, SOURCE.md). ``python -m
netsim.scenario.nycmesh > netsim/data/scenarios/nycmesh.yaml`` writes the built-in file; a
test keeps it equal to :func:`nycmesh_text`.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from netsim.scenario.generator import edge_catalog

PAPER_MODEL_BYTES = 1.6e6
"""The model size the delays were generated for (Async-HFL's configs: 1,600 kB)."""
SAMPLES = 600
LOCAL_EPOCHS = 5
FLOP_PER_SAMPLE = 5.715e7  # cnn-mnist's training FLOP per sample and epoch (models.yaml)
LATENCY_PER_DELAY = 1e-4  # s of link latency per s of round delay (route choice, SOURCE.md)


def _read(name: str) -> np.ndarray:
    text = resources.files("netsim").joinpath("data").joinpath("nycmesh").joinpath(
        name).read_text("utf-8")
    rows = [[float(x) for x in line.replace(",", " ").split()]
            for line in text.splitlines() if line.strip()]
    return np.array(rows, dtype=float)


def nycmesh_text() -> str:
    """The built-in scenario's YAML (SOURCE.md's transformation of the shipped delays)."""
    round_s = _read("delay_client_to_gateway.csv")
    cloud_s = _read("delay_gateway_to_cloud.csv").ravel()
    comp_s = _read("comp1.txt").ravel()
    n_dev, n_gw = round_s.shape
    classes = edge_catalog()["device_classes"]
    sbc, jetson, cloud = classes["sbc"], classes["jetson"], classes["cloud"]
    wifi, ether = edge_catalog()["access_links"]["wifi"], edge_catalog()["access_links"]["ethernet"]
    gw = [f"gateway-{k + 1}" for k in range(n_gw)]
    lines = [
        "# Async-HFL's NYC mesh (Yu et al., IoTDI 2023; github.com/Orienfish/Async-HFL, MIT):",
        "# 184 devices, 6 gateways, 1 server. Written by `python -m netsim.scenario.nycmesh`",
        "# from netsim/data/nycmesh/ (SOURCE.md there: the delays, what netsim transforms).",
        "# Each device links to every gateway it can reach (rate: the paper's 1,600 kB model",
        "# down and up in the recorded round delay; latency 1e-4 s per s of it), lists them as",
        "# its reachable edges (fastest first), and trains 600 samples x 5 local epochs of",
        "# cnn-mnist in its recorded computational delay. An edge aggregator (Jetson-class) on",
        "# each gateway; the gateways reach the server over Ethernet at the recorded 18.72 s",
        "# per model. cnn-mnist's curve is fitted to McMahan's FedAvg (docs/curves.md).",
        "name: nycmesh",
        "seed: 0",
        "devices:",
        f"  - {{id: server, flop_per_s: {float(cloud['flop_per_s']):.6g}, memory_bytes: "
        f"{float(cloud['memory_bytes'][-1]):.6g}, power_busy_w: {cloud['power_busy_w']}, "
        f"power_idle_w: {cloud['power_idle_w']}}}",
    ]
    links = []
    for i in range(n_dev):
        reach = np.flatnonzero(round_s[i] > 0)
        reach = reach[np.argsort(round_s[i][reach], kind="stable")]
        flops = SAMPLES * LOCAL_EPOCHS * FLOP_PER_SAMPLE / comp_s[i]
        edges = ", ".join(gw[k] for k in reach)
        lines.append(
            f"  - {{id: device-{i + 1:03d}, flop_per_s: {flops:.6g}, memory_bytes: "
            f"{float(sbc['memory_bytes'][1]):.6g}, power_busy_w: {sbc['power_busy_w']}, "
            f"power_idle_w: {sbc['power_idle_w']}, samples: {SAMPLES}, edges: [{edges}]}}")
        for k in reach.tolist():
            d = float(round_s[i, k])
            links.append(
                f"  - {{a: device-{i + 1:03d}, b: {gw[k]}, bandwidth_bps: "
                f"{2 * 8 * PAPER_MODEL_BYTES / d:.6g}, latency_s: {d * LATENCY_PER_DELAY:.6g}, "
                f"energy_j_per_bit: {float(wifi['energy_j_per_bit']):.6g}}}")
    for g in range(n_gw):
        links.append(f"  - {{a: {gw[g]}, b: server, bandwidth_bps: "
                     f"{8 * PAPER_MODEL_BYTES / cloud_s[g]:.6g}, latency_s: "
                     f"{float(ether['latency_s']):.6g}, energy_j_per_bit: "
                     f"{float(ether['energy_j_per_bit']):.6g}}}")
    lines += ["links:", *links, "edges:"]
    lines += [f"  - {{id: {g}, flop_per_s: {float(jetson['flop_per_s']):.6g}, power_busy_w: "
              f"{jetson['power_busy_w']}, power_idle_w: {jetson['power_idle_w']}}}" for g in gw]
    lines += [
        "aggregator: server",
        "model: cnn-mnist",
        "training:",
        "  backend: surrogate",
        "  target_accuracy: 0.95   # Async-HFL's MNIST target",
        "  deadline_s: 30 days",
        "  max_epochs: 20000      # room for K = 1 baselines (fedasync, concurrency 60: 565)",
        f"  local_epochs: {LOCAL_EPOCHS}",
        "  batch_size: 50",
        "policies:",
        "  hierfavg: {edge_rounds: 2}",
        "  rfl-ha: {edge_rounds: 2, buffer_updates: 1}",
        "  async-hfl: {edge_rounds: 2, participants_per_edge: 10, edge_buffer_updates: 5, "
        "buffer_updates: 1}",
        "  cloud-only: {k: 60}",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(nycmesh_text(), end="")
