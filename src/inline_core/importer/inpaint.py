"""ComfyUI's masks and inpaint nodes onto ours (the core's handlers for them).

A ComfyUI MASK (1 repaints) is one of our `mask` values (an `L` image, white repaints):

- LoadImage's MASK is its image's alpha inverted (transparent repaints): an `input/mask` of the
  same asset, `alpha`, inverted. For an image without alpha ComfyUI gives an empty 64x64 mask and
  ours is empty at the image's size; every use resizes it, so both keep the whole image.
- LoadImageMask: an `input/mask` of its channel, the alpha inverted as ComfyUI inverts it.
- ImageToMask (red, green or blue), MaskToImage, InvertMask, GrowMask and ThresholdMask: the
  mask nodes of the same names (`graph/mask_nodes.py`). ImageToMask's alpha is refused: images
  here are RGB, as LoadImage's IMAGE is in ComfyUI, where that alpha fails too.

The latent's noise mask, which `sample` applies at every step as ComfyUI's samplers do:

- SetLatentNoiseMask: `latent/noise-mask`.
- VAEEncodeForInpaint: `vae/encode-inpaint` (its masked pixels mid-gray, the mask grown by
  `grow_mask_by`).
- ImageCompositeMasked (a render pasted back onto its image through the mask) has no equivalent:
  its render goes on as it is, listed under `changesPicture`.
- InpaintModelConditioning: its latent is the pixels' `vae/encode` with, when `noise_mask` is on,
  a `latent/noise-mask` of the mask with `crop`: resized to the pixels and cropped with them as
  the encode crops them, as ComfyUI crops it (not stretched over the cropped latent). Its two
  conditionings pass through as they came: what it adds to them (the masked image and mask as
  extra input channels) only inpaint models with such channels read, and none served here has
  them (ComfyUI's models without such channels ignore them too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.graph.mask_nodes import CHANNELS
from inline_core.graph.schema import PortKind
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.mapper import Handler, Mapper
from inline_core.importer.values import Port, Value, describe
from inline_core.importer.workflow import ComfyNode

RGB = ("red", "green", "blue")


def image_alpha(m: Mapper, node: ComfyNode) -> Value:
    """LoadImage's MASK output: its image's alpha, inverted."""
    params = {"asset": m.image_asset(node), "channel": "alpha", "invert": True}
    port = m.add(f"c{node.id}_mask", "input/mask", params, {}, describe(node))
    return Value(PortKind.MASK, port, node.id)


def load_mask(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    channel = _channel(m, node, tuple(CHANNELS), "alpha")
    params = {"asset": m.image_asset(node), "channel": channel, "invert": channel == "alpha"}
    port = m.add(f"c{node.id}", "input/mask", params, {}, describe(node))
    return Value(PortKind.MASK, port, node.id)


def _channel(m: Mapper, node: ComfyNode, allowed: tuple[str, ...], default: str) -> str:
    channel = m.text(node, "channel", default)
    if channel not in allowed:
        m.warn(
            f"{describe(node)}: channel {channel!r} is not one of {', '.join(allowed)}; "
            f"using {default}"
        )
        return default
    return channel


def image_to_mask(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    where = describe(node)
    channel = m.text(node, "channel", "red")
    if channel == "alpha":
        raise UnsupportedNode(
            f"{where} takes an image's alpha channel; images here are RGB (as LoadImage's "
            "IMAGE is in ComfyUI): take the mask from LoadImage's MASK output instead"
        )
    channel = _channel(m, node, RGB, "red")
    return _op(m, node, "mask/from-image", {"channel": channel}, ("image", PortKind.IMAGE))


def mask_to_image(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    return _op(m, node, "mask/to-image", {}, ("mask", PortKind.MASK), PortKind.IMAGE)


def invert_mask(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    return _op(m, node, "mask/invert", {}, ("mask", PortKind.MASK))


def grow_mask(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    tapered = m.literal(node, "tapered_corners")
    params = {
        "expand": m.whole(node, "expand", 0),
        "tapered_corners": tapered if isinstance(tapered, bool) else True,
    }
    return _op(m, node, "mask/grow", params, ("mask", PortKind.MASK))


def threshold_mask(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    params = {"value": m.number(node, "value", 0.5)}
    return _op(m, node, "mask/threshold", params, ("mask", PortKind.MASK))


def _op(
    m: Mapper,
    node: ComfyNode,
    node_type: str,
    params: Mapping[str, Any],
    source: tuple[str, PortKind],
    kind: PortKind = PortKind.MASK,
) -> Value | None:
    """One of our mask nodes, fed by the ComfyUI node's input `source` (name, kind)."""
    name, source_kind = source
    value = m.input_value(node, name, source_kind)
    if value is None or value.port is None:
        return None
    port = m.add(f"c{node.id}", node_type, params, {name: value.port}, describe(node))
    return Value(kind, port, node.id)


def set_noise_mask(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    latent = m.input_value(node, "samples", PortKind.LATENT)
    mask = m.input_value(node, "mask", PortKind.MASK)
    if latent is None or latent.port is None:
        return None
    return _noise_mask(m, node, f"c{node.id}", latent.port, mask)


def _noise_mask(
    m: Mapper, node: ComfyNode, node_id: str, latent: Port, mask: Value | None, crop: bool = False
) -> Value:
    if mask is None or mask.port is None:
        m.warn(f"{describe(node)}: its mask could not be mapped; the whole latent is sampled")
        return Value(PortKind.LATENT, latent, node.id)
    inputs = {"latent": latent, "mask": mask.port}
    params = {"crop": True} if crop else {}
    port = m.add(node_id, "latent/noise-mask", params, inputs, describe(node))
    return Value(PortKind.LATENT, port, node.id)


def encode_for_inpaint(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    vae = m.input_value(node, "vae", PortKind.VAE)
    image = m.input_value(node, "pixels", PortKind.IMAGE)
    mask = m.input_value(node, "mask", PortKind.MASK)
    inputs = {name: v.port if v else None for name, v in (("vae", vae), ("image", image))}
    inputs["mask"] = mask.port if mask else None
    params = {"grow": m.whole(node, "grow_mask_by", 6)}
    port = m.add(f"c{node.id}", "vae/encode-inpaint", params, inputs, describe(node))
    return Value(PortKind.LATENT, port, node.id)


def inpaint_conditioning(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    """InpaintModelConditioning: its conditionings as they came (slots 0 and 1), its latent the
    pixels encoded, with the mask as its noise mask when `noise_mask` is on (slot 2)."""
    if slot in (0, 1):
        m.warn(
            f"{describe(node)}: its masked image and mask on the conditioning are for inpaint "
            "models with extra input channels; the models here have none (ComfyUI's models "
            "without them ignore them too), so the conditioning passes through unchanged"
        )
        name = "positive" if slot == 0 else "negative"
        return m.input_value(node, name, PortKind.CONDITIONING)
    vae = m.input_value(node, "vae", PortKind.VAE)
    image = m.input_value(node, "pixels", PortKind.IMAGE)
    inputs = {name: v.port if v else None for name, v in (("vae", vae), ("image", image))}
    encoded = m.add(f"c{node.id}_encode", "vae/encode", {}, inputs, describe(node))
    noise_mask = m.literal(node, "noise_mask")
    if noise_mask is False:
        return Value(PortKind.LATENT, encoded, node.id)
    mask = m.input_value(node, "mask", PortKind.MASK)
    return _noise_mask(m, node, f"c{node.id}", encoded, mask, crop=True)


def composite_masked(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    """ImageCompositeMasked, which pastes a render back onto its image through the mask: no
    compositing node here, so its render (`source`) goes on as it is, listed as a change."""
    reason = (
        "the render is not pasted back onto its destination image through the mask: outside "
        "the mask the picture is the render's (the image through the VAE), not the image's "
        "own pixels"
    )
    return m.drop_for(node, "source", PortKind.IMAGE, reason)


HANDLERS: dict[str, Handler] = {
    "LoadImageMask": load_mask,
    "ImageToMask": image_to_mask,
    "MaskToImage": mask_to_image,
    "InvertMask": invert_mask,
    "GrowMask": grow_mask,
    "ThresholdMask": threshold_mask,
    "SetLatentNoiseMask": set_noise_mask,
    "VAEEncodeForInpaint": encode_for_inpaint,
    "InpaintModelConditioning": inpaint_conditioning,
    "ImageCompositeMasked": composite_masked,
}
