"""What FLUX.2 can be split across ranks with, and which renders a split can take (torch-free).

cache-dit's context parallelism shards FLUX.2 by diffusers' `Flux2Transformer2DModel._cp_plan`:
the image tokens (the render's latents with its reference images' after them) and the prompt's
tokens are each sharded evenly over the ranks, with their positions, and attention runs with
Ulysses over the transformer's heads (24 for klein 4B, read from the model's files), Ring (the
shared masked ring, `ring.py`), or Ring over Ulysses groups: the shared flow split
(`families/flow_split.py`). The prompt is padded to 512 tokens, so only rank counts
dividing 512 shard it; the image tokens are not padded, so a render whose tokens the ranks cannot
share is refused at submit (`sequence_refusal`), its reference images' tokens counted where their
sizes are known then (an uploaded image); a reference whose size is known only at run (an image
made by another node) is checked on the ranks before the transformer runs (`tokens_refusal`), in
the same words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.families.flow_request import PIXELS_PER_TOKEN
from inline_core.families.flow_split import (
    WAY_OUT,
    grid_of,
    image_tokens_refusal,
    ranks_words,
    ulysses_support,
)
from inline_core.families.flux2.request import TEXT_TOKENS, reference_size
from inline_core.families.flux2.transformer import config_of
from inline_core.models.source import Source


def support_for(transformer: Source | None) -> ModelParallelSupport:
    """The support of this transformer: its heads, from its folder's config or its file's shapes."""
    return ulysses_support(
        "flux-2", None if transformer is None else config_of(transformer), TEXT_TOKENS
    )


def sequence_refusal(
    params: Mapping[str, Any],
    split: ParallelSpec,
    references: Sequence[tuple[int, int]] = (),
) -> str | None:
    """Why this render's image tokens cannot be sharded evenly over `split`'s ranks (None: they
    can): its latents' and those of its reference images of sizes `references` (width, height,
    as uploaded)."""
    latents = grid_of(params)
    if latents is None:
        return None  # the request's own check refuses the size, with its message
    grids = [_grid(*reference_size(w, h)) for w, h in references]
    return tokens_refusal(latents, grids, split.sequence_ranks, f"={split}")


def tokens_refusal(
    latents: tuple[int, int],
    references: Sequence[tuple[int, int]],
    ranks: int,
    setting: str = "",
) -> str | None:
    """Why image tokens of a latent grid `latents` (rows, columns) and reference grids
    `references` cannot be sharded evenly over `ranks` (None: they can); `setting`: the split's
    INLINE_PARALLEL value, where it is known (`=ulysses=2`)."""
    if not references:
        return image_tokens_refusal("FLUX.2", latents, ranks, setting)
    rows, cols = latents
    tokens = rows * cols + sum(r * c for r, c in references)
    if ranks < 2 or tokens % ranks == 0:
        return None
    width, height = cols * PIXELS_PER_TOKEN, rows * PIXELS_PER_TOKEN
    encoded = ", ".join(f"{c * PIXELS_PER_TOKEN}x{r * PIXELS_PER_TOKEN}" for r, c in references)
    return (
        f"{width}x{height} with reference images encoded at {encoded} is {tokens} image tokens "
        f"for FLUX.2 ({rows * cols} of the image's, {tokens - rows * cols} of its references', "
        f"one each {PIXELS_PER_TOKEN}x{PIXELS_PER_TOKEN} px; a reference is scaled down to a "
        f"1024x1024 area at most and cropped to multiples of {PIXELS_PER_TOKEN}), which "
        f"{ranks_words(ranks, setting)} cannot share evenly: pick a size and reference images "
        f"whose tokens add up to a multiple of {ranks} (every side a multiple of "
        f"{PIXELS_PER_TOKEN * ranks} px fits, for references within that area), {WAY_OUT}"
    )


def _grid(width: int, height: int) -> tuple[int, int]:
    """The token grid (rows, columns) of an image of this size, in pixels."""
    return height // PIXELS_PER_TOKEN, width // PIXELS_PER_TOKEN
