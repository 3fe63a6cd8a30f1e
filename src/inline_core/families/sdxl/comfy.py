"""SDXL's ComfyUI recipe (data, torch-free): its workflows collapse onto `stability/sdxl`.

ComfyUI's classic default graph and its SDXL template are one chain: SaveImage (or PreviewImage)
<- VAEDecode <- KSampler (seed, steps, cfg as `guidance`, sampler_name and scheduler as the
node's `sampler` and `schedule`) <- the checkpoint's MODEL through LoraLoaders, two
CLIPTextEncode prompts on its CLIP (through the same LoraLoaders and a CLIPSetLastLayer, the
node's `clip_skip`), and an EmptyLatentImage (width, height). SDXL Turbo's template samples with
SamplerCustom (KSamplerSelect's sampler, SDTurboScheduler's sigmas) instead of KSampler. A
VAELoader's file is the node's `vae`. What the data does not reach (the checkpoint loader
itself, LoraLoader's two strengths, CLIPSetLastLayer, the base + refiner chain, the
Turbo chain) is `comfy_reader.py`'s.
"""

from __future__ import annotations

from inline_core.contract.comfy_recipe import (
    ComfyClass,
    ComfyRecipe,
    Latent,
    OwnNode,
    PartLoader,
    Sink,
)
from inline_core.families.sdxl.descriptor import NODE_TYPE

CHECKPOINT_LOADER = "CheckpointLoaderSimple"
CLIP_LAYER = "CLIPSetLastLayer"  # its `stop_at_clip_layer` is the node's `clip_skip`
TURBO_SCHEDULER = "SDTurboScheduler"  # SDXL Turbo's template: its sigmas from a SamplerCustom


def sd_recipe(node_type: str, reader: str) -> ComfyRecipe:
    """The default graph's chain onto `node_type`, what data does not reach read by `reader`
    (SDXL's and SD 1.5's nodes read one chain)."""
    return ComfyRecipe(
        own_node=OwnNode(
            node=node_type,
            sinks={"SaveImage": Sink("images"), "PreviewImage": Sink("images")},
            latents={
                "EmptyLatentImage": Latent(
                    {"width": "width", "height": "height"}, {"width": 512, "height": 512}
                )
            },
            sampler_defaults={"seed": 0, "steps": 20, "cfg": 8.0},  # KSampler's own defaults
            model_nodes={},
            parts={"VAELoader": PartLoader("vae_name", "vae", "vae")},
            reader=reader,
        ),
        classes={
            CLIP_LAYER: ComfyClass(widgets=("stop_at_clip_layer",), outputs=("CLIP",)),
            TURBO_SCHEDULER: ComfyClass(widgets=("steps", "denoise"), outputs=("SIGMAS",)),
            # The hires fix's latent upscales (`comfy_hires.py`).
            "LatentUpscale": ComfyClass(
                widgets=("upscale_method", "width", "height", "crop"), outputs=("LATENT",)
            ),
            "LatentUpscaleBy": ComfyClass(
                widgets=("upscale_method", "scale_by"), outputs=("LATENT",)
            ),
        },
    )


RECIPE = sd_recipe(NODE_TYPE, "inline_core.families.sdxl.comfy_reader:SDXLCollapse")
