# ruff: noqa
"""centraldigits: the ServerApp (quickstart-pytorch's server_app.py over task.py): FedAvg
with a centralized evaluate_fn on the held-out digits."""

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from centraldigits.task import initial_arrays, load_centralized_dataset, test

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Main entry point for the ServerApp."""
    fraction_evaluate: float = context.run_config["fraction-evaluate"]
    num_rounds: int = context.run_config["num-server-rounds"]
    lr: float = context.run_config["learning-rate"]

    strategy = FedAvg(fraction_evaluate=fraction_evaluate)
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(initial_arrays()),
        train_config=ConfigRecord({"lr": lr}),
        num_rounds=num_rounds,
        evaluate_fn=global_evaluate,
    )
    np.savez("final_model", *result.arrays.to_numpy_ndarrays())


def global_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
    """Evaluate the global model on the central test rows."""
    x, y = load_centralized_dataset()
    loss, accuracy = test(arrays.to_numpy_ndarrays(), x, y)
    return MetricRecord({"accuracy": accuracy, "loss": loss})
