"""Krea 2's torch side: how each part loads, and how loaded parts make its pipeline. Its VAE is
the Qwen-Image VAE (`shared_parts`): the same file, loaded once for every family that decodes
with it."""

from __future__ import annotations

from collections.abc import Mapping

from inline_core.contract.builder import ADAPTER_CACHE, FUSED_COPIES, Parts
from inline_core.diffusion.formats import qwen3_vl, qwen_image_vae
from inline_core.diffusion.parts import PartLoader
from inline_core.errors import InvalidRequest
from inline_core.families.krea2.encoder import Krea2PromptEncoder
from inline_core.families.krea2.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.krea2.formats import TRANSFORMER
from inline_core.families.krea2.pipeline import Krea2StepPipeline
from inline_core.families.krea2.step_cache import LAYOUT
from inline_core.families.krea2.vae import QwenImageVAE


class Krea2Builder:
    step_cache_layout = LAYOUT  # its pipelines cache their blocks per request
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        "text_encoder": "text_encoder",
        "vae": "vae",
    }
    shared_parts = {"vae": qwen_image_vae.SHARED}

    load = PartLoader(
        "Krea 2",
        {"transformer": TRANSFORMER, "text_encoder": qwen3_vl.FORMAT, "vae": qwen_image_vae.FORMAT},
        DEFAULT_SCHEDULER_CONFIG,
    ).load

    def text_encoder(self, parts: Parts) -> Krea2PromptEncoder:
        return Krea2PromptEncoder(
            parts["tokenizer"], parts["text_encoder"], parts.placements["text_encoder"], parts.swap
        )

    def vae(self, parts: Parts) -> QwenImageVAE:
        return QwenImageVAE(parts["vae"], parts.placements["vae"], parts.swap)

    def denoiser(self, parts: Parts) -> Krea2StepPipeline:
        raise InvalidRequest("Krea 2 serves its own node only (no low-level vocabulary yet)")

    def pipeline(self, parts: Parts) -> Krea2StepPipeline:
        return Krea2StepPipeline(
            text_encoder=self.text_encoder(parts),
            transformer=parts["transformer"],
            vae=self.vae(parts),
            placement=parts.placements["denoiser"],
            swap=parts.swap,
            scheduler_config=parts["scheduler"],
            model_key=parts.model_key,
            serial_phases=parts.serial_phases,
            adapter_cache=parts.extra.get(ADAPTER_CACHE),
            fused_copies=parts.extra.get(FUSED_COPIES),
        )


BUILDER = Krea2Builder()
