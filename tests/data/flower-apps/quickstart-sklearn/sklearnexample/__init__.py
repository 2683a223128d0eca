# ruff: noqa
# Flower's example app, from github.com/adap/flower, examples/quickstart-sklearn/sklearnexample/__init__.py at fdef7afb1d (Apache-2.0): unchanged
# (tests/data/flower-apps/README.md).
"""quickstart-sklearn-example."""
