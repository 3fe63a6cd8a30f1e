"""The `alibaba/z-image-turbo` node: what a client draws and the validator checks (torch-free)."""

from __future__ import annotations

from inline_core.contract.common_params import (
    LORAS,
    MODEL,
    NEGATIVE_PROMPT,
    SEED,
    TEXT_ENCODER,
    VAE,
)
from inline_core.families.nodes.sampling import sampler_param, schedule_param
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.schema import PortKind

NODE_TYPE = "alibaba/z-image-turbo"

ZIMAGE_DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="Z-Image Turbo",
    category="image/generate",
    icon="sparkles",
    source="core",
    output_kind="image",
    inputs=(
        PortSpec("prompt", PortKind.TEXT),
        PortSpec("image", PortKind.IMAGE, optional=True, label="Image (img2img)"),
        # A control image as the user made it (canny edges, depth, pose), for `controlnet`.
        PortSpec("control_image", PortKind.IMAGE, optional=True, label="Control image"),
        PortSpec("mask", PortKind.MASK, optional=True, label="Mask (inpaint: white repaints)"),
        LORAS,
    ),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    params=(
        NEGATIVE_PROMPT,
        ParamSpec(
            "width",
            ParamWidget.NUMBER,
            default=1024,
            minimum=64,
            maximum=4096,
            step=16,
            integer=True,
        ),
        ParamSpec(
            "height",
            ParamWidget.NUMBER,
            default=1024,
            minimum=64,
            maximum=4096,
            step=16,
            integer=True,
        ),
        ParamSpec("steps", ParamWidget.NUMBER, default=8, minimum=1, maximum=100, integer=True),
        ParamSpec("guidance", ParamWidget.NUMBER, default=0.0, minimum=0.0, maximum=20.0, step=0.1),
        sampler_param(),  # euler on the simple schedule: the Turbo scheduler's own steps
        schedule_param(),
        ParamSpec(
            "strength",
            ParamWidget.NUMBER,
            default=0.6,
            minimum=0.0,
            maximum=1.0,
            step=0.01,
            label="Strength (img2img)",
        ),
        ParamSpec(
            "controlnet",
            ParamWidget.SELECT,
            default=None,
            options_from="controlnet",
            empty_picks_none=True,
            label="Control model (controlnet/)",
        ),
        ParamSpec(
            "control_strength",
            ParamWidget.NUMBER,
            default=0.75,
            minimum=0.0,
            maximum=2.0,
            step=0.05,
            label="Control strength",
        ),
        SEED,
        MODEL,
        VAE,
        TEXT_ENCODER,
    ),
    description=(
        "Text to image, or image to image when an image is wired in (strength sets how much "
        "changes; the image is resized to width x height). Guidance above 0 turns on "
        "classifier-free guidance with the negative prompt (a CFG++ sampler needs it). LoRAs "
        "wired in (input/lora) apply to this render alone. A control model (the Z-Image Fun "
        "ControlNet Union) follows the control image at the control strength. A mask repaints "
        "the image's white part; with a 2.x control model the mask and image feed the control "
        "instead."
    ),
)

EXTRA_HINT = "install the diffusers extra: pip install 'inline-core[diffusers]'"
