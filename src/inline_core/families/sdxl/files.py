"""Which files make an SDXL stack, and how each is recognised (torch-free; runs at submit).

- the diffusion model: an all-in-one checkpoint in `checkpoints/` in the original Stability
  naming (its UNet, VAE and both text encoders as views of one file), a split UNet file in
  `diffusion_models/`, or a diffusers `StableDiffusionXLPipeline` folder (in either folder),
  which brings every part and its scheduler config;
- the VAE: the checkpoint's, the folder's, or a 4-channel LDM VAE in `vae/` (a `vae` param picks
  one, overriding the checkpoint's, as ComfyUI's VAELoader does);
- the text encoders: CLIP-L and OpenCLIP-G, the checkpoint's (`conditioner.embedders.0.` and
  `.1.`) or the folder's, or split files in `text_encoders/`; the CLIP tokenizer from the folder,
  or a `text_encoders/` folder named like `clip_tokenizer` (a checkpoint carries none).

`INLINE_SDXL_MODEL`, `INLINE_SDXL_VAE`, `INLINE_SDXL_TEXT_ENCODER(_2)` override each part.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from inline_core.contract.files import (
    ModelRule,
    PartRule,
    Score,
    StackRules,
    TokenizerRule,
    read_json,
)
from inline_core.diffusion.files.header import HEADERS, HeaderError
from inline_core.diffusion.files.shapes import Shapes, read_shapes
from inline_core.diffusion.formats import clip, ldm_vae
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.families.sdxl import unet
from inline_core.families.sdxl.refiner import is_refiner
from inline_core.models.catalog import CatalogEntry
from inline_core.models.source import Source

FAMILY, TITLE = "sdxl", "SDXL"
SDXL_VAE_SCALING = 0.13025  # not stored in a VAE file: SDXL's latent scale (ComfyUI's too)
# SDXL base's scheduler (a checkpoint brings none): epsilon prediction on SD's betas.
DEFAULT_SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "EulerDiscreteScheduler",
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "num_train_timesteps": 1000,
    "prediction_type": "epsilon",
}
SDXL_NAME = re.compile(r"sdxl|[-_ ]xl[-_ .]|pony|illustrious|noob", re.IGNORECASE)
TOKENIZER_NAME = re.compile(r"clip.*tokenizer|tokenizer.*clip", re.IGNORECASE)
L_VIEWS, G_VIEWS = ("0", "clip_l"), ("1", "clip_g")
V_PRED_KEY = "v_pred"  # an empty tensor a v-prediction checkpoint carries
ZTSNR_KEY = "ztsnr"  # and one trained with zero terminal SNR, beside it


def prediction_of(source: Source) -> dict[str, Any]:
    """A checkpoint's own sampling, as scheduler config keys over the default: v-prediction
    where it carries the `v_pred` marker tensor (NoobAI's and other v-prediction SDXL
    checkpoints), with zero terminal SNR where `ztsnr` is beside it, as ComfyUI reads them;
    empty: the scheduler config's (epsilon by default)."""
    if not source.is_file:
        return {}
    try:
        keys = HEADERS.get(source.path)
    except (HeaderError, OSError):
        return {}
    if V_PRED_KEY not in keys:
        return {}
    return {"prediction_type": "v_prediction", "rescale_betas_zero_snr": ZTSNR_KEY in keys}


def own_prediction(model: Source, scheduler: Source | None = None) -> str:
    """How a model samples by its own files, in ModelSamplingDiscrete's words (`eps`,
    `v_prediction`, with ` + zsnr`): its checkpoint's markers over its scheduler config (a
    diffusers folder's; SDXL's default for a checkpoint)."""
    folder = None if scheduler is None else read_json(scheduler.location / "scheduler_config.json")
    config = {**DEFAULT_SCHEDULER_CONFIG, **(folder or {}), **prediction_of(model)}
    kind = "eps" if config.get("prediction_type") == "epsilon" else str(config["prediction_type"])
    return kind + (" + zsnr" if config.get("rescale_betas_zero_snr") else "")


def refiner_refusal(path: Path | None) -> str | None:
    """Why a checkpoint is no base model: an SDXL refiner's (`refiner.is_refiner`); None for a
    base."""
    if not is_refiner(path):
        return None
    name = "" if path is None else path.name
    return (
        f"{name} is an SDXL refiner checkpoint (its one text encoder is OpenCLIP-G "
        "at conditioner.embedders.0., its UNet conditioned on an aesthetic score): it "
        "refines a base model's render; pick a base checkpoint as the model and this one as "
        "its refiner"
    )


def vae_format(title: str, scaling: float) -> ModelFormat:
    """A 4-channel LDM VAE at a family's latent scale (a VAE file stores none)."""

    def infer(shapes: Shapes) -> dict[str, Any]:
        return {**ldm_vae.infer_config(shapes), "scaling_factor": scaling}

    return replace(ldm_vae.FORMAT, title=title, infer_config=infer)


VAE_FORMAT = vae_format("SDXL VAE", SDXL_VAE_SCALING)


def four_channel_vae(name: re.Pattern[str]) -> Score:
    """A 4-channel LDM VAE (SD's latents); one whose name matches ranks first."""

    def score(entry: CatalogEntry, _unet: Source | None) -> int | None:
        named = 1 if name.search(entry.name) else 0
        if entry.is_folder:
            config = read_json(entry.path / "config.json")
            return named if config is not None and config.get("latent_channels") == 4 else None
        shapes = read_shapes(entry.path)
        if shapes is None or not ldm_vae.is_ldm_vae(shapes):
            return None
        return named if ldm_vae.latent_channels(shapes) == 4 else None

    return score


vae_score = four_channel_vae(SDXL_NAME)


def encoder_score(projected: bool, name: re.Pattern[str]) -> Score:
    def score(entry: CatalogEntry, _unet: Source | None) -> int | None:
        named = 1 if name.search(entry.name) else 0
        if entry.is_folder:
            config = read_json(entry.path / "config.json")
            if config is None or config.get("model_type") not in (clip.MODEL_TYPE, "clip"):
                return None
            architectures: object = config.get("architectures")
            names = [str(a) for a in cast(list[object], architectures or [])]
            with_projection = any(a.endswith("WithProjection") for a in names)
            return named if with_projection == projected else None
        shapes = read_shapes(entry.path)
        if shapes is None or not clip.is_clip_text(shapes):
            return None
        return named if not projected or clip.projects(shapes) else None

    return score


def tokenizer_fallback() -> Path | None:
    return None  # no package ships CLIP's vocabulary; a folder in text_encoders/ does


RULES = StackRules(
    title=TITLE,
    family=FAMILY,
    model=ModelRule(
        title="SDXL diffusion model",
        override="INLINE_SDXL_MODEL",
        pipeline_prefix="StableDiffusionXL",
        transformer_class="UNet2DConditionModel",
        recognize=unet.is_sdxl,
        name=SDXL_NAME,
        hint=(
            "put an SDXL checkpoint (sd_xl_base_1.0.safetensors, or any community SDXL "
            "checkpoint) in {root}/checkpoints, or set INLINE_SDXL_MODEL"
        ),
        subfolder="unet",
        looks=unet.looks,
    ),
    parts=(
        PartRule(
            part="vae",
            label="vae",
            title="4-channel SDXL VAE",
            category="vae",
            subfolder="vae",
            override="INLINE_SDXL_VAE",
            score=vae_score,
            hint="put the SDXL VAE (sdxl_vae.safetensors) in {root}/vae, or set INLINE_SDXL_VAE",
        ),
        PartRule(
            part="text_encoder",
            label="text encoder",
            title="CLIP-L text encoder",
            category="text_encoders",
            subfolder="text_encoder",
            override="INLINE_SDXL_TEXT_ENCODER",
            score=encoder_score(False, re.compile(r"clip[-_]?l", re.IGNORECASE)),
            hint="put CLIP-L (clip_l.safetensors) in {root}/text_encoders",
            checkpoint_views=L_VIEWS,
        ),
        PartRule(
            part="text_encoder_2",
            label="text encoder 2",
            title="OpenCLIP-G text encoder",
            category="text_encoders",
            subfolder="text_encoder_2",
            override="INLINE_SDXL_TEXT_ENCODER_2",
            score=encoder_score(True, re.compile(r"clip[-_]?g", re.IGNORECASE)),
            hint="put OpenCLIP-G (clip_g.safetensors) in {root}/text_encoders",
            checkpoint_views=G_VIEWS,
        ),
    ),
    tokenizer=TokenizerRule(
        part="text_encoder",
        fallback=tokenizer_fallback,
        folder=TOKENIZER_NAME,
        hint=(
            "a checkpoint carries no tokenizer: put CLIP's tokenizer files (vocab.json, "
            "merges.txt) in {root}/text_encoders/clip_tokenizer (inline-core download "
            "--family sdxl fetches them)"
        ),
    ),
)
