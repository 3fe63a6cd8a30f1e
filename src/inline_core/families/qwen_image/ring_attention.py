"""Qwen-Image's attention routed through the masked ring (`families/masked_ring.py`; imports
torch): its processors carry the ring as their parallel config (where cache-dit put its own), and
diffusers' `dispatch_attention_fn`, which they call with it, hands such calls to the ring. The
mask its split builds (`split_plan.PaddedSplit`, the whole sequence's keys in rank order, as for
Ulysses) reaches the ring unchanged.
"""

from __future__ import annotations

from typing import Any

from inline_core.families import masked_ring
from inline_core.families.masked_ring import MaskedRing

PROCESSORS = "diffusers.models.transformers.transformer_qwenimage"


def route(transformer: Any, ring: MaskedRing) -> None:
    """Run the attention of `transformer`'s blocks over `ring`."""
    processors = [block.attn.processor for block in transformer.transformer_blocks]
    masked_ring.route(PROCESSORS, "dispatch_attention_fn", "parallel_config", processors, ring)
