"""Counter-based uniform draws: the k-th draw of device d is a hash of (key, d, k).

What lets a million devices each have their own random stream without a generator object per
device: draws are computed in arrays for any set of (device, counter) pairs, in any order, and
a device's draws never depend on which others are drawn with it or when (the property the
changing world needs: its sessions do not depend on when the engine asks). The hash is
SplitMix64's finalizer (Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
OOPSLA 2014), applied to the device's stream key and then to the counter; the top 53 bits
give a double in (0, 1).
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 arrays (wrapping arithmetic)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def stream_key(seed: np.random.SeedSequence) -> int:
    """A 64-bit key from a seed sequence (one per stream of draws)."""
    return int(seed.generate_state(1, np.uint64)[0])


def uniforms(key: int, device: np.ndarray, counter: np.ndarray) -> np.ndarray:
    """Draw ``counter[j]`` of device ``device[j]`` in the stream ``key``: doubles in (0, 1)."""
    with np.errstate(over="ignore"):
        d = np.asarray(device).astype(np.uint64)
        k = np.asarray(counter).astype(np.uint64)
        z = _mix(np.uint64(key) ^ _mix((d + np.uint64(1)) * _GOLDEN))
        z = _mix(z + (k + np.uint64(1)) * _GOLDEN)
    return ((z >> _S11).astype(np.float64) + 0.5) * (1.0 / 9007199254740992.0)
