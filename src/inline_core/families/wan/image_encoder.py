"""Wan 2.1 image-to-video's image conditioning: the CLIP vision encoder's penultimate hidden
states for the first frame, as `WanImageToVideoPipeline.encode_image` computes them (torch).

The image goes through CLIP's image processor from the image as given (resized and center
cropped to the encoder's 224 px), not from the render-size frame the VAE encodes.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from inline_core.diffusion.libs import module
from inline_core.diffusion.placement import OffloadSwap, PlacementLike, torch_dtype
from inline_core.families.wan.clip_vision import PROCESSOR_CONFIG
from inline_core.models.source import Source


def load_processor(source: Source | None) -> Any:
    """A folder's CLIP image processor, or CLIP's own settings (a single file brings none)."""
    processor_class = module("transformers").CLIPImageProcessor
    if source is None:
        return processor_class(**PROCESSOR_CONFIG)
    return processor_class.from_pretrained(
        str(source.path), subfolder=source.subfolder or "", local_files_only=True
    )


def image_embeds(
    encoder: nn.Module,
    processor: Any,
    image: Any,
    placement: PlacementLike,
    swap: OffloadSwap,
) -> torch.Tensor:
    """(1, tokens, width): the encoder's penultimate hidden states for `image` (a PIL image)."""
    pixels = cast(torch.Tensor, processor(images=image, return_tensors="pt")["pixel_values"])
    with swap.use(encoder, placement), torch.inference_mode():
        out: Any = encoder(
            pixel_values=pixels.to(placement.device, torch_dtype(placement.dtype)),
            output_hidden_states=True,
        )
    return cast(torch.Tensor, out.hidden_states[-2])
