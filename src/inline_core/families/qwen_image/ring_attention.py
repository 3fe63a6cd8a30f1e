"""Qwen-Image's attention routed through the masked ring (`families/masked_ring.py`; imports
torch): its processors carry the ring as their parallel config (where cache-dit put its own), and
diffusers' `dispatch_attention_fn`, which they call with it, hands such calls to the ring. The
mask its split builds (`split_plan.PaddedSplit`, the whole sequence's keys in rank order, as for
Ulysses) reaches the ring unchanged.
"""

from __future__ import annotations

from typing import Any

from inline_core.families.masked_ring import MaskedRing, RingRoute

PROCESSORS = "diffusers.models.transformers.transformer_qwenimage"
ROUTE = RingRoute(PROCESSORS, "dispatch_attention_fn", "parallel_config")


def route(transformer: Any, ring: MaskedRing) -> None:
    """Run the attention of `transformer`'s blocks over `ring`."""
    ROUTE.route(transformer, ring)
