"""What Qwen-Image can be split across ranks with (torch-free; the plan is `split_plan.py`).

Its own plan on cache-dit's context parallelism, Ulysses or Ring: each stream is padded to a
multiple of the ranks and the pads masked (so any prompt length and image size splits), and the
mask is laid out in the ranks' order. Ulysses hands it to the attention of the gathered keys;
Ring to its own ring attention, which masks each rank's keys with their slice of it at every
step (`ring_attention.py`: cache-dit's ring attention takes no mask, and Qwen-Image's prompts
are masked). The two together (USP, `ulysses_ring.py`) run that ring over Ulysses groups, so the
automatic split may pick them (Ulysses as far as the heads allow, Ring over the rest). Ulysses
shards attention heads, so its degree must divide the transformer's heads: read from the model's
own files (24 on the 20B).
"""

from __future__ import annotations

from inline_core.device.split import ModelParallelSupport
from inline_core.families.qwen_image.transformer import config_of
from inline_core.models.source import Source

SPLIT_METHODS = frozenset({"ulysses", "ring"})
SPLIT_ENGINES = frozenset({"cache-dit"})  # xDiT's Qwen-Image class is not used here


def parallel_support(heads: int | None) -> ModelParallelSupport:
    """The family's support for a transformer of `heads` attention heads (None: not known)."""
    return ModelParallelSupport(family="qwen-image", methods=SPLIT_METHODS, heads=heads)


def support_for(transformer: Source | None) -> ModelParallelSupport:
    """The support of this transformer: its heads, from its folder's config or its file's shapes."""
    config = None if transformer is None else config_of(transformer)
    heads: object = None if config is None else config.get("num_attention_heads")
    return parallel_support(heads if isinstance(heads, int) and heads > 0 else None)
