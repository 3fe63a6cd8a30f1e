"""LTX-2.5: what it is made of, how it is told from 2.0/2.3, and what it needs to render here
(torch-free; runs at submit).

What diffusers 0.42 makes of LTX-2.5 (`pipelines/ltx2`, `modular_pipelines/ltx2`):
- The denoiser is LTX-2's `LTX2VideoTransformer3DModel` (video and audio streams, cross
  timestep as 2.3's), with the same connectors (`LTX2TextConnectors`), video VAE
  (`AutoencoderKLLTX2Video`: its latent space and its encoder, for an image's first frame),
  audio VAE (`AutoencoderKLLTX2Audio`) and vocoder (`LTX2Vocoder` / `LTX2VocoderWithBWE`).
- Its text encoder is Gemma 4 (`Gemma4UnifiedForConditionalGeneration`, model_type
  `gemma4_unified`), read as Gemma 3 is: every layer's hidden states, stacked, left-padded.
  `LTX2Pipeline` takes it as its `text_encoder` unchanged.
- Its video decoder is a diffusion model of its own (`LTX2VideoDiffusionDecoderModel`, the
  folder's `diffusion_decoder/`): deterministic neighbourhood-attention stages build a context
  volume from the denormalized latents, then a last stage denoises pixels drawn as noise from
  the render's generator (after the video and audio noise), conditioned on it. Its scheduler is
  inside the model (a linear 1 -> 0 Euler loop; LTX-2.5 ships one x0 step), so the folder's
  `scheduler/` stays the transformer's. diffusers runs it as `LTX25AutoBlocks`' decode step
  (`LTX2DiffusionVaeDecoderStep`), or as `LTX2Pipeline(output_type="latent")` followed by
  `LTX2VideoDiffusionDecodePipeline(denormalize=False)` with the same generator: the plain
  text-to-video render this node matches.
- Its two-stage `upscale` runs as diffusers' classes chain it for 2.0 (`LTX2Pipeline` at half
  the size, `LTX2LatentUpsamplePipeline`, `LTX2Pipeline` again as the refining pass), then the
  diffusion decoder with the refining pass's generator, on the recipe of ComfyUI's official
  LTX-2.5 templates (Comfy-Org/workflow_templates `templates/video_ltx2_5_t2v.json`,
  `video_ltx2_5_i2v.json`) where the params leave it (`versions.py`). What the node still
  renders otherwise than those templates: the refining pass's noise comes from the request's
  seed (the template's second RandomNoise is a fixed 42); sizes are multiples of 64 (the
  template halves 1280x720 and ComfyUI floors the latent); the template's i2v first pass holds
  its frame at strength 0.7 (LTXVImgToVideoInplace), the node keeps it clean; its prompt
  enhancer (TextGenerateLTX2Prompt) is not run; its negative prompt is unused at cfg 1 either
  way. diffusers' own multi-stage 2.5 recipe, DFR (`LTX2DFRPipeline` passes appending
  keyframe-slot tokens and the first pass as an IC-LoRA reference,
  `LTX2DFRTemporalRefinePipeline` rounds), is another render, not run here.

A folder is LTX-2.5 when its text encoder is Gemma 4 (`config.json`'s model_type), whatever its
name; it then needs its `diffusion_decoder/`. Text and image to video render as 2.0's do (the
image re-compressed at 2.5's conditioning CRF, 18, as diffusers resolves it from Gemma 4), the
decode aside, and so does `upscale` (above). Its decoder may also be ComfyUI's LTX-2.5
video VAE file in `vae/` (`diffusion_vae_file.py`), where the folder has no
`diffusion_decoder/`. ComfyUI's other LTX-2.5 files are not read (`comfy_ltx25.py`).
"""

from __future__ import annotations

from pathlib import Path

from inline_core.contract.files import read_json
from inline_core.errors import ModelMissing
from inline_core.families.ltx2.diffusion_vae_file import is_diffusion_vae_file
from inline_core.families.ltx2.diffusion_vae_file import problem as diffusion_vae_problem
from inline_core.models.catalog import Catalog
from inline_core.models.source import Source

ENCODER_PREFIX = "gemma4"  # Gemma 4's model_types: gemma4, gemma4_unified
ENCODER_TYPE = "gemma4_unified"  # the one LTX2Pipeline takes as its text encoder
DECODER_SUBFOLDER = "diffusion_decoder"
DECODER_CLASS = "LTX2VideoDiffusionDecoderModel"
VAE_CATEGORY = "vae"  # where ComfyUI's LTX-2.5 templates keep its video VAE file


def encoder_kind(encoder: Source | None) -> str:
    """The text encoder folder's model_type ("" for a file or none)."""
    if encoder is None or encoder.is_file:
        return ""
    config = read_json(encoder.location / "config.json")
    return "" if config is None else str(config.get("model_type") or "")


def is_ltx25(encoder: Source | None) -> bool:
    return encoder_kind(encoder).startswith(ENCODER_PREFIX)


def decoder_folder(transformer: Source | None) -> Path | None:
    """The model folder's diffusion decoder (None: there is none)."""
    if transformer is None or transformer.subfolder is None:
        return None
    folder = transformer.path / DECODER_SUBFOLDER
    config = read_json(folder / "config.json")
    return folder if config is not None and config.get("_class_name") == DECODER_CLASS else None


def decoder_file(catalog: Catalog | None, node_id: str) -> Path | None:
    """ComfyUI's LTX-2.5 video VAE file in `vae/` (`diffusion_vae_file.py`), the only one; a
    422 where it cannot be read or there are several."""
    if catalog is None:
        return None
    entries = catalog.entries(VAE_CATEGORY)
    found = [e.path for e in entries if not e.is_folder and is_diffusion_vae_file(e.path)]
    if len(found) > 1:
        raise ModelMissing(
            f"{len(found)} LTX-2.5 diffusion video VAE files are in {catalog.root / VAE_CATEGORY} "
            f"({', '.join(p.name for p in found[:3])}): keep one, or put the model folder's "
            f"{DECODER_SUBFOLDER}/",
            node_id=node_id,
        )
    if found:
        wrong = diffusion_vae_problem(found[0])
        if wrong is not None:
            raise ModelMissing(
                f"the diffusion video VAE {found[0]} cannot be read: {wrong}", node_id=node_id
            )
    return found[0] if found else None


def check_ltx25(
    transformer: Source | None,
    encoder: Source | None,
    node_id: str,
    catalog: Catalog | None = None,
) -> Path | None:
    """On an LTX-2.5 stack, its diffusion decoder: the model folder's `diffusion_decoder/`,
    else ComfyUI's video VAE file in `vae/` (a 422 naming what is missing); None on 2.0/2.3."""
    if not is_ltx25(encoder):
        return None
    kind = encoder_kind(encoder)
    if kind != ENCODER_TYPE:
        raise ModelMissing(
            f"this model's text encoder {encoder.location if encoder else ''} is Gemma 4 of "
            f"model_type {kind!r}: LTX-2.5's is {ENCODER_TYPE!r} "
            "(Gemma4UnifiedForConditionalGeneration, as diffusers' LTX-2.5 folder holds it)",
            node_id=node_id,
        )
    folder = decoder_folder(transformer) or decoder_file(catalog, node_id)
    if folder is None:
        where = transformer.path if transformer is not None else "the model"
        raise ModelMissing(
            f"this model is LTX-2.5 (its text encoder is {encoder_kind(encoder)}), which decodes "
            f"its video with a diffusion decoder: {where} has no {DECODER_SUBFOLDER}/ "
            f"({DECODER_CLASS}) and {VAE_CATEGORY}/ holds no ComfyUI LTX-2.5 video VAE file; put "
            f"LTX-2.5's diffusers folder, its {DECODER_SUBFOLDER}/ included, in "
            f"diffusion_models, or ComfyUI's ltx-2.5-video-vae file in {VAE_CATEGORY}/",
            node_id=node_id,
        )
    return folder
