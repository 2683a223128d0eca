"""Stands in for ``tensorflow.python.grappler`` (empty; Baechi imports its cluster and item modules)."""
