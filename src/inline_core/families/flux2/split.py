"""What FLUX.2 can be split across ranks with, and which renders a split can take (torch-free).

cache-dit's context parallelism shards FLUX.2 by diffusers' `Flux2Transformer2DModel._cp_plan`:
the image tokens (the render's latents with its reference images' after them) and the prompt's
tokens are each sharded evenly over the ranks, with their positions, and attention runs with
Ulysses, which shards heads, so its degree must divide the transformer's heads (24 for klein 4B,
read from the model's files). Ring is not offered: it is untested for this family here. The prompt
is padded to 512 tokens, so only rank counts dividing 512 shard it (`sequence_multiple`); the image
tokens are not padded, so a render whose tokens the ranks cannot share is refused at submit
(`sequence_refusal`), its reference images' tokens counted where their sizes are known then (an
uploaded image); a reference whose size is known only at run (an image made by another node) is
checked on the ranks before the transformer runs (`tokens_refusal`), in the same words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.families.flow_request import PIXELS_PER_TOKEN
from inline_core.families.flux2.request import TEXT_TOKENS, reference_size
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


def sequence_refusal(
    params: Mapping[str, Any],
    split: ParallelSpec,
    references: Sequence[tuple[int, int]] = (),
) -> str | None:
    """Why this render's image tokens cannot be sharded evenly over `split`'s ranks (None: they
    can): its latents' and those of its reference images of sizes `references` (width, height,
    as uploaded)."""
    width, height = int(params.get("width") or 0), int(params.get("height") or 0)
    if width <= 0 or height <= 0 or width % PIXELS_PER_TOKEN or height % PIXELS_PER_TOKEN:
        return None  # the request's own check refuses the size, with its message
    grids = [_grid(*reference_size(w, h)) for w, h in references]
    return tokens_refusal(_grid(width, height), grids, split.sequence_ranks, f"={split}")


def tokens_refusal(
    latents: tuple[int, int],
    references: Sequence[tuple[int, int]],
    ranks: int,
    setting: str = "",
) -> str | None:
    """Why image tokens of a latent grid `latents` (rows, columns) and reference grids
    `references` cannot be sharded evenly over `ranks` (None: they can); `setting`: the split's
    INLINE_PARALLEL value, where it is known (`=ulysses=2`)."""
    rows, cols = latents
    tokens = rows * cols + sum(r * c for r, c in references)
    if ranks < 2 or tokens % ranks == 0:
        return None
    width, height = cols * PIXELS_PER_TOKEN, rows * PIXELS_PER_TOKEN
    split = f"the {ranks} ranks of this server's split (INLINE_PARALLEL{setting})"
    way_out = "or render it on a server without INLINE_PARALLEL"
    if not references:
        return (
            f"{width}x{height} is {tokens} image tokens for FLUX.2 ({rows}x{cols} patches of "
            f"{PIXELS_PER_TOKEN} px), which {split} cannot share evenly: pick a width or height "
            f"whose patches make a multiple of {ranks} (a side of a multiple of "
            f"{PIXELS_PER_TOKEN * ranks} px fits), {way_out}"
        )
    encoded = ", ".join(f"{c * PIXELS_PER_TOKEN}x{r * PIXELS_PER_TOKEN}" for r, c in references)
    return (
        f"{width}x{height} with reference images encoded at {encoded} is {tokens} image tokens "
        f"for FLUX.2 ({rows * cols} of the image's, {tokens - rows * cols} of its references', "
        f"one each {PIXELS_PER_TOKEN}x{PIXELS_PER_TOKEN} px; a reference is scaled down to a "
        f"1024x1024 area at most and cropped to multiples of {PIXELS_PER_TOKEN}), which {split} "
        f"cannot share evenly: pick a size and reference images whose tokens add up to a "
        f"multiple of {ranks} (every side a multiple of {PIXELS_PER_TOKEN * ranks} px fits, for "
        f"references within that area), {way_out}"
    )


def _grid(width: int, height: int) -> tuple[int, int]:
    """The token grid (rows, columns) of an image of this size, in pixels."""
    return height // PIXELS_PER_TOKEN, width // PIXELS_PER_TOKEN
