"""Wan's ComfyUI recipe (data, torch-free): its template chains collapse onto `alibaba/wan`.

ComfyUI's Wan templates (Wan 2.1 text-to-video, Wan 2.2 5B text/image-to-video, Wan 2.1
image-to-video, Wan 2.2 A14B) are one chain each: SaveVideo <- CreateVideo (fps) or
SaveAnimatedWEBP (fps, rendered as a lossless animated PNG) <- VAEDecode <- KSampler (seed, steps,
cfg as `guidance`, which counts as diffusers' guidance scale does; sampler_name and scheduler as
the node's `sampler` and `schedule`, one to one) <- ModelSamplingSD3 (shift) <-
UNETLoader, two CLIPTextEncode prompts, and a latent: EmptyHunyuanLatentVideo,
Wan22ImageToVideoLatent or WanImageToVideo (width, height, length as `frames`; the optional start
image is the node's `image`). What data does not reach is `comfy_reader.py`'s: the sampler's
names, A14B's two KSamplerAdvanced stages (`comfy_stages.py`), a SamplerCustomAdvanced chain and
2.1's CLIP-vision chain (`comfy_clip_vision.py`).
"""

from __future__ import annotations

from inline_core.contract.comfy_recipe import SAVE_VIDEO, ComfyRecipe, Latent, OwnNode, Sink
from inline_core.families.wan.descriptor import NODE_TYPE
from inline_core.graph.sampler_names import GUIDED_SAMPLERS

I2V = "WanImageToVideo"  # 2.1's image-to-video latent: its prompts pass through it
VIDEO = {"width": "width", "height": "height", "length": "frames"}
SIZES = {"width": 832, "height": 480, "length": 81}

RECIPE = ComfyRecipe(
    own_node=OwnNode(
        node=NODE_TYPE,
        sinks={
            "SaveVideo": SAVE_VIDEO,
            "SaveAnimatedWEBP": Sink(
                "images",
                params={"fps": "fps"},
                fixed={"format": "png"},
                note="WebP is not offered; the take is a lossless animated PNG",
            ),
        },
        latents={
            "EmptyHunyuanLatentVideo": Latent(VIDEO, SIZES),
            "Wan22ImageToVideoLatent": Latent(VIDEO, SIZES, image="start_image"),
            I2V: Latent(VIDEO, SIZES, image="start_image"),
        },
        samplers=GUIDED_SAMPLERS,  # each onto the node's own, a name it lacks refused
        sampler_defaults={"seed": 0, "steps": 30, "cfg": 5.0},
        conditioning_through=(I2V,),
        reader="inline_core.families.wan.comfy_reader:WanCollapse",
    )
)
