"""FLUX.2's torch side: how each part of its stack loads, and how loaded parts make its
pipelines.

klein's Qwen3 text encoder is read through the chat template without thinking: the prompt padded
to 512 tokens, three hidden states side by side (a quarter, half and three quarters deep: layers
9, 18 and 27 of Qwen3-4B's and Qwen3-8B's 36). The Qwen3 weights are the format Z-Image loads too
(`shared_parts`): one file, loaded once for both families, read each its own way.

dev's Mistral Small 3 is read as diffusers' `Flux2Pipeline` reads it: BFL's system message, then
the prompt, padded to 512 tokens, hidden states 10, 20 and 30 side by side (fixed: ComfyUI's file
keeps only those 30 layers). Which text encoder a stack has is told from its files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.contract.builder import ADAPTER_CACHE, FUSED_COPIES, Parts
from inline_core.device.policy import Placement
from inline_core.diffusion.encoders.chat_prompt import ChatPromptEncoder
from inline_core.diffusion.encoders.system_chat_prompt import SystemChatPromptEncoder
from inline_core.diffusion.formats import flux2_vae, mistral3, qwen3
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.diffusion.loading import guarded, load_tokenizer
from inline_core.diffusion.parts import PartLoader
from inline_core.errors import RunFailed
from inline_core.families.flux2 import transformer
from inline_core.families.flux2.files import DEFAULT_SCHEDULER_CONFIG, reads_mistral
from inline_core.families.flux2.pipeline import Flux2DenoisePipeline, Flux2StepPipeline
from inline_core.families.flux2.request import TEXT_TOKENS
from inline_core.families.flux2.step_cache import LAYOUT
from inline_core.families.flux2.vae import Flux2VAE
from inline_core.families.flux2.variants import DISTILLED_MARK, variant_of
from inline_core.models.source import Source

TEMPLATE_OPTIONS = {"enable_thinking": False}
# A Qwen3 is shared with Z-Image; a Mistral is keyed by its own files under the same name (only
# FLUX.2 dev reads one).
SHARED_PARTS = {"text_encoder": qwen3.SHARED, "tokenizer": qwen3.SHARED}
DEV_TEXT_LAYERS = (10, 20, 30)  # diffusers' `text_encoder_out_layers` for FLUX.2 dev


def _loader(text_encoder: ModelFormat) -> PartLoader:
    return PartLoader(
        "FLUX.2",
        {"transformer": transformer.FORMAT, "text_encoder": text_encoder, "vae": flux2_vae.FORMAT},
        DEFAULT_SCHEDULER_CONFIG,
        chat_template=True,
    )


KLEIN_PARTS = _loader(qwen3.FORMAT)
DEV_PARTS = _loader(mistral3.FORMAT)


def tokenizer(source: Source) -> Any:
    """The text encoder's tokenizer: ComfyUI's Mistral file's own, or a folder's, with its chat
    template (a Mistral's without one gets Mistral Small 3's)."""
    if source.is_file:
        path = source.path
        return guarded("tokenizer", source, lambda: mistral3.embedded_tokenizer(path))
    found = load_tokenizer(source)
    if getattr(found, "chat_template", None):
        return found
    templated = mistral3.templated(found)
    if templated is None:
        raise RunFailed(f"the tokenizer in {source.location} has no chat template")
    return templated


def is_mistral(model: Any) -> bool:
    return getattr(model.config, "model_type", None) in mistral3.MODEL_TYPES


def text_layers(num_layers: int) -> tuple[int, ...]:
    """The hidden states klein reads of a Qwen3 with `num_layers` layers: (9, 18, 27) of 36."""
    return (num_layers // 4, num_layers // 2, num_layers * 3 // 4)


def marked(model: Any, source: Source) -> Any:
    """The transformer with whether it is a step-distilled klein in its config: its files say
    it (`variants.py`), and the pipelines built over it read it there."""
    kind = variant_of(dict(model.config), source)
    model.register_to_config(**{DISTILLED_MARK: bool(kind is not None and kind.distilled)})
    return model


class Flux2Builder:
    step_cache_layout = LAYOUT  # its pipelines cache their blocks per request
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        "text_encoder": "text_encoder",
        "vae": "vae",
    }
    shared_parts = SHARED_PARTS

    def load(self, part: str, source: Source | None, placement: Placement | None) -> Any:
        if part == "tokenizer" and source is not None:
            return tokenizer(source)
        if part == "transformer" and source is not None:
            return marked(KLEIN_PARTS.load(part, source, placement), source)
        if part != "text_encoder" or source is None or not reads_mistral(source):
            return KLEIN_PARTS.load(part, source, placement)
        return mistral3.without_final_norm(DEV_PARTS.load(part, source, placement))

    def text_encoder(self, parts: Parts) -> ChatPromptEncoder:
        model = parts["text_encoder"]
        if is_mistral(model):
            from diffusers.pipelines.flux2.system_messages import SYSTEM_MESSAGE

            return SystemChatPromptEncoder(
                parts["tokenizer"],
                model,
                parts.placements["text_encoder"],
                parts.swap,
                system=SYSTEM_MESSAGE,
                max_sequence_length=TEXT_TOKENS,
                hidden_layers=DEV_TEXT_LAYERS,
            )
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
            serial_phases=parts.serial_phases,
            **self._denoise_kwargs(parts),
        )


BUILDER = Flux2Builder()
