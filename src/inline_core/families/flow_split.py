"""A flow image family split by cache-dit's Ulysses over its transformer's heads, and the image
tokens its ranks must share (torch-free). FLUX.2 and Krea 2 split this way, and with Ring, alone or
over Ulysses groups: their blocks' attention runs the shared masked ring (`masked_ring.py`,
`ulysses_ring.py`), routed by each family's `ring.py`.

Ulysses shards heads, so its degree must divide the transformer's (read from the model's files).
The prompt is padded to a fixed count of tokens, so only rank counts dividing it shard it
(`sequence_multiple`); the image tokens (one per 16x16 px) are not padded, so a render whose
image tokens the ranks cannot share evenly is refused in words (`image_tokens_refusal`): a 422 at
submit, and the same words on a rank, never cache-dit's "must be divisible by mesh size".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.device.split import ModelParallelSupport
from inline_core.families.flow_request import PIXELS_PER_TOKEN

SPLIT_METHODS = frozenset({"ulysses", "ring"})
SPLIT_ENGINES = frozenset({"cache-dit"})
WAY_OUT = "or render it on a server without INLINE_PARALLEL"


def ulysses_support(
    family: str,
    config: Mapping[str, Any] | None,
    text_tokens: int,
) -> ModelParallelSupport:
    """Ulysses over the heads of a transformer's `config` (None: not read yet, so unknown), Ring,
    or both, for prompts padded to `text_tokens`."""
    heads: object = None if config is None else config.get("num_attention_heads")
    return ModelParallelSupport(
        family=family,
        methods=SPLIT_METHODS,
        heads=heads if isinstance(heads, int) and heads > 0 else None,
        sequence_multiple=text_tokens,
        ulysses_with_ring=True,  # the masked ring runs over Ulysses groups
    )


def grid_of(params: Mapping[str, Any]) -> tuple[int, int] | None:
    """The token grid (rows, columns) of a render's `width` and `height` (None: a size the
    request's own check refuses, with its message)."""
    width, height = int(params.get("width") or 0), int(params.get("height") or 0)
    if width <= 0 or height <= 0 or width % PIXELS_PER_TOKEN or height % PIXELS_PER_TOKEN:
        return None
    return height // PIXELS_PER_TOKEN, width // PIXELS_PER_TOKEN


def ranks_words(ranks: int, setting: str = "") -> str:
    """The split's ranks in words; `setting`: its INLINE_PARALLEL value where known
    (`=ulysses=2`)."""
    return f"the {ranks} ranks of this server's split (INLINE_PARALLEL{setting})"


def image_tokens_refusal(
    title: str, latents: tuple[int, int], ranks: int, setting: str = ""
) -> str | None:
    """Why the image tokens of a latent grid `latents` (rows, columns) of `title`'s cannot be
    sharded evenly over `ranks` (None: they can)."""
    rows, cols = latents
    tokens = rows * cols
    if ranks < 2 or tokens % ranks == 0:
        return None
    width, height = cols * PIXELS_PER_TOKEN, rows * PIXELS_PER_TOKEN
    return (
        f"{width}x{height} is {tokens} image tokens for {title} ({rows}x{cols} patches of "
        f"{PIXELS_PER_TOKEN} px), which {ranks_words(ranks, setting)} cannot share evenly: pick "
        f"a width or height whose patches make a multiple of {ranks} (a side of a multiple of "
        f"{PIXELS_PER_TOKEN * ranks} px fits), {WAY_OUT}"
    )
