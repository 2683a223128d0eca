"""A tiny CNN for scikit-learn's 8x8 digits shaped 1x8x8, in plain torch: the worked example of
docs/byo-model.md (bring your own model).

conv 8@3x3 pad 1, ReLU, max pool 2 (8x4x4), conv 16@3x3 pad 1, ReLU, max pool 2 (16x2x2),
flatten, FC 64-32, ReLU, FC 32-10; 3,658 parameters.

    netsim models inspect experiments.byo_model.tiny_cnn:tiny_cnn --input-shape 1,8,8
    netsim run experiments/byo_model/tiny-cnn.yaml --allow-imports
"""

from __future__ import annotations

from torch import nn


def tiny_cnn(num_classes: int = 10) -> nn.Module:
    """A fresh tiny CNN on 1x8x8 inputs, ``num_classes`` outputs (logits)."""
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),     # 8 x 4 x 4
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),    # 16 x 2 x 2
        nn.Flatten(),
        nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, num_classes),
    )
