"""LTX-2's video VAE decoded in temporal chunks, each chunk's frames handed on as it decodes.

LTX-2's decoder reads, through its temporal convolutions (kernel 3; the video's edges padded by
repeating the edge frame), latent frames on both sides of a frame when it is not causal (before
it only when it is), out to the decoder's reach (`receptive_reach`, read from its layers:
conv_in, the mid block's resnets, each up block's resnets and upsampler at its own temporal
scale, conv_out). Each chunk is decoded from a window holding that reach on either side of it,
and only the chunk's own frames are kept, so every frame is the one-shot decode's (to the float
arithmetic of a smaller tensor): nothing is blended, unlike diffusers' own temporal tiling
(`AutoencoderKLLTX2Video.enable_tiling`), which approximates. The first chunk is small (early
bytes for a stream), each next one twice the last up to the reach, and a chunk whose window
would hold the whole video takes the rest of it: a window holds at most a chunk and the reach on
either side, so memory is flat in the video's length once it is longer than that. The reach is
what it is: LTX-2's non-causal decoder reaches 22 latent frames (176 video frames) each way, so
a video shorter than that (121 frames: 16 latent frames) decodes in one chunk, as one-shot, and
a longer one streams, its first chunk after a window of 24 latent frames; the tiny kit's decoder
reaches 6.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

VALUE_RANGE = (-1.0, 1.0)  # the video VAE's decoded floats
FIRST_CHUNK = 2  # latent frames of the first chunk (17 video frames of LTX-2's): early bytes


@dataclass(frozen=True)
class Chunk:
    """One chunk: its latent frames [start, end) and the window decoded for it."""

    start: int
    end: int
    window_start: int
    window_end: int


@dataclass(frozen=True)
class Reach:
    """How many latent frames before and after it a decoded frame depends on."""

    before: int
    after: int


def plan(latent_frames: int, reach: Reach, first: int = FIRST_CHUNK) -> list[Chunk]:
    """The chunks of a video of `latent_frames`, in order: the first of `first` latent frames,
    each next one twice the last, up to the reach; a chunk whose window would hold the whole
    video takes every frame left (nothing is decoded twice for nothing)."""
    if first < 1:
        raise ValueError(f"a first chunk of {first} latent frames")
    largest = max(first, reach.before, reach.after)
    chunks: list[Chunk] = []
    start, size = 0, first
    while start < latent_frames:
        end = min(latent_frames, start + size)
        # The upsamplers drop the first frames of whatever they are given: one latent frame
        # before the chunk is always decoded with it.
        window_start = max(0, start - max(reach.before, 1))
        if window_start == 0 and end + reach.after >= latent_frames:
            end = latent_frames  # its window is the whole video: decode the rest with it
        chunks.append(Chunk(start, end, window_start, min(latent_frames, end + reach.after)))
        start, size = end, min(largest, 2 * size)
    return chunks


def frame_span(chunk: Chunk, temporal: int) -> tuple[int, int]:
    """The video frames [first, end) chunk `chunk` adds: latent frame 0 is one frame, each later
    one `temporal` frames."""
    first = 0 if chunk.start == 0 else temporal * (chunk.start - 1) + 1
    return first, temporal * (chunk.end - 1) + 1


def receptive_reach(vae: nn.Module) -> Reach:
    """The decoder's reach in latent frames: each temporal convolution adds its kernel less one
    at the temporal scale it runs at (an upsampler's own convolution runs before it multiplies
    the frames), all of it before the frame on a causal decoder, half on either side otherwise."""
    decoder = cast(Any, vae).decoder
    total = 0.0
    scale = 1
    upsampler_convs: set[int] = set()
    for layer in cast(nn.Module, decoder).modules():
        name = type(layer).__name__
        if name == "LTX2VideoUpsampler3d":
            conv = cast(Any, layer).conv
            total += (conv.kernel_size[0] - 1) / scale
            upsampler_convs.add(id(conv))
            scale *= int(cast(Any, layer).stride[0])
        elif name == "LTX2VideoCausalConv3d" and id(layer) not in upsampler_convs:
            total += (cast(Any, layer).kernel_size[0] - 1) / scale
    if bool(decoder.is_causal):
        return Reach(math.ceil(total), 0)
    return Reach(math.ceil(total / 2), math.ceil(total / 2))


def decode_chunks(
    vae: nn.Module, latents: torch.Tensor, *, first: int = FIRST_CHUNK
) -> Iterator[torch.Tensor]:
    """Each chunk's video frames, (1, 3, frames, H, W) floats in `VALUE_RANGE`, as they decode,
    from denormalized latents (1, C, F, H, W) on the VAE's device and dtype."""
    model = cast(Any, vae)
    temporal = int(model.temporal_compression_ratio)
    for piece in plan(int(latents.shape[2]), receptive_reach(vae), first):
        window = latents[:, :, piece.window_start : piece.window_end]
        decoded = cast(torch.Tensor, model.decode(window, None, return_dict=False)[0])
        first_frame, end = frame_span(piece, temporal)
        offset = temporal * piece.window_start  # the window's first frame in the video
        yield decoded[:, :, first_frame - offset : end - offset]


class ChunkedVideoDecode:
    """The video VAE as a chunked decoder (`components.step.SupportsChunkedVAEDecode`)."""

    chunk_value_range: tuple[float, float] = VALUE_RANGE

    def __init__(self, vae: nn.Module) -> None:
        self.vae = vae

    def decode_chunks(self, latents: torch.Tensor, /) -> Iterator[torch.Tensor]:
        return decode_chunks(self.vae, latents)
