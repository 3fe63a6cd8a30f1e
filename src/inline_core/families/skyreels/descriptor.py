"""The `skywork/skyreels-v2` node: what a client draws and the validator checks (torch-free)."""

from __future__ import annotations

from inline_core.contract.common_params import MODEL, NEGATIVE_PROMPT, SEED, TEXT_ENCODER, VAE
from inline_core.families.nodes.sampling import sampler_param, schedule_param
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.schema import PortKind

NODE_TYPE = "skywork/skyreels-v2"
STEPS_DEFAULT = 30
GUIDANCE_DEFAULT = 6.0
# SkyReels-V2 DF 540P's published render: 960x544, 97 frames at 24 fps, guidance 6, shift 8.
DEFAULTS = {"width": 960, "height": 544, "frames": 97, "fps": 24}


def _size(name: str) -> ParamSpec:
    return ParamSpec(
        name,
        ParamWidget.NUMBER,
        DEFAULTS[name],
        minimum=16,
        maximum=2048,
        step=16,
        integer=True,
    )


def _frames(name: str, default: int | None, label: str) -> ParamSpec:
    return ParamSpec(
        name, ParamWidget.NUMBER, default, minimum=1, maximum=2001, integer=True, label=label
    )


SKYREELS_DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="SkyReels-V2",
    category="video/generate",
    icon="film",
    source="core",
    output_kind="video",
    inputs=(
        PortSpec("prompt", PortKind.TEXT),
        PortSpec("image", PortKind.IMAGE, optional=True, label="First frame (image to video)"),
        PortSpec(
            "video", PortKind.VIDEO, optional=True, label="Video to extend (from its last overlap)"
        ),
    ),
    outputs=(PortSpec("video", PortKind.VIDEO),),
    params=(
        NEGATIVE_PROMPT,
        _size("width"),
        _size("height"),
        _frames("frames", DEFAULTS["frames"], "Frames, 4k+1"),
        ParamSpec(
            "fps",
            ParamWidget.NUMBER,
            default=DEFAULTS["fps"],
            minimum=1,
            maximum=120,
            integer=True,
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
        sampler_param("the model's own UniPC, as diffusers' diffusion-forcing pipeline steps it"),
        schedule_param("the model's own, diffusers' UniPC table"),
        ParamSpec(
            "shift",
            ParamWidget.NUMBER,
            default=None,
            minimum=0.0,
            maximum=20.0,
            step=0.1,
            label="Flow shift (empty: the model's own)",
        ),
        # A long video: chunks of base_frames, each from the last `overlap` frames so far.
        _frames("base_frames", None, "Frames per chunk, 4k+1 (empty: one chunk; 540P: 97)"),
        _frames("overlap", None, "Frames each chunk starts from, 4k+1 (17 or 37)"),
        ParamSpec(
            "ar_step",
            ParamWidget.NUMBER,
            default=0,
            minimum=0,
            maximum=50,
            integer=True,
            label="Asynchronous steps between causal blocks (0: synchronous; 5 with blocks of 5)",
        ),
        ParamSpec(
            "causal_block_size",
            ParamWidget.NUMBER,
            default=1,
            minimum=1,
            maximum=50,
            integer=True,
            label="Latent frames per causal block",
        ),
        SEED,
        MODEL,
        VAE,
        TEXT_ENCODER,
        ParamSpec("format", ParamWidget.SELECT, default="mp4", options=("mp4", "png")),
    ),
    # Its render takes interactions at chunk boundaries (`server/interactions.py`).
    extra={"interactions": True},
    description=(
        "Text to video with SkyReels-V2 diffusion forcing (1.3B or 14B); image to video with "
        "an image wired (it becomes the first frame, resized to width x height); with a video "
        "wired, extends it: frames new frames continue from its last overlap frames, after "
        "its own (resized), as diffusers' video-to-video pipeline does. A video longer "
        "than base_frames renders in chunks of base_frames, each starting from the last overlap "
        "frames of the video so far; ar_step above 0 renders each causal block of "
        "causal_block_size latent frames that many steps behind the one before. sampler and "
        "schedule are ComfyUI's (CFG++ ones where guidance is above 1), each run of frames at "
        "one level stepping with its own; a sampler that calls the model twice a step (heun) "
        "counts ar_step in calls. Empty, the model's own UniPC on its own table, as diffusers' "
        "pipeline. While it "
        "renders, POST /v1/runs/{id}/interactions (or an interaction message on the run's "
        "events socket) changes the prompt, negative prompt or "
        "guidance from the next chunk on. frames is 4k+1; format png is a lossless APNG."
    ),
)

EXTRA_HINT = (
    "install the diffusers extra (torch, diffusers, transformers) for SkyReels-V2: "
    "pip install 'inline-core[diffusers]'"
)
