"""What Qwen-Image can be split across ranks with (torch-free; the plan is `split_plan.py`).

Its own plan on cache-dit's context parallelism, Ulysses only: each stream is padded to a
multiple of the ranks and the pads masked (so any prompt length and image size splits), and the
mask is laid out as Ulysses orders the keys. cache-dit's ring attention takes no mask, and
Qwen-Image's prompts are masked (a batch's shorter prompts, every pad), so Ring is not offered.
Ulysses shards attention heads, so its degree must divide the transformer's heads: read from the
model's own files (24 on the 20B).
"""

from __future__ import annotations

from inline_core.device.split import ModelParallelSupport
from inline_core.families.qwen_image.transformer import config_of
from inline_core.models.source import Source

SPLIT_METHODS = frozenset({"ulysses"})
SPLIT_ENGINES = frozenset({"cache-dit"})  # xDiT's Qwen-Image class is not used here


def support_for(transformer: Source | None) -> ModelParallelSupport:
    """The support of this transformer: its heads, from its folder's config or its file's shapes."""
    config = None if transformer is None else config_of(transformer)
    heads: object = None if config is None else config.get("num_attention_heads")
    return ModelParallelSupport(
        family="qwen-image",
        methods=SPLIT_METHODS,
        heads=heads if isinstance(heads, int) and heads > 0 else None,
    )
