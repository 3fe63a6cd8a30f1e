"""ComfyUI's SDXL inpaint chains read onto `stability/sdxl`'s image and mask inputs.

VAEEncodeForInpaint (pixels, mask, grow_mask_by) and SetLatentNoiseMask over a VAEEncode become
the node's `image` (the encode's pixels) and `mask` (the mask's source, LoadImage's alpha
included); the KSampler's denoise is the node's `strength`. What renders otherwise is listed
under `changesPicture`, never hidden:

- the node inpaints as `StableDiffusionXLInpaintPipeline` does: the mask binarised at one half
  and taken to the latents by nearest neighbour, the kept part put back after each step; ComfyUI
  resizes its noise mask bilinearly (soft values kept), and VAEEncodeForInpaint also encodes the
  masked pixels as mid-gray and grows the mask by `grow_mask_by`;
- the node renders at its width x height, the image resized to them (ComfyUI renders at the
  image's size): the import cannot see the image's size, so they are the node's defaults until
  set;
- a denoise below 1 is diffusers' strength (the share of the steps that run), where ComfyUI runs
  all its steps over the tail of a longer schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inline_core.graph.schema import PortKind
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.mapper import Mapper
from inline_core.importer.values import Port, describe
from inline_core.importer.workflow import ComfyNode

ENCODE_INPAINT, NOISE_MASK, ENCODE = "VAEEncodeForInpaint", "SetLatentNoiseMask", "VAEEncode"
INPAINT_LATENTS = (ENCODE_INPAINT, NOISE_MASK)
READING = (
    "stability/sdxl inpaints as StableDiffusionXLInpaintPipeline does (the mask binarised at "
    "one half, nearest to the latents, the kept part put back after each step)"
)


def inpaint_inputs(
    m: Mapper,
    latent: ComfyNode,
    sampler: ComfyNode,
    required: Callable[[ComfyNode, str], ComfyNode],
    params: dict[str, Any],
) -> tuple[ComfyNode, Port, Port]:
    """The inpaint latent's encode node (its VAE is the decoder's), and the node's image and
    mask ports; `params` gets the strength. `required(node, name)` reads the node on an input."""
    if latent.class_type == NOISE_MASK:
        encode = required(latent, "samples")
        if encode.class_type != ENCODE:
            raise UnsupportedNode(
                f"{describe(latent)}: its samples come from {describe(encode)}; only a "
                f"{ENCODE} of the image to inpaint imports onto stability/sdxl"
            )
        how = f"its mask is resized bilinearly and kept soft in ComfyUI; {READING}"
    else:
        encode = latent
        grow = m.whole(latent, "grow_mask_by", 6)
        how = (
            f"ComfyUI encodes the masked pixels as mid-gray and grows the mask by {grow}; "
            f"{READING}, the pixels encoded as they are"
        )
    image = m.input_value(encode, "pixels", PortKind.IMAGE)
    mask = m.input_value(latent, "mask", PortKind.MASK)
    if image is None or mask is None or image.port is None or mask.port is None:
        raise UnsupportedNode(f"{describe(latent)}: its image and mask must both be wired")
    denoise = m.number(sampler, "denoise", 1.0)
    params["strength"] = denoise
    size = (
        "the node renders at its width x height with the image resized to them, where ComfyUI "
        "renders at the image's size: set them to the image's"
    )
    m.substituted(latent, f"{how}; {size}")
    if denoise < 1.0:
        m.substituted(
            sampler,
            f"denoise {denoise:g} runs as strength {denoise:g}: the share of the steps that run "
            "(diffusers' count), where ComfyUI runs all its steps over a longer schedule's tail",
        )
    return encode, image.port, mask.port
