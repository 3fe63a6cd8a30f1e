"""ComfyUI's own definitions of the node classes the importer reads: inputs with ComfyUI's specs,
outputs, category, as ComfyUI's `nodes.py` and `comfy_extras/` declare them.

Specs are written as `contract/comfy_specs.py` writes them (the shape a family's recipe uses for
the classes it adds); `Picker` choices are filled in when `/object_info` is answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inline_core.contract.comfy_specs import (
    BOOLEAN,
    COMBO,
    FLOAT,
    INT,
    LINK,
    MAX_RESOLUTION,
    MAX_SEED,
    STRING,
    Picker,
    Spec,
)

INT64 = 0x7FFFFFFFFFFFFFFF


@dataclass(frozen=True)
class NodeDef:
    category: str
    required: dict[str, Spec]
    outputs: tuple[tuple[str, str], ...] = ()  # (type, name)
    optional: dict[str, Spec] = field(default_factory=dict[str, Spec])
    output_node: bool = False
    display_name: str | None = None
    description: str = ""
    hidden: dict[str, str] = field(default_factory=dict[str, str])
    python_module: str = "nodes"
    # Inputs and outputs not declared (a class a family's recipe names without its specs): only
    # the importer checks its inputs, and any link from it is taken.
    untyped: bool = False


SEED = INT(0, 0, MAX_SEED, control_after_generate=True)
STEPS = INT(20, 1, 10000)
CFG = FLOAT(8.0, 0.0, 100.0, 0.1, round=0.01)
WIDTH_HEIGHT_SD3 = INT(1024, 16, MAX_RESOLUTION, 16)
BATCH = INT(1, 1, 4096)
LENGTH = INT(81, 1, MAX_RESOLUTION, 4)
STRENGTH = FLOAT(1.0, -100.0, 100.0)
SAVED = {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"}
CUSTOM_SAMPLER = "comfy_extras.nodes_custom_sampler"
CLIP_TYPES = COMBO(
    "stable_diffusion", "stable_cascade", "sd3", "stable_audio", "mochi", "ltxv", "pixart",
    "cosmos", "lumina2", "wan", "hidream", "chroma", "ace", "omnigen2", "qwen_image",
    "hunyuan_image",
)  # fmt: skip
DEVICE = COMBO("default", "cpu", advanced=True)

NODE_DEFS: dict[str, NodeDef] = {
    "CheckpointLoaderSimple": NodeDef(
        "loaders",
        {"ckpt_name": Picker("checkpoints")},
        (("MODEL", "MODEL"), ("CLIP", "CLIP"), ("VAE", "VAE")),
        display_name="Load Checkpoint",
    ),
    "UNETLoader": NodeDef(
        "advanced/loaders",
        {
            "unet_name": Picker("diffusion_models"),
            "weight_dtype": COMBO("default", "fp8_e4m3fn", "fp8_e4m3fn_fast", "fp8_e5m2"),
        },
        (("MODEL", "MODEL"),),
        display_name="Load Diffusion Model",
    ),
    "CLIPLoader": NodeDef(
        "advanced/loaders",
        {"clip_name": Picker("text_encoders"), "type": CLIP_TYPES},
        (("CLIP", "CLIP"),),
        optional={"device": DEVICE},
        display_name="Load CLIP",
    ),
    "DualCLIPLoader": NodeDef(
        "advanced/loaders",
        {
            "clip_name1": Picker("text_encoders"),
            "clip_name2": Picker("text_encoders"),
            "type": COMBO("sdxl", "sd3", "flux", "hunyuan_video", "hidream"),
        },
        (("CLIP", "CLIP"),),
        optional={"device": DEVICE},
        display_name="DualCLIPLoader",
    ),
    "TripleCLIPLoader": NodeDef(
        "advanced/loaders",
        {
            "clip_name1": Picker("text_encoders"),
            "clip_name2": Picker("text_encoders"),
            "clip_name3": Picker("text_encoders"),
        },
        (("CLIP", "CLIP"),),
        description="[Recipes]\n\nsd3: clip-l, clip-g, t5",
        python_module="comfy_extras.nodes_sd3",
    ),
    "VAELoader": NodeDef(
        "loaders", {"vae_name": Picker("vae")}, (("VAE", "VAE"),), display_name="Load VAE"
    ),
    "LoraLoaderModelOnly": NodeDef(
        "loaders",
        {"model": LINK("MODEL"), "lora_name": Picker("loras"), "strength_model": STRENGTH},
        (("MODEL", "MODEL"),),
        display_name="LoraLoaderModelOnly",
    ),
    "LoraLoader": NodeDef(
        "loaders",
        {
            "model": LINK("MODEL"),
            "clip": LINK("CLIP"),
            "lora_name": Picker("loras"),
            "strength_model": STRENGTH,
            "strength_clip": STRENGTH,
        },
        (("MODEL", "MODEL"), ("CLIP", "CLIP")),
        display_name="Load LoRA",
    ),
    "ModelPatchLoader": NodeDef(
        "advanced/loaders",
        {"name": Picker("controlnet")},
        (("MODEL_PATCH", "MODEL_PATCH"),),
        display_name="ModelPatchLoader",
        python_module="comfy_extras.nodes_model_patch",
    ),
    "QwenImageDiffsynthControlnet": NodeDef(
        "advanced/loaders/qwen",
        {
            "model": LINK("MODEL"),
            "model_patch": LINK("MODEL_PATCH"),
            "vae": LINK("VAE"),
            "image": LINK("IMAGE"),
            "strength": FLOAT(1.0, -10.0, 10.0),
        },
        (("MODEL", "MODEL"),),
        optional={"mask": LINK("MASK")},
        python_module="comfy_extras.nodes_model_patch",
    ),
    "ZImageFunControlnet": NodeDef(
        "advanced/loaders/zimage",
        {
            "model": LINK("MODEL"),
            "model_patch": LINK("MODEL_PATCH"),
            "vae": LINK("VAE"),
            "strength": FLOAT(1.0, -10.0, 10.0),
        },
        (("MODEL", "MODEL"),),
        optional={"image": LINK("IMAGE"), "inpaint_image": LINK("IMAGE"), "mask": LINK("MASK")},
        python_module="comfy_extras.nodes_model_patch",
    ),
    "VAEEncodeForInpaint": NodeDef(
        "latent/inpaint",
        {
            "pixels": LINK("IMAGE"),
            "vae": LINK("VAE"),
            "mask": LINK("MASK"),
            "grow_mask_by": INT(6, 0, 64),
        },
        (("LATENT", "LATENT"),),
        display_name="VAE Encode (for Inpainting)",
    ),
    "SetLatentNoiseMask": NodeDef(
        "latent/inpaint",
        {"samples": LINK("LATENT"), "mask": LINK("MASK")},
        (("LATENT", "LATENT"),),
        display_name="Set Latent Noise Mask",
    ),
    "InpaintModelConditioning": NodeDef(
        "conditioning/inpaint",
        {
            "positive": LINK("CONDITIONING"),
            "negative": LINK("CONDITIONING"),
            "vae": LINK("VAE"),
            "pixels": LINK("IMAGE"),
            "mask": LINK("MASK"),
            "noise_mask": BOOLEAN(True),
        },
        (("CONDITIONING", "positive"), ("CONDITIONING", "negative"), ("LATENT", "latent")),
    ),
    "LoadImageMask": NodeDef(
        "mask",
        {
            "image": Picker("images", {"image_upload": True}),
            "channel": COMBO("alpha", "red", "green", "blue"),
        },
        (("MASK", "MASK"),),
        display_name="Load Image (as Mask)",
    ),
    "ImageToMask": NodeDef(
        "mask",
        {"image": LINK("IMAGE"), "channel": COMBO("red", "green", "blue", "alpha")},
        (("MASK", "MASK"),),
        display_name="Convert Image to Mask",
        python_module="comfy_extras.nodes_mask",
    ),
    "MaskToImage": NodeDef(
        "mask",
        {"mask": LINK("MASK")},
        (("IMAGE", "IMAGE"),),
        display_name="Convert Mask to Image",
        python_module="comfy_extras.nodes_mask",
    ),
    "InvertMask": NodeDef(
        "mask",
        {"mask": LINK("MASK")},
        (("MASK", "MASK"),),
        python_module="comfy_extras.nodes_mask",
    ),
    "GrowMask": NodeDef(
        "mask",
        {
            "mask": LINK("MASK"),
            "expand": INT(0, -MAX_RESOLUTION, MAX_RESOLUTION),
            "tapered_corners": BOOLEAN(True),
        },
        (("MASK", "MASK"),),
        python_module="comfy_extras.nodes_mask",
    ),
    "ThresholdMask": NodeDef(
        "mask",
        {"mask": LINK("MASK"), "value": FLOAT(0.5, 0.0, 1.0)},
        (("MASK", "MASK"),),
        python_module="comfy_extras.nodes_mask",
    ),
    "ImageCompositeMasked": NodeDef(
        "image",
        {
            "destination": LINK("IMAGE"),
            "source": LINK("IMAGE"),
            "x": INT(0, 0, MAX_RESOLUTION),
            "y": INT(0, 0, MAX_RESOLUTION),
            "resize_source": BOOLEAN(False),
        },
        (("IMAGE", "IMAGE"),),
        optional={"mask": LINK("MASK")},
        python_module="comfy_extras.nodes_mask",
    ),
    "CLIPTextEncode": NodeDef(
        "conditioning",
        {
            "text": STRING(multiline=True, dynamicPrompts=True),
            "clip": LINK("CLIP"),
        },
        (("CONDITIONING", "CONDITIONING"),),
        display_name="CLIP Text Encode (Prompt)",
    ),
    "ConditioningZeroOut": NodeDef(
        "advanced/conditioning",
        {"conditioning": LINK("CONDITIONING")},
        (("CONDITIONING", "CONDITIONING"),),
    ),
    "EmptyLatentImage": NodeDef(
        "latent",
        {
            "width": INT(512, 16, MAX_RESOLUTION, 8),
            "height": INT(512, 16, MAX_RESOLUTION, 8),
            "batch_size": BATCH,
        },
        (("LATENT", "LATENT"),),
        display_name="Empty Latent Image",
    ),
    "EmptySD3LatentImage": NodeDef(
        "latent/sd3",
        {"width": WIDTH_HEIGHT_SD3, "height": WIDTH_HEIGHT_SD3, "batch_size": BATCH},
        (("LATENT", "LATENT"),),
        python_module="comfy_extras.nodes_sd3",
    ),
    "ModelSamplingAuraFlow": NodeDef(
        "advanced/model",
        {"model": LINK("MODEL"), "shift": FLOAT(1.73, 0.0, 100.0)},
        (("MODEL", "MODEL"),),
        python_module="comfy_extras.nodes_model_advanced",
    ),
    "ModelSamplingSD3": NodeDef(
        "advanced/model",
        {"model": LINK("MODEL"), "shift": FLOAT(3.0, 0.0, 100.0)},
        (("MODEL", "MODEL"),),
        python_module="comfy_extras.nodes_model_advanced",
    ),
    "ModelSamplingFlux": NodeDef(
        "advanced/model",
        {
            "model": LINK("MODEL"),
            "max_shift": FLOAT(1.15, 0.0, 100.0),
            "base_shift": FLOAT(0.5, 0.0, 100.0),
            "width": INT(1024, 16, MAX_RESOLUTION, 8),
            "height": INT(1024, 16, MAX_RESOLUTION, 8),
        },
        (("MODEL", "MODEL"),),
        python_module="comfy_extras.nodes_model_advanced",
    ),
    "KSampler": NodeDef(
        "sampling",
        {
            "model": LINK("MODEL"),
            "seed": SEED,
            "steps": STEPS,
            "cfg": CFG,
            "sampler_name": Picker("samplers"),
            "scheduler": Picker("schedulers"),
            "positive": LINK("CONDITIONING"),
            "negative": LINK("CONDITIONING"),
            "latent_image": LINK("LATENT"),
            "denoise": FLOAT(1.0, 0.0, 1.0),
        },
        (("LATENT", "LATENT"),),
    ),
    "KSamplerAdvanced": NodeDef(
        "sampling",
        {
            "model": LINK("MODEL"),
            "add_noise": COMBO("enable", "disable"),
            "noise_seed": SEED,
            "steps": STEPS,
            "cfg": CFG,
            "sampler_name": Picker("samplers"),
            "scheduler": Picker("schedulers"),
            "positive": LINK("CONDITIONING"),
            "negative": LINK("CONDITIONING"),
            "latent_image": LINK("LATENT"),
            "start_at_step": INT(0, 0, 10000),
            "end_at_step": INT(10000, 0, 10000),
            "return_with_leftover_noise": COMBO("disable", "enable"),
        },
        (("LATENT", "LATENT"),),
        display_name="KSampler (Advanced)",
    ),
    # Custom sampling (comfy_extras/nodes_custom_sampler.py): read onto `sample` by the importer.
    "SamplerCustom": NodeDef(
        "sampling/custom_sampling",
        {
            "model": LINK("MODEL"),
            "add_noise": BOOLEAN(True),
            "noise_seed": SEED,
            "cfg": CFG,
            "positive": LINK("CONDITIONING"),
            "negative": LINK("CONDITIONING"),
            "sampler": LINK("SAMPLER"),
            "sigmas": LINK("SIGMAS"),
            "latent_image": LINK("LATENT"),
        },
        (("LATENT", "output"), ("LATENT", "denoised_output")),
        python_module=CUSTOM_SAMPLER,
    ),
    "SamplerCustomAdvanced": NodeDef(
        "sampling/custom_sampling",
        {
            "noise": LINK("NOISE"),
            "guider": LINK("GUIDER"),
            "sampler": LINK("SAMPLER"),
            "sigmas": LINK("SIGMAS"),
            "latent_image": LINK("LATENT"),
        },
        (("LATENT", "output"), ("LATENT", "denoised_output")),
        python_module=CUSTOM_SAMPLER,
    ),
    "KSamplerSelect": NodeDef(
        "sampling/custom_sampling/samplers",
        {"sampler_name": Picker("samplers")},
        (("SAMPLER", "SAMPLER"),),
        python_module=CUSTOM_SAMPLER,
    ),
    "BasicScheduler": NodeDef(
        "sampling/custom_sampling/schedulers",
        {
            "model": LINK("MODEL"),
            "scheduler": Picker("schedulers"),
            "steps": STEPS,
            "denoise": FLOAT(1.0, 0.0, 1.0),
        },
        (("SIGMAS", "SIGMAS"),),
        python_module=CUSTOM_SAMPLER,
    ),
    "KarrasScheduler": NodeDef(
        "sampling/custom_sampling/schedulers",
        {
            "steps": STEPS,
            "sigma_max": FLOAT(14.614642, 0.0, 5000.0, round=False),
            "sigma_min": FLOAT(0.0291675, 0.0, 5000.0, round=False),
            "rho": FLOAT(7.0, 0.0, 100.0, round=False),
        },
        (("SIGMAS", "SIGMAS"),),
        python_module=CUSTOM_SAMPLER,
    ),
    "BetaSamplingScheduler": NodeDef(
        "sampling/custom_sampling/schedulers",
        {
            "model": LINK("MODEL"),
            "steps": STEPS,
            "alpha": FLOAT(0.6, 0.0, 50.0, round=False),
            "beta": FLOAT(0.6, 0.0, 50.0, round=False),
        },
        (("SIGMAS", "SIGMAS"),),
        python_module=CUSTOM_SAMPLER,
    ),
    "RandomNoise": NodeDef(
        "sampling/custom_sampling/noise",
        {"noise_seed": SEED},
        (("NOISE", "NOISE"),),
        python_module=CUSTOM_SAMPLER,
    ),
    "DisableNoise": NodeDef(
        "sampling/custom_sampling/noise", {}, (("NOISE", "NOISE"),), python_module=CUSTOM_SAMPLER
    ),
    "CFGGuider": NodeDef(
        "sampling/custom_sampling/guiders",
        {
            "model": LINK("MODEL"),
            "positive": LINK("CONDITIONING"),
            "negative": LINK("CONDITIONING"),
            "cfg": CFG,
        },
        (("GUIDER", "GUIDER"),),
        python_module=CUSTOM_SAMPLER,
    ),
    "BasicGuider": NodeDef(
        "sampling/custom_sampling/guiders",
        {"model": LINK("MODEL"), "conditioning": LINK("CONDITIONING")},
        (("GUIDER", "GUIDER"),),
        python_module=CUSTOM_SAMPLER,
    ),
    "ModelSamplingDiscrete": NodeDef(
        "advanced/model",
        {
            "model": LINK("MODEL"),
            "sampling": COMBO("eps", "v_prediction", "lcm", "x0", "img_to_img"),
            "zsnr": BOOLEAN(False),
        },
        (("MODEL", "MODEL"),),
        python_module="comfy_extras.nodes_model_advanced",
    ),
    "VAEDecode": NodeDef(
        "latent",
        {"samples": LINK("LATENT"), "vae": LINK("VAE")},
        (("IMAGE", "IMAGE"),),
        display_name="VAE Decode",
    ),
    "VAEDecodeTiled": NodeDef(
        "_for_testing",
        {
            "samples": LINK("LATENT"),
            "vae": LINK("VAE"),
            "tile_size": INT(512, 64, 4096, 32),
            "overlap": INT(64, 0, 4096, 32),
            "temporal_size": INT(64, 8, 4096, 4),
            "temporal_overlap": INT(8, 4, 4096, 4),
        },
        (("IMAGE", "IMAGE"),),
        display_name="VAE Decode (Tiled)",
    ),
    "VAEEncode": NodeDef(
        "latent",
        {"pixels": LINK("IMAGE"), "vae": LINK("VAE")},
        (("LATENT", "LATENT"),),
        display_name="VAE Encode",
    ),
    "LoadImage": NodeDef(
        "image",
        {"image": Picker("images", {"image_upload": True})},
        (("IMAGE", "IMAGE"), ("MASK", "MASK")),
        display_name="Load Image",
    ),
    "SaveImage": NodeDef(
        "image",
        {"images": LINK("IMAGE"), "filename_prefix": STRING("ComfyUI")},
        output_node=True,
        display_name="Save Image",
        description="Saves the input images to your ComfyUI output directory.",
        hidden=SAVED,
    ),
    "PreviewImage": NodeDef(
        "image",
        {"images": LINK("IMAGE")},
        output_node=True,
        display_name="Preview Image",
        description="Saves the input images to your ComfyUI output directory.",
        hidden=SAVED,
    ),
    "PrimitiveInt": NodeDef(
        "utils/primitive",
        {"value": INT(0, -INT64, INT64, control_after_generate=True)},
        (("INT", "INT"),),
        display_name="Int",
        python_module="comfy_extras.nodes_primitive",
    ),
    "PrimitiveFloat": NodeDef(
        "utils/primitive",
        {"value": FLOAT(0.0, -float(INT64), float(INT64))},
        (("FLOAT", "FLOAT"),),
        display_name="Float",
        python_module="comfy_extras.nodes_primitive",
    ),
    "PrimitiveBoolean": NodeDef(
        "utils/primitive",
        {"value": BOOLEAN(False)},
        (("BOOLEAN", "BOOLEAN"),),
        display_name="Boolean",
        python_module="comfy_extras.nodes_primitive",
    ),
    "PrimitiveString": NodeDef(
        "utils/primitive",
        {"value": STRING()},
        (("STRING", "STRING"),),
        display_name="String",
        python_module="comfy_extras.nodes_primitive",
    ),
    "PrimitiveStringMultiline": NodeDef(
        "utils/primitive",
        {"value": STRING(multiline=True)},
        (("STRING", "STRING"),),
        display_name="String (Multiline)",
        python_module="comfy_extras.nodes_primitive",
    ),
    "ComfySwitchNode": NodeDef(
        "logic",
        {
            "switch": BOOLEAN(False),
            "on_false": ["*", {"lazy": True}],
            "on_true": ["*", {"lazy": True}],
        },
        (("*", "output"),),
        display_name="Switch",
        python_module="comfy_extras.nodes_logic",
    ),
    "EmptyHunyuanLatentVideo": NodeDef(
        "latent/video",
        {
            "width": INT(848, 16, MAX_RESOLUTION, 16),
            "height": INT(480, 16, MAX_RESOLUTION, 16),
            "length": INT(25, 1, MAX_RESOLUTION, 4),
            "batch_size": BATCH,
        },
        (("LATENT", "LATENT"),),
        display_name="Empty HunyuanVideo 1.0 Latent",
        python_module="comfy_extras.nodes_hunyuan",
    ),
    "Wan22ImageToVideoLatent": NodeDef(
        "conditioning/inpaint",
        {
            "vae": LINK("VAE"),
            "width": INT(1280, 32, MAX_RESOLUTION, 32),
            "height": INT(704, 32, MAX_RESOLUTION, 32),
            "length": INT(49, 1, MAX_RESOLUTION, 4),
            "batch_size": BATCH,
        },
        (("LATENT", "LATENT"),),
        optional={"start_image": LINK("IMAGE")},
        python_module="comfy_extras.nodes_wan",
    ),
    "WanImageToVideo": NodeDef(
        "conditioning/video_models",
        {
            "positive": LINK("CONDITIONING"),
            "negative": LINK("CONDITIONING"),
            "vae": LINK("VAE"),
            "width": INT(832, 16, MAX_RESOLUTION, 16),
            "height": INT(480, 16, MAX_RESOLUTION, 16),
            "length": LENGTH,
            "batch_size": BATCH,
        },
        (("CONDITIONING", "positive"), ("CONDITIONING", "negative"), ("LATENT", "latent")),
        optional={"clip_vision_output": LINK("CLIP_VISION_OUTPUT"), "start_image": LINK("IMAGE")},
        python_module="comfy_extras.nodes_wan",
    ),
    "CLIPVisionLoader": NodeDef(
        "loaders",
        {"clip_name": Picker("clip_vision")},
        (("CLIP_VISION", "CLIP_VISION"),),
        display_name="Load CLIP Vision",
    ),
    "CLIPVisionEncode": NodeDef(
        "conditioning",
        {
            "clip_vision": LINK("CLIP_VISION"),
            "image": LINK("IMAGE"),
            "crop": COMBO("center", "none"),
        },
        (("CLIP_VISION_OUTPUT", "CLIP_VISION_OUTPUT"),),
        display_name="CLIP Vision Encode",
    ),
    "CreateVideo": NodeDef(
        "image/video",
        {"images": LINK("IMAGE"), "fps": FLOAT(30.0, 1.0, 120.0, 1.0)},
        (("VIDEO", "VIDEO"),),
        optional={"audio": LINK("AUDIO")},
        display_name="Create Video",
        python_module="comfy_extras.nodes_video",
    ),
    "SaveVideo": NodeDef(
        "image/video",
        {
            "video": LINK("VIDEO"),
            "filename_prefix": STRING("video/ComfyUI"),
            "format": COMBO("auto", "mp4"),
            "codec": COMBO("auto", "h264"),
        },
        output_node=True,
        display_name="Save Video",
        hidden=SAVED,
        python_module="comfy_extras.nodes_video",
    ),
    "SaveAnimatedWEBP": NodeDef(
        "image/animation",
        {
            "images": LINK("IMAGE"),
            "filename_prefix": STRING("ComfyUI"),
            "fps": FLOAT(6.0, 0.01, 1000.0),
            "lossless": BOOLEAN(True),
            "quality": INT(80, 0, 100),
            "method": COMBO("default", "fastest", "slowest"),
        },
        output_node=True,
        hidden=SAVED,
    ),
}
