"""Qwen-Image's torch side: how each part of its stack loads, and how loaded parts make its
pipeline.

The shared layer calls this (`contract/builder.py`): in process through the resident stacks, in a
worker group's ranks straight from the files. The stack is Qwen-Image's transformer, the Qwen-Image
VAE and Qwen2.5-VL with its tokenizer and, for the edit models, its image processor. Whether a
transformer edits is told from its files once, at load, and travels with the loaded module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from inline_core.contract.builder import ADAPTER_CACHE, FUSED_COPIES, Parts
from inline_core.device.policy import Placement
from inline_core.diffusion.formats import qwen_image_vae
from inline_core.diffusion.loading import guarded
from inline_core.diffusion.parts import PartLoader
from inline_core.errors import InvalidRequest
from inline_core.families.qwen_image import processor, text_encoder, transformer
from inline_core.families.qwen_image.denoiser import QwenImageDenoiser
from inline_core.families.qwen_image.encoder import QwenPromptEncoder
from inline_core.families.qwen_image.files import SCHEDULER_CONFIG, processor_folder, variant_of
from inline_core.families.qwen_image.pipeline import QwenImageStepPipeline
from inline_core.families.qwen_image.step_cache import LAYOUT
from inline_core.families.qwen_image.vae import QwenImageVAE
from inline_core.models.source import Source

EDITS = "inline_core_qwen_image_edit"  # the attribute a loaded transformer carries


class QwenImageBuilder:
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        "text_encoder": "text_encoder",
        "vae": "vae",
    }
    step_cache_layout = LAYOUT  # its pipelines cache their blocks per request
    # Its VAE file is loaded once for every family that decodes with it (Krea 2).
    shared_parts = {"vae": qwen_image_vae.SHARED}

    _parts = PartLoader(
        "Qwen-Image",
        {
            "transformer": transformer.FORMAT,
            "text_encoder": text_encoder.FORMAT,
            "vae": qwen_image_vae.FORMAT,
        },
        SCHEDULER_CONFIG,
    )

    def load(self, part: str, source: Source | None, placement: Placement | None) -> Any:
        loaded = self._parts.load(part, source, placement)
        if part == "transformer" and source is not None:
            setattr(loaded, EDITS, variant_of(source) == "edit")
        if part == "tokenizer" and source is not None:
            return loaded, _processor(source, loaded)
        return loaded

    def text_encoder(self, parts: Parts) -> QwenPromptEncoder:
        tokenizer, processor = parts["tokenizer"]
        model = parts["text_encoder"]
        text_encoder.align_token_ids(model, tokenizer)
        return QwenPromptEncoder(
            tokenizer,
            processor,
            model,
            parts.placements["text_encoder"],
            parts.swap,
            _vae_images(parts).resize,
        )

    def vae(self, parts: Parts) -> QwenImageVAE:
        return _vae_images(parts)

    def _denoiser(self, parts: Parts) -> QwenImageDenoiser:
        return QwenImageDenoiser(
            parts["transformer"],
            parts.placements["denoiser"],
            parts.swap,
            adapter_cache=parts.extra.get(ADAPTER_CACHE),
            model_key=parts.model_key,
            fused_copies=parts.extra.get(FUSED_COPIES),
        )

    def denoiser(self, parts: Parts) -> QwenImageStepPipeline:
        raise InvalidRequest(
            "Qwen-Image does not serve the low-level primitives (use alibaba/qwen-image)"
        )

    def pipeline(self, parts: Parts) -> QwenImageStepPipeline:
        model: nn.Module = parts["transformer"]
        return QwenImageStepPipeline(
            text_encoder=self.text_encoder(parts),
            denoiser=self._denoiser(parts),
            vae=self.vae(parts),
            scheduler_config=parts["scheduler"],
            model_key=parts.model_key,
            edit=bool(getattr(model, EDITS, False)),
            serial_phases=parts.serial_phases,
        )


def _vae_images(parts: Parts) -> QwenImageVAE:
    return QwenImageVAE(parts["vae"], parts.placements["vae"], parts.swap)


def _processor(source: Source, tokenizer: Any) -> Any:
    """The image processor beside the tokenizer (None: none there; only an edit needs one)."""
    folder = processor_folder(source)
    if folder is None:
        return None
    return guarded("image processor", Source(folder), lambda: processor.load(folder, tokenizer))


BUILDER = QwenImageBuilder()
