"""The `alibaba/qwen-image` node: what a client draws and the validator checks (torch-free)."""

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

NODE_TYPE = "alibaba/qwen-image"
IMAGE_INPUTS = ("image", "image2", "image3")  # an edit model's reference images, in order
EXTRA_HINT = "install the diffusers extra: pip install 'inline-core[diffusers]'"


def _size(name: str) -> ParamSpec:
    return ParamSpec(
        name,
        ParamWidget.NUMBER,
        default=0,
        minimum=0,
        maximum=4096,
        step=16,
        integer=True,
        label=f"{name.capitalize()} (0: 1328, or an edit's reference area)",
    )


QWEN_IMAGE_DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="Qwen-Image",
    category="image/generate",
    icon="sparkles",
    source="core",
    output_kind="image",
    inputs=(
        PortSpec("prompt", PortKind.TEXT),
        PortSpec("image", PortKind.IMAGE, optional=True, label="Image (edit models)"),
        PortSpec("image2", PortKind.IMAGE, optional=True, label="Image 2 (edit models)"),
        PortSpec("image3", PortKind.IMAGE, optional=True, label="Image 3 (edit models)"),
        LORAS,
    ),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    params=(
        NEGATIVE_PROMPT,
        _size("width"),
        _size("height"),
        ParamSpec("steps", ParamWidget.NUMBER, default=50, minimum=1, maximum=200, integer=True),
        ParamSpec(
            "guidance",
            ParamWidget.NUMBER,
            default=4.0,
            minimum=1.0,
            maximum=20.0,
            step=0.1,
            label="Guidance (true CFG; 1: off)",
        ),
        ParamSpec(
            "shift",
            ParamWidget.NUMBER,
            default=0.0,
            minimum=0.0,
            maximum=20.0,
            step=0.05,
            label="Shift (0: the model's own)",
        ),
        # CFG++ too: its step hands on the negative's prediction (refused unguided at submit).
        sampler_param(),
        schedule_param(),
        SEED,
        MODEL,
        VAE,
        TEXT_ENCODER,
    ),
    description=(
        "Text to image with Qwen-Image (and its 2512 release), or an edit of one to three "
        "reference images with Qwen-Image-Edit 2509/2511 (wire them into image, image2, "
        "image3). Guidance above 1 turns on true classifier-free guidance with the negative "
        "prompt. LoRAs wired in (input/lora) apply to this render alone."
    ),
)
