"""What we know of ComfyUI's node classes: widget order, output types, and virtual nodes.

The UI format stores widget values positionally (`widgets_values`), so reading it needs the order
ComfyUI gives each class's widgets, including the hidden `control_after_generate` value that
follows a seed and the `upload` value that follows LoadImage's file name. The API format names its
inputs, so it needs none of this.
"""

from __future__ import annotations

from collections.abc import Mapping

CONTROL_AFTER_GENERATE = "control_after_generate"

WIDGET_ORDER: dict[str, tuple[str, ...]] = {
    "CheckpointLoaderSimple": ("ckpt_name",),
    "UNETLoader": ("unet_name", "weight_dtype"),
    "CLIPLoader": ("clip_name", "type", "device"),
    "DualCLIPLoader": ("clip_name1", "clip_name2", "type", "device"),
    "TripleCLIPLoader": ("clip_name1", "clip_name2", "clip_name3"),
    "VAELoader": ("vae_name",),
    "LoraLoaderModelOnly": ("lora_name", "strength_model"),
    "LoraLoader": ("lora_name", "strength_model", "strength_clip"),
    "ModelPatchLoader": ("name",),
    "QwenImageDiffsynthControlnet": ("strength",),
    "ZImageFunControlnet": ("strength",),
    "VAEEncodeForInpaint": ("grow_mask_by",),
    "SetLatentNoiseMask": (),
    "InpaintModelConditioning": ("noise_mask",),
    "LoadImageMask": ("image", "channel", "upload"),
    "ImageToMask": ("channel",),
    "MaskToImage": (),
    "InvertMask": (),
    "GrowMask": ("expand", "tapered_corners"),
    "ThresholdMask": ("value",),
    "ImageCompositeMasked": ("x", "y", "resize_source"),
    "CLIPTextEncode": ("text",),
    "ConditioningZeroOut": (),
    "EmptyLatentImage": ("width", "height", "batch_size"),
    "EmptySD3LatentImage": ("width", "height", "batch_size"),
    "ModelSamplingAuraFlow": ("shift",),
    "ModelSamplingSD3": ("shift",),
    "ModelSamplingFlux": ("max_shift", "base_shift", "width", "height"),
    "KSampler": (
        "seed",
        CONTROL_AFTER_GENERATE,
        "steps",
        "cfg",
        "sampler_name",
        "scheduler",
        "denoise",
    ),
    "KSamplerAdvanced": (
        "add_noise",
        "noise_seed",
        CONTROL_AFTER_GENERATE,
        "steps",
        "cfg",
        "sampler_name",
        "scheduler",
        "start_at_step",
        "end_at_step",
        "return_with_leftover_noise",
    ),
    # Custom sampling (comfy_extras/nodes_custom_sampler.py)
    "SamplerCustom": ("add_noise", "noise_seed", CONTROL_AFTER_GENERATE, "cfg"),
    "SamplerCustomAdvanced": (),
    "KSamplerSelect": ("sampler_name",),
    "BasicScheduler": ("scheduler", "steps", "denoise"),
    "KarrasScheduler": ("steps", "sigma_max", "sigma_min", "rho"),
    "BetaSamplingScheduler": ("steps", "alpha", "beta"),
    "RandomNoise": ("noise_seed", CONTROL_AFTER_GENERATE),
    "DisableNoise": (),
    "ModelSamplingDiscrete": ("sampling", "zsnr"),
    "CFGGuider": ("cfg",),
    "BasicGuider": (),
    "VAEDecode": (),
    "VAEDecodeTiled": ("tile_size", "overlap", "temporal_size", "temporal_overlap"),
    "VAEEncode": (),
    "LoadImage": ("image", "upload"),
    "SaveImage": ("filename_prefix",),
    "PreviewImage": (),
    "PrimitiveInt": ("value", CONTROL_AFTER_GENERATE),
    "PrimitiveFloat": ("value",),
    "PrimitiveBoolean": ("value",),
    "PrimitiveString": ("value",),
    "PrimitiveStringMultiline": ("value",),
    "ComfySwitchNode": ("switch",),
    # Video (the Wan templates)
    "EmptyHunyuanLatentVideo": ("width", "height", "length", "batch_size"),
    "Wan22ImageToVideoLatent": ("width", "height", "length", "batch_size"),
    "WanImageToVideo": ("width", "height", "length", "batch_size"),
    "CLIPVisionLoader": ("clip_name",),
    "CLIPVisionEncode": ("crop",),
    "CreateVideo": ("fps",),
    "SaveVideo": ("filename_prefix", "format", "codec"),
    "SaveAnimatedWEBP": ("filename_prefix", "fps", "lossless", "quality", "method"),
}

# Output types by slot, for reading API-format files (the UI format writes them on each node).
OUTPUT_TYPES: dict[str, tuple[str, ...]] = {
    "CheckpointLoaderSimple": ("MODEL", "CLIP", "VAE"),
    "UNETLoader": ("MODEL",),
    "CLIPLoader": ("CLIP",),
    "DualCLIPLoader": ("CLIP",),
    "TripleCLIPLoader": ("CLIP",),
    "VAELoader": ("VAE",),
    "LoraLoaderModelOnly": ("MODEL",),
    "LoraLoader": ("MODEL", "CLIP"),
    "ModelPatchLoader": ("MODEL_PATCH",),
    "QwenImageDiffsynthControlnet": ("MODEL",),
    "ZImageFunControlnet": ("MODEL",),
    "LoadImageMask": ("MASK",),
    "ImageToMask": ("MASK",),
    "MaskToImage": ("IMAGE",),
    "InvertMask": ("MASK",),
    "GrowMask": ("MASK",),
    "ThresholdMask": ("MASK",),
    "ImageCompositeMasked": ("IMAGE",),
    "VAEEncodeForInpaint": ("LATENT",),
    "SetLatentNoiseMask": ("LATENT",),
    "InpaintModelConditioning": ("CONDITIONING", "CONDITIONING", "LATENT"),
    "CLIPTextEncode": ("CONDITIONING",),
    "ConditioningZeroOut": ("CONDITIONING",),
    "EmptyLatentImage": ("LATENT",),
    "EmptySD3LatentImage": ("LATENT",),
    "ModelSamplingAuraFlow": ("MODEL",),
    "ModelSamplingSD3": ("MODEL",),
    "ModelSamplingFlux": ("MODEL",),
    "KSampler": ("LATENT",),
    "KSamplerAdvanced": ("LATENT",),
    "SamplerCustom": ("LATENT", "LATENT"),
    "SamplerCustomAdvanced": ("LATENT", "LATENT"),
    "KSamplerSelect": ("SAMPLER",),
    "BasicScheduler": ("SIGMAS",),
    "KarrasScheduler": ("SIGMAS",),
    "BetaSamplingScheduler": ("SIGMAS",),
    "RandomNoise": ("NOISE",),
    "DisableNoise": ("NOISE",),
    "ModelSamplingDiscrete": ("MODEL",),
    "CFGGuider": ("GUIDER",),
    "BasicGuider": ("GUIDER",),
    "VAEDecode": ("IMAGE",),
    "VAEDecodeTiled": ("IMAGE",),
    "VAEEncode": ("LATENT",),
    "LoadImage": ("IMAGE", "MASK"),
    "PrimitiveInt": ("INT",),
    "PrimitiveFloat": ("FLOAT",),
    "PrimitiveBoolean": ("BOOLEAN",),
    "PrimitiveString": ("STRING",),
    "PrimitiveStringMultiline": ("STRING",),
    "EmptyHunyuanLatentVideo": ("LATENT",),
    "Wan22ImageToVideoLatent": ("LATENT",),
    "WanImageToVideo": ("CONDITIONING", "CONDITIONING", "LATENT"),
    "CLIPVisionLoader": ("CLIP_VISION",),
    "CLIPVisionEncode": ("CLIP_VISION_OUTPUT",),
    "CreateVideo": ("VIDEO",),
}

# Input names that, on a node we do not know, most likely carry a value of this type. Used only
# to pass a value through a skipped node of an API-format file, which does not write types.
INPUT_NAMES_BY_TYPE: dict[str, frozenset[str]] = {
    "MODEL": frozenset({"model", "unet"}),
    "CLIP": frozenset({"clip", "text_encoder"}),
    "VAE": frozenset({"vae"}),
    "CONDITIONING": frozenset({"conditioning", "positive", "cond"}),
    "LATENT": frozenset({"samples", "latent", "latent_image", "latents"}),
    "IMAGE": frozenset({"image", "images", "pixels"}),
    "MASK": frozenset({"mask", "masks"}),
    "STRING": frozenset({"text", "string", "prompt", "value"}),
}

# UI-only nodes: never executed by ComfyUI; the UI reader follows or drops them.
NOTE_TYPES = frozenset({"Note", "MarkdownNote"})
REROUTE = "Reroute"
PRIMITIVE_NODE = "PrimitiveNode"  # the UI's widget-value source (widgets_values[0] is the value)

# Nodes whose only job is to hold a value for a widget input.
CONSTANT_TYPES = frozenset(
    {
        PRIMITIVE_NODE,
        "PrimitiveInt",
        "PrimitiveFloat",
        "PrimitiveBoolean",
        "PrimitiveString",
        "PrimitiveStringMultiline",
    }
)

# Node modes in the UI format.
MODE_MUTED = 2  # "never": left out of the run
MODE_BYPASSED = 4  # inputs pass straight through to outputs of the same type

# Subgraph boundary pseudo-node ids inside a subgraph definition.
SUBGRAPH_INPUT_ID = "-10"
SUBGRAPH_OUTPUT_ID = "-20"


def widget_names(
    class_type: str, value_count: int, declared: Mapping[str, tuple[str, ...]] | None = None
) -> tuple[str, ...] | None:
    """The widget order for `class_type`, fitted to how many values the file holds; `declared`
    adds the orders of classes served nodes stand in for (a pack's, say).

    Files saved before a class grew its `control_after_generate` (or with it turned off) hold one
    value fewer; dropping the control name keeps the later values in their places.
    """
    names = WIDGET_ORDER.get(class_type) or (declared or {}).get(class_type)
    if names is None:
        return None
    if CONTROL_AFTER_GENERATE in names and value_count == len(names) - 1:
        return tuple(n for n in names if n != CONTROL_AFTER_GENERATE)
    return names
