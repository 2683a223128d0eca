"""The Flower ClientApp (the Message API, as Flower's quickstarts write it): each node trains
and evaluates the MLP of :mod:`.task` on its partition of the digits.

The node's partition is ``context.node_config["partition-id"]`` of ``["num-partitions"]``
(netsim numbers the scenario's training devices 0..n-1; Flower's simulation engine numbers its
supernodes). Hyper-parameters come from ``context.run_config`` where given (``local-epochs``,
``lr``, ``batch-size``), else the defaults below. A FedProx train message carries
``proximal-mu`` in its config: the handler adds the proximal term with that weight. The
minibatch order is seeded by the partition and the server round, so a node trains the same
way in every run given the same arrays.
"""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from experiments.flower import task

LOCAL_EPOCHS = 2
LR = 0.1
BATCH_SIZE = 16

app = ClientApp()


def _partition(context: Context):
    return task.load_partition(int(context.node_config["partition-id"]),
                               int(context.node_config["num-partitions"]))


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Train the received arrays on the node's training shard; reply with the new arrays,
    the training loss and ``num-examples`` (the weight of this update in FedAvg)."""
    x, y, _, _ = _partition(context)
    config = msg.content["config"]
    run_config = context.run_config
    partition = int(context.node_config["partition-id"])
    server_round = int(config.get("server-round", 0))
    arrays, loss = task.train(
        msg.content["arrays"].to_numpy_ndarrays(), x, y,
        epochs=int(run_config.get("local-epochs", LOCAL_EPOCHS)),
        lr=float(run_config.get("lr", LR)),
        batch_size=int(run_config.get("batch-size", BATCH_SIZE)),
        proximal_mu=float(config.get("proximal-mu", 0.0)),
        seed=partition * 100_003 + server_round)
    content = RecordDict({"arrays": ArrayRecord(arrays),
                          "metrics": MetricRecord({"train_loss": loss,
                                                   "num-examples": len(y)})})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Evaluate the received arrays on the node's validation shard."""
    _, _, x, y = _partition(context)
    loss, accuracy = task.evaluate(msg.content["arrays"].to_numpy_ndarrays(), x, y)
    content = RecordDict({"metrics": MetricRecord({"loss": loss, "accuracy": accuracy,
                                                   "num-examples": len(y)})})
    return Message(content=content, reply_to=msg)
