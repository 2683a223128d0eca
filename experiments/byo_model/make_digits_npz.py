"""Write ``digits-8x8.npz``: scikit-learn's 1,797 bundled 8x8 digits (grey levels 0..16 divided
by 16, shaped N x 1 x 8 x 8, float32) as ``x`` and their labels (int64) as ``y``, the data set
of docs/byo-model.md's example (about 69 kB compressed).

    python experiments/byo_model/make_digits_npz.py [OUT.npz]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

#: Where the example's scenario reads it.
DEFAULT_OUT = Path(__file__).with_name("digits-8x8.npz")


def main(out: str | Path = DEFAULT_OUT) -> Path:
    """Write the file; returns its path."""
    digits = load_digits()
    x = (np.asarray(digits.data, dtype=np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    np.savez_compressed(out, x=x, y=np.asarray(digits.target, dtype=np.int64))
    return Path(out)


if __name__ == "__main__":
    print(f"wrote {main(*sys.argv[1:2])}")
