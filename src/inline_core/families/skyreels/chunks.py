"""How a SkyReels-V2 diffusion-forcing render splits into chunks (torch-free).

diffusers' `SkyReelsV2DiffusionForcingPipeline` renders a video longer than `base_num_frames`
(with `overlap_history` set) as several chunks of at most `base_num_frames` frames, each one's
first latent frames the last `overlap_history` ones of the video so far (cut to a whole number of
causal blocks); a shorter video is one chunk. The plan is a function of the request's sizes only,
so it is known before the first step: how many chunks, each one's latent frames, its prefix, and
which of its frames the video keeps. With a first frame (image to video) the first chunk starts
from it: one latent frame of prefix, kept in the video (`first_prefix`).
"""

from __future__ import annotations

from dataclasses import dataclass

TEMPORAL_FACTOR = 4  # the Wan VAE: 4 frames per latent frame, after the first


def latent_frames(frames: int) -> int:
    return (frames - 1) // TEMPORAL_FACTOR + 1


def extended_prefix(overlap: int, causal_block_size: int) -> int:
    """The latent frames the first chunk takes from a video it extends: its last `overlap`
    frames', cut to whole causal blocks (as every later chunk's prefix is)."""
    count = latent_frames(overlap)
    return count - count % causal_block_size


@dataclass(frozen=True)
class Chunk:
    index: int
    frames: int  # latent frames rendered (its window, prefix included)
    prefix: int  # latent frames taken from the video so far or the image (clean, never stepped)
    kept_from: int  # its first latent frame the video keeps (0, or the overlap)
    first: int  # where its kept frames start in the video's latent frames

    @property
    def kept(self) -> int:
        return self.frames - self.kept_from


def plan(
    frames: int,
    base_frames: int | None,
    overlap: int | None,
    causal_block_size: int,
    first_prefix: int = 0,
) -> tuple[Chunk, ...]:
    """The chunks of a render of `frames` video frames, as diffusers renders them; the first
    starts from `first_prefix` given latent frames (1: the first frame of image to video)."""
    total = latent_frames(frames)
    if overlap is None or base_frames is None or frames <= base_frames:
        return (Chunk(0, total, first_prefix, 0, 0),)
    overlap_latent = latent_frames(overlap)
    base = latent_frames(base_frames)
    stride = base - overlap_latent
    count = 1 + (total - base - 1) // stride + 1
    chunks = [Chunk(0, base, first_prefix, 0, 0)]
    prefix = extended_prefix(overlap, causal_block_size)
    done = base
    for index in range(1, count):
        finished = index * stride + overlap_latent
        window = min(total - finished + overlap_latent, base)
        chunks.append(Chunk(index, window, prefix, overlap_latent, done))
        done += window - overlap_latent
    return tuple(chunks)


def refusal(
    frames: int, base_frames: int | None, overlap: int | None, causal_block_size: int
) -> str | None:
    """Why a chunk plan cannot render (None: it can)."""
    if (overlap is None) != (base_frames is None):
        return "'base_frames' and 'overlap' go together: set both for a long video, or neither"
    for name, value in (("base_frames", base_frames), ("overlap", overlap)):
        if value is not None and (value < 1 or (value - 1) % TEMPORAL_FACTOR):
            return f"param '{name}' must be 4k+1 (1, 5, 9, ..., 97), got {value}"
    if base_frames is not None and overlap is not None and frames > base_frames:
        if latent_frames(overlap) >= latent_frames(base_frames):
            return (
                f"param 'overlap' ({overlap}) must be shorter than 'base_frames' ({base_frames}): "
                "each chunk adds the frames past its overlap"
            )
    for chunk in plan(frames, base_frames, overlap, causal_block_size):
        if chunk.frames % causal_block_size:
            return (
                f"param 'causal_block_size' ({causal_block_size}) must divide every chunk's latent "
                f"frames: chunk {chunk.index} has {chunk.frames} (frames {frames}, base_frames "
                f"{base_frames}, overlap {overlap})"
            )
    return None
