"""Stands in for ``tensorflow.core.framework`` (empty)."""
