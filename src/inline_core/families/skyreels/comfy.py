"""SkyReels-V2's ComfyUI recipe (data, torch-free): what of ComfyUI's SkyReels-V2 workflows
imports onto `skywork/skyreels-v2`.

ComfyUI runs SkyReels-V2 checkpoints through its native Wan nodes: Wan 2.1's text-to-video chain
(UNETLoader, CLIPLoader `wan`, two CLIPTextEncode, EmptyHunyuanLatentVideo, ModelSamplingSD3,
KSampler, VAEDecode, CreateVideo/SaveVideo or SaveAnimatedWEBP); the KSampler's sampler_name and
scheduler are the node's `sampler` and `schedule` (`comfy_reader.py`). Which node it imports onto is
told by the model file: a file the SkyReels-V2 family takes (`files.py`: a DF folder, the fps
embedding in its header, or `skyreels` in its name) imports onto this node, a plain Wan file onto
`alibaba/wan`. The chain renders one window with every frame at the sampler's step, which is
this node with no `base_frames`, `ar_step` 0 and blocks of 1 latent frame (its defaults). One
difference is the model's own: ComfyUI's Wan model has no fps embedding and leaves a SkyReels-V2
file's unused, where this node conditions on the workflow's fps through it, as diffusers and
SkyReels' own code do; the import lists it as changing the picture (`comfy_reader.py`).

Not imported:
- Wan's image-to-video chains (`WanImageToVideo`): a SkyReels-V2 I2V checkpoint is Wan 2.1's
  image-to-video model, with CLIP vision, which this node is not (its image input is the
  diffusion-forcing first frame); such a chain with a SkyReels-V2 file is refused as not this
  node's chain.
- Kijai's WanVideoWrapper diffusion-forcing workflow (`WanVideoDiffusionForcingSampler` over
  `WanVideoModelLoader`, `LoadWanVideoT5TextEncoder`, `WanVideoTextEncode`, `WanVideoEmptyEmbeds`,
  `WanVideoDecode`). Its sampler's window is fixed (one window of the whole length, `ar_step` 0,
  blocks of 1: this node's defaults) and its steps, cfg, shift, seed and fps are this node's, but
  the rest is not one to one: `prefix_samples` with `addnoise_condition` (a noised clean prefix:
  this node has no such noise), `samples` with `denoise_strength` (video to video by noising),
  its cache, SLG and experimental args, and its loaders' precision and quantization, read by
  classes this importer does not know. The workflow is refused naming the sampler and this node
  (`importer/known_families.py` lists the sampler as SkyReels-V2's), rather than imported in part.
"""

from __future__ import annotations

from dataclasses import replace

from inline_core.contract.comfy_recipe import ComfyRecipe, Latent
from inline_core.families.skyreels.descriptor import NODE_TYPE
from inline_core.families.wan.comfy import RECIPE as WAN_RECIPE
from inline_core.families.wan.comfy import SIZES, VIDEO

_WAN = WAN_RECIPE.own_node
assert _WAN is not None  # Wan's recipe is its own node's chain

# Wan's text-to-video chain, its sinks, sampler and loaders, onto this node; no image latent.
RECIPE = ComfyRecipe(
    own_node=replace(
        _WAN,
        node=NODE_TYPE,
        latents={"EmptyHunyuanLatentVideo": Latent(VIDEO, SIZES)},
        conditioning_through=(),
        reader="inline_core.families.skyreels.comfy_reader:SkyReelsCollapse",
    )
)
