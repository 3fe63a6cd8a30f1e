"""Krea 2's ComfyUI recipe (data, torch-free): its template chains collapse onto `krea/krea-2`.

ComfyUI's Krea 2 Turbo text-to-image template is one chain: SaveImage <- VAEDecode <- KSampler
(seed, steps, cfg, its sampler and scheduler the node's) <- LoraLoaderModelOnly (its style LoRA,
switched) <- UNETLoader, a CLIPTextEncode prompt and its ConditioningZeroOut as the negative, and
EmptyLatentImage (width, height); a CLIPLoader of type `krea2` and a VAELoader are the node's
`text_encoder` and `vae`. ComfyUI's cfg counts `uncond + cfg * (cond - uncond)`, Krea's guidance
`cond + g * (cond - uncond)`: g is cfg - 1. What data does not reach is `comfy_reader.py`'s.
"""

from __future__ import annotations

from inline_core.contract.comfy_recipe import ComfyRecipe, Latent, OwnNode, Sink
from inline_core.families.krea2.descriptor import NODE_TYPE
from inline_core.graph.sampler_names import GUIDED_SAMPLERS

SIZE = {"width": "width", "height": "height"}

RECIPE = ComfyRecipe(
    own_node=OwnNode(
        node=NODE_TYPE,
        sinks={"SaveImage": Sink("images")},
        latents={"EmptyLatentImage": Latent(SIZE, {"width": 1024, "height": 1024})},
        samplers=GUIDED_SAMPLERS,
        sampler_defaults={"seed": 0, "steps": 20, "cfg": 8.0},  # KSampler's own defaults
        model_nodes={},  # the node's schedule is the model's own: no shift to set
        reader="inline_core.families.krea2.comfy_reader:Krea2Collapse",
    ),
)
