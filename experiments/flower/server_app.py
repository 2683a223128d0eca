"""The Flower ServerApp and the centralized evaluation of the global model.

- :func:`evaluate` is Flower's ``evaluate_fn``: ``(server_round, ArrayRecord) ->
  MetricRecord`` with the test cross-entropy (``loss``, nats) and ``accuracy`` of the global
  model on the held-out 20 % of the digits (:func:`.task.load_test`). netsim's ``flower``
  policy reads ``loss`` as the run's loss (``loss_metric``).
- ``app`` is a ServerApp whose ``@app.main()`` runs FedAvg with that evaluation, as a
  Flower project's server_app.py does; netsim runs it with its own Grid when given as the
  ``flower`` policy's ``server_app``, and Flower with its own.
  ``context.run_config`` may set ``num-server-rounds`` (default 3), ``fraction-train``
  (default 0.5) and ``fraction-evaluate`` (default 0.5).
"""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from experiments.flower import task


def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
    """Test loss (nats) and accuracy of the global model (module docstring)."""
    x, y = task.load_test()
    loss, accuracy = task.evaluate(arrays.to_numpy_ndarrays(), x, y)
    return MetricRecord({"loss": loss, "accuracy": accuracy})


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """FedAvg over the grid's nodes with centralized evaluation (module docstring)."""
    rc = context.run_config
    strategy = FedAvg(fraction_train=float(rc.get("fraction-train", 0.5)),
                      fraction_evaluate=float(rc.get("fraction-evaluate", 0.5)))
    result = strategy.start(grid=grid, initial_arrays=task.initial_arrays(),
                            num_rounds=int(rc.get("num-server-rounds", 3)),
                            evaluate_fn=evaluate)
    final = result.evaluate_metrics_serverapp
    if final:
        last = max(final)
        print(f"round {last}: {dict(final[last])}")

