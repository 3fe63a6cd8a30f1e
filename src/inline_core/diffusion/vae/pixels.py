"""A VAE's decoded video as the frames a take holds (imports torch)."""

from __future__ import annotations

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
