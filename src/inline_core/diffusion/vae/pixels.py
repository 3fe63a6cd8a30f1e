"""A VAE's decoded video as the frames a take holds (imports torch)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch

from inline_core.runtime.video import Frames


def to_pixels(video: torch.Tensor, value_range: tuple[float, float]) -> Frames:
    """(1, 3, F, H, W) floats in `value_range` -> (F, H, W, 3) uint8, rounded as diffusers'
    video processor rounds them."""
    low, high = value_range
    scale = 1.0 / (high - low)
    unit = (video[0].float() * scale - low * scale).clamp(0, 1)
    frames = unit.permute(1, 2, 3, 0).cpu().numpy()
    return (frames * 255).round().astype(np.uint8)


def gather_chunks(
    chunks: Iterable[torch.Tensor],
    total: int,
    value_range: tuple[float, float],
    on_chunk: Callable[[int, Frames, int], None] | None,
) -> Frames:
    """A video decoded chunk by chunk, (1, 3, frames, H, W) floats each, into one array of its
    `total` frames; each chunk's are handed to `on_chunk` (first frame, frames, total) as a view
    of it as it is decoded: the frames are held once, never joined."""
    video: Frames | None = None
    done = 0
    for chunk in chunks:
        pixels = to_pixels(chunk, value_range)
        if video is None:
            video = np.empty((total, *pixels.shape[1:]), dtype=np.uint8)
        count = pixels.shape[0]
        video[done : done + count] = pixels
        if on_chunk is not None:
            on_chunk(done, video[done : done + count], total)
        done += count
    if video is None or done != total:
        raise RuntimeError(f"the VAE decoded {done} frames of {total}")
    return video
