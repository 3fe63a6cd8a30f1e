"""What LTX-2 can be split across ranks with, and which renders a split can take (torch-free).

cache-dit's context parallelism knows LTX-2 (its `LTX2` plan): at the transformer's input it
shards the video's tokens, the soundtrack's tokens and both prompts' tokens evenly over the
ranks (the per-token timesteps of an image-to-video row with the video's), shards each rotary
table with its stream, runs self-attention and the two streams' cross-attention with Ulysses or
Ring, and gathers both outputs before `proj_out` and `audio_proj_out`. xDiT has no LTX-2 class, so
cache-dit is the one engine (`Capabilities.split_engines`).

Two constraints follow, read from the model's files and the request's size:
- Ulysses shards attention heads, so its degree must divide both streams' heads (the video's 32
  and the soundtrack's 32 on LTX-2: their greatest common divisor is what `heads` holds);
- each sequence is sharded without padding, so ulysses x ring must divide the video's tokens
  (latent frames x rows x columns), the soundtrack's latent frames (its length follows from the
  frames and the frame rate) and the padded prompt's tokens (1024 on LTX-2): a render one of
  them does not divide is a 422 at submit (`sequence_refusal`), never a failure mid-denoise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from inline_core.contract.files import read_json
from inline_core.contract.sources import Sources
from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.families.ltx2.files import prompt_tokens, vae_factors
from inline_core.families.ltx2.request import SPATIAL_FACTOR, TEMPORAL_FACTOR
from inline_core.models.source import Source

SPLIT_METHODS = frozenset({"ulysses", "ring"})
SPLIT_ENGINES = frozenset({"cache-dit"})  # xDiT (xfuser) has no LTX-2 transformer class
AUDIO_LATENT_DOWNSAMPLE = 4  # the audio VAE's mel frames per latent frame (diffusers' constant)


def support_for(transformer: Source | None) -> ModelParallelSupport:
    """The support of this transformer: the heads both streams share, from its config."""
    config = None if transformer is None else read_json(transformer.location / "config.json")
    heads: int | None = None
    if config is not None:
        video, audio = config.get("num_attention_heads"), config.get("audio_num_attention_heads")
        if isinstance(video, int) and isinstance(audio, int) and video > 0 and audio > 0:
            heads = math.gcd(video, audio)
    return ModelParallelSupport(family="ltx2", methods=SPLIT_METHODS, heads=heads)


def audio_per_second(audio_vae: Source | None) -> float | None:
    """The soundtrack's latent frames a second, from the audio VAE's config (None: unreadable)."""
    config = None if audio_vae is None else read_json(audio_vae.location / "config.json")
    if config is None:
        return None
    rate, hop = config.get("sample_rate"), config.get("mel_hop_length")
    if not isinstance(rate, int) or not isinstance(hop, int) or hop <= 0:
        return None
    return rate / hop / AUDIO_LATENT_DOWNSAMPLE


def sequence_refusal(
    params: Mapping[str, Any], defaults: Mapping[str, Any], sources: Sources, split: ParallelSpec
) -> str | None:
    """Why this render's sequences cannot be sharded evenly over `split`'s ranks (None: they
    can, or a size the submit checks refuse on their own)."""
    ranks = split.degree("ulysses") * split.degree("ring")
    if ranks < 2:
        return None
    size = {n: int(params.get(n) or defaults[n]) for n in ("width", "height", "frames", "fps")}
    spatial, temporal = vae_factors(sources.get("vae")) or (SPATIAL_FACTOR, TEMPORAL_FACTOR)
    width, height, frames, fps = size["width"], size["height"], size["frames"], size["fps"]
    if width % spatial or height % spatial or (frames - 1) % temporal or fps < 1:
        return None
    latent_frames = (frames - 1) // temporal + 1
    sequences = {
        "video": latent_frames * (height // spatial) * (width // spatial),
        "prompt": prompt_tokens(sources.get("tokenizer")),
    }
    per_second = audio_per_second(sources.get("audio_vae"))
    if per_second is not None:  # as the pipeline rounds it
        sequences["soundtrack"] = round(frames / fps * per_second)
    uneven = [f"the {name}'s {n} tokens" for name, n in sequences.items() if n % ranks]
    if not uneven:
        return None
    return (
        f"{width}x{height} at {frames} frames and {fps} fps has {' and '.join(uneven)}, which "
        f"the {ranks} ranks of this server's split (INLINE_PARALLEL={split}) cannot share "
        f"evenly: pick a size, frame count or frame rate that makes each a multiple of {ranks}, "
        "or render it on a server without INLINE_PARALLEL"
    )
