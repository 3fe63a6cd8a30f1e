"""Krea 2's attention under Ring, alone or over Ulysses groups (imports torch).

cache-dit's Krea 2 planner shards the joint sequence (the prompt's 512 tokens, then the image's)
evenly in rank order and hands every block's attention the whole sequence's key mask (the
prompt's padding, then the image's tokens, all real): the layout the shared masked ring reads
(`families/masked_ring.py`). cache-dit's own ring attention takes no mask (its CPU kernel
refuses one), so the blocks' processors carry this rank's masked ring as their context-parallel
config, and the planner's processor, which calls its module's `_dispatch_attention_fn` with that
config, is handed to the ring for such calls. The text fusion, run whole on every rank, is not
split and keeps cache-dit's path (the planner clears its processors' config around it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.families.masked_ring import MaskedRing, RingRoute
from inline_core.families.ulysses_ring import route_split

PLANNER = "cache_dit.distributed.transformers.krea2"  # its processor's module
ROUTE = RingRoute(PLANNER, "_dispatch_attention_fn", "cp_config")


def route_ring(transformer: Any, degrees: Mapping[str, int]) -> MaskedRing | None:
    """Run the attention of a split `transformer`'s blocks over this rank's masked ring where
    `degrees` has Ring (None, nothing changed: Ulysses alone stays cache-dit's)."""
    return route_split(ROUTE, transformer, degrees)
