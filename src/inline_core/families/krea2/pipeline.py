"""Krea 2 as a step pipeline (spec 003): the arithmetic of diffusers' `Krea2Pipeline`, per
request, so the pixels match. Latents are packed 2x2; each row carries its prompt's stacked
hidden states and mask; guidance is Krea's `cond + g * (cond - uncond)` against the negative
prompt; the shift is the resolution's (Turbo: fixed)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import torch
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.flow.samplers import numpy_flow_spacing
from inline_core.diffusion.flow.schedule import FlowMatchSchedule, calculate_shift
from inline_core.diffusion.placement import OffloadSwap, PlacementLike, torch_dtype
from inline_core.errors import InvalidRequest
from inline_core.families.krea2.encoder import Krea2PromptEncoder, MaskedConditioning
from inline_core.families.krea2.request import Krea2Request, new_request
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


class Krea2StepPipeline:
    _dit_modules = ["transformer"]
    _encoder_modules = ["text_encoder.model"]
    _vae_modules = ["vae.autoencoder"]
    _resident_modules: list[str] = []

    def __init__(
        self,
        *,
        text_encoder: Krea2PromptEncoder,
        transformer: nn.Module,
        vae: QwenImageVAE,
        placement: PlacementLike,
        swap: OffloadSwap,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
        serial_phases: bool = False,
    ) -> None:
        self.text_encoder = text_encoder
        self.transformer = transformer
        self.vae = vae
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        self.dtype = torch_dtype(placement.dtype)
        self.scheduler_config = dict(scheduler_config)
        self.model_key = model_key
        self.serial_phases = serial_phases
        self.channels = int(cast(Any, transformer).config.in_channels) // (PATCH * PATCH)

    def request(self, **kwargs: Any) -> Krea2Request:
        return new_request(self.model_key, **kwargs)

    def prepare_encode(self, state: Krea2Request, /) -> Krea2Request:
        with torch.inference_mode():
            if state.loras:
                raise InvalidRequest("Krea 2 takes no LoRAs here yet")
            encoder, layers = self.text_encoder, state.text_layers or self.text_encoder.layers
            if state.positive is None:
                state.positive = encoder.encode_layers(state.prompt, layers)
            if state.cfg and state.negative is None:
                state.negative = encoder.encode_layers(state.negative_prompt, layers)
            dtype = cast(torch.Tensor, state.positive.value).dtype
            h, w = state.latent_size
            generator = torch.Generator("cpu").manual_seed(state.seed)
            shape = (state.batch_size, self.channels, h * PATCH, w * PATCH)
            drawn = torch.randn(shape, generator=generator, dtype=dtype)
            noise = pack(drawn[state.batch_index : state.batch_index + 1]).to(self.device)
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
            state.schedule = FlowMatchSchedule.create(
                config,
                state.steps,
                h * w,
                self.device,
                sampler=state.sampler,
                schedule=state.sigma_schedule,
                spacing=numpy_flow_spacing,
                seed=state.seed,
                row=state.batch_index,
                mu=mu,
            )
            state.latents = Latents(noise.to(torch.float32), tuple(noise.shape))
        return state

    def denoise_step(self, states: Sequence[Krea2Request], /) -> list[torch.Tensor]:
        with torch.inference_mode():
            rows = [(s, cast(MaskedConditioning, s.positive)) for s in states]
            rows += [(s, cast(MaskedConditioning, s.negative)) for s in states if s.cfg]
            out = self._forward(rows)
            negatives = iter(out[len(states) :])
            preds: list[torch.Tensor] = []
            for i, s in enumerate(states):
                pred = out[i : i + 1].float()
                if s.cfg:
                    neg = next(negatives).unsqueeze(0).float()
                    pred = pred + s.guidance * (pred - neg)
                preds.append(pred)
            return preds

    def _forward(self, rows: list[tuple[Krea2Request, MaskedConditioning]]) -> torch.Tensor:
        h, w = rows[0][0].latent_size
        hidden = torch.cat([cast(Latents, s.latents).value for s, _c in rows])
        text = torch.stack([cast(torch.Tensor, c.value) for _s, c in rows])
        mask = torch.stack([cast(torch.Tensor, c.mask) for _s, c in rows])
        timestep = torch.cat(
            [cast(FlowMatchSchedule, s.schedule).model_timestep(s.step_index) for s, _c in rows]
        )
        with self.swap.use(self.transformer, self.placement):
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

    def step_scheduler(self, state: Krea2Request, noise_pred: Any, /) -> None:
        schedule, lat = _prepared(state)
        with torch.inference_mode():
            state.latents = schedule.step(state.step_index, noise_pred, lat)
        state.step_index += 1

    def post_latents(self, state: Krea2Request, /) -> Latents:
        _schedule, lat = _prepared(state)
        h, w = state.latent_size
        value = unpack(cast(torch.Tensor, lat.value), h, w)
        state.latents = state.positive = state.negative = None
        return Latents(value, tuple(value.shape))

    def post_decode(self, state: Krea2Request, /) -> Image.Image:
        latents = self.post_latents(state)
        with torch.inference_mode():
            return self.vae.decode(latents)


def _prepared(state: Krea2Request) -> tuple[FlowMatchSchedule, Latents]:
    if state.schedule is None or state.latents is None:
        raise RuntimeError("prepare_encode has not run for this request")
    return cast(FlowMatchSchedule, state.schedule), state.latents


__all__ = ["Conditioning", "Krea2StepPipeline"]
