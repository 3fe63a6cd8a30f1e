"""The `alibaba/wan` node: what a client draws and the validator checks (torch-free)."""

from __future__ import annotations

from inline_core.families.common_params import MODEL, SEED, TEXT_ENCODER, VAE
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.schema import PortKind

NODE_TYPE = "alibaba/wan"
MAX_PROMPT_CHARS = 20_000


MODEL_DEFAULT = "empty: the model's own"
STEPS_DEFAULT = 50


def _size(name: str) -> ParamSpec:
    # Multiples of 16 here; the 5B's VAE needs 32 (checked at submit, `WanFamily.check_wired`).
    return ParamSpec(
        name,
        ParamWidget.NUMBER,
        None,
        minimum=16,
        maximum=2048,
        step=16,
        integer=True,
        label=f"{name.capitalize()} ({MODEL_DEFAULT}: 832x480 for Wan 2.1, 1280x704 for 2.2 5B)",
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
        # One edge per LoRA of the stack, from `input/lora` nodes, applied in edge order.
        PortSpec("loras", PortKind.LORA, optional=True, multiple=True, label="LoRAs"),
    ),
    outputs=(PortSpec("video", PortKind.VIDEO),),
    params=(
        ParamSpec("negative_prompt", ParamWidget.TEXTAREA, default="", max_length=MAX_PROMPT_CHARS),
        _size("width"),
        _size("height"),
        # 4k+1, checked at submit (`WanFamily.check_wired` names the param).
        ParamSpec(
            "frames",
            ParamWidget.NUMBER,
            default=None,
            minimum=1,
            maximum=1001,
            integer=True,
            label=f"Frames, 4k+1 ({MODEL_DEFAULT}: 81 for Wan 2.1, 121 for 2.2 5B)",
        ),
        ParamSpec(
            "fps",
            ParamWidget.NUMBER,
            default=None,
            minimum=1,
            maximum=120,
            integer=True,
            label=f"FPS ({MODEL_DEFAULT}: 16 for Wan 2.1, 24 for 2.2 5B)",
        ),
        ParamSpec(
            "steps", ParamWidget.NUMBER, default=STEPS_DEFAULT, minimum=1, maximum=200, integer=True
        ),
        ParamSpec("guidance", ParamWidget.NUMBER, default=5.0, minimum=1.0, maximum=20.0, step=0.1),
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
        "and fps left empty take the model's own (832x480, 81 frames at 16 fps for Wan 2.1; "
        "1280x704, 121 at 24 for the 5B). frames is 4k+1. Guidance above 1 turns on "
        "classifier-free guidance with the negative prompt. format mp4 is H.264 (yuv420p); png "
        "is a lossless animated PNG, for exact comparisons."
    ),
)

EXTRA_HINT = (
    "install the zimage extra (torch, diffusers, transformers) for Wan: "
    "pip install 'inline-core[zimage]'"
)
