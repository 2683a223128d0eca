# ruff: noqa
# Flower's example app, from github.com/adap/flower, examples/quickstart-pandas/pandas_example/client_app.py at fdef7afb1d (Apache-2.0): unchanged but for its data loader, get_clientapp_dataset (generated data, see below)
# (tests/data/flower-apps/README.md).
"""pandas_example: A Flower / Pandas app."""

import warnings

import numpy as np
import pandas as pd
from flwr.app import Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

warnings.filterwarnings("ignore", category=UserWarning)


# netsim's test copy: the data loader below replaces the original's (which downloads
# scikit-learn/iris with flwr_datasets) by generated data of the same shape: 150 rows of
# iris's sepal columns (within the histogram's bins), split IID into num_partitions shards.
def get_clientapp_dataset(partition_id: int, num_partitions: int):
    rng = np.random.default_rng(2024)
    dataset = pd.DataFrame({
        "SepalLengthCm": np.clip(rng.normal(5.84, 0.83, 150), 2.1, 9.9),
        "SepalWidthCm": np.clip(rng.normal(3.05, 0.43, 150), 2.1, 9.9)})
    shard = np.array_split(rng.permutation(150), num_partitions)[partition_id]
    dataset = dataset.iloc[shard]
    # Use just the specified columns
    return dataset[["SepalLengthCm", "SepalWidthCm"]]


# Flower ClientApp
app = ClientApp()


@app.query()
def query(msg: Message, context: Context):
    """Construct histogram of local dataset and report to `ServerApp`."""

    # Read the node_config to fetch data partition associated to this node
    partition_id = context.node_config["partition-id"]
    num_partitions = context.node_config["num-partitions"]

    dataset = get_clientapp_dataset(partition_id, num_partitions)

    metrics = {}
    # Compute some statistics for each column in the dataframe
    for feature_name in dataset.columns:
        # Compute histogram
        freqs, _ = np.histogram(dataset[feature_name], bins=np.linspace(2.0, 10.0, 10))
        metrics[feature_name] = freqs.tolist()

        # Compute weighted average
        metrics[f"{feature_name}_avg"] = dataset[feature_name].mean() * len(dataset)
        metrics[f"{feature_name}_count"] = len(dataset)

    reply_content = RecordDict({"query_results": MetricRecord(metrics)})

    return Message(reply_content, reply_to=msg)
