"""Masks as the primitives apply them (torch): a mask node's `L` image (white repaints) resized,
rounded and grown the way ComfyUI's inpaint nodes do, so an imported workflow keeps their
arithmetic.

- A latent's noise mask (`sample`): resized to the latent bilinearly, soft values kept
  (`noise_mask.NoiseMask` applies it at every step); InpaintModelConditioning's is first resized
  to the encoded image and cropped with it (`cropped_with`).
- `vae/encode-inpaint` (VAEEncodeForInpaint): the mask resized to the image bilinearly and
  cropped with it; the pixels under its rounded part encoded as mid-gray; the noise mask is that
  rounded mask grown by a `grow` x `grow` box (`ceil((grow - 1) / 2)` pixels down and right,
  the rest up and left, as its padded convolution spreads it).
- A node's own inpaint mask (diffusers' inpaint pipelines): resized to the output and binarised,
  then taken to latent size by nearest neighbour (`mask_pixels`, `latent_size`).
- A control's inpaint inputs (ZImageFunControlnet's): the repaint mask resized to the latent by
  nearest neighbour, soft values kept; the image to inpaint (mid-gray without one) with the
  rounded kept part kept and the rest mid-gray; a missing control image is mid-gray too. A
  control model that takes them gets them with neither a mask nor an image to inpaint wired:
  the mid-gray image, nothing kept (ComfyUI's, where diffusers pads zeros).
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 (torch's own spelling)
from PIL import Image

from inline_core.components.interfaces import Latents
from inline_core.diffusion.libs import diffusers
from inline_core.errors import InvalidRequest


def mask_tensor(mask: Image.Image) -> torch.Tensor:
    """`(1, 1, H, W)` float32 in [0, 1]: 255 is 1."""
    gray = mask.convert("L")
    raw = torch.frombuffer(bytearray(gray.tobytes()), dtype=torch.uint8)
    return (raw.to(torch.float32) / 255).reshape(1, 1, gray.height, gray.width)


def resized(mask: torch.Tensor, size: tuple[int, int], mode: str) -> torch.Tensor:
    """`mask` at `size` (height, width), by `mode` ("bilinear" or "nearest")."""
    if tuple(mask.shape[-2:]) == size:
        return mask
    return F.interpolate(mask, size=size, mode=mode)


def crop_box(width: int, height: int, multiple: int) -> tuple[int, int, int, int]:
    """(left, top, width, height): the centred box of whole `multiple`s inside the image."""
    inner_width, inner_height = width // multiple * multiple, height // multiple * multiple
    return (width - inner_width) // 2, (height - inner_height) // 2, inner_width, inner_height


def cropped_with(
    mask: torch.Tensor, image: tuple[int, int], cropped: tuple[int, int]
) -> torch.Tensor:
    """A mask over an image of size `image` (width, height), resized to it bilinearly and
    centre-cropped to `cropped` as the image was (InpaintModelConditioning's arithmetic)."""
    (width, height), (inner_width, inner_height) = image, cropped
    at_image = resized(mask, (height, width), "bilinear")
    left, top = (width - inner_width) // 2, (height - inner_height) // 2
    return at_image[..., top : top + inner_height, left : left + inner_width]


def grown(mask: torch.Tensor, by: int) -> torch.Tensor:
    """The rounded mask grown by a `by` x `by` box (0: rounded only)."""
    rounded = mask.round()
    if by == 0:
        return rounded
    height, width = mask.shape[-2:]
    kernel = torch.ones((1, 1, by, by), dtype=mask.dtype)
    spread = F.conv2d(rounded, kernel, padding=math.ceil((by - 1) / 2))
    return spread.clamp(0, 1)[..., :height, :width].round()


def mask_pixels(mask: Image.Image, width: int, height: int, multiple: int) -> torch.Tensor:
    """`(1, 1, height, width)`, 0 or 1: the mask resized and binarised as diffusers reads it."""
    processor: Any = diffusers().image_processor.VaeImageProcessor(
        vae_scale_factor=multiple, do_normalize=False, do_binarize=True, do_convert_grayscale=True
    )
    return cast(torch.Tensor, processor.preprocess(mask, height=height, width=width))


def latent_size(pixels: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A pixel mask at the latents' size, by nearest neighbour (diffusers' inpaint pipelines)."""
    return F.interpolate(pixels, size=tuple(shape[-2:]), mode="nearest")


def rgb_at(image: Image.Image, width: int, height: int) -> Image.Image:
    """An image in RGB at the output size (resized as diffusers' image processor resizes)."""
    image = image.convert("RGB")
    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.LANCZOS)
    return image


def mask_image(mask: torch.Tensor) -> Image.Image:
    """A `(1, 1, H, W)` mask in [0, 1] as an `L` image."""
    array = (mask[0, 0] * 255).round().clamp(0, 255).to(torch.uint8).numpy()
    return Image.fromarray(np.ascontiguousarray(array), "L")


def encode_for_inpaint(
    vae: Any, image: Image.Image, mask: Image.Image, grow: int
) -> tuple[tuple[int, int], Latents, Image.Image]:
    """VAEEncodeForInpaint on a loaded VAE: (the cropped image's size, its latents with the
    masked part mid-gray, the grown noise mask as an `L` image at that size)."""
    rgb = image.convert("RGB")
    multiple = int(vae.pixel_multiple)
    left, top, width, height = crop_box(rgb.width, rgb.height, multiple)
    if width == 0 or height == 0:
        raise InvalidRequest(
            f"the image is {rgb.width}x{rgb.height}; it must be at least {multiple}x{multiple} "
            "pixels"
        )
    at_image = resized(mask_tensor(mask), (rgb.height, rgb.width), "bilinear")
    cropped_mask = at_image[..., top : top + height, left : left + width]
    cropped = rgb.crop((left, top, left + width, top + height))
    pixels = cast(torch.Tensor, vae.processor.preprocess(cropped))
    keep = (1.0 - cropped_mask.round()).to(pixels.device, pixels.dtype)
    latents = cast(Latents, vae.encode_pixels(pixels * keep, None))
    return (width, height), latents, mask_image(grown(cropped_mask, grow))


def control_inpaint(
    vae: Any,
    control: Image.Image | None,
    inpaint: Image.Image | None,
    mask: Image.Image | None,
    width: int,
    height: int,
    *,
    inpaints: bool = False,
) -> dict[str, Any]:
    """A control's request fields at the output size: `control_latents` (the control image, or
    mid-gray), and with a mask or an image to inpaint, or for a control model that takes them
    (`inpaints`, as ComfyUI feeds one without them: a mid-gray image, nothing kept),
    `control_inpaint` (that image's latents, its masked part mid-gray) and `control_mask` (the
    repaint mask at latent size, or None)."""
    gray = torch.zeros((1, 3, height, width))

    def pixels(image: Image.Image | None) -> torch.Tensor:
        if image is None:
            return gray
        rgb = image.convert("RGB")
        if rgb.size != (width, height):
            rgb = rgb.resize((width, height), Image.Resampling.LANCZOS)
        return cast(torch.Tensor, vae.processor.preprocess(rgb))

    latents = cast(Latents, vae.encode_pixels(pixels(control), None))
    if inpaint is None and mask is None and not inpaints:
        return {"control_latents": latents}
    source = pixels(inpaint)
    repaint: torch.Tensor | None = None
    if mask is not None:
        tensor = mask_tensor(mask)
        keep = (1.0 - resized(tensor, (height, width), "bilinear")).round()
        source = source * keep.to(source.dtype)
        shape = cast(torch.Tensor, latents.value).shape
        repaint = resized(tensor, (int(shape[-2]), int(shape[-1])), "nearest")
    return {
        "control_latents": latents,
        "control_inpaint": vae.encode_pixels(source, None),
        "control_mask": repaint,
    }
