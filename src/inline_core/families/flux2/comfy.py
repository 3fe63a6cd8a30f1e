"""FLUX.2's ComfyUI recipe (data, torch-free): its template chains collapse onto `bfl/flux-2`.

ComfyUI's FLUX.2 klein templates (text to image and image edit, 4B and 9B, distilled and base)
and FLUX.2 dev's (text to image and image edit: a BasicGuider, the prompt through FluxGuidance,
whose value is the node's embedded `guidance`) are one chain each: SaveImage <- VAEDecode <-
SamplerCustomAdvanced, read as the KSampler it amounts to (`importer/custom_collapse.py`):
RandomNoise (the seed), CFGGuider (the model on its UNETLoader, cfg as `guidance`, two prompts),
KSamplerSelect (the node's sampler), Flux2Scheduler (the steps; its schedule is the model's own)
and EmptyFlux2LatentImage (width, height). An
edit's positive prompt passes through ReferenceLatent nodes, each the VAEEncode of an image: in
the order they are applied, the node's `image`, `image2` and `image3`. What data does not reach
is `comfy_reader.py`'s.
"""

from __future__ import annotations

from inline_core.contract.comfy_recipe import (
    ComfyClass,
    ComfyRecipe,
    Latent,
    NodeNames,
    OwnNode,
    Sink,
)
from inline_core.families.flux2.descriptor import NODE_TYPE
from inline_core.graph.sampler_names import GUIDED_SAMPLERS

SCHEDULER = "Flux2Scheduler"
LATENT = "EmptyFlux2LatentImage"
REFERENCE = "ReferenceLatent"
GUIDANCE = "FluxGuidance"  # dev's embedded guidance, set on the prompt's conditioning
SIZE = {"width": "width", "height": "height"}

RECIPE = ComfyRecipe(
    own_node=OwnNode(
        node=NODE_TYPE,
        sinks={"SaveImage": Sink("images")},
        latents={LATENT: Latent(SIZE, {"width": 1024, "height": 1024})},
        samplers=GUIDED_SAMPLERS,
        # ComfyUI's own defaults (Flux2Scheduler's 20 steps, CFGGuider's cfg 8).
        sampler_defaults={"seed": 0, "steps": 20, "cfg": 8.0},
        model_nodes={},  # the node's schedule is the model's own: no shift to set
        names=NodeNames(negative_prompt=None),  # guided against the empty prompt, as diffusers
        reader="inline_core.families.flux2.comfy_reader:Flux2Collapse",
    ),
    # Off the node's chain (a split schedule, img2img), Flux2Scheduler onto `sample`'s mu.
    sigma_sources="inline_core.families.flux2.comfy_sigmas:SIGMA_SOURCES",
    classes={
        SCHEDULER: ComfyClass(("steps", "width", "height"), ("SIGMAS",)),
        LATENT: ComfyClass(("width", "height", "batch_size"), ("LATENT",)),
        REFERENCE: ComfyClass((), ("CONDITIONING",)),
        GUIDANCE: ComfyClass(("guidance",), ("CONDITIONING",)),
        "GetImageSize": ComfyClass((), ("INT", "INT", "INT")),
    },
)
