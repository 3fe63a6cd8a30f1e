"""What Z-Image can be split across ranks with (torch-free; the device package knows no models).

xDiT splits Z-Image with Ulysses and Ring sequence parallelism only (it has no PipeFusion for it),
and so does cache-dit's context parallelism. Ulysses shards attention heads, so its degree must
divide the transformer's heads: read from the model's own files, 30 for Z-Image Turbo.
"""

from __future__ import annotations

from inline_core.device.split import ModelParallelSupport
from inline_core.families.zimage.transformer import config_of
from inline_core.models.source import Source

SPLIT_METHODS = frozenset({"ulysses", "ring"})
TURBO_HEADS = 30  # Z-Image Turbo: 3840 wide, 128 per head
# The transformer pads its image and caption streams to multiples of 32 tokens (diffusers'
# SEQ_MULTI_OF), so only rank counts dividing 32 shard them without a remainder.
SEQUENCE_MULTIPLE = 32


def parallel_support(heads: int | None = None) -> ModelParallelSupport:
    """The family's support; `heads` of the model at hand (Turbo's when not known)."""
    return ModelParallelSupport(
        family="z-image",
        methods=SPLIT_METHODS,
        heads=TURBO_HEADS if heads is None else heads,
        sequence_multiple=SEQUENCE_MULTIPLE,
    )


def support_for(transformer: Source | None) -> ModelParallelSupport:
    """The support of this transformer (what the split depends on: the heads in its files)."""
    config = None if transformer is None else config_of(transformer)
    heads: object = None if config is None else config.get("n_heads")
    return parallel_support(heads if isinstance(heads, int) and heads > 0 else None)
