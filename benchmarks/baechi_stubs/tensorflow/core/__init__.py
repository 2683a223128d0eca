"""Stands in for the ``tensorflow.core`` package (empty)."""
