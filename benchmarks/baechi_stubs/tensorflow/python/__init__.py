"""Stands in for the ``tensorflow.python`` package (empty)."""
