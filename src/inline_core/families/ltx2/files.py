"""Which files make an LTX-2 stack, and how each is recognised (torch-free; runs at submit).

An LTX-2 stack is a transformer (video and audio streams), the video VAE, the audio VAE, the
vocoder, the text connectors, a Gemma 3 text encoder with its tokenizer (LTX-2.5's: Gemma 4, and
its folder's `diffusion_decoder/`, `ltx25.py`), and a flow-matching scheduler config. Each
part is read from a diffusers folder (`LTX2Pipeline`'s, `LTX2ImageToVideoPipeline`'s or
`LTX2DFRPipeline`'s, in `diffusion_models/`), a component folder of its class in its
category (`vae/`, `text_encoders/`), or ComfyUI's all-in-one file in `checkpoints/`
(`ltx-2*.safetensors`: every part but Gemma under its key prefix, their configs in its header,
`single_file.py`). Gemma may also be ComfyUI's single file in `text_encoders/`
(`gemma_3_12B_it*.safetensors`, `gemma_file.py`), its tokenizer inside it. A stack without a
part is `model_missing` naming what to put.

`INLINE_LTX2_MODEL`, `INLINE_LTX2_VAE`, `INLINE_LTX2_AUDIO_VAE`, `INLINE_LTX2_VOCODER`,
`INLINE_LTX2_CONNECTORS` and `INLINE_LTX2_TEXT_ENCODER` override each part.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inline_core.contract.files import (
    ModelRule,
    PartRule,
    Score,
    StackRules,
    TokenizerRule,
    read_json,
)
from inline_core.diffusion.files.shapes import Shapes
from inline_core.families.ltx2 import (
    checkpoint_keys,
    comfy_ltx25,
    connector_keys,
    gemma_file,
    vocoder_keys,
)
from inline_core.families.ltx2.request import MAX_PROMPT_TOKENS
from inline_core.families.ltx2.single_file_config import SingleFileError, layout
from inline_core.families.ltx2.single_file_vae_config import (
    vae_factors as single_file_vae_factors,
)
from inline_core.models.catalog import CatalogEntry
from inline_core.models.source import Source

FAMILY, TITLE = "ltx2", "LTX-2"
TRANSFORMER_CLASS = "LTX2VideoTransformer3DModel"
VAE_CLASS = "AutoencoderKLLTX2Video"
AUDIO_VAE_CLASS = "AutoencoderKLLTX2Audio"
VOCODER_CLASSES = ("LTX2Vocoder", "LTX2VocoderWithBWE")
CONNECTORS_CLASS = "LTX2TextConnectors"
TEXT_ENCODER_TYPE = "gemma3"
TEXT_ENCODER_TYPES = (TEXT_ENCODER_TYPE, "gemma4_unified")  # LTX-2.0/2.3's, LTX-2.5's (ltx25.py)
TOKENIZER_FOLDER = re.compile(r"gemma", re.IGNORECASE)  # a single file's tokenizer, beside it
FOLDER_HINT = (
    "put a diffusers LTX-2 folder (Lightricks/LTX-2's, with transformer/, vae/, audio_vae/, "
    "vocoder/, connectors/, text_encoder/, tokenizer/ and scheduler/) in "
    "{root}/diffusion_models, or set INLINE_LTX2_MODEL"
)
# LTX-2's published scheduler (a stack without a scheduler config): flow matching, shifted by
# the video's token count.
DEFAULT_SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "FlowMatchEulerDiscreteScheduler",
    "num_train_timesteps": 1000,
    "shift": 1.0,
    "use_dynamic_shifting": True,
    "base_shift": 0.95,
    "max_shift": 2.05,
    "base_image_seq_len": 1024,
    "max_image_seq_len": 4096,
    "shift_terminal": 0.1,
    "time_shift_type": "exponential",
}


def single_file(shapes: Shapes) -> bool:
    """LTX-2's diffusion model by its keys (an all-in-one file's, its prefix cut): both streams'
    input projections (LTX-Video has no audio stream)."""
    return "patchify_proj.weight" in shapes and "audio_patchify_proj.weight" in shapes


def folder_class(entry: CatalogEntry) -> str | None:
    if not entry.is_folder:
        return None
    config = read_json(entry.path / "config.json")
    value = None if config is None else config.get("_class_name")
    return value if isinstance(value, str) else None


def class_score(*names: str) -> Score:
    """A component folder of one of these classes."""

    def score(entry: CatalogEntry, _transformer: Source | None) -> int | None:
        return 0 if folder_class(entry) in names else None

    return score


def encoder_score(entry: CatalogEntry, _transformer: Source | None) -> int | None:
    """A Gemma 3 or LTX-2.5's Gemma 4 folder (its tokenizer inside), or ComfyUI's Gemma 3 file
    (whole or not: what it lacks is said at submit, `gemma_file.problem`)."""
    if not entry.is_folder:
        return 0 if gemma_file.is_gemma_file(entry.path) else None
    config = read_json(entry.path / "config.json")
    return 0 if config is not None and config.get("model_type") in TEXT_ENCODER_TYPES else None


def encoder_problem(path: Path) -> str | None:
    """Why the file or folder at `path` is not a Gemma 3 text encoder this server reads (None:
    it is one): what `encoder_score` takes, and for ComfyUI's file what `gemma_file.problem`
    finds missing."""
    if path.is_dir():
        config = read_json(path / "config.json")
        kind = None if config is None else config.get("model_type")
        return None if kind in TEXT_ENCODER_TYPES else f"it is not a Gemma folder ({kind!r})"
    # ComfyUI's LTX-2.5 Gemma 4 file is said to be that: its embedding and q-normed layers
    # are what tell a Gemma 3 file too, so it is told by its projections first.
    ltx25 = comfy_ltx25.refusal(path)
    if ltx25 is not None:
        return ltx25
    if not gemma_file.is_gemma_file(path):
        return "it is not ComfyUI's Gemma 3 file (no Gemma 3 language model in it)"
    return gemma_file.problem(path)


def _part(
    part: str,
    label: str,
    title: str,
    category: str,
    score: Callable[..., int | None],
    prefix: str | None = None,
) -> PartRule:
    override = f"INLINE_LTX2_{part.upper()}"
    return PartRule(
        part=part,
        label=label,
        title=title,
        category=category,
        subfolder=part,
        override=override,
        score=score,
        checkpoint_prefix=prefix,
        hint=(
            f"the LTX-2 {label} comes with a diffusers LTX-2 folder (its {part}/); put one in "
            f"{{root}}/diffusion_models, a {title} folder in {{root}}/{category}, or set {override}"
        ),
    )


RULES = StackRules(
    title=TITLE,
    family=FAMILY,
    model=ModelRule(
        title="LTX-2 diffusion model (a diffusers LTX-2 folder or an all-in-one ltx-2 file)",
        override="INLINE_LTX2_MODEL",
        # LTX2DFRPipeline: the class diffusers loads LTX-2.5's folder with (`ltx25.py`)
        pipeline_prefix=("LTX2Pipeline", "LTX2ImageToVideoPipeline", "LTX2DFRPipeline"),
        transformer_class=TRANSFORMER_CLASS,
        recognize=single_file,
        # Lightricks' and ComfyUI's file names (ltx-2-19b-dev-fp8.safetensors, ltx-2.3-...):
        # a ComfyUI workflow naming one is LTX-2's, never LTX-Video's.
        name=re.compile(r"ltx[-_]?2", re.IGNORECASE),
        hint=FOLDER_HINT,
    ),
    parts=(
        _part(
            "vae",
            "video VAE",
            f"LTX-2 video VAE ({VAE_CLASS})",
            "vae",
            class_score(VAE_CLASS),
            checkpoint_keys.VAE_PREFIX,
        ),
        _part(
            "audio_vae",
            "audio VAE",
            f"LTX-2 audio VAE ({AUDIO_VAE_CLASS})",
            "vae",
            class_score(AUDIO_VAE_CLASS),
            checkpoint_keys.AUDIO_VAE_PREFIX,
        ),
        _part(
            "vocoder",
            "vocoder",
            "LTX-2 vocoder (LTX2Vocoder)",
            "vae",
            class_score(*VOCODER_CLASSES),
            vocoder_keys.PREFIX,
        ),
        _part(
            "connectors",
            "text connectors",
            f"LTX-2 text connectors ({CONNECTORS_CLASS})",
            "text_encoders",
            class_score(CONNECTORS_CLASS),
            connector_keys.PROJECTIONS,
        ),
        _part(
            "text_encoder",
            "text encoder",
            "Gemma 3 text encoder (an HF folder with its tokenizer, or ComfyUI's "
            "gemma_3_12B_it file in bf16, fp8 or NVFP4 fp4_mixed)",
            "text_encoders",
            encoder_score,
        ),
    ),
    tokenizer=TokenizerRule(
        part="text_encoder",
        fallback=lambda: None,
        hint=(
            "the Gemma 3 text encoder needs its tokenizer (tokenizer.json, "
            "tokenizer_config.json) beside it: a diffusers LTX-2 folder's tokenizer/, inside "
            "the text encoder's folder, or for a file without one (ComfyUI's carry theirs) a "
            "folder with 'gemma' in its name in {root}/text_encoders"
        ),
        folder=TOKENIZER_FOLDER,
        inside=gemma_file.carries_tokenizer,
    ),
)


def vae_factors(vae: Source | None) -> tuple[int, int] | None:
    """The video VAE's (spatial, temporal) compression, from its config (None: unreadable)."""
    if vae is None:
        return None
    if vae.view is not None:  # a part of the all-in-one file: its header's config
        try:
            found = layout(vae.path)
        except SingleFileError:
            return None
        return single_file_vae_factors(found.configs["vae"])
    config = read_json(vae.location / "config.json")
    if config is None:
        return None
    scaling = config.get("spatio_temporal_scaling") or ()
    steps = sum(1 for s in scaling if s)
    spatial = config.get("spatial_compression_ratio") or int(config.get("patch_size", 4)) * 2**steps
    temporal = (
        config.get("temporal_compression_ratio") or int(config.get("patch_size_t", 1)) * 2**steps
    )
    return int(spatial), int(temporal)


def prompt_tokens(tokenizer: Source | None) -> int:
    """The padded prompt's length: the tokenizer's `model_max_length` (LTX-2's own: 1024)."""
    config = None if tokenizer is None else read_json(tokenizer.location / "tokenizer_config.json")
    value = None if config is None else config.get("model_max_length")
    return value if isinstance(value, int) and 0 < value < 1_000_000 else MAX_PROMPT_TOKENS
