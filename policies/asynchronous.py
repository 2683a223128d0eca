"""Asynchronous baselines: FedBuff and FedAsync (netsim's formalization, docs/async.md).

FedBuff (Nguyen et al., AISTATS 2022) keeps ``concurrency`` clients training and the server
steps as soon as ``buffer_updates`` (K) updates have arrived; clients still training deliver
their updates later, stale by the aggregations in between. FedAsync (Xie et al., 2019) is the
K = 1 case. Here the server's step is the engine's aggregation and an update's worth is the one
progress model's staleness weight ``(1 + s) ** -staleness_exponent`` (netsim.training.loss);
``max_staleness`` discards updates staler than that on arrival.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from netsim.policy import Decision, Observation, register
from policies.baselines import FitMemo, FleetPolicy, all_samples, at_most, nobody_can_train


class FedBuffParams(BaseModel):
    """concurrency: how many devices train at once (fewer if fewer are available and idle);
    buffer_updates: K, the server aggregates every K arrivals (at most the concurrency);
    max_staleness: optional, updates staler than this many aggregations are discarded."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    concurrency: Annotated[int, Field(ge=1)] = 20
    buffer_updates: Annotated[int, Field(ge=1)] = 5
    max_staleness: Annotated[int | None, Field(ge=0)] = None

    @field_validator("buffer_updates")
    @classmethod
    def _within_concurrency(cls, k: int, info: ValidationInfo) -> int:
        concurrency = info.data.get("concurrency")
        if concurrency is not None and k > concurrency:
            raise ValueError(f"buffer_updates {k} is larger than the concurrency {concurrency} "
                             "(K updates can never arrive at once from fewer jobs)")
        return k


class FedAsyncParams(BaseModel):
    """The server steps at every arrival (K = 1).

    concurrency: how many devices train at once; max_staleness: optional, updates staler
    than this many aggregations are discarded."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    concurrency: Annotated[int, Field(ge=1)] = 20
    max_staleness: Annotated[int | None, Field(ge=0)] = None


def _buffered(obs: Observation, fits: FitMemo, rng: np.random.Generator, concurrency: int,
              k: int, max_staleness: int | None) -> Decision:
    """Top the devices with an outstanding update (training, or waiting in the buffer) up to
    ``concurrency`` with idle devices drawn at random; the epoch aggregates ``k`` updates
    (fewer when fewer can arrive)."""
    idx = fits(obs)
    busy = obs.busy
    in_flight = 0 if busy is None else int(np.count_nonzero(busy))
    # (the idle ones of idx, ascending: a mask over the fleet, cheaper than indexing idx)
    free = idx if busy is None or not in_flight else np.flatnonzero(fits.mask(obs) & ~busy)
    start = at_most(rng, free, max(concurrency - in_flight, 0))
    can_arrive = len(start) + in_flight  # (busy devices: the buffered updates' included)
    if not can_arrive:
        return nobody_can_train(obs)
    k = min(k, can_arrive)
    return Decision(participants=all_samples(obs, start), variant=0, buffer_updates=k,
                    max_staleness=max_staleness,
                    info={"buffer_updates": k, "in_flight_before": in_flight})


@register("fedbuff", "buffered asynchronous aggregation (FedBuff): concurrency devices train at "
          "once, the server aggregates every buffer_updates arrivals, optional max_staleness; "
          "full model, all their samples", FedBuffParams)
class FedBuff(FleetPolicy):
    name = "fedbuff"
    params: FedBuffParams

    def decide(self, obs: Observation) -> Decision:
        p = self.params
        return _buffered(obs, self._fits, self._rng, p.concurrency, p.buffer_updates,
                         p.max_staleness)


@register("fedasync", "asynchronous aggregation at every arrival (FedAsync, K = 1): concurrency "
          "devices train at once, optional max_staleness; full model, all their samples",
          FedAsyncParams)
class FedAsync(FleetPolicy):
    name = "fedasync"
    params: FedAsyncParams

    def decide(self, obs: Observation) -> Decision:
        return _buffered(obs, self._fits, self._rng, self.params.concurrency, 1,
                         self.params.max_staleness)
