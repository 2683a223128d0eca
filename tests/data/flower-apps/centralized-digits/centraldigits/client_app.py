# ruff: noqa
"""centraldigits: the ClientApp (quickstart-pytorch's client_app.py over task.py)."""

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from centraldigits.task import load_data, test, train

app = ClientApp()


def _data(context: Context):
    return load_data(context.node_config["partition-id"], context.node_config["num-partitions"])


@app.train()
def train_fn(msg: Message, context: Context):
    """Train the global model on the node's partition."""
    x, y, _, _ = _data(context)
    arrays = msg.content["arrays"].to_numpy_ndarrays()
    arrays, train_loss = train(arrays, x, y, context.run_config["local-epochs"],
                               msg.content["config"]["lr"], context.run_config["batch-size"])
    metrics = MetricRecord({"train_loss": train_loss, "num-examples": len(y)})
    content = RecordDict({"arrays": ArrayRecord(arrays), "metrics": metrics})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate_fn(msg: Message, context: Context):
    """Evaluate the global model on the node's validation rows."""
    _, _, x, y = _data(context)
    eval_loss, eval_acc = test(msg.content["arrays"].to_numpy_ndarrays(), x, y)
    metrics = MetricRecord({"eval_loss": eval_loss, "eval_acc": eval_acc,
                            "num-examples": len(y)})
    return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)
