"""SDXL's torch side: how each part of its stack loads, and how loaded parts make its pipeline.

The shared layer calls this (`contract/builder.py`). SDXL is diffusers' `UNet2DConditionModel`,
an `AutoencoderKL` at SDXL's latent scale, and two CLIP text encoders read as ComfyUI reads them
(`diffusion/encoders/clip_prompt.py`): CLIP-L padded with its end token, OpenCLIP-G with token 0
and the pooled embedding; neither passes its final layer norm at a chosen layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.components.step import StepPipeline
from inline_core.contract.builder import ADAPTER_CACHE, FUSED_COPIES, Parts
from inline_core.device.policy import Placement
from inline_core.diffusion.adapters.bank import AdapterBank
from inline_core.diffusion.encoders.clip_prompt import ClipPromptEncoder, ClipTower
from inline_core.diffusion.formats import clip
from inline_core.diffusion.parts import PartLoader
from inline_core.diffusion.vae.autoencoder_kl import AutoencoderKLVAE
from inline_core.errors import InvalidRequest
from inline_core.families.sdxl import unet
from inline_core.families.sdxl.files import DEFAULT_SCHEDULER_CONFIG, VAE_FORMAT, prediction_of
from inline_core.families.sdxl.lora import part_reader
from inline_core.families.sdxl.lora_naming import TEXT_ENCODER, TEXT_ENCODER_2, UNET
from inline_core.families.sdxl.pipeline import PREDICTION_ATTR, PREVIEW_FORMAT, SDXLStepPipeline
from inline_core.families.sdxl.refiner import REFINER, REFINER_TEXT_ENCODER
from inline_core.families.sdxl.refiner_stage import RefinerStage
from inline_core.families.sdxl.request import DEFAULT_CLIP_SKIP
from inline_core.models.source import Source

G_PAD = 0  # OpenCLIP-G pads with token 0 (`!`), as ComfyUI and SDXL's second tokenizer do


class SDXLBuilder:
    preview_format = PREVIEW_FORMAT  # its latents' (SD 1.5's builder names its own)
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        "text_encoder": "text_encoder",
        "text_encoder_2": "text_encoder",
        "vae": "vae",
        REFINER: "denoiser",
        REFINER_TEXT_ENCODER: "text_encoder",
    }

    parts = PartLoader(
        "SDXL",
        {
            "transformer": unet.FORMAT,
            "text_encoder": clip.CLIP_L,
            "text_encoder_2": clip.CLIP_G,
            "vae": VAE_FORMAT,
            REFINER: unet.FORMAT,
            REFINER_TEXT_ENCODER: clip.CLIP_G,
        },
        DEFAULT_SCHEDULER_CONFIG,
    )

    def load(self, part: str, source: Source | None, placement: Placement | None) -> Any:
        loaded = self.parts.load(part, source, placement)
        if part == "transformer" and source is not None:
            # A checkpoint says it predicts v (with zero terminal SNR) in its own keys: the UNet
            # carries that to its pipeline, over the default scheduler config (it brings none).
            setattr(loaded, PREDICTION_ATTR, prediction_of(source))
        return loaded

    def text_encoder(self, parts: Parts) -> ClipPromptEncoder:
        first, second = parts["text_encoder"], parts["text_encoder_2"]
        towers = (
            ClipTower(first, pad=None, final_norm=False, adapters=_bank(parts, TEXT_ENCODER)),
            ClipTower(
                second,
                pad=G_PAD,
                final_norm=False,
                pooled=True,
                adapters=_bank(parts, TEXT_ENCODER_2),
            ),
        )
        return ClipPromptEncoder(
            parts["tokenizer"],
            towers,
            parts.placements["text_encoder"],
            parts.swap,
            clip_skip=DEFAULT_CLIP_SKIP,
        )

    def vae(self, parts: Parts) -> AutoencoderKLVAE:
        return AutoencoderKLVAE(parts["vae"], parts.placements["vae"], parts.swap)

    def pipeline(self, parts: Parts) -> SDXLStepPipeline:
        return SDXLStepPipeline(
            unet=parts["transformer"],
            adapters=_bank(parts, UNET),
            text_encoder=self.text_encoder(parts),
            vae=self.vae(parts),
            placement=parts.placements["denoiser"],
            swap=parts.swap,
            scheduler_config=parts["scheduler"],
            model_key=parts.model_key,
            serial_phases=parts.serial_phases,
            refiner=self.refiner(parts),
            preview_format=self.preview_format,
        )

    def refiner(self, parts: Parts) -> RefinerStage | None:
        """The refiner checkpoint's UNet and its one encoder (OpenCLIP-G, read as the base's
        second tower), where the stack has one."""
        if REFINER not in parts.values:
            return None
        tower = ClipTower(parts[REFINER_TEXT_ENCODER], pad=G_PAD, final_norm=False, pooled=True)
        encoder = ClipPromptEncoder(
            parts["tokenizer"],
            (tower,),
            parts.placements["text_encoder"],
            parts.swap,
            clip_skip=DEFAULT_CLIP_SKIP,
        )
        return RefinerStage(parts[REFINER], encoder)

    def denoiser(self, parts: Parts) -> StepPipeline:
        raise InvalidRequest(
            "SDXL does not serve the low-level primitives yet (use stability/sdxl)"
        )


# The part each LoRA half adapts, and the device policy role it is placed as.
_PARTS = {UNET: ("transformer", "denoiser"), TEXT_ENCODER: ("text_encoder", "text_encoder")}
_PARTS[TEXT_ENCODER_2] = ("text_encoder_2", "text_encoder")


def _bank(parts: Parts, half: str) -> AdapterBank:
    """The LoRA bank of one model of the stack: the kohya files' `half` of it, loaded into the
    resident cache under that model (the UNet's fused copies counted where the policy makes
    them; a text encoder's forwards are short and apply LoRAs per row)."""
    part, role = _PARTS[half]
    model = parts[part]
    config: Any = getattr(model, "config", None)
    reader = part_reader(
        half,
        layers_per_block=int(getattr(config, "layers_per_block", 2) or 2),
        text_model=hasattr(model, "text_model"),
    )
    return AdapterBank.placed(
        model,
        reader,
        parts.placements[role],
        parts.extra.get(ADAPTER_CACHE),
        (parts.model_key, half),
        parts.extra.get(FUSED_COPIES) if half == UNET else None,
    )


BUILDER = SDXLBuilder()
