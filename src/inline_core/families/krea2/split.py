"""What Krea 2 can be split across ranks with, and which renders a split can take (torch-free).

cache-dit's Krea 2 planner (`cache_dit/distributed/transformers/krea2.py`) runs the text fusion
on the whole prompt on every rank, then shards the joint sequence (the prompt's 512 tokens, then
the image's) evenly over the ranks for the transformer blocks, with Ulysses over the heads (its
grouped key/value heads repeated to the query heads first), and gathers it back before the last
layer: the shared flow split (`families/flow_split.py`). Ring, alone or over Ulysses groups, shards
the same way; its attention is the shared masked ring (`ring.py`), as cache-dit's ring takes no
mask and Krea 2's prompts are masked. The prompt's 512 tokens shard over rank counts dividing 512;
the image's are not padded, so a render whose image tokens the ranks cannot share is refused at
submit (`sequence_refusal`) and, in the same words, on a rank before the transformer runs
(`Krea2StepPipeline.prepare_encode`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.families.flow_split import grid_of, image_tokens_refusal, ulysses_support
from inline_core.families.krea2.formats import config_of
from inline_core.families.krea2.request import TEXT_TOKENS
from inline_core.models.source import Source

TITLE = "Krea 2"


def support_for(transformer: Source | None) -> ModelParallelSupport:
    """The support of this transformer: its heads, from its folder's config or its file's shapes."""
    config = None if transformer is None else config_of(transformer)
    return ulysses_support("krea-2", config, TEXT_TOKENS)


def sequence_refusal(params: Mapping[str, Any], split: ParallelSpec) -> str | None:
    """Why this render's image tokens cannot be sharded evenly over `split`'s ranks (None: they
    can)."""
    latents = grid_of(params)
    if latents is None:
        return None  # the request's own check refuses the size, with its message
    return tokens_refusal(latents, split.sequence_ranks, f"={split}")


def tokens_refusal(latents: tuple[int, int], ranks: int, setting: str = "") -> str | None:
    """Why the image tokens of a latent grid `latents` (rows, columns) cannot be sharded evenly
    over `ranks` (None: they can); `setting`: the split's INLINE_PARALLEL value where known."""
    return image_tokens_refusal(TITLE, latents, ranks, setting)
