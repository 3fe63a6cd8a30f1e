"""Chroma's torch side: how each part loads, and how loaded parts make its pipelines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.contract.builder import Parts
from inline_core.diffusion.files.shapes import Shapes
from inline_core.diffusion.formats import ldm_vae
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.diffusion.parts import PartLoader
from inline_core.diffusion.vae.autoencoder_kl import AutoencoderKLVAE
from tiny_chroma.encoder import MaskedT5Encoder
from tiny_chroma.pipeline import ChromaDenoisePipeline, ChromaStepPipeline
from tiny_chroma.request import PATCH

# Chroma's published scheduler config (used when a transformer comes without one).
DEFAULT_SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "FlowMatchEulerDiscreteScheduler",
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "max_image_seq_len": 4096,
    "max_shift": 1.15,
    "shift": 3.0,
    "use_dynamic_shifting": True,
}


def _folders_only(_shapes: Shapes) -> bool:
    return False


def _no_config(_shapes: Shapes) -> dict[str, Any]:
    raise ValueError("this family reads diffusers folders only")


TRANSFORMER = ModelFormat(
    what="diffusion model",
    title="Chroma diffusion model",
    library="diffusers",
    class_name="ChromaTransformer2DModel",
    recognize=_folders_only,
    infer_config=_no_config,
)
T5 = ModelFormat(
    what="text encoder",
    title="T5 encoder",
    library="transformers",
    class_name="T5EncoderModel",
    recognize=_folders_only,
    infer_config=_no_config,
)


class ChromaBuilder:
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        "text_encoder": "text_encoder",
        "vae": "vae",
    }

    load = PartLoader(
        "Chroma",
        {"transformer": TRANSFORMER, "text_encoder": T5, "vae": ldm_vae.FORMAT},
        DEFAULT_SCHEDULER_CONFIG,
    ).load

    def text_encoder(self, parts: Parts) -> MaskedT5Encoder:
        return MaskedT5Encoder(
            parts["tokenizer"], parts["text_encoder"], parts.placements["text_encoder"], parts.swap
        )

    def vae(self, parts: Parts) -> AutoencoderKLVAE:
        return AutoencoderKLVAE(parts["vae"], parts.placements["vae"], parts.swap, patch=PATCH)

    def _denoise_kwargs(self, parts: Parts) -> dict[str, Any]:
        return {
            "transformer": parts["transformer"],
            "placement": parts.placements["denoiser"],
            "swap": parts.swap,
            "scheduler_config": parts["scheduler"],
            "model_key": parts.model_key,
        }

    def denoiser(self, parts: Parts) -> ChromaDenoisePipeline:
        return ChromaDenoisePipeline(**self._denoise_kwargs(parts))

    def pipeline(self, parts: Parts) -> ChromaStepPipeline:
        return ChromaStepPipeline(
            text_encoder=self.text_encoder(parts),
            vae=self.vae(parts),
            **self._denoise_kwargs(parts),
        )


BUILDER = ChromaBuilder()
