"""The low-level primitive vocabulary: a decomposed diffusion graph, as ComfyUI spells it.

Loaders produce engine handles (`model`, `vae`, `text-encoder`), which flow through encode, sample
and decode as typed sockets; only `vae/decode` makes media. The descriptors are served and
type-checked by every install (hidden from the add-node menu); their runners dispatch by the family
of the model loaded (`families/nodes/`). Without a family that serves them, a graph that would run
a primitive is refused at submit.

`sample` counts cfg as ComfyUI does (1 is no guidance) and offers the sigma library's samplers and
schedules, under ComfyUI's names.
"""

from __future__ import annotations

from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.registry import Registry
from inline_core.graph.sampler_names import GUIDED_SAMPLERS, SCHEDULES
from inline_core.graph.schema import PortKind

# Samplers and schedules under ComfyUI's names: the sigma library's (`euler` + `simple` is a
# flow model's own render); its CFG++ ones where the model's family runs them.
FLOW_SAMPLERS = GUIDED_SAMPLERS
FLOW_SCHEDULES = SCHEDULES


# A flow model's shift for the render, in place of its own (ComfyUI's model sampling nodes);
# empty: the model's own. One of the two.
SHIFT_PARAMS = (
    ParamSpec(
        "shift",
        ParamWidget.NUMBER,
        None,
        label="Shift (the model's own when empty; ComfyUI's ModelSamplingSD3/AuraFlow)",
        minimum=0.0,
        maximum=100.0,
        step=0.01,
    ),
    ParamSpec(
        "mu",
        ParamWidget.NUMBER,
        None,
        label="Exponential shift mu (ComfyUI's ModelSamplingFlux; empty: the model's own)",
        minimum=-100.0,
        maximum=100.0,
        step=0.01,
    ),
)


def _file_picker(category: str) -> ParamSpec:
    return ParamSpec("file", ParamWidget.SELECT, required=True, options_from=category)


def _size(name: str) -> ParamSpec:
    # Latent sides are image sides / 8, and DiT patches are 2x2 latents: multiples of 16.
    return ParamSpec(
        name, ParamWidget.NUMBER, 1024, minimum=64, maximum=4096, step=16, integer=True
    )


def _loader(
    node_type: str,
    title: str,
    category: str,
    output: PortSpec,
    extra: tuple[ParamSpec, ...] = (),
) -> NodeDescriptor:
    """A loader: one file picker over a catalog category, one engine-handle output."""
    return NodeDescriptor(
        type=node_type,
        title=title,
        category="loaders",
        icon="cpu",
        hidden=True,
        params=(_file_picker(category), *extra),
        outputs=(output,),
    )


LOAD_DIFFUSION_MODEL = _loader(
    "load/diffusion-model",
    "Load diffusion model",
    "diffusion_models",
    PortSpec("model", PortKind.MODEL),
)
LOAD_VAE = _loader("load/vae", "Load VAE", "vae", PortSpec("vae", PortKind.VAE))
# One text encoder file may suit several families, each reading it its own way (Qwen3-4B: Z-Image
# reads one hidden layer, FLUX.2 klein three): `type` says whose reading, as ComfyUI's CLIPLoader
# type does (`lumina2`, `flux2`, ...); empty, it is read the ways the run's samples take it (every
# family's that takes the file where those are not known at submit), and `sample` takes its
# model's reading (`families/nodes/loaders.py`).
LOAD_TEXT_ENCODER = _loader(
    "load/text-encoder",
    "Load text encoder",
    "text_encoders",
    PortSpec("text_encoder", PortKind.TEXT_ENCODER),
    (
        ParamSpec(
            "type",
            ParamWidget.TEXT,
            "",
            label="Type (ComfyUI's CLIPLoader type: whose reading; empty: each family's)",
        ),
    ),
)

LORA_MAX_STRENGTH = 10.0  # negative strengths invert a LoRA (as ComfyUI allows); this bounds typos


def _lora_node(
    node_type: str,
    title: str,
    category: str,
    inputs: tuple[PortSpec, ...],
    output: PortSpec,
    about: str,
    *,
    hidden: bool,
    extra: tuple[ParamSpec, ...] = (),
) -> NodeDescriptor:
    """A node picking one LoRA from `loras/` and its strength."""
    strength = ParamSpec(
        "strength",
        ParamWidget.NUMBER,
        1.0,
        minimum=-LORA_MAX_STRENGTH,
        maximum=LORA_MAX_STRENGTH,
        step=0.05,
    )
    return NodeDescriptor(
        type=node_type,
        title=title,
        category=category,
        icon="layers",
        hidden=hidden,
        inputs=inputs,
        params=(
            ParamSpec(
                "name", ParamWidget.SELECT, required=True, options_from="loras", label="LoRA"
            ),
            strength,
            *extra,
        ),
        outputs=(output,),
        description=about,
    )


# `model` in, the same model with one more LoRA of its stack out: chain them for a stack.
LOAD_LORA = _lora_node(
    "load/lora",
    "Load LoRA",
    "loaders",
    (PortSpec("model", PortKind.MODEL),),
    PortSpec("model", PortKind.MODEL),
    "Adds a LoRA from loras/ to the model's stack; applied per request, never merged.",
    hidden=True,
)

# One LoRA of a high-level node's stack (its `loras` input takes one edge per LoRA).
INPUT_LORA = _lora_node(
    "input/lora",
    "LoRA",
    "inputs",
    (),
    PortSpec("lora", PortKind.LORA),
    "A LoRA from loras/ and its strength, for a model node's loras input; on a two-model "
    "stack (Wan 2.2 A14B's high- and low-noise experts), expert picks the models it adapts.",
    hidden=False,
    extra=(
        ParamSpec(
            "strength_clip",
            ParamWidget.NUMBER,
            None,
            minimum=-LORA_MAX_STRENGTH,
            maximum=LORA_MAX_STRENGTH,
            step=0.05,
            label="Text encoder strength (LoRAs that adapt them; empty: strength)",
        ),
        ParamSpec(
            "expert",
            ParamWidget.SELECT,
            default="both",
            options=("both", "high", "low"),
            label="Expert (two-model stacks: the high-noise, the low-noise or both)",
        ),
    ),
)

# `model` in, the same model steered by a control model and its image out (ComfyUI's
# ModelPatchLoader + QwenImageDiffsynthControlnet, or ZImageFunControlnet); the images are
# encoded at the latent's size. A control model that inpaints takes a mask (white repaints) and
# the image it masks (without one: mid-gray), and a mid-gray control image when none is wired.
LOAD_CONTROLNET = NodeDescriptor(
    type="load/controlnet",
    title="Apply control model",
    category="loaders",
    icon="layers",
    hidden=True,
    inputs=(
        PortSpec("model", PortKind.MODEL),
        PortSpec("vae", PortKind.VAE),
        PortSpec("image", PortKind.IMAGE, optional=True, label="Control image"),
        PortSpec("mask", PortKind.MASK, optional=True, label="Inpaint mask (white repaints)"),
        PortSpec("inpaint_image", PortKind.IMAGE, optional=True, label="Image to inpaint"),
    ),
    params=(
        ParamSpec(
            "name",
            ParamWidget.SELECT,
            required=True,
            options_from="controlnet",
            label="Control model",
        ),
        ParamSpec("strength", ParamWidget.NUMBER, 1.0, minimum=-10.0, maximum=10.0, step=0.01),
    ),
    outputs=(PortSpec("model", PortKind.MODEL),),
    description="Steers the model with a control model from controlnet/ and a control image; "
    "a control model that inpaints also takes a mask and the image it masks.",
)

ENCODE_TEXT = NodeDescriptor(
    type="encode/text",
    title="Encode text",
    category="conditioning",
    icon="type",
    hidden=True,
    inputs=(
        PortSpec("text_encoder", PortKind.TEXT_ENCODER),
        PortSpec("prompt", PortKind.TEXT),
    ),
    outputs=(PortSpec("conditioning", PortKind.CONDITIONING),),
)

# ComfyUI's FluxGuidance: the guidance a guidance-distilled model (FLUX.2 dev) embeds, set on a
# conditioning (its other families' readings too); a model that embeds none refuses it.
CONDITIONING_GUIDANCE = NodeDescriptor(
    type="conditioning/guidance",
    title="Embedded guidance",
    category="conditioning",
    icon="type",
    hidden=True,
    inputs=(PortSpec("conditioning", PortKind.CONDITIONING),),
    params=(ParamSpec("guidance", ParamWidget.NUMBER, 3.5, minimum=0.0, maximum=100.0, step=0.1),),
    outputs=(PortSpec("conditioning", PortKind.CONDITIONING),),
    description="Sets the guidance a guidance-distilled model embeds (ComfyUI's FluxGuidance); "
    "a model that embeds none refuses it.",
)

LATENT_EMPTY = NodeDescriptor(
    type="latent/empty",
    title="Empty latent",
    category="latent",
    icon="square",
    hidden=True,
    params=(
        _size("width"),
        _size("height"),
        ParamSpec("batch", ParamWidget.NUMBER, 1, minimum=1, maximum=16, step=1, integer=True),
    ),
    outputs=(PortSpec("latent", PortKind.LATENT),),
)

SAMPLE = NodeDescriptor(
    type="sample",
    title="Sample",
    category="sampling",
    icon="sparkles",
    hidden=True,
    inputs=(
        PortSpec("model", PortKind.MODEL),
        PortSpec("positive", PortKind.CONDITIONING),
        PortSpec("negative", PortKind.CONDITIONING, optional=True),
        PortSpec("latent", PortKind.LATENT),
    ),
    params=(
        ParamSpec("steps", ParamWidget.NUMBER, 8, minimum=1, maximum=200, step=1, integer=True),
        # ComfyUI's count: uncond + cfg * (cond - uncond); 1 is no guidance.
        ParamSpec("cfg", ParamWidget.NUMBER, 1.0, minimum=1.0, maximum=30.0, step=0.1),
        ParamSpec("sampler", ParamWidget.SELECT, "euler", options=FLOW_SAMPLERS),
        ParamSpec("scheduler", ParamWidget.SELECT, "simple", options=FLOW_SCHEDULES),
        ParamSpec("seed", ParamWidget.SEED, -1),
        ParamSpec("denoise", ParamWidget.NUMBER, 1.0, minimum=0.0, maximum=1.0, step=0.01),
        # ComfyUI's KSamplerAdvanced: a window of the schedule, and its noise in and out.
        ParamSpec("start_step", ParamWidget.NUMBER, 0, minimum=0, maximum=10000, integer=True),
        ParamSpec("end_step", ParamWidget.NUMBER, 10000, minimum=0, maximum=10000, integer=True),
        ParamSpec("add_noise", ParamWidget.BOOLEAN, True),
        ParamSpec("leftover_noise", ParamWidget.BOOLEAN, False),
        *SHIFT_PARAMS,
    ),
    outputs=(PortSpec("latent", PortKind.LATENT),),
)

VAE_DECODE = NodeDescriptor(
    type="vae/decode",
    title="VAE decode",
    category="latent",
    icon="image",
    hidden=True,
    output_kind="image",
    inputs=(PortSpec("vae", PortKind.VAE), PortSpec("latent", PortKind.LATENT)),
    outputs=(PortSpec("image", PortKind.IMAGE),),
)

VAE_ENCODE = NodeDescriptor(
    type="vae/encode",
    title="VAE encode",
    category="latent",
    icon="square",
    hidden=True,
    inputs=(PortSpec("vae", PortKind.VAE), PortSpec("image", PortKind.IMAGE)),
    outputs=(PortSpec("latent", PortKind.LATENT),),
)

# ComfyUI's VAEEncodeForInpaint: the masked pixels (the mask rounded) encoded as mid-gray, and
# the mask grown by `grow` pixels as the latent's noise mask.
VAE_ENCODE_INPAINT = NodeDescriptor(
    type="vae/encode-inpaint",
    title="VAE encode for inpainting",
    category="latent",
    icon="square",
    hidden=True,
    inputs=(
        PortSpec("vae", PortKind.VAE),
        PortSpec("image", PortKind.IMAGE),
        PortSpec("mask", PortKind.MASK),
    ),
    params=(ParamSpec("grow", ParamWidget.NUMBER, 6, minimum=0, maximum=64, step=1, integer=True),),
    outputs=(PortSpec("latent", PortKind.LATENT),),
    description="Encodes the image with its masked part mid-gray; `sample` repaints the mask, "
    "grown by `grow` pixels, and keeps the rest.",
)

# ComfyUI's SetLatentNoiseMask: `sample` repaints where the mask is white and keeps the latent
# elsewhere (a gray mask blends), at every step. `crop`: the mask covers the image a `vae/encode`
# latent was made from, before the encode's centre crop, and is cropped with it
# (InpaintModelConditioning's); otherwise it is stretched over the latent.
LATENT_NOISE_MASK = NodeDescriptor(
    type="latent/noise-mask",
    title="Set latent noise mask",
    category="latent",
    icon="square",
    hidden=True,
    inputs=(PortSpec("latent", PortKind.LATENT), PortSpec("mask", PortKind.MASK)),
    params=(ParamSpec("crop", ParamWidget.BOOLEAN, False),),
    outputs=(PortSpec("latent", PortKind.LATENT),),
    description="Sampling repaints the latent where the mask is white and keeps it where black. "
    "With `crop`, a mask over the encoded image is resized to it and cropped as the encode "
    "cropped the image.",
)

PRIMITIVE_DESCRIPTORS: tuple[NodeDescriptor, ...] = (
    LOAD_DIFFUSION_MODEL,
    LOAD_VAE,
    LOAD_TEXT_ENCODER,
    LOAD_LORA,
    INPUT_LORA,
    LOAD_CONTROLNET,
    ENCODE_TEXT,
    CONDITIONING_GUIDANCE,
    LATENT_EMPTY,
    SAMPLE,
    VAE_DECODE,
    VAE_ENCODE,
    VAE_ENCODE_INPAINT,
    LATENT_NOISE_MASK,
)


def register_primitive_descriptors(registry: Registry) -> None:
    """Serve the primitives without runners. A type already registered (a model family that
    registered a runner for it first) is left as it is, so the order of registration is free."""
    for descriptor in PRIMITIVE_DESCRIPTORS:
        if descriptor.type not in registry:
            registry.register(descriptor)
