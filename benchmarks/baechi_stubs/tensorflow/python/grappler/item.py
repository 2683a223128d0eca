"""Stands in for ``tensorflow.python.grappler.item`` (imported by Baechi's placer_lib, unused here)."""
