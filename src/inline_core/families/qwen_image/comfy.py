"""Qwen-Image's ComfyUI recipe (data, torch-free): its template chains collapse onto
`alibaba/qwen-image`.

ComfyUI's Qwen-Image templates (Qwen-Image and 2512 text to image, Qwen-Image-Edit 2509/2511
from one to three images) are one chain each: SaveImage (or SaveImageAdvanced) <- VAEDecode <-
KSampler (seed, steps, cfg as `guidance`, diffusers' `true_cfg_scale`; its sampler and scheduler
the node's) <- CFGNorm <- ModelSamplingAuraFlow (shift) <- LoraLoaderModelOnly (Lightning) <-
UNETLoader, two prompts (CLIPTextEncode, or TextEncodeQwenImageEditPlus, whose `image1`..`image3`
are the node's `image`..`image3`) and a latent: EmptySD3LatentImage (width, height) or, for an
edit, the VAEEncode of its first image (the node sizes an edit's output itself). What data does
not reach is `comfy_reader.py`'s: image scalers on an image's way, the reference method node of
Edit 2511's conditioning, CFGNorm, and the first Edit's TextEncodeQwenImageEdit, refused (its
prompt template is not the one rendered here).
"""

from __future__ import annotations

from inline_core.contract.comfy_recipe import (
    ComfyClass,
    ComfyRecipe,
    Encoder,
    Latent,
    OwnNode,
    Sink,
    default_encoders,
)
from inline_core.families.qwen_image.descriptor import NODE_TYPE
from inline_core.graph.sampler_names import GUIDED_SAMPLERS

CFG_NORM = "CFGNorm"
REFERENCE_METHOD = "FluxKontextMultiReferenceLatentMethod"
# Classes that scale an image on its way to an encoder or the latent: the model scales its
# references itself (`comfy_reader.py` says so where it changes the picture).
IMAGE_SCALERS = ("FluxKontextImageScale", "ImageScaleToTotalPixels")
EDIT_IMAGES = {"image1": "image", "image2": "image2", "image3": "image3"}
SIZE = {"width": "width", "height": "height"}

RECIPE = ComfyRecipe(
    own_node=OwnNode(
        node=NODE_TYPE,
        sinks={
            "SaveImage": Sink("images"),
            "SaveImageAdvanced": Sink("images"),
        },
        latents={
            "EmptySD3LatentImage": Latent(SIZE, {"width": 1328, "height": 1328}),
            # An edit's latent: its first image encoded, only its size read (denoise 1).
            "VAEEncode": Latent({}),
        },
        samplers=GUIDED_SAMPLERS,  # the node's own: CFG++ ones too
        sampler_defaults={"seed": 0, "steps": 50, "cfg": 4.0},
        model_nodes={"ModelSamplingAuraFlow": {"shift": "shift"}, CFG_NORM: {}},
        encoders={
            **default_encoders(),
            # Read to be refused by name (`comfy_reader.py`): the first Edit's template.
            "TextEncodeQwenImageEdit": Encoder(text="prompt", images={"image": "image"}),
            "TextEncodeQwenImageEditPlus": Encoder(text="prompt", images=EDIT_IMAGES),
        },
        reader="inline_core.families.qwen_image.comfy_reader:QwenImageCollapse",
    ),
    classes={
        "TextEncodeQwenImageEdit": ComfyClass(("prompt",), ("CONDITIONING",)),
        "TextEncodeQwenImageEditPlus": ComfyClass(("prompt",), ("CONDITIONING",)),
        CFG_NORM: ComfyClass(("strength",), ("MODEL",)),
        REFERENCE_METHOD: ComfyClass(("reference_latents_method",), ("CONDITIONING",)),
        "FluxKontextImageScale": ComfyClass((), ("IMAGE",)),
        "ImageScaleToTotalPixels": ComfyClass(("upscale_method", "megapixels"), ("IMAGE",)),
        "SaveImageAdvanced": ComfyClass(("filename_prefix", "format", "bit_depth", "color")),
    },
)
