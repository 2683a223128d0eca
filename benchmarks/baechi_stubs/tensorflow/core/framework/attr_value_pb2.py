"""Stands in for ``tensorflow.core.framework.attr_value_pb2`` (imported by Baechi's placer_utils, unused here)."""
