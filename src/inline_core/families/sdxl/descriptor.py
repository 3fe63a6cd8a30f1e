"""The `stability/sdxl` node: what a client draws and the validator checks (torch-free)."""

from __future__ import annotations

from inline_core.contract.common_params import LORAS, NEGATIVE_PROMPT, SEED, VAE
from inline_core.families.nodes.sampling import sampler_param, schedule_param
from inline_core.families.sdxl.hires import HIRES_PARAMS
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.schema import PortKind

# The `prediction` param: the checkpoint's own (its `v_pred`/`ztsnr` markers, else epsilon),
# or ComfyUI's ModelSamplingDiscrete `sampling` that replaces it for the render.
CHECKPOINT_PREDICTION = "model"
PREDICTION_OVERRIDES = ("eps", "v_prediction")
NODE_TYPE = "stability/sdxl"
# Not the shared `simple`: SDXL checkpoints are sampled on ComfyUI's KSampler default, `normal`.
DEFAULT_SCHEDULE = "normal"

# The checkpoint (empty: the first SDXL model found), as ComfyUI's CheckpointLoaderSimple picks.
MODEL = ParamSpec(
    "model",
    ParamWidget.SELECT,
    default=None,
    options_from="checkpoints",
    label="Checkpoint (empty: auto)",
    # Empty, the model may be a diffusers folder in diffusion_models/: a run does not need a
    # file in checkpoints/ to be claimed.
    empty_found_anywhere=True,
)


# A refiner checkpoint (empty: none): its UNet takes over at `refiner_switch`.
REFINER = ParamSpec(
    "refiner",
    ParamWidget.SELECT,
    default=None,
    options_from="checkpoints",
    label="Refiner checkpoint (empty: none)",
    empty_picks_none=True,  # no refiner: a run needs no second checkpoint
)
REFINER_SWITCH = ParamSpec(
    "refiner_switch",
    ParamWidget.NUMBER,
    default=0.8,
    minimum=0.0,
    maximum=1.0,
    step=0.01,
    label="Refiner switch (diffusers' denoising_end: the share the base runs)",
)


def _size(name: str) -> ParamSpec:
    return ParamSpec(
        name, ParamWidget.NUMBER, default=1024, minimum=64, maximum=4096, step=8, integer=True
    )


SDXL_DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="SDXL",
    category="image/generate",
    icon="sparkles",
    source="core",
    output_kind="image",
    inputs=(
        PortSpec("prompt", PortKind.TEXT),
        PortSpec("image", PortKind.IMAGE, optional=True, label="Image (img2img)"),
        PortSpec("mask", PortKind.MASK, optional=True, label="Mask (inpaint: white repaints)"),
        LORAS,
    ),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    params=(
        NEGATIVE_PROMPT,
        _size("width"),
        _size("height"),
        ParamSpec("steps", ParamWidget.NUMBER, default=30, minimum=1, maximum=200, integer=True),
        ParamSpec(
            "guidance",
            ParamWidget.NUMBER,
            default=7.0,
            minimum=1.0,
            maximum=30.0,
            step=0.1,
            label="Guidance (ComfyUI's cfg; 1: none)",
        ),
        sampler_param(),
        schedule_param(default=DEFAULT_SCHEDULE),
        ParamSpec(
            "clip_skip",
            ParamWidget.NUMBER,
            default=-2,
            minimum=-24,
            maximum=-1,
            integer=True,
            label="CLIP layer (CLIPSetLastLayer: -1 the last, -2 SDXL's own)",
        ),
        ParamSpec(
            "prediction",
            ParamWidget.SELECT,
            default=CHECKPOINT_PREDICTION,
            options=(CHECKPOINT_PREDICTION, *PREDICTION_OVERRIDES),
            label="Prediction (ModelSamplingDiscrete's sampling; model: the checkpoint's own)",
        ),
        ParamSpec(
            "zsnr",
            ParamWidget.BOOLEAN,
            default=False,
            label="Zero terminal SNR (ModelSamplingDiscrete's zsnr, with a prediction set)",
        ),
        ParamSpec(
            "strength",
            ParamWidget.NUMBER,
            default=0.6,
            minimum=0.0,
            maximum=1.0,
            step=0.01,
            label="Strength (img2img)",
        ),
        SEED,
        MODEL,
        VAE,
        REFINER,
        REFINER_SWITCH,
        *HIRES_PARAMS,
    ),
    description=(
        "Text to image with an SDXL checkpoint (any community SDXL checkpoint, or a diffusers "
        "SDXL folder). Prompts read as ComfyUI reads them: (words:1.2) and (words) weights, "
        "any length in 77-token windows. With an image wired in it renders image to image "
        "(strength: the share of the steps that run; the image is resized to width x "
        "height); a mask wired with it repaints the mask's white part and keeps the rest. "
        "guidance is ComfyUI's cfg (1 turns guidance off); "
        "sampler and schedule are ComfyUI's names; clip_skip is CLIPSetLastLayer's layer; "
        "prediction and zsnr are ModelSamplingDiscrete's (eps or v_prediction in place of the "
        "checkpoint's own). A "
        "vae picked here replaces the checkpoint's. LoRAs wired in (input/lora, kohya's naming) "
        "apply to this render alone: strength on the UNet, strength_clip on both text encoders. "
        "A refiner checkpoint picked as refiner takes over below timestep (1 - refiner_switch) "
        "x 1000, as diffusers' denoising_end splits it, with its own text encoder and its "
        "aesthetic score (6, 2.5 for the negative prompt); its VAE decodes. hires_width x "
        "hires_height (0 x 0: none) adds ComfyUI's hires fix: the latents scaled up "
        "(LatentUpscale's hires_method), then a second KSampler's hires_steps at "
        "hires_denoise on the node's seed, sampler, schedule and guidance."
    ),
)

EXTRA_HINT = "install the diffusers extra: pip install 'inline-core[diffusers]'"
