"""Torch-free image nodes (Pillow): resize, crop, flip and rotate, each writing one PNG take.

They make the whole run -> take path useful without a model installed, and are the simple
post-processing a client wants after a render.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

from PIL import Image, ImageOps

from inline_core.errors import InvalidRequest, RunFailed
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.graph.schema import PortKind

MAX_SIDE = 8192

RESAMPLE: dict[str, Image.Resampling] = {
    "lanczos": Image.Resampling.LANCZOS,
    "bicubic": Image.Resampling.BICUBIC,
    "bilinear": Image.Resampling.BILINEAR,
    "nearest": Image.Resampling.NEAREST,
}


def _side(name: str, default: int, minimum: int = 1) -> ParamSpec:
    return ParamSpec(
        name, ParamWidget.NUMBER, default, minimum=minimum, maximum=MAX_SIDE, step=1, integer=True
    )


def _image_node(
    type_: str, title: str, icon: str, params: tuple[ParamSpec, ...], description: str
) -> NodeDescriptor:
    return NodeDescriptor(
        type=type_,
        title=title,
        category="image",
        icon=icon,
        output_kind="image",
        inputs=(PortSpec("image", PortKind.IMAGE),),
        outputs=(PortSpec("image", PortKind.IMAGE),),
        params=params,
        description=description,
    )


IMAGE_RESIZE = _image_node(
    "image/resize",
    "Resize",
    "scaling",
    (
        _side("width", 1024),
        _side("height", 1024),
        ParamSpec("mode", ParamWidget.SELECT, "fit", options=("fit", "fill", "stretch")),
        ParamSpec("resample", ParamWidget.SELECT, "lanczos", options=tuple(RESAMPLE)),
    ),
    "Resize to a box: fit keeps the aspect ratio inside it, fill covers it and crops the "
    "overflow evenly, stretch ignores the aspect ratio.",
)

IMAGE_CROP = _image_node(
    "image/crop",
    "Crop",
    "crop",
    (_side("x", 0, 0), _side("y", 0, 0), _side("width", 512), _side("height", 512)),
    "Cut out a box whose top-left corner is (x, y); the box must lie inside the image.",
)

IMAGE_FLIP = _image_node(
    "image/flip",
    "Flip",
    "flip-horizontal",
    (ParamSpec("direction", ParamWidget.SELECT, "horizontal", options=("horizontal", "vertical")),),
    "Mirror the image left-right (horizontal) or top-bottom (vertical).",
)

IMAGE_ROTATE = _image_node(
    "image/rotate",
    "Rotate",
    "rotate-cw",
    (
        ParamSpec(
            "degrees", ParamWidget.SELECT, "90", options=("90", "180", "270"), label="Clockwise"
        ),
    ),
    "Rotate clockwise by a quarter, half or three-quarter turn (lossless).",
)


class ImageOpRunner(NodeRunner):
    """One image in, one image out, saved as a PNG take with the node's params."""

    @abstractmethod
    def transform(self, image: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        """The new image. Must not modify `image` (it may be a cached output)."""

    def run(self, call: NodeCall) -> NodeResult:
        image = call.inputs.get("image")
        if not isinstance(image, Image.Image):
            raise RunFailed(f"input 'image' is not an image (got {type(image).__name__})")
        report = call.ctx.reporter(call.node_id)
        report.phase("run")
        out = self.transform(image, call.params)
        call.ctx.cancel.raise_if_cancelled()
        report.phase("save")
        take = call.ctx.save_image(call.node_id, out, call.params)
        report.phase("save", 1.0)
        return NodeResult(outputs={"image": out}, takes=(take,))


class Resize(ImageOpRunner):
    def transform(self, image: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        size = (int(params["width"]), int(params["height"]))
        method = RESAMPLE[str(params["resample"])]
        match params["mode"]:
            case "fill":
                return ImageOps.fit(image, size, method=method, centering=(0.5, 0.5))
            case "stretch":
                return image.resize(size, method)
            case _:
                return ImageOps.contain(image, size, method=method)


class Crop(ImageOpRunner):
    def transform(self, image: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        x, y = int(params["x"]), int(params["y"])
        width, height = int(params["width"]), int(params["height"])
        if x + width > image.width or y + height > image.height:
            raise InvalidRequest(
                f"crop box {width}x{height} at ({x}, {y}) reaches outside the "
                f"{image.width}x{image.height} image"
            )
        return image.crop((x, y, x + width, y + height))


class Flip(ImageOpRunner):
    def transform(self, image: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        if params["direction"] == "vertical":
            return image.transpose(Image.Transpose.FLIP_TOP_BOTTOM)
        return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)


_CLOCKWISE = {
    "90": Image.Transpose.ROTATE_270,  # Pillow's transposes turn counter-clockwise
    "180": Image.Transpose.ROTATE_180,
    "270": Image.Transpose.ROTATE_90,
}


class Rotate(ImageOpRunner):
    def transform(self, image: Image.Image, params: Mapping[str, Any]) -> Image.Image:
        return image.transpose(_CLOCKWISE[str(params["degrees"])])


IMAGE_NODES: tuple[tuple[NodeDescriptor, type[ImageOpRunner]], ...] = (
    (IMAGE_RESIZE, Resize),
    (IMAGE_CROP, Crop),
    (IMAGE_FLIP, Flip),
    (IMAGE_ROTATE, Rotate),
)


def register_image_nodes(registry: Registry) -> None:
    for descriptor, runner in IMAGE_NODES:
        registry.register(descriptor, runner())
