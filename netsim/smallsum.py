"""Sums of a few floats in Python that equal numpy's, bit for bit (a speed measure).

numpy's ``sum`` (and ``mean``, its sum over the count) adds fewer than :data:`FEW_IN_ORDER`
numbers one after another, in order; from that many on it sums pairwise in blocks of 8. An
asynchronous epoch's books hold one or two numbers each (its transfers' charges, its updates'
samples), where numpy's fixed cost per call was most of the time: below that size netsim adds
them in a Python loop and gets the same float. tests/test_energy.py checks the premise on the
numpy installed.
"""

from __future__ import annotations

from collections.abc import Sequence

FEW_IN_ORDER = 8
"""numpy's sum adds fewer numbers than this one after another, in order."""


def sum_in_order(values: Sequence[float]) -> float:
    """``float(numpy.sum(values))`` for fewer than :data:`FEW_IN_ORDER` floats: their sum
    left to right (0.0 for none)."""
    total = 0.0
    for v in values:
        total += v
    return total
