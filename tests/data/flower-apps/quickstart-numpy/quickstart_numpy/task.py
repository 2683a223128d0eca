# ruff: noqa
# Flower's example app, from github.com/adap/flower, examples/quickstart-numpy/quickstart_numpy/task.py at fdef7afb1d (Apache-2.0): unchanged
# (tests/data/flower-apps/README.md).
"""quickstart-numpy: A Flower / NumPy app."""

import numpy as np


def get_dummy_model():
    return [np.ones((1, 1))]
