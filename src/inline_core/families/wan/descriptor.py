"""The `alibaba/wan` node: what a client draws and the validator checks (torch-free)."""

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
from inline_core.families.wan.variants import T2V
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.schema import PortKind

NODE_TYPE = "alibaba/wan"


MODEL_DEFAULT = "empty: the model's own"
# The node's empty sampler and schedule: the model's own, diffusers' WanPipeline's (`schedule.py`).
MODEL_OWN = ""
STEPS_DEFAULT = 50
GUIDANCE_DEFAULT = 5.0
# Size, length and rate by default: Wan 2.1's 480p, the default download's, which every variant
# renders (multiples of 32, 4k+1 frames). The 5B and the A14B pair were trained larger (their
# own sizes are in the labels); a render at those sets them, as ComfyUI's templates do.
DEFAULTS = T2V.defaults()
TRAINED_AT = "Wan 2.2 5B: 1280x704, 121 frames at 24 fps; A14B: 1280x720"


def _size(name: str) -> ParamSpec:
    # Multiples of 16 here; the 5B's VAE needs 32 (checked at submit, `WanFamily.check_wired`).
    return ParamSpec(
        name,
        ParamWidget.NUMBER,
        DEFAULTS[name],
        minimum=16,
        maximum=2048,
        step=16,
        integer=True,
        label=f"{name.capitalize()} ({TRAINED_AT})",
    )


WAN_DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="Wan",
    category="video/generate",
    icon="film",
    source="core",
    output_kind="video",
    inputs=(
        PortSpec("prompt", PortKind.TEXT),
        PortSpec(
            "image", PortKind.IMAGE, optional=True, label="First frame (image-to-video models)"
        ),
        LORAS,
    ),
    outputs=(PortSpec("video", PortKind.VIDEO),),
    params=(
        NEGATIVE_PROMPT,
        _size("width"),
        _size("height"),
        # 4k+1, checked at submit (`WanFamily.check_wired` names the param).
        ParamSpec(
            "frames",
            ParamWidget.NUMBER,
            default=DEFAULTS["frames"],
            minimum=1,
            maximum=1001,
            integer=True,
            label="Frames, 4k+1 (Wan 2.2 5B: 121)",
        ),
        ParamSpec(
            "fps",
            ParamWidget.NUMBER,
            default=DEFAULTS["fps"],
            minimum=1,
            maximum=120,
            integer=True,
            label="FPS (Wan 2.2 5B: 24)",
        ),
        ParamSpec(
            "steps", ParamWidget.NUMBER, default=STEPS_DEFAULT, minimum=1, maximum=200, integer=True
        ),
        ParamSpec(
            "guidance",
            ParamWidget.NUMBER,
            default=GUIDANCE_DEFAULT,
            minimum=1.0,
            maximum=20.0,
            step=0.1,
        ),
        # diffusers' guidance_scale_2 (checked at submit: two-expert models only).
        ParamSpec(
            "guidance_2",
            ParamWidget.NUMBER,
            default=None,
            minimum=1.0,
            maximum=20.0,
            step=0.1,
            label="Low-noise expert's guidance (Wan 2.2 A14B; empty: guidance)",
        ),
        # The step the pair switches at, as ComfyUI's two KSamplerAdvanced stages split it
        # (checked at submit: 1..steps-1, two-expert models only).
        ParamSpec(
            "switch_step",
            ParamWidget.NUMBER,
            default=None,
            minimum=1,
            maximum=199,
            integer=True,
            label="First step on the low-noise expert (Wan 2.2 A14B; empty: the model's boundary)",
        ),
        sampler_param("the model's own UniPC, as its scheduler config sets it"),
        schedule_param("the model's own, diffusers' UniPC table"),
        ParamSpec(
            "shift",
            ParamWidget.NUMBER,
            default=None,
            minimum=0.0,
            maximum=20.0,
            step=0.1,
            label=f"Flow shift ({MODEL_DEFAULT})",
        ),
        SEED,
        MODEL,
        VAE,
        TEXT_ENCODER,
        ParamSpec("format", ParamWidget.SELECT, default="mp4", options=("mp4", "png")),
    ),
    description=(
        "Text to video with Wan 2.1 (1.3B or 14B), Wan 2.2 TI2V-5B or Wan 2.2 A14B (pick either "
        "expert's file: its sibling is found beside it; guidance_2 guides the low-noise one, "
        "switch_step is the first step on it, empty: the model's boundary ratio; an input/lora's "
        "expert picks the experts it adapts); "
        "image to video with the 5B "
        "(wire an image: it becomes the first frame, resized to width x height). Size, frames "
        "and fps default to Wan 2.1's 832x480, 81 frames at 16 fps, which every model renders; "
        "the 5B was trained at 1280x704, 121 at 24, the A14B pair at 1280x720. frames is "
        "4k+1. Guidance above 1 turns on classifier-free guidance with the negative prompt. "
        "sampler and schedule are ComfyUI's (CFG++ ones where guidance is above 1); empty, "
        "the model's own UniPC on its own table, as diffusers' WanPipeline. "
        "format mp4 is H.264 (yuv420p); png is a lossless animated PNG, for exact comparisons."
    ),
)

EXTRA_HINT = (
    "install the diffusers extra (torch, diffusers, transformers) for Wan: "
    "pip install 'inline-core[diffusers]'"
)
