"""Torch-free mask nodes (Pillow, numpy): where a mask comes from and what is done to it.

A mask is a grayscale (`L`) image: 255 is 1, the part a render repaints, 0 the part it keeps
(ComfyUI's MASK values, at 8 bits a pixel). An image wired into a mask input is read by its
luminance. Masks feed renders (`latent/noise-mask`, `vae/encode-inpaint`,
`load/controlnet`, the Z-Image node's `mask`); they are inputs, not outputs, so these nodes write
no takes.

- `input/mask`: one channel of an uploaded image or a take (`alpha`, `red`, `green`, `blue`),
  optionally inverted. A file without that channel reads as its RGBA conversion does: no alpha
  is alpha 255 everywhere. (ComfyUI's LoadImage MASK is the alpha inverted: transparent repaints.)
- `mask/from-image`: one colour channel of an image; `mask/to-image`: the mask as a gray image.
- `mask/invert`, `mask/threshold` (1 above the value, else 0), `mask/grow` (`expand` steps of a
  3x3 dilation, or erosion when negative; `tapered_corners` uses the cross instead of the square,
  as ComfyUI's GrowMask does).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.registry import Registry
from inline_core.graph.runner import MediaResolver, NodeCall, NodeResult, NodeRunner
from inline_core.graph.schema import PortKind
from inline_core.graph.sources import MediaSource, open_image

CHANNELS = {"alpha": "A", "red": "R", "green": "G", "blue": "B"}
MAX_GROW = 1024  # steps of one pixel each way


def mask_value(value: object, port: str, node_id: str | None) -> Image.Image:
    """The mask on input `port` as an `L` image (an image wired in is read by its luminance)."""
    if not isinstance(value, Image.Image):
        got = "nothing" if value is None else type(value).__name__
        raise InvalidRequest(f"input {port!r} needs a mask, got {got}", node_id=node_id)
    return value if value.mode == "L" else value.convert("L")


def read_channel(image: Image.Image, channel: str) -> Image.Image:
    """One channel of an image as a mask, read as ComfyUI's LoadImageMask reads it: a 32-bit
    integer image is scaled down first, anything but RGBA is converted to RGBA."""
    if image.mode == "I":
        image = image.point(lambda v: v * (1 / 255))
    if image.getbands() != ("R", "G", "B", "A"):
        image = image.convert("RGBA")
    return image.getchannel(CHANNELS[channel])


def _channel_param(options: tuple[str, ...], default: str) -> ParamSpec:
    return ParamSpec("channel", ParamWidget.SELECT, default, options=options)


MASK_PORT = PortSpec("mask", PortKind.MASK)


def _mask_node(
    type_: str,
    title: str,
    params: tuple[ParamSpec, ...],
    description: str,
    *,
    inputs: tuple[PortSpec, ...] = (MASK_PORT,),
    output: PortSpec = MASK_PORT,
) -> NodeDescriptor:
    return NodeDescriptor(
        type=type_,
        title=title,
        category="mask",
        icon="square-dashed",
        inputs=inputs,
        outputs=(output,),
        params=params,
        description=description,
    )


INPUT_MASK = NodeDescriptor(
    type="input/mask",
    title="Mask",
    category="input",
    icon="square-dashed",
    hidden=True,
    params=(
        ParamSpec("asset", ParamWidget.MEDIA, required=True, label="Image"),
        _channel_param(tuple(CHANNELS), "alpha"),
        ParamSpec("invert", ParamWidget.BOOLEAN, False),
    ),
    outputs=(MASK_PORT,),
    description="One channel of an uploaded asset or an earlier take, as a mask (white "
    "repaints); invert turns it over (an alpha inverted: transparent repaints).",
)

MASK_FROM_IMAGE = _mask_node(
    "mask/from-image",
    "Mask from image",
    (_channel_param(("red", "green", "blue"), "red"),),
    "One colour channel of an image, as a mask.",
    inputs=(PortSpec("image", PortKind.IMAGE),),
)
MASK_TO_IMAGE = _mask_node(
    "mask/to-image",
    "Mask to image",
    (),
    "The mask as a gray image.",
    output=PortSpec("image", PortKind.IMAGE),
)
MASK_INVERT = _mask_node("mask/invert", "Invert mask", (), "Repaint what was kept, and back.")
MASK_THRESHOLD = _mask_node(
    "mask/threshold",
    "Threshold mask",
    (ParamSpec("value", ParamWidget.NUMBER, 0.5, minimum=0.0, maximum=1.0, step=0.01),),
    "1 where the mask is above the value, else 0.",
)
MASK_GROW = _mask_node(
    "mask/grow",
    "Grow mask",
    (
        ParamSpec(
            "expand",
            ParamWidget.NUMBER,
            0,
            minimum=-MAX_GROW,
            maximum=MAX_GROW,
            step=1,
            integer=True,
        ),
        ParamSpec("tapered_corners", ParamWidget.BOOLEAN, True),
    ),
    "Grow the mask by expand pixels (shrink it when negative), one 3x3 step at a time: the "
    "square, or the cross with tapered corners.",
)


class MaskSource(MediaSource):
    def run(self, call: NodeCall) -> NodeResult:
        with open_image(*self.path(call.params)) as image:
            mask = read_channel(image, str(call.params["channel"]))
        if call.params["invert"]:
            mask = ImageOps.invert(mask)
        return NodeResult(outputs={"mask": mask})


class MaskOp(NodeRunner):
    """One mask (or image) in, one value out; no take."""

    source = "mask"
    output = "mask"

    @abstractmethod
    def apply(self, value: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        """The new mask (or image). Must not modify `value` (it may be a cached output)."""

    def run(self, call: NodeCall) -> NodeResult:
        value = call.inputs.get(self.source)
        if self.source == "mask":
            value = mask_value(value, "mask", call.node_id)
        elif not isinstance(value, Image.Image):
            raise InvalidRequest("input 'image' needs an image", node_id=call.node_id)
        return NodeResult(outputs={self.output: self.apply(value, call.params)})


class FromImage(MaskOp):
    source = "image"

    def apply(self, value: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        return value.convert("RGB").getchannel(CHANNELS[str(params["channel"])])


class ToImage(MaskOp):
    output = "image"

    def apply(self, value: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        return value.convert("RGB")


class Invert(MaskOp):
    def apply(self, value: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        return ImageOps.invert(value)


class Threshold(MaskOp):
    def apply(self, value: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        # Compared as ComfyUI compares its float mask: value / 255 in float32.
        level = np.float32(float(params["value"]))
        above = np.asarray(value, dtype=np.float32) / np.float32(255) > level
        return Image.fromarray(np.where(above, 255, 0).astype(np.uint8), "L")


class Grow(MaskOp):
    def apply(self, value: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        expand, tapered = int(params["expand"]), bool(params["tapered_corners"])
        mask = np.asarray(value, dtype=np.uint8)
        for _ in range(abs(expand)):
            # Erosion is the dilation of the inverse: pixels past the edge never count.
            mask = dilate(mask, tapered) if expand > 0 else 255 - dilate(255 - mask, tapered)
        return Image.fromarray(np.ascontiguousarray(mask), "L")


def dilate(mask: np.ndarray, tapered: bool) -> np.ndarray:
    """One step of grayscale dilation over the 3x3 square, or the cross (`tapered`)."""
    padded = np.pad(mask, 1)  # zeros: the maximum ignores pixels past the edge
    height, width = mask.shape
    centre = padded[1 : height + 1, 1 : width + 1]
    if tapered:
        return np.maximum.reduce(
            [
                centre,
                padded[0:height, 1 : width + 1],
                padded[2 : height + 2, 1 : width + 1],
                padded[1 : height + 1, 0:width],
                padded[1 : height + 1, 2 : width + 2],
            ]
        )
    rows = np.maximum.reduce([padded[:, 0:width], padded[:, 1 : width + 1], padded[:, 2:]])
    return np.maximum.reduce([rows[0:height], rows[1 : height + 1], rows[2:]])


MASK_NODES: tuple[tuple[NodeDescriptor, type[MaskOp]], ...] = (
    (MASK_FROM_IMAGE, FromImage),
    (MASK_TO_IMAGE, ToImage),
    (MASK_INVERT, Invert),
    (MASK_THRESHOLD, Threshold),
    (MASK_GROW, Grow),
)


def register_mask_nodes(registry: Registry, media: MediaResolver) -> None:
    registry.register(INPUT_MASK, MaskSource(media))
    for descriptor, runner in MASK_NODES:
        registry.register(descriptor, runner())
