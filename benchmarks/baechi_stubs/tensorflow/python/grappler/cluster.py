"""Stands in for ``tensorflow.python.grappler.cluster`` (imported by Baechi's placer_lib, unused here)."""
