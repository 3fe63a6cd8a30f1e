"""The `lightricks/ltx-2` node: what a client draws and the validator checks (torch-free)."""

from __future__ import annotations

from dataclasses import replace

from inline_core.contract.common_params import MODEL, SEED, TEXT_ENCODER
from inline_core.families.nodes.sampling import sampler_param, schedule_param
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.schema import PortKind

NODE_TYPE = "lightricks/ltx-2"
UPSCALE_CATEGORY = "latent_upscale_models"
MAX_PROMPT_CHARS = 20_000
STEPS_DEFAULT = 40
# LTX-2's published defaults: 768x512, 121 frames (8k+1) at 24 fps, guidance 4 for the video
# and 7 for the soundtrack.
DEFAULTS = {"width": 768, "height": 512, "frames": 121, "fps": 24}


def _size(name: str) -> ParamSpec:
    # Multiples of 32 for LTX-2's VAE (a model's own VAE is checked at submit).
    return ParamSpec(
        name,
        ParamWidget.NUMBER,
        DEFAULTS[name],
        minimum=32,
        maximum=4096,
        step=32,
        integer=True,
    )


LTX2_DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="LTX-2",
    category="video/generate",
    icon="film",
    source="core",
    output_kind="video",
    inputs=(
        PortSpec("prompt", PortKind.TEXT),
        PortSpec("image", PortKind.IMAGE, optional=True, label="First frame (image to video)"),
        # One edge per LoRA of the stack, from `input/lora` nodes, applied in edge order.
        PortSpec("loras", PortKind.LORA, optional=True, multiple=True, label="LoRAs"),
    ),
    outputs=(PortSpec("video", PortKind.VIDEO), PortSpec("audio", PortKind.AUDIO)),
    params=(
        ParamSpec("negative_prompt", ParamWidget.TEXTAREA, default="", max_length=MAX_PROMPT_CHARS),
        _size("width"),
        _size("height"),
        # 8k+1 for LTX-2's VAE, checked at submit against the model's own VAE.
        ParamSpec(
            "frames",
            ParamWidget.NUMBER,
            default=DEFAULTS["frames"],
            minimum=1,
            maximum=1001,
            integer=True,
            label="Frames, 8k+1",
        ),
        ParamSpec(
            "fps", ParamWidget.NUMBER, default=DEFAULTS["fps"], minimum=1, maximum=120, integer=True
        ),
        # Empty steps, guidance, audio_guidance, sampler: the model version's (versions.py:
        # LTX2Pipeline's 40, 4, 7, euler; with `upscale`, the version's template's).
        ParamSpec(
            "steps",
            ParamWidget.NUMBER,
            default=None,
            minimum=1,
            maximum=200,
            integer=True,
            label=f"Steps (empty: the model's, {STEPS_DEFAULT})",
        ),
        ParamSpec(
            "guidance",
            ParamWidget.NUMBER,
            default=None,
            minimum=1.0,
            maximum=20.0,
            step=0.1,
            label="Guidance (empty: the model's, 4)",
        ),
        ParamSpec(
            "audio_guidance",
            ParamWidget.NUMBER,
            default=None,
            minimum=1.0,
            maximum=20.0,
            step=0.1,
            label="Soundtrack's guidance (empty: the model's, 7)",
        ),
        # The sigma library's samplers and schedules; euler on "simple" is LTX2Pipeline's own.
        # CFG++ too: each stream steps along its own unconditional output (cfg_pp.py).
        sampler_param("the model's, euler"),
        schedule_param(),
        # ComfyUI's ManualSigmas: the first pass on these levels (steps and schedule unused).
        ParamSpec("sigmas", ParamWidget.TEXT, "", label="Sigmas (empty: the schedule's)"),
        SEED,
        # A diffusers folder in diffusion_models/, or ComfyUI's all-in-one file in checkpoints/.
        replace(MODEL, also_from=("checkpoints",)),
        # Gemma 3: a folder, or ComfyUI's gemma_3_12B_it file (empty: the one found).
        TEXT_ENCODER,
        # The two-stage path (the official workflows'): a first pass at half the size, the
        # latent upsampler, a refining pass of 3 steps at width x height (versions.py).
        ParamSpec("upscale", ParamWidget.BOOLEAN, default=False, label="Two-stage upscale"),
        replace(
            sampler_param("the model's"),
            name="refine_sampler",
            label="Refining pass's sampler (empty: the model's template's)",
        ),
        # ManualSigmas' text (empty: the model's; LTX-2.0/2.3 0.909375, 0.725, 0.421875, 0).
        ParamSpec("refine_sigmas", ParamWidget.TEXT, "", label="Refining pass's sigmas"),
        ParamSpec(
            "upscale_model",
            ParamWidget.SELECT,
            default=None,
            options_from=UPSCALE_CATEGORY,
            label="Latent upsampler (empty: the model folder's, or the one for its version)",
            empty_found_anywhere=True,
        ),
        ParamSpec("format", ParamWidget.SELECT, default="mp4", options=("mp4", "png")),
        ParamSpec("audio_format", ParamWidget.SELECT, default="flac", options=("flac", "wav")),
    ),
    description=(
        "Text to video with its soundtrack, LTX-2 (a diffusers LTX-2 folder); with an image "
        "wired, image to video from that first frame (stretched to width x height). The video and "
        "the sound are denoised together, one forward for both. frames is 8k+1 (the VAE's), "
        "size a multiple of 32. guidance guides the video and audio_guidance the sound "
        "(classifier-free, above 1, with the negative prompt). sampler and schedule pick the sigma "
        "library's (euler on simple: LTX2Pipeline's own). LoRAs wired in (input/lora) apply "
        "to this render's rows alone. Outputs: the video (format mp4: "
        "H.264 with its AAC soundtrack; png: a lossless animated PNG, silent) and the sound "
        "alone (audio_format flac or wav)."
    ),
)

EXTRA_HINT = (
    "install the diffusers extra (torch, diffusers, transformers) for LTX-2: "
    "pip install 'inline-core[diffusers]'"
)
