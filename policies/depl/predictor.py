"""DepL's distributional loss predictor: quantiles of the final loss of a training trajectory.

A trajectory is the model variant and the samples trained on in each epoch. Its final loss
under netsim's surrogate is ``mean_K * exp(s_run * z_run + s_epoch * z_K)``
(:mod:`netsim.training.loss`), with ``mean_K`` the predictor's mean curve after the
trajectory (switch losses included) and ``z`` standard normal; so ``log(loss / mean_K)`` has a
*spread* distribution that does not depend on the trajectory. Three sources of that spread:

* ``analytic``: normal with sigma = hypot(s_run, s_epoch) (log-normal loss; the default);
* ``montecarlo``: draws of the surrogate's noise, ``s_run * z_run + s_epoch * z_K``, from a
  seeded generator (the same answer up to sampling error; the reference the optimum uses);
* ``empirical``: log-residuals measured on repeated real runs (e.g. the calibration curves
  in netsim/data/calibration/), each final loss over the mean of its configuration.

netsim's formalization: the papers say DepL uses the loss *distribution*; they do not say how
it is predicted. Quantiles here are of the loss after the last epoch of the plan.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, ndtr, ndtri

from netsim.scenario.schema import ModelSpec, TrainingSpec
from netsim.training.loss import LossPredictor, LossState


@dataclass(frozen=True)
class LogSpread:
    """The distribution of ``log(final loss / predicted mean)``.

    ``sigma`` gives the analytic normal form; ``draws`` (sorted), when given, an empirical or
    Monte Carlo form used instead.
    """

    sigma: float
    draws: np.ndarray | None = None

    def quantile(self, q: float) -> float:
        """The ``q``-quantile of the log-ratio (dimensionless)."""
        if self.draws is None:
            return self.sigma * float(ndtri(q))
        return float(np.quantile(self.draws, q))

    def cdf(self, x: np.ndarray | float) -> np.ndarray:
        """P(log-ratio <= x)."""
        x = np.asarray(x, dtype=float)
        if self.draws is None:
            return ndtr(x / self.sigma) if self.sigma > 0 else (x >= 0).astype(float)
        return np.searchsorted(self.draws, x, side="right") / len(self.draws)


def montecarlo_spread(sigma_run: float, sigma_epoch: float, rng: np.random.Generator,
                      n_draws: int = 100_000) -> LogSpread:
    """Monte Carlo draws of the surrogate's noise on the final loss (seeded by ``rng``)."""
    z = rng.standard_normal((2, n_draws))
    draws = np.sort(sigma_run * z[0] + sigma_epoch * z[1])
    return LogSpread(math.hypot(sigma_run, sigma_epoch), draws)


def empirical_spread(final_losses: Sequence[Sequence[float]]) -> LogSpread:
    """Spread from measured final losses: one sequence per configuration (repeated seeds).

    Each loss is divided by its configuration's geometric mean; the log-ratios are pooled.
    """
    logs = [np.log(np.asarray(g, dtype=float)) for g in final_losses if len(g) > 1]
    if not logs:
        raise ValueError("empirical spread needs at least one configuration with 2+ runs")
    draws = np.sort(np.concatenate([g - g.mean() for g in logs]))
    return LogSpread(float(draws.std(ddof=1)), draws)


class DistributionalPredictor:
    """Quantiles and success probabilities of the final loss of a trajectory.

    Wraps the policy-side :class:`~netsim.training.loss.LossPredictor` (mean curve, switch
    losses) with a :class:`LogSpread`.
    """

    def __init__(self, model: ModelSpec, training: TrainingSpec,
                 spread: LogSpread | None = None) -> None:
        self.base = LossPredictor(model, training)
        self.sigma_run = self.base.sigma_run  # widened for non-IID data (netsim.training.loss)
        self.sigma_epoch = self.base.sigma_epoch
        self.spread = spread or LogSpread(self.base.sigma)

    def final_state(self, variants: Sequence[int], samples: Sequence[float],
                    participants: Sequence[int] | int = 1) -> LossState:
        """The progress model's state after training ``samples[k]`` samples with
        ``variants[k]`` on ``participants[k]`` devices (one count for every epoch, or one
        per epoch)."""
        parts = [participants] * len(variants) if isinstance(participants, int) \
            else list(participants)
        states = self.base.replay(LossState(), [(int(v), float(s), int(p)) for v, s, p in
                                                zip(variants, samples, parts, strict=True)])
        return states[-1] if states else LossState()

    def final_mean(self, variants: Sequence[int], samples: Sequence[float],
                   participants: Sequence[int] | int = 1) -> float:
        """The mean-curve loss after the trajectory (the median of the final loss)."""
        return self.base.mean(self.final_state(variants, samples, participants))

    def quantile(self, variants: Sequence[int], samples: Sequence[float], q: float,
                 participants: Sequence[int] | int = 1) -> float:
        """The ``q``-quantile of the final loss (with this predictor's spread)."""
        return self.final_mean(variants, samples, participants) * math.exp(
            self.spread.quantile(q))

    def analytic_quantile(self, variants: Sequence[int], samples: Sequence[float],
                          q: float, participants: Sequence[int] | int = 1) -> float:
        """The ``q``-quantile of the final loss, log-normal form (the progress model's own
        :meth:`~netsim.training.loss.LossPredictor.quantile`, its spread at that state)."""
        return self.base.quantile(self.final_state(variants, samples, participants), q)

    def sample_final_losses(self, variants: Sequence[int], samples: Sequence[float],
                            rng: np.random.Generator, n_draws: int = 10_000,
                            participants: Sequence[int] | int = 1) -> np.ndarray:
        """Monte Carlo draws of the final loss over the surrogate's noise."""
        state = self.final_state(variants, samples, participants)
        z = rng.standard_normal((2, n_draws))
        noise = self.base.run_sigma(state) * z[0] + self.sigma_epoch * z[1]
        return self.base.mean(state) * np.exp(noise)

    def montecarlo_quantile(self, variants: Sequence[int], samples: Sequence[float], q: float,
                            rng: np.random.Generator, n_draws: int = 10_000,
                            participants: Sequence[int] | int = 1) -> float:
        """The ``q``-quantile of the final loss by Monte Carlo over the surrogate's noise."""
        return float(np.quantile(self.sample_final_losses(variants, samples, rng, n_draws,
                                                          participants), q))

    def success_probability(self, final_mean: np.ndarray | float,
                            target_loss: float) -> np.ndarray:
        """P(final loss <= ``target_loss``) for trajectories ending at ``final_mean``."""
        mean = np.asarray(final_mean, dtype=float)
        with np.errstate(divide="ignore"):
            return self.spread.cdf(np.log(target_loss / mean))


QUADRATURE_NODES = 120  # Gauss-Hermite nodes over the run's noise draw (error < 1e-3)


@functools.lru_cache(maxsize=8)
def gauss_hermite(order: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Hermite nodes (probabilists', weight ``exp(-x^2 / 2)``) and weights normalised
    to sum to 1, for ``order`` points: computed once per order (``hermegauss`` solves an
    eigenvalue problem, about 14 ms at 120 nodes, which dominated planning when every
    :func:`first_passage_probability` call redid it). The arrays are shared, read-only."""
    x, w = np.polynomial.hermite_e.hermegauss(order)
    w = w / w.sum()
    x.flags.writeable = False
    w.flags.writeable = False
    return x, w


def first_passage_probability(means: Sequence[float] | np.ndarray, target_loss: float,
                              z_mean: float, z_var: float,
                              sigmas_run: Sequence[float] | np.ndarray | float,
                              sigma_epoch: float, nodes: int | None = None) -> float:
    """P(some epoch's loss <= ``target_loss``): the event the simulator scores (a run ends
    ``ok`` at the first epoch whose loss is at or below L*).

    The surrogate's loss after epoch k is ``means[k] * exp(sigmas_run[k] * z + sigma_epoch *
    z_k)``: one run draw ``z ~ N(z_mean, z_var)`` shared by every epoch (N(0, 1) before the
    run; its posterior once epochs have been observed), scaled by the run spread at that
    epoch's state, and independent per-epoch noise. Given z the epochs fail independently, so
    ``P = E_z[1 - prod_k Phi(-(log L* - log means[k] - sigmas_run[k] z) / sigma_epoch)]``,
    the expectation by Gauss-Hermite quadrature (``nodes`` points, default
    :data:`QUADRATURE_NODES`). netsim's formalization.
    """
    logm = np.log(np.asarray(means, dtype=float))
    if len(logm) == 0:
        return 0.0
    s = np.broadcast_to(np.asarray(sigmas_run, dtype=float), logm.shape)
    margin = math.log(target_loss) - logm  # log L* - log mean_k
    sd = math.sqrt(max(z_var, 0.0))
    if sigma_epoch <= 0.0:  # only the run draw: success iff z <= max_k margin_k / s_k
        if np.any((s <= 0) & (margin >= 0)):
            return 1.0
        pos = s > 0
        if not pos.any():
            return 0.0
        t = float(np.max(margin[pos] / s[pos]))
        return float(t >= z_mean) if sd == 0.0 else float(ndtr((t - z_mean) / sd))
    x, w = gauss_hermite((nodes or QUADRATURE_NODES) if sd > 0 else 1)
    z = z_mean + sd * x
    gap = margin[None, :] - z[:, None] * s[None, :]  # per node and epoch
    log_fail = log_ndtr(-gap / sigma_epoch).sum(axis=1)
    return float(np.dot(w, 1.0 - np.exp(log_fail)))


def calibration_spread(path: str, epoch: int | None = None) -> LogSpread:
    """Empirical spread from measured curves (netsim/data/calibration/curves.parquet).

    Columns used: ``config``, ``seed``, ``epoch``, ``loss``. For each configuration the losses
    of all seeds at ``epoch`` (default: the last epoch) form one group of repeated runs.
    """
    import pandas as pd

    curves = pd.read_parquet(path, columns=["config", "seed", "epoch", "loss"])
    at = curves["epoch"].max() if epoch is None else epoch
    final = curves[curves["epoch"] == at]
    return empirical_spread([g["loss"].to_numpy() for _, g in final.groupby("config")])
