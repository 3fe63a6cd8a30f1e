"""Video to video: a SkyReels-V2 render that extends a given video, as diffusers'
`SkyReelsV2DiffusionForcingVideoToVideoPipeline` does it (torch).

The given frames are resized to the render's size as diffusers' video processor resizes them; the
last `overlap` of them are encoded (Wan VAE) and the first chunk starts from their latent frames
(cut to whole causal blocks: `chunks.extended_prefix`). The video out is the given frames, then
every frame rendered (which start again from the overlap's frames, as diffusers' do).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch
from PIL import Image


def video_pixels(frames: np.ndarray[Any, Any], width: int, height: int) -> torch.Tensor:
    """(1, 3, F, height, width) floats in (-1, 1) of uint8 frames (F, H, W, 3), as diffusers'
    video processor prepares a list of frames."""
    from diffusers.video_processor import VideoProcessor

    processor: Any = VideoProcessor(vae_scale_factor=8)
    images = [Image.fromarray(frame) for frame in frames]
    pixels = processor.preprocess_video(images, height=height, width=width)
    return cast(torch.Tensor, pixels).to(torch.float32)
