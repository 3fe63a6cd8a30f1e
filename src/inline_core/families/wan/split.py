"""What Wan can be split across ranks with, and which renders a split can take (torch-free).

cache-dit's context parallelism knows Wan (its `WanTransformer3D` plan, the one diffusers'
`WanTransformer3DModel._cp_plan` holds too): the patchified video tokens are sharded evenly over
the ranks at the first block, the rotary frequencies (and Wan 2.2 TI2V's per-token timesteps) with
them, self-attention runs with Ulysses or Ring, and the output is gathered before `proj_out`'s
unpatchify. The prompt's 512 tokens (and Wan 2.1 i2v's 257 image tokens before them) are never
sharded: cross-attention runs on each rank's shard of the video against all of them. xDiT has no
Wan transformer class worth using, so cache-dit is the one engine (`Capabilities.split_engines`).

Two constraints follow, both read from the model's own files and the request's size:
- Ulysses shards attention heads, so its degree must divide the transformer's heads (12 for the
  1.3B, 24 for the TI2V-5B, 40 for the 14B and each A14B expert);
- the token sequence (latent frames x latent rows / 2 x latent columns / 2) is sharded without
  padding, so ulysses x ring must divide it: a render whose sequence it does not divide is a 422 at
  submit (`sequence_refusal`), never a failure mid-denoise. Wan pads nothing, so the model itself
  sets no `sequence_multiple`: the published sizes (832x480x81: 32,760 tokens) divide by 8.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.families.wan.request import TEMPORAL_FACTOR
from inline_core.families.wan.transformer import config_of
from inline_core.families.wan.variants import WanVariant
from inline_core.models.source import Source

SPLIT_METHODS = frozenset({"ulysses", "ring"})
SPLIT_ENGINES = frozenset({"cache-dit"})  # xDiT (xfuser) has no Wan transformer class we use


def parallel_support(heads: int | None = None) -> ModelParallelSupport:
    """The family's support; `heads` of the model at hand (None: not known, any degree)."""
    return ModelParallelSupport(family="wan", methods=SPLIT_METHODS, heads=heads)


def support_for(transformer: Source | None) -> ModelParallelSupport:
    """The support of this transformer: its heads, from its folder's config or its file's shapes
    (an A14B pair's experts share one shape, so the high-noise file's stands for both)."""
    config = None if transformer is None else config_of(transformer)
    heads: object = None if config is None else config.get("num_attention_heads")
    return parallel_support(heads if isinstance(heads, int) and heads > 0 else None)


def sequence_tokens(width: int, height: int, frames: int, kind: WanVariant) -> int:
    """The transformer's token count for a render: latent frames x (rows / 2) x (columns / 2)."""
    latent_frames = (frames - 1) // TEMPORAL_FACTOR + 1
    side = kind.size_multiple  # the VAE's factor times the 2x2 patch
    return latent_frames * (height // side) * (width // side)


def sequence_ranks(split: ParallelSpec) -> int:
    """The ranks the sequence is sharded over (Ulysses and Ring both shard it)."""
    return split.sequence_ranks


def sequence_refusal(
    params: Mapping[str, Any], kind: WanVariant, split: ParallelSpec
) -> str | None:
    """Why this render's token sequence cannot be sharded evenly over `split`'s ranks (None: it
    can). Params left empty take the variant's defaults, as `lower` gives them."""
    defaults = kind.defaults()
    size = {name: params.get(name) or defaults[name] for name in ("width", "height", "frames")}
    width, height, frames = (int(size[name]) for name in ("width", "height", "frames"))
    side = kind.size_multiple
    if width % side or height % side or (frames - 1) % TEMPORAL_FACTOR:
        return None  # `check_wired` refuses the size itself, with its own message
    ranks = sequence_ranks(split)
    tokens = sequence_tokens(width, height, frames, kind)
    if ranks < 2 or tokens % ranks == 0:
        return None
    latent_frames = (frames - 1) // TEMPORAL_FACTOR + 1
    # Frame counts whose latent frames are a multiple of the ranks: any size then divides.
    counts = ", ".join(str(TEMPORAL_FACTOR * (ranks * k - 1) + 1) for k in (1, 2, 3))
    return (
        f"{width}x{height} at {frames} frames is {tokens} tokens for {kind.title} "
        f"({latent_frames} latent frames of {height // side}x{width // side} patches), which the "
        f"{ranks} ranks of this server's split (INLINE_PARALLEL={split}) cannot share evenly: "
        f"pick a size or frame count that makes the tokens a multiple of {ranks} (frames "
        f"{counts}, ... fit any size), or render it on a server without INLINE_PARALLEL"
    )
