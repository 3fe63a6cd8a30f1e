"""Ulysses and Ring together (USP) for a masked attention (imports torch; Qwen-Image's, Krea 2's
and FLUX.2's), and the ring a split's degrees ask for (`masked_ring_for`, `route_split`).

The ranks form a grid as cache-dit's mesh lays them out, Ring outer and Ulysses inner: rank
`ring_index * ulysses + ulysses_index`, so the shards cache-dit hands out in rank order are, for
each ring position, its Ulysses members' in turn. Each attention first trades heads for tokens
inside the Ulysses group (an all-to-all: every member then holds its share of the heads over the
group's tokens, in rank order), then runs `MaskedRing` over the ring position's peers: the keys a
ring step brings are one Ulysses group's, which the whole sequence's mask (in rank order)
covers with one contiguous slice, so the mask still travels without being sent. The
output trades its tokens back for heads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist

from inline_core.families.masked_ring import MaskedRing, RingRoute

_dist: Any = dist  # `new_group` and `all_to_all_single` are partly untyped in torch


class MaskedUlyssesRing(MaskedRing):
    """The ring over Ulysses groups one rank's attention runs: `ulysses` ranks trade heads,
    `ring` such groups pass keys around."""

    def __init__(self, rank: int, ulysses: int, ring: int) -> None:
        self.ulysses = ulysses
        ring_index, self.ulysses_index = divmod(rank, ulysses)
        # Every rank makes every group, in one order (new_group is collective).
        rings = [_dist.new_group([r * ulysses + u for r in range(ring)]) for u in range(ulysses)]
        groups = [_dist.new_group([r * ulysses + u for u in range(ulysses)]) for r in range(ring)]
        super().__init__(ring_index, ring, rings[self.ulysses_index])
        self.heads_group: Any = groups[ring_index]

    def _into_ring(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, tokens, heads, width) -> (batch, group's tokens, heads / ulysses, width)."""
        batch, tokens, heads, width = x.shape
        if heads % self.ulysses:
            raise ValueError(f"{heads} attention heads do not split over ulysses={self.ulysses}")
        parts = x.reshape(batch, tokens, self.ulysses, heads // self.ulysses, width)
        sent = parts.permute(2, 0, 1, 3, 4).contiguous()  # member j gets its heads' share
        got = torch.empty_like(sent)
        _dist.all_to_all_single(got, sent, group=self.heads_group)  # got[j]: member j's tokens
        return got.permute(1, 0, 2, 3, 4).reshape(batch, self.ulysses * tokens, -1, width)

    def _out_of_ring(self, x: torch.Tensor) -> torch.Tensor:
        """The inverse: (batch, group's tokens, heads / ulysses, width) -> this rank's tokens
        with every head."""
        batch, tokens, heads, width = x.shape
        mine = tokens // self.ulysses
        sent = x.reshape(batch, self.ulysses, mine, heads, width).permute(1, 0, 2, 3, 4)
        sent = sent.contiguous()  # member j gets its tokens of these heads
        got = torch.empty_like(sent)
        _dist.all_to_all_single(got, sent, group=self.heads_group)  # got[j]: member j's heads
        return got.permute(1, 2, 0, 3, 4).reshape(batch, mine, self.ulysses * heads, width)


def masked_ring_for(ulysses: int, ring: int) -> MaskedRing | None:
    """This rank's ring for a split of `ulysses` x `ring` ranks (None: no Ring, Ulysses alone or
    no split): over Ulysses groups where both are above 1."""
    if ring < 2:
        return None
    if ulysses > 1:
        return MaskedUlyssesRing(dist.get_rank(), ulysses, ring)
    return MaskedRing(dist.get_rank(), ring)


def route_split(
    route: RingRoute, transformer: Any, degrees: Mapping[str, int]
) -> MaskedRing | None:
    """Run the attention of a split `transformer` over this rank's masked ring, as its family's
    `route` says, where `degrees` has Ring (None, nothing changed: Ulysses alone stays
    cache-dit's)."""
    ring = masked_ring_for(int(degrees.get("ulysses", 1)), int(degrees.get("ring", 1)))
    if ring is not None:
        route.route(transformer, ring)
    return ring
