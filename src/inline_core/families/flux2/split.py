"""What FLUX.2 can be split across ranks with, and which renders a split can take (torch-free).

cache-dit's context parallelism shards FLUX.2 by diffusers' `Flux2Transformer2DModel._cp_plan`:
the image tokens (the render's latents with its reference images' after them) and the prompt's
tokens are each sharded evenly over the ranks, with their positions, and attention runs with
Ulysses, which shards heads, so its degree must divide the transformer's heads (24 for klein 4B,
read from the model's files). Ring is not offered: it is untested for this family here. The prompt
is padded to 512 tokens, so only rank counts dividing 512 shard it (`sequence_multiple`); the image
tokens are not padded, so a render whose tokens the ranks cannot share is refused at submit
(`sequence_refusal`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.families.flow_request import PIXELS_PER_TOKEN
from inline_core.families.flux2.request import TEXT_TOKENS
from inline_core.families.flux2.transformer import config_of
from inline_core.models.source import Source

SPLIT_METHODS = frozenset({"ulysses"})
SPLIT_ENGINES = frozenset({"cache-dit"})


def support_for(transformer: Source | None) -> ModelParallelSupport:
    """The support of this transformer: its heads, from its folder's config or its file's shapes."""
    config = None if transformer is None else config_of(transformer)
    heads: object = None if config is None else config.get("num_attention_heads")
    known = heads if isinstance(heads, int) and heads > 0 else None
    return ModelParallelSupport(
        family="flux-2",
        methods=SPLIT_METHODS,
        heads=known,
        sequence_multiple=TEXT_TOKENS,
        ulysses_with_ring=False,
    )


def sequence_refusal(params: Mapping[str, Any], split: ParallelSpec) -> str | None:
    """Why this render's image tokens cannot be sharded evenly over `split`'s ranks (None: they
    can). Only the render's own latents are known at submit; reference images add theirs at run,
    and the ranks refuse a sum they cannot share."""
    width, height = int(params.get("width") or 0), int(params.get("height") or 0)
    if width <= 0 or height <= 0 or width % PIXELS_PER_TOKEN or height % PIXELS_PER_TOKEN:
        return None  # the request's own check refuses the size, with its message
    ranks = split.sequence_ranks
    tokens = (width // PIXELS_PER_TOKEN) * (height // PIXELS_PER_TOKEN)
    if ranks < 2 or tokens % ranks == 0:
        return None
    return (
        f"{width}x{height} is {tokens} image tokens for FLUX.2 ({height // PIXELS_PER_TOKEN}x"
        f"{width // PIXELS_PER_TOKEN} patches of {PIXELS_PER_TOKEN} px), which the {ranks} ranks "
        f"of this server's split (INLINE_PARALLEL={split}) cannot share evenly: pick a width or "
        f"height whose patches make a multiple of {ranks} (a side of a multiple of "
        f"{PIXELS_PER_TOKEN * ranks} px fits), or render it on a server without INLINE_PARALLEL"
    )
