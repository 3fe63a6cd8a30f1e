"""LTX-2's ComfyUI recipe (data, torch-free): its template chain collapses onto
`lightricks/ltx-2`.

ComfyUI's LTX-2 templates (text to video and image to video) are one chain: SaveVideo <-
CreateVideo (fps; its audio from LTXVAudioVAEDecode) <- VAEDecode or VAEDecodeTiled <-
LTXVSeparateAVLatent <- SamplerCustomAdvanced: RandomNoise (the seed), CFGGuider (cfg, for both
streams; its prompts through LTXVConditioning) on the CheckpointLoaderSimple's model (the
all-in-one file, the node's `model`), KSamplerSelect (the node's sampler), LTXVScheduler (the
steps; at its published shifts it is the node's own schedule) and LTXVConcatAVLatent of
EmptyLTXVLatentVideo (width, height, length as `frames`; LTXVImgToVideoInplace on it brings the
first frame) and LTXVEmptyLatentAudio; the official templates' second, refining sampler on
LTXVLatentUpsampler's latents is the node's `upscale`. LTXAVTextEncoderLoader's Gemma 3 file
is the node's `text_encoder`. What data does not reach is
`comfy_reader.py`'s.
"""

from __future__ import annotations

from inline_core.contract.comfy_recipe import (
    SAVE_VIDEO,
    ComfyClass,
    ComfyRecipe,
    OwnNode,
    PartLoader,
)
from inline_core.families.ltx2.descriptor import NODE_TYPE
from inline_core.graph.sampler_names import GUIDED_SAMPLERS

SCHEDULER = "LTXVScheduler"
CONDITIONING = "LTXVConditioning"
CONCAT, SEPARATE = "LTXVConcatAVLatent", "LTXVSeparateAVLatent"
VIDEO_LATENT, AUDIO_LATENT = "EmptyLTXVLatentVideo", "LTXVEmptyLatentAudio"
IMAGE_IN_PLACE, PREPROCESS = "LTXVImgToVideoInplace", "LTXVPreprocess"
UPSAMPLER, UPSCALE_LOADER = "LTXVLatentUpsampler", "LatentUpscaleModelLoader"
CROP_GUIDES = "LTXVCropGuides"
AUDIO_VAE_LOADER, TEXT_ENCODER_LOADER = "LTXVAudioVAELoader", "LTXAVTextEncoderLoader"

RECIPE = ComfyRecipe(
    own_node=OwnNode(
        node=NODE_TYPE,
        sinks={"SaveVideo": SAVE_VIDEO},
        # Read by the reader (the audio latent beside the video's): none by data.
        latents={},
        samplers=GUIDED_SAMPLERS,
        sampler_defaults={"seed": 0, "steps": 20, "cfg": 4.0},
        model_nodes={},
        conditioning_through=(CONDITIONING, CROP_GUIDES),
        # LTXAVTextEncoderLoader's Gemma 3 file: the node's `text_encoder` picker.
        parts={TEXT_ENCODER_LOADER: PartLoader("text_encoder", "text_encoder", "text_encoders")},
        reader="inline_core.families.ltx2.comfy_reader:LTX2Collapse",
    ),
    classes={
        SCHEDULER: ComfyClass(
            ("steps", "max_shift", "base_shift", "stretch", "terminal"), ("SIGMAS",)
        ),
        "ManualSigmas": ComfyClass(("sigmas",), ("SIGMAS",)),
        CONDITIONING: ComfyClass(("frame_rate",), ("CONDITIONING", "CONDITIONING")),
        VIDEO_LATENT: ComfyClass(("width", "height", "length", "batch_size"), ("LATENT",)),
        AUDIO_LATENT: ComfyClass(("frames_number", "frame_rate", "batch_size"), ("LATENT",)),
        CONCAT: ComfyClass((), ("LATENT",)),
        SEPARATE: ComfyClass((), ("LATENT", "LATENT")),
        AUDIO_VAE_LOADER: ComfyClass(("ckpt_name",), ("VAE",)),
        TEXT_ENCODER_LOADER: ComfyClass(("text_encoder", "ckpt_name", "device"), ("CLIP",)),
        "LTXVAudioVAEDecode": ComfyClass((), ("AUDIO",)),
        UPSAMPLER: ComfyClass((), ("LATENT",)),
        UPSCALE_LOADER: ComfyClass(("model_name",), ("LATENT_UPSCALE_MODEL",)),
        CROP_GUIDES: ComfyClass((), ("CONDITIONING", "CONDITIONING", "LATENT")),
        IMAGE_IN_PLACE: ComfyClass(("strength", "bypass"), ("LATENT",)),
        PREPROCESS: ComfyClass(("img_compression",), ("IMAGE",)),
        "EmptyImage": ComfyClass(("width", "height", "batch_size", "color"), ("IMAGE",)),
        "ImageScaleBy": ComfyClass(("upscale_method", "scale_by"), ("IMAGE",)),
        "GetImageSize": ComfyClass((), ("INT", "INT", "INT")),
    },
)
