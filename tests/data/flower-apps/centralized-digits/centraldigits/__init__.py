# ruff: noqa
"""centraldigits: netsim's test app, quickstart-pytorch's shape over scikit-learn's digits."""
