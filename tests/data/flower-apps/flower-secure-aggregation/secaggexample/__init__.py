# ruff: noqa
# Flower's example app, from github.com/adap/flower, examples/flower-secure-aggregation/secaggexample/__init__.py at fdef7afb1d (Apache-2.0): unchanged
# (tests/data/flower-apps/README.md).
"""secaggexample: A Flower with SecAgg+ app."""
