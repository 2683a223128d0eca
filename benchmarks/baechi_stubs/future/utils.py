"""Stands in for ``future.utils``: only ``bytes_to_native_str``, which Baechi's placer_lib imports."""


def bytes_to_native_str(b):
    """``b`` decoded when it is bytes, else as given."""
    return b.decode() if isinstance(b, bytes) else b
