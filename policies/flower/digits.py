"""netsim's digits MLP (the real backend, :mod:`netsim.training.real`) as a Flower ClientApp:
the same shards, the same minibatch stream, the same test split, so Flower's FedAvg over it
gives the real backend's fedavg-all losses (tests/test_flower.py) and a Flower user can see
their ClientApp's shape in a model netsim already trains.

``digits_app(backend)`` returns the ClientApp, the evaluate_fn and the initial arrays of one
run's :class:`~netsim.training.real.RealBackend`. Each train message trains the device named
by the node's ``device-id`` on all its declared samples from the arrays it was sent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from netsim.training.real import RealBackend


def digits_app(backend: RealBackend) -> tuple[ClientApp, Any, ArrayRecord]:
    """(client app, evaluate_fn, initial arrays) over ``backend``."""
    app = ClientApp()
    samples = dict(zip(backend.device_ids, backend.device_samples, strict=True))

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        device = str(context.node_config["device-id"])
        base = msg.content.array_records["arrays"].to_numpy_ndarrays()
        local, n = backend.local_update(device, samples[device], base)
        before = backend.evaluate(base).loss  # (QFedAvg weighs by the loss before training)
        return Message(RecordDict({"arrays": ArrayRecord([np.asarray(a) for a in local]),
                                   "metrics": MetricRecord({"num-examples": int(n),
                                                            "train_loss": before})}),
                       reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        step = backend.evaluate(msg.content.array_records["arrays"].to_numpy_ndarrays())
        return Message(RecordDict({"metrics": MetricRecord({
            "loss": step.loss, "accuracy": float(step.accuracy or 0.0),
            "num-examples": int(samples[str(context.node_config["device-id"])])})}),
            reply_to=msg)

    def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        step = backend.evaluate(arrays.to_numpy_ndarrays())
        return MetricRecord({"loss": step.loss, "accuracy": float(step.accuracy or 0.0)})

    return app, evaluate_fn, ArrayRecord([np.array(p, copy=True) for p in backend.params])
