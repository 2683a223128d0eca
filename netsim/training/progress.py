"""What a training backend reports after each epoch.

Both backends (the surrogate loss model and the real-training backend) return an
:class:`EpochProgress` from their ``advance`` call; the engine records ``loss`` in the
``epochs`` table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EpochProgress:
    """Training progress after one epoch.

    Attributes
    ----------
    loss:
        Test loss after the epoch, cross-entropy in nats.
    accuracy:
        Test accuracy in [0, 1] (real backend), or None where the backend does not
        measure it (the surrogate).
    """

    loss: float
    accuracy: float | None = None
