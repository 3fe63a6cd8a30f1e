"""Krea 2 as a step pipeline (spec 003): the arithmetic of diffusers' `Krea2Pipeline`, per
request, so the pixels match. Latents are packed 2x2; each row carries its prompt's stacked
hidden states and mask, and its request's LoRA stack; guidance is Krea's `cond + g * (cond -
uncond)` against the negative prompt; the shift is the resolution's (Turbo: fixed). What every
flow image pipeline does is `FlowImagePipeline`'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.flow.schedule import FlowMatchSchedule, calculate_shift
from inline_core.errors import InvalidRequest
from inline_core.families.flow_pipeline import FlowImagePipeline
from inline_core.families.krea2.encoder import Krea2PromptEncoder, MaskedConditioning
from inline_core.families.krea2.lora import read_lora
from inline_core.families.krea2.request import Krea2Request, new_request
from inline_core.families.krea2.ring import route_ring
from inline_core.families.krea2.split import tokens_refusal
from inline_core.families.krea2.vae import QwenImageVAE

PATCH = 2
TURBO_MU = 1.15  # Turbo's fixed shift


def pack(latents: torch.Tensor) -> torch.Tensor:
    b, c, h, w = latents.shape
    x = latents.view(b, c, h // PATCH, PATCH, w // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // PATCH) * (w // PATCH), c * PATCH * PATCH)


def unpack(packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """(1, tokens, 4C) -> (1, C, 1, 2h, 2w) for a token grid of h x w."""
    b, _tokens, channels = packed.shape
    x = packed.view(b, h, w, channels // (PATCH * PATCH), PATCH, PATCH).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, channels // (PATCH * PATCH), 1, h * PATCH, w * PATCH)


def position_ids(text: int, h: int, w: int) -> torch.Tensor:
    """(text + h*w, 3): text at the origin, image tokens at (0, row, column)."""
    image = torch.zeros(h, w, 3)
    image[..., 1] = torch.arange(h)[:, None]
    image[..., 2] = torch.arange(w)[None, :]
    return torch.cat([torch.zeros(text, 3), image.reshape(h * w, 3)])


class Krea2StepPipeline(FlowImagePipeline[Krea2Request]):
    _encoder_modules = ["text_encoder.model"]
    _vae_modules = ["vae.autoencoder"]
    preview_name = "wan21"  # the Qwen-Image VAE's latents are Wan 2.1's, one frame deep

    def __init__(
        self,
        *,
        text_encoder: Krea2PromptEncoder,
        transformer: nn.Module,
        vae: QwenImageVAE,
        **kwargs: Any,
    ) -> None:
        super().__init__(transformer=transformer, read_lora=read_lora, **kwargs)
        self.text_encoder = text_encoder
        self.vae = vae
        self.channels = int(cast(Any, transformer).config.in_channels) // (PATCH * PATCH)

    def request(self, **kwargs: Any) -> Krea2Request:
        return new_request(self.model_key, **kwargs)

    # -- worker-group split (components.step.SupportsSplitNotice) ------------------------------

    def split_by(self, engine: str, degrees: Mapping[str, int], /) -> None:
        """Under Ring, the blocks' attention runs over the masked ring (`ring.py`)."""
        if engine != "cache-dit":
            raise ValueError(f"Krea 2 splits with cache-dit, not {engine}")
        route_ring(self.transformer, degrees)

    def prepare_encode(self, state: Krea2Request, /) -> Krea2Request:
        refuse_unshared(state)
        with torch.inference_mode():
            encoder, layers = self.text_encoder, state.text_layers or self.text_encoder.layers
            if state.positive is None:
                state.positive = encoder.encode_layers(state.prompt, layers)
            if state.cfg and state.negative is None:
                state.negative = encoder.encode_layers(state.negative_prompt, layers)
            dtype = cast(torch.Tensor, state.positive.value).dtype
            h, w = state.latent_size
            config = self.scheduler_config
            mu = (
                TURBO_MU
                if state.distilled
                else calculate_shift(
                    h * w,
                    config.get("base_image_seq_len", 256),
                    config.get("max_image_seq_len", 6400),
                    config.get("base_shift", 0.5),
                    config.get("max_shift", 1.15),
                )
            )
            self._start(state, (self.channels, h * PATCH, w * PATCH), dtype, mu)
        return state

    def _guide(self, pred: torch.Tensor, negative: torch.Tensor, guidance: float) -> torch.Tensor:
        return pred + guidance * (pred - negative)

    def _pack(self, latents: torch.Tensor) -> torch.Tensor:
        return pack(latents)

    def _unpack(self, packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
        return unpack(packed, h, w)

    def _preview(self, packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
        return unpack(packed, h, w)

    def _decoder(self) -> QwenImageVAE:
        return self.vae

    def _forward(self, rows: list[tuple[Krea2Request, Conditioning]]) -> torch.Tensor:
        h, w = rows[0][0].latent_size
        masked = [cast(MaskedConditioning, c) for _s, c in rows]
        hidden = torch.cat([cast(torch.Tensor, self._latents_in(s).value) for s, _c in rows])
        text = torch.stack([cast(torch.Tensor, c.value) for c in masked])
        mask = torch.stack([cast(torch.Tensor, c.mask) for c in masked])
        timestep = torch.cat(
            [cast(FlowMatchSchedule, s.schedule).model_timestep(s.step_index) for s, _c in rows]
        )
        with self._on_device(rows):
            return cast(
                torch.Tensor,
                self.transformer(
                    hidden_states=hidden.to(self.dtype),
                    encoder_hidden_states=text.to(self.device, self.dtype),
                    timestep=timestep.to(self.device, self.dtype),
                    position_ids=position_ids(text.shape[1], h, w).to(self.device),
                    encoder_attention_mask=mask.to(self.device),
                    return_dict=False,
                )[0],
            )


def refuse_unshared(state: Krea2Request) -> None:
    """A rank's guard behind the check at submit (`Krea2Family.unsplittable`): image tokens the
    ranks cannot share are an `InvalidRequest` saying why and what to change, before cache-dit's
    planner shards them unevenly (its Ulysses exchange takes equal shards)."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return
    if why := tokens_refusal(state.latent_size, dist.get_world_size()):  # ulysses x ring
        raise InvalidRequest(why)
