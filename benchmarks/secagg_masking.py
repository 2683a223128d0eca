"""What one SecAgg+ mask costs a device, per model element, measured on this host.

SecAgg+ (Flower's ``secaggplus_mod``, collect_masked_vectors stage) adds to the quantized
update a private mask and one pairwise mask per neighbour, each drawn with
``flwr.common.secure_aggregation.secaggplus_utils.pseudo_rand_gen`` (a seeded NumPy
``RandomState.randint`` over the update's shapes) and added modulo the mod range; the server
regenerates each surviving node's private mask in the unmask stage. This script times one
mask (generation, addition, modulo) over ELEMENTS int64 elements, the best of REPEATS, and
this host's float64 matrix-multiply rate (netsim's ``host_flop_per_s``, the yardstick of
``client_compute: measured``), and prints the mask's cost per element as FLOP-equivalents:
seconds per element x the host's FLOP/s. netsim charges that constant
(``policies.flower.grid.SECAGG_MASK_FLOP_PER_ELEMENT``) at the device's FLOP/s.

    OMP_NUM_THREADS=1 python benchmarks/secagg_masking.py
"""

from __future__ import annotations

import time

import numpy as np
from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen

from policies.flower.policy import host_flop_per_s

ELEMENTS, REPEATS, MOD_RANGE = 1_000_000, 7, 1 << 30


def mask_seconds_per_element() -> float:
    """Seconds one mask takes per element (generation, addition, modulo; best of REPEATS)."""
    vector = [np.zeros(ELEMENTS, dtype=np.int64)]
    best = float("inf")
    for k in range(REPEATS):
        t0 = time.perf_counter()
        (mask,) = pseudo_rand_gen(bytes(32 - 4) + k.to_bytes(4, "little"), MOD_RANGE,
                                  [(ELEMENTS,)])
        vector[0] = (vector[0] + mask) % MOD_RANGE
        best = min(best, time.perf_counter() - t0)
    return best / ELEMENTS


if __name__ == "__main__":
    per_element_s = mask_seconds_per_element()
    flops = host_flop_per_s()
    print(f"mask: {per_element_s * 1e9:.3g} ns per element; host: {flops:.3g} FLOP/s; "
          f"SECAGG_MASK_FLOP_PER_ELEMENT = {per_element_s * flops:.3g}")
