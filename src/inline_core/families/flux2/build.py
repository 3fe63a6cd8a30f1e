"""FLUX.2 klein's torch side: how each part of its stack loads, and how loaded parts make its
pipelines.

Its Qwen3 text encoder is read through the chat template without thinking: the prompt padded to
512 tokens, three hidden states side by side (a quarter, half and three quarters deep: layers 9,
18 and 27 of Qwen3-4B's and Qwen3-8B's 36). The Qwen3 weights are the format Z-Image loads too
(`shared_parts`): one file, loaded once for both families, read each its own way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.contract.builder import ADAPTER_CACHE, FUSED_COPIES, Parts
from inline_core.diffusion.encoders.chat_prompt import ChatPromptEncoder
from inline_core.diffusion.formats import flux2_vae, qwen3
from inline_core.diffusion.parts import PartLoader
from inline_core.families.flux2 import transformer
from inline_core.families.flux2.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.flux2.pipeline import Flux2DenoisePipeline, Flux2StepPipeline
from inline_core.families.flux2.request import TEXT_TOKENS
from inline_core.families.flux2.step_cache import LAYOUT
from inline_core.families.flux2.vae import Flux2VAE

TEMPLATE_OPTIONS = {"enable_thinking": False}
SHARED_PARTS = {"text_encoder": qwen3.SHARED, "tokenizer": qwen3.SHARED}


def text_layers(num_layers: int) -> tuple[int, ...]:
    """The hidden states klein reads of a Qwen3 with `num_layers` layers: (9, 18, 27) of 36."""
    return (num_layers // 4, num_layers // 2, num_layers * 3 // 4)


class Flux2Builder:
    step_cache_layout = LAYOUT  # its pipelines cache their blocks per request
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        "text_encoder": "text_encoder",
        "vae": "vae",
    }
    shared_parts = SHARED_PARTS

    load = PartLoader(
        "FLUX.2",
        {
            "transformer": transformer.FORMAT,
            "text_encoder": qwen3.FORMAT,
            "vae": flux2_vae.FORMAT,
        },
        DEFAULT_SCHEDULER_CONFIG,
        chat_template=True,
    ).load

    def text_encoder(self, parts: Parts) -> ChatPromptEncoder:
        model = parts["text_encoder"]
        layers = int(model.config.num_hidden_layers)
        return ChatPromptEncoder(
            parts["tokenizer"],
            model,
            parts.placements["text_encoder"],
            parts.swap,
            max_sequence_length=TEXT_TOKENS,
            template_options=TEMPLATE_OPTIONS,
            hidden_layers=text_layers(layers),
            padded=True,
        )

    def vae(self, parts: Parts) -> Flux2VAE:
        return Flux2VAE(parts["vae"], parts.placements["vae"], parts.swap)

    def _denoise_kwargs(self, parts: Parts) -> dict[str, Any]:
        return {
            "transformer": parts["transformer"],
            "placement": parts.placements["denoiser"],
            "swap": parts.swap,
            "scheduler_config": parts["scheduler"],
            "model_key": parts.model_key,
            "adapter_cache": parts.extra.get(ADAPTER_CACHE),
            "fused_copies": parts.extra.get(FUSED_COPIES),
        }

    def denoiser(self, parts: Parts) -> Flux2DenoisePipeline:
        place = parts.placements["denoiser"]
        return Flux2DenoisePipeline(serial_phases=place.offload, **self._denoise_kwargs(parts))

    def pipeline(self, parts: Parts) -> Flux2StepPipeline:
        return Flux2StepPipeline(
            text_encoder=self.text_encoder(parts),
            vae=self.vae(parts),
            # With CPU offload, encode and decode swap modules on the device: between steps.
            serial_phases=any(p.offload for p in parts.placements.values()),
            **self._denoise_kwargs(parts),
        )


BUILDER = Flux2Builder()
