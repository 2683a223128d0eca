"""Stands in for the ``future`` package (Python 2/3 compatibility; only ``future.utils`` is imported)."""
