"""Z-Image's torch side: how each part of its stack loads, and how loaded parts make its pipelines.

The shared layer calls this (`contract/builder.py`): in process through the resident stacks, in a
worker group's ranks straight from the files. Z-Image is a transformer of its own, the FLUX VAE and
a Qwen3 text encoder read through its chat template with thinking enabled (the second to last
hidden state of the real tokens, at most 512 of them).
"""

from __future__ import annotations

from collections.abc import Mapping

from inline_core.contract.builder import ADAPTER_CACHE, FUSED_COPIES, Parts
from inline_core.diffusion.encoders.chat_prompt import ChatPromptEncoder
from inline_core.diffusion.formats import ldm_vae, qwen3
from inline_core.diffusion.parts import PartLoader
from inline_core.diffusion.vae.autoencoder_kl import AutoencoderKLVAE
from inline_core.families.zimage import transformer
from inline_core.families.zimage.denoiser import ZImageDenoiser
from inline_core.families.zimage.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.zimage.pipeline import ZImageDenoisePipeline, ZImageStepPipeline
from inline_core.families.zimage.request import PATCH
from inline_core.families.zimage.step_cache import LAYOUT

MAX_PROMPT_TOKENS = 512
TEMPLATE_OPTIONS = {"enable_thinking": True}


class ZImageBuilder:
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        "text_encoder": "text_encoder",
        "vae": "vae",
    }

    step_cache_layout = LAYOUT  # its pipelines cache their main blocks per request
    # Its Qwen3 is loaded once for every family that reads the same file (FLUX.2 klein 4B).
    shared_parts = {"text_encoder": qwen3.SHARED, "tokenizer": qwen3.SHARED}

    load = PartLoader(
        "Z-Image",
        {"transformer": transformer.FORMAT, "text_encoder": qwen3.FORMAT, "vae": ldm_vae.FORMAT},
        DEFAULT_SCHEDULER_CONFIG,
        chat_template=True,
    ).load

    def text_encoder(self, parts: Parts) -> ChatPromptEncoder:
        return ChatPromptEncoder(
            parts["tokenizer"],
            parts["text_encoder"],
            parts.placements["text_encoder"],
            parts.swap,
            max_sequence_length=MAX_PROMPT_TOKENS,
            template_options=TEMPLATE_OPTIONS,
        )

    def vae(self, parts: Parts) -> AutoencoderKLVAE:
        return AutoencoderKLVAE(parts["vae"], parts.placements["vae"], parts.swap, patch=PATCH)

    def _denoiser(self, parts: Parts) -> ZImageDenoiser:
        return ZImageDenoiser(
            parts["transformer"],
            parts.placements["denoiser"],
            parts.swap,
            adapter_cache=parts.extra.get(ADAPTER_CACHE),
            model_key=parts.model_key,
            fused_copies=parts.extra.get(FUSED_COPIES),
        )

    def denoiser(self, parts: Parts) -> ZImageDenoisePipeline:
        place = parts.placements["denoiser"]
        return ZImageDenoisePipeline(
            denoiser=self._denoiser(parts),
            scheduler_config=parts["scheduler"],
            model_key=parts.model_key,
            serial_phases=place.offload,
        )

    def pipeline(self, parts: Parts) -> ZImageStepPipeline:
        return ZImageStepPipeline(
            text_encoder=self.text_encoder(parts),
            denoiser=self._denoiser(parts),
            vae=self.vae(parts),
            scheduler_config=parts["scheduler"],
            model_key=parts.model_key,
            serial_phases=parts.serial_phases,
        )


BUILDER = ZImageBuilder()
