"""HierFAVG (Liu et al., "Client-Edge-Cloud Hierarchical Federated Learning", ICC 2020) and
its star baseline (netsim's formalization, docs/hierarchical.md).

HierFAVG: kappa_1 local updates per edge aggregation (here: the training's local epochs,
``training.local_epochs``), kappa_2 edge aggregations per cloud aggregation
(``edge_rounds``); every device of an edge takes part unless ``participants_per_edge`` draws
that many at random per edge each cloud round (netsim's). ``cloud-only``: random-k's star
epoch on the same world, the edges relaying unaggregated.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from netsim.policy import Decision, Observation, register
from netsim.policy.requirements import EDGES
from policies.baselines import FleetPolicy, KParams, RandomK, all_samples, nobody_can_train


class HierFavgParams(BaseModel):
    """edge_rounds: kappa_2, edge aggregations per cloud aggregation (>= 1);
    participants_per_edge: how many devices of each edge train each cloud round, drawn at
    random (absent: every device of the edge that can)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    edge_rounds: Annotated[int, Field(ge=1, le=10_000)] = 2
    participants_per_edge: Annotated[int, Field(ge=1)] | None = None


def per_edge(obs: Observation, idx: np.ndarray, rng: np.random.Generator,
             k: int | None, edge_of: np.ndarray | None = None) -> np.ndarray:
    """Of devices ``idx`` (those that can train now), those with an edge, at most ``k`` per
    edge drawn at random (all where ``k`` is None), in row order. ``edge_of``: each device
    row's edge (-1: none; default its default edge, ``tiers.default_edge``)."""
    tiers = obs.tiers
    if tiers is None:
        return idx
    edge = (tiers.default_edge if edge_of is None else edge_of)[idx]
    idx, edge = idx[edge >= 0], edge[edge >= 0]
    if k is None:
        return idx
    # k of each edge's devices uniformly at random, all edges at once: order each edge's
    # devices by a uniform draw and keep the first k (a group of at most k keeps all)
    order = np.lexsort((rng.random(len(idx)), edge))
    grouped = edge[order]
    first = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    rank = np.arange(len(idx)) - np.repeat(first, np.diff(np.r_[first, len(idx)]))
    return np.sort(idx[order[rank < k]])


@register("hierfavg", "HierFAVG: every device (or participants_per_edge per edge) trains with "
          "its edge, edge_rounds edge aggregations per cloud aggregation, synchronous tiers",
          HierFavgParams)
class HierFavg(FleetPolicy):
    name = "hierfavg"
    params: HierFavgParams
    requires = frozenset({EDGES})

    def decide(self, obs: Observation) -> Decision:
        idx = per_edge(obs, self._fits(obs), self._rng, self.params.participants_per_edge)
        if not len(idx):
            return nobody_can_train(obs)
        return Decision(participants=all_samples(obs, idx), variant=0,
                        edge_rounds=self.params.edge_rounds)


@register("cloud-only", "the star beside hierfavg: k devices drawn at random each epoch train "
          "with the cloud, the edges relaying unaggregated (random-k's epoch)", KParams)
class CloudOnly(RandomK):
    def __init__(self, params: KParams) -> None:
        super().__init__(params)
        self.name = "cloud-only"
