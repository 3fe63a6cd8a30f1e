"""Wan's torch side: how each part of its stack loads, and how loaded parts make its pipeline.

The shared layer calls this (`contract/builder.py`). Wan is diffusers' `WanTransformer3DModel`, a
Wan VAE (`AutoencoderKLWan`, Wan 2.1's or 2.2's) and a UMT5 encoder read as `WanPipeline` reads
it (512 tokens, zero-padded past the prompt). A Wan 2.2 A14B pair adds its low-noise expert,
`transformer_2`, placed as a denoiser too: both are the render's parts, resident together (with
CPU offload, the one in use is on the device).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.components.step import StepPipeline
from inline_core.contract.builder import ADAPTER_CACHE, FUSED_COPIES, Parts
from inline_core.device.policy import Placement
from inline_core.diffusion.encoders.padded_t5 import PaddedT5Encoder
from inline_core.diffusion.formats import umt5, wan_vae
from inline_core.diffusion.parts import PartLoader
from inline_core.diffusion.vae.wan_vae import WanVAE
from inline_core.errors import InvalidRequest
from inline_core.families.wan import clip_vision, transformer
from inline_core.families.wan.experts import LOW_NOISE
from inline_core.families.wan.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.wan.image_encoder import load_processor
from inline_core.families.wan.pipeline import WanStepPipeline
from inline_core.families.wan.request import MAX_PROMPT_TOKENS
from inline_core.families.wan.step_cache import LAYOUT
from inline_core.families.wan.variants import variant_of
from inline_core.families.wan.vision_files import IMAGE_ENCODER, IMAGE_PROCESSOR
from inline_core.models.source import Source


def text_encoder_of(parts: Parts) -> PaddedT5Encoder:
    """The UMT5 encoder as `WanPipeline` reads it (Wan-based families read it so too)."""
    return PaddedT5Encoder(
        parts["tokenizer"],
        parts["text_encoder"],
        parts.placements["text_encoder"],
        parts.swap,
        max_sequence_length=MAX_PROMPT_TOKENS,
    )


def vae_of(parts: Parts) -> WanVAE:
    return WanVAE(parts["vae"], parts.placements["vae"], parts.swap)


class WanBuilder:
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        LOW_NOISE: "denoiser",
        "text_encoder": "text_encoder",
        IMAGE_ENCODER: "text_encoder",  # an encoder of the conditioning, placed as one
        "vae": "vae",
    }
    step_cache_layout = LAYOUT  # its pipelines cache their blocks per request

    parts = PartLoader(
        "Wan",
        {
            "transformer": transformer.FORMAT,
            LOW_NOISE: transformer.FORMAT,
            "text_encoder": umt5.FORMAT,
            "vae": wan_vae.FORMAT,
            IMAGE_ENCODER: clip_vision.FORMAT,
        },
        DEFAULT_SCHEDULER_CONFIG,
    )

    def load(self, part: str, source: Source | None, placement: Placement | None) -> Any:
        if part == IMAGE_PROCESSOR:  # a config, no weights
            return load_processor(source)
        return self.parts.load(part, source, placement)

    def text_encoder(self, parts: Parts) -> PaddedT5Encoder:
        return text_encoder_of(parts)

    def vae(self, parts: Parts) -> WanVAE:
        return vae_of(parts)

    def pipeline(self, parts: Parts) -> WanStepPipeline:
        kind = variant_of(dict(parts["transformer"].config))
        return WanStepPipeline(
            text_encoder=self.text_encoder(parts),
            transformer=parts["transformer"],
            vae=self.vae(parts),
            placement=parts.placements["denoiser"],
            swap=parts.swap,
            scheduler_config=parts["scheduler"],
            model_key=parts.model_key,
            serial_phases=parts.serial_phases,
            expand_timesteps=kind is not None and kind.expand_timesteps,
            transformer_2=parts.values.get(LOW_NOISE),
            image_encoder=parts.values.get(IMAGE_ENCODER),
            image_processor=parts.values.get(IMAGE_PROCESSOR),
            encoder_placement=parts.placements["text_encoder"],
            adapter_cache=parts.extra.get(ADAPTER_CACHE),
            fused_copies=parts.extra.get(FUSED_COPIES),
        )

    def denoiser(self, parts: Parts) -> StepPipeline:
        raise InvalidRequest("Wan does not serve the low-level primitives yet (use alibaba/wan)")


BUILDER = WanBuilder()
