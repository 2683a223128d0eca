# ruff: noqa
# Flower's example app, from github.com/adap/flower, examples/quickstart-sklearn/sklearnexample/task.py at fdef7afb1d (Apache-2.0): unchanged but for its data loader, load_data (generated data, see below)
# (tests/data/flower-apps/README.md).
import numpy as np
from flwr.common import NDArrays
from sklearn.linear_model import LogisticRegression

# This information is needed to create a correct scikit-learn model
UNIQUE_LABELS = [0, 1, 2]
FEATURES = ["petal_length", "petal_width", "sepal_length", "sepal_width"]


def get_model_params(model: LogisticRegression) -> NDArrays:
    """Return the parameters of a sklearn LogisticRegression model."""
    if model.fit_intercept:
        params = [
            model.coef_,
            model.intercept_,
        ]
    else:
        params = [
            model.coef_,
        ]
    return params


def set_model_params(model: LogisticRegression, params: NDArrays) -> LogisticRegression:
    """Set the parameters of a sklean LogisticRegression model."""
    model.coef_ = params[0]
    if model.fit_intercept:
        model.intercept_ = params[1]
    return model


def set_initial_params(model: LogisticRegression, n_classes: int, n_features: int):
    """Set initial parameters as zeros.

    Required since model params are uninitialized until model.fit is called but server
    asks for initial parameters from clients at launch. Refer to
    sklearn.linear_model.LogisticRegression documentation for more information.
    """
    model.classes_ = np.array([i for i in range(n_classes)])

    model.coef_ = np.zeros((n_classes, n_features))
    if model.fit_intercept:
        model.intercept_ = np.zeros((n_classes,))


def create_log_reg_and_instantiate_parameters(penalty):
    model = LogisticRegression(
        penalty=penalty,
        max_iter=1,  # local epoch
        warm_start=True,  # prevent refreshing weights when fitting,
        solver="saga",
    )
    # Setting initial parameters, akin to model.compile for keras models
    set_initial_params(model, n_features=len(FEATURES), n_classes=len(UNIQUE_LABELS))
    return model


# netsim's test copy: the data loader below replaces the original's (which downloads
# hitorilabs/iris with flwr_datasets) by generated data of the same shape: 150 rows of the
# four FEATURES around iris's class means, labels in UNIQUE_LABELS, split with quantity skew
# (partition k holds a share proportional to 1 / (k + 1)^2), so that a small partition's
# training split lacks a class and scikit-learn fails on it, as on a device with too little
# data. The 80/20 split of a partition is the original's.
IRIS_MEANS = np.array([[1.46, 0.25, 5.01, 3.43], [4.26, 1.33, 5.94, 2.77],
                       [5.55, 2.03, 6.59, 2.97]])


def load_data(partition_id: int, num_partitions: int):
    """Load the data for the given partition."""
    rng = np.random.default_rng(2024)
    labels = np.repeat(np.arange(len(UNIQUE_LABELS)), 50)
    features = IRIS_MEANS[labels] + rng.normal(0.0, 0.35, size=(len(labels), len(FEATURES)))
    order = rng.permutation(len(labels))
    X, y = features[order], labels[order]
    weights = 1.0 / (np.arange(num_partitions) + 1.0) ** 2
    sizes = np.maximum(1, np.floor(len(y) * weights / weights.sum()).astype(int))
    bounds = np.minimum(np.concatenate([[0], np.cumsum(sizes)]), len(y))
    X, y = X[bounds[partition_id]:bounds[partition_id + 1]], y[bounds[partition_id]:bounds[partition_id + 1]]
    # Split the on-edge data: 80% train, 20% test
    X_train, X_test = X[: int(0.8 * len(X))], X[int(0.8 * len(X)) :]
    y_train, y_test = y[: int(0.8 * len(y))], y[int(0.8 * len(y)) :]
    return X_train, y_train, X_test, y_test
