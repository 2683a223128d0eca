# ruff: noqa
# Flower's example app, from github.com/adap/flower, examples/quickstart-numpy/quickstart_numpy/__init__.py at fdef7afb1d (Apache-2.0): unchanged
# (tests/data/flower-apps/README.md).
"""quickstart-numpy: A Flower / NumPy app."""
