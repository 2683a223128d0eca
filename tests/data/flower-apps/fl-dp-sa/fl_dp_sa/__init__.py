# ruff: noqa
# Flower's example app, from github.com/adap/flower, examples/fl-dp-sa/fl_dp_sa/__init__.py at fdef7afb1d (Apache-2.0): unchanged
# (tests/data/flower-apps/README.md).
"""fl_dp_sa: Flower Example using Differential Privacy and Secure Aggregation."""
