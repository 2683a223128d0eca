"""One FedAvg round of the torch backend against a bare torch loop doing the same work.

Run: python benchmarks/torch_round.py [--model small-cnn] [--devices 10] [--samples 200]
     [--fraction 1.0] [--rounds 5]

Both sides train the same participants on the same shards (the backend's float32 shard
tensors) for the same steps (``training.real``'s defaults: 2 local passes of minibatches of
16, SGD at 0.05), then average the models weighted by samples and evaluate the test split
once. The netsim side is :meth:`netsim.torchnet.backend.TorchBackend.advance`; the bare side
is the textbook loop (one ``nn.Module``, ``torch.optim.SGD``, ``loss.backward()``,
``load_state_dict``-style in-place copies, a weighted sum under ``torch.no_grad()``). Rounds
alternate between the two (so a busy machine slows both alike) and the medians are compared;
the last line is ``round / bare loop: X.XXx``. One intra-op thread, as the backend runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from netsim.torchnet import require_torch, zoo
from netsim.torchnet.backend import TorchBackend
from netsim.training.real import real_config
from netsim.training.shards import prefix_length

VARIANTS = [{"name": "full", "params_fraction": 1.0}]


def bare_round(torch, module, opt, global_params, shards, steps_rng, test, cfg):
    """One FedAvg round the plain way; returns the new global parameters and the test loss."""
    functional = torch.nn.functional
    params = list(module.parameters())
    summed = [torch.zeros_like(p) for p in global_params]
    total = 0
    for x, y in shards:
        with torch.no_grad():
            for p, g in zip(params, global_params, strict=True):
                p.copy_(g)
        n = len(y)
        for _ in range(cfg.local_epochs):
            order = torch.from_numpy(steps_rng.permutation(n))
            for start in range(0, n, cfg.batch_size):
                idx = order[start:start + cfg.batch_size]
                opt.zero_grad(set_to_none=True)
                functional.cross_entropy(module(x[idx]), y[idx]).backward()
                opt.step()
        with torch.no_grad():
            for a, p in zip(summed, params, strict=True):
                a.add_(p, alpha=n)
        total += n
    new = [a / total for a in summed]
    with torch.no_grad():
        for p, g in zip(params, new, strict=True):
            p.copy_(g)
        loss = float(functional.cross_entropy(module(test[0]), test[1]))
    return new, loss


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="small-cnn", choices=sorted(zoo.TORCH_MODELS))
    ap.add_argument("--devices", type=int, default=10)
    ap.add_argument("--samples", type=int, default=200,
                    help="declared samples per device (each trains on all: its whole shard)")
    ap.add_argument("--fraction", type=float, default=1.0,
                    help="share of its declared samples each device trains on (its shard's prefix)")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    torch = require_torch()
    ids = [f"d{i}" for i in range(a.devices)]
    backend = TorchBackend({"name": a.model, "variants": VARIANTS}, ids,
                           [a.samples] * a.devices, {}, np.random.default_rng(0))
    # the prefix of each device's shard that the backend trains for this plan
    plan = dict.fromkeys(ids, max(1, round(a.fraction * a.samples)))
    used = [prefix_length(plan[d], a.samples, len(y)) for d, y in zip(ids, backend._shard_y,
                                                                       strict=True)]
    shards = [(x[:n], y[:n]) for x, y, n in zip(backend._shard_x, backend._shard_y, used,
                                                 strict=True)]
    cfg = real_config({})
    module = zoo.build(a.model, torch.Generator().manual_seed(1))
    opt = torch.optim.SGD(module.parameters(), lr=cfg.learning_rate)
    global_params = [p.detach().clone() for p in backend.params]
    test = (backend._x_test, backend._y_test)
    steps_rng = np.random.default_rng(1)
    n_train = sum(len(y) for _, y in shards)
    print(f"{a.model}: {a.devices} participants training {n_train} samples, "
          f"{cfg.local_epochs} passes of batches of {cfg.batch_size}, test split "
          f"{len(test[1])}; torch {torch.__version__}, {torch.get_num_threads()} thread")
    ours, bare = [], []
    for r in range(a.rounds + 1):  # (the first round of each warms up: not counted)
        t0 = time.perf_counter()
        step = backend.advance(plan, 0)
        t1 = time.perf_counter()
        global_params, loss = bare_round(torch, module, opt, global_params, shards, steps_rng,
                                         test, cfg)
        t2 = time.perf_counter()
        if r:
            ours.append(t1 - t0)
            bare.append(t2 - t1)
        print(f"round {r}: netsim {t1 - t0:.3f} s (loss {step.loss:.4f}), "
              f"bare {t2 - t1:.3f} s (loss {loss:.4f})" + ("" if r else " (warm-up)"))
    ratio = statistics.median(ours) / statistics.median(bare)
    print(f"median: netsim {statistics.median(ours):.3f} s, bare {statistics.median(bare):.3f} s")
    print(f"round / bare loop: {ratio:.2f}x")


if __name__ == "__main__":
    main()
