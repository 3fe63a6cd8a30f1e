"""LTX-2's torch side: how each part of its stack loads, and how loaded parts make its pipeline.

The shared layer calls this (`contract/builder.py`). Every part is a folder of its diffusers
(or transformers) class, read with that class's `from_pretrained`, local files only, or a part
of ComfyUI's all-in-one file (`single_file.py`; all but the text encoder): the
transformer, the video and audio VAEs and the vocoder and connectors (`diffusers.pipelines.ltx2`),
and the Gemma 3 text encoder: a folder, or ComfyUI's single file through the shared loader
(`gemma_file.py`), its tokenizer from the file (`gemma_tokenizer.py`). The connectors run
beside the text encoder; the audio VAE and the vocoder beside the video VAE.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from torch import nn

from inline_core.components.step import StepPipeline
from inline_core.contract.builder import ADAPTER_CACHE, FUSED_COPIES, Parts
from inline_core.contract.files import read_json
from inline_core.device.policy import Placement
from inline_core.diffusion.libs import module, quiet
from inline_core.diffusion.loading import (
    guarded,
    load_component,
    load_dtype,
    load_scheduler_config,
    load_tokenizer,
    place,
)
from inline_core.errors import InvalidRequest, RunFailed
from inline_core.families.ltx2 import gemma_file
from inline_core.families.ltx2.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.ltx2.gemma_tokenizer import file_tokenizer
from inline_core.families.ltx2.pipeline import LTX2StepPipeline
from inline_core.families.ltx2.single_file import load_part
from inline_core.families.ltx2.step_cache import LAYOUT
from inline_core.models.source import Source

# Each weight part: (the library module its class is in, the class, what messages call it).
CLASSES: Mapping[str, tuple[str, str, str]] = {
    "transformer": ("diffusers", "LTX2VideoTransformer3DModel", "diffusion model"),
    "vae": ("diffusers", "AutoencoderKLLTX2Video", "video VAE"),
    "audio_vae": ("diffusers", "AutoencoderKLLTX2Audio", "audio VAE"),
    "vocoder": ("diffusers.pipelines.ltx2", "LTX2Vocoder", "vocoder"),
    "connectors": ("diffusers.pipelines.ltx2", "LTX2TextConnectors", "text connectors"),
    "text_encoder": ("transformers", "Gemma3ForConditionalGeneration", "text encoder"),
}
# The text encoder's class by its folder's model_type: LTX-2.5's is Gemma 4 (`ltx25.py`).
ENCODER_CLASSES = {"gemma4_unified": "Gemma4UnifiedForConditionalGeneration"}


def load_folder(part: str, source: Source, placement: Placement) -> nn.Module:
    """One part from its folder (a diffusers pipeline's subfolder, or a component folder)."""
    library, class_name, what = CLASSES[part]
    if part == "text_encoder" and source.is_file:  # ComfyUI's Gemma file: its language model
        return load_component(gemma_file.FORMAT, replace(source, view=gemma_file.VIEW), placement)
    if source.view is not None:  # a part of ComfyUI's all-in-one file
        return load_part(part, library, class_name, what, source, placement)
    if source.is_file:
        raise RunFailed(
            f"the LTX-2 {what} {source.location} is a single file: LTX-2 reads folders and "
            "ComfyUI's all-in-one file"
        )

    def load() -> nn.Module:
        quiet()
        cls: Any = getattr(module(library), class_name)
        if part == "vocoder":  # LTX-2.3's vocoder has its own class; its config names it
            cls = vocoder_class(source, cls)
        elif part == "text_encoder":
            cls = encoder_class(source, cls)
        model = cast(
            nn.Module,
            cls.from_pretrained(
                str(source.path),
                subfolder=source.subfolder or "",
                local_files_only=True,
                dtype=load_dtype(placement),
            ),
        )
        return place(model, placement)

    return guarded(what, source, load)


def vocoder_class(source: Source, default: Any) -> Any:
    config = read_json(source.location / "config.json") or {}
    name = config.get("_class_name")
    found = getattr(module("diffusers.pipelines.ltx2"), str(name), None) if name else None
    return found or default


def encoder_class(source: Source, default: Any) -> Any:
    config = read_json(source.location / "config.json") or {}
    name = ENCODER_CLASSES.get(str(config.get("model_type") or ""))
    return getattr(module("transformers"), name) if name else default


class LTX2Builder:
    step_cache_layout = LAYOUT  # its pipeline caches its blocks per request
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        "text_encoder": "text_encoder",
        "connectors": "text_encoder",  # small; run right after the text encoder
        "vae": "vae",
        "audio_vae": "vae",
        "vocoder": "vae",
    }

    def load(self, part: str, source: Source | None, placement: Placement | None) -> Any:
        if part == "scheduler":
            return load_scheduler_config(source, DEFAULT_SCHEDULER_CONFIG)
        if source is None:
            raise ValueError(f"the LTX-2 {part} has no default")
        if part == "tokenizer":
            if source.is_file:  # the SentencePiece model inside ComfyUI's Gemma file
                path = source.path
                return guarded("tokenizer", source, lambda: file_tokenizer(path))
            return load_tokenizer(source)
        if part not in CLASSES or placement is None:
            raise ValueError(f"LTX-2 has no part {part!r}")
        return load_folder(part, source, placement)

    def pipeline(self, parts: Parts) -> LTX2StepPipeline:
        transformer = parts["transformer"]
        config = transformer.config
        if int(config.patch_size) != 1 or int(config.patch_size_t) != 1:
            raise RunFailed(
                f"this LTX-2 transformer patchifies {config.patch_size_t}x{config.patch_size}: "
                "LTX-2's are 1x1"
            )
        return LTX2StepPipeline(
            text_encoder=parts["text_encoder"],
            tokenizer=parts["tokenizer"],
            connectors=parts["connectors"],
            transformer=transformer,
            vae=parts["vae"],
            audio_vae=parts["audio_vae"],
            vocoder=parts["vocoder"],
            placement=parts.placements["denoiser"],
            encoder_placement=parts.placements["text_encoder"],
            vae_placement=parts.placements["vae"],
            swap=parts.swap,
            scheduler_config=parts["scheduler"],
            model_key=parts.model_key,
            adapter_cache=parts.extra.get(ADAPTER_CACHE),
            fused_copies=parts.extra.get(FUSED_COPIES),
        )

    def denoiser(self, parts: Parts) -> StepPipeline:
        raise InvalidRequest("LTX-2 does not serve the low-level primitives (use lightricks/ltx-2)")

    def text_encoder(self, parts: Parts) -> Any:
        raise InvalidRequest("LTX-2 does not serve the low-level primitives (use lightricks/ltx-2)")

    def vae(self, parts: Parts) -> Any:
        raise InvalidRequest("LTX-2 does not serve the low-level primitives (use lightricks/ltx-2)")


BUILDER = LTX2Builder()
