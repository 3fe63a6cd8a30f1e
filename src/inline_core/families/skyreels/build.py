"""SkyReels-V2's torch side: how each part of its stack loads, and how loaded parts make its
pipeline. Its transformer is diffusers' `SkyReelsV2Transformer3DModel` (Wan's keys and config,
`transformer.py`); its VAE and UMT5 are Wan's, loaded by the same shared formats and wrapped as
Wan wraps them (one resident copy serves both families)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.components.step import StepPipeline
from inline_core.contract.builder import Parts
from inline_core.device.policy import Placement
from inline_core.diffusion.encoders.padded_t5 import PaddedT5Encoder
from inline_core.diffusion.formats import umt5, wan_vae
from inline_core.diffusion.parts import PartLoader
from inline_core.diffusion.vae.wan_vae import WanVAE
from inline_core.errors import InvalidRequest
from inline_core.families.skyreels import transformer
from inline_core.families.skyreels.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.skyreels.pipeline import SkyReelsStepPipeline
from inline_core.families.wan.build import text_encoder_of, vae_of
from inline_core.models.source import Source


class SkyReelsBuilder:
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        "text_encoder": "text_encoder",
        "vae": "vae",
    }

    parts = PartLoader(
        "SkyReels-V2",
        {"transformer": transformer.FORMAT, "text_encoder": umt5.FORMAT, "vae": wan_vae.FORMAT},
        DEFAULT_SCHEDULER_CONFIG,
    )

    def load(self, part: str, source: Source | None, placement: Placement | None) -> Any:
        return self.parts.load(part, source, placement)

    def text_encoder(self, parts: Parts) -> PaddedT5Encoder:
        return text_encoder_of(parts)

    def vae(self, parts: Parts) -> WanVAE:
        return vae_of(parts)

    def pipeline(self, parts: Parts) -> SkyReelsStepPipeline:
        return SkyReelsStepPipeline(
            text_encoder=self.text_encoder(parts),
            transformer=parts["transformer"],
            vae=self.vae(parts),
            placement=parts.placements["denoiser"],
            swap=parts.swap,
            scheduler_config=parts["scheduler"],
            model_key=parts.model_key,
            serial_phases=parts.serial_phases,
        )

    def denoiser(self, parts: Parts) -> StepPipeline:
        raise InvalidRequest(
            "SkyReels-V2 does not serve the low-level primitives (use skywork/skyreels-v2)"
        )


BUILDER = SkyReelsBuilder()
