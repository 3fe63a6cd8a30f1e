"""SDXL (and SD 1.x) as a step pipeline (spec 003): the four calls the batched sampler drives.

`prepare_encode` draws the noise as KSampler draws it, encodes the prompts (both CLIPs, weights,
windows, the request's layer) and builds the request's private schedule (`schedule.py`);
`denoise_step` runs one UNet forward over a batch of requests of one latent size (each with its
own prompt, timestep, sampler and guidance; a request with guidance adds its negative row);
`step_scheduler` advances one request; `post_decode` decodes it. The arithmetic is ComfyUI's
(`uncond + cfg * (cond - uncond)`; SDXL's size conditioning is the latent's size, uncropped),
which is diffusers' `StableDiffusionXLPipeline`'s on the same sigmas.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any, cast

import torch
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.device.policy import Placement
from inline_core.diffusion.adapters.bank import AdapterBank
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.diffusion.encoders.clip_prompt import ClipConditioning, ClipPromptEncoder
from inline_core.diffusion.masks import rgb_at
from inline_core.diffusion.placement import OffloadSwap
from inline_core.diffusion.vae.autoencoder_kl import AutoencoderKLVAE
from inline_core.errors import InvalidRequest
from inline_core.families.sdxl.embedding_vectors import EmbeddingVectors
from inline_core.families.sdxl.family import SDXLFamily
from inline_core.families.sdxl.hires_stage import enter_hires, seeded_noise
from inline_core.families.sdxl.inpaint import INPAINT_CHANNELS, InpaintBlend, InpaintChannels
from inline_core.families.sdxl.refiner_stage import RefinerStage, enter_refiner, refiner_sizes
from inline_core.families.sdxl.request import (
    LATENT_FACTOR,
    SDXLRequest,
    img2img_start,
    new_request,
)
from inline_core.families.sdxl.schedule import DiscreteSchedule

# A UNet's own sampling (its checkpoint's prediction type and zero-SNR rescale, as scheduler
# config keys), or nothing.
PREDICTION_ATTR = "inline_prediction"

# Its latents' preview format (`diffusion/preview/formats.py`), as its family declares it.
(PREVIEW_FORMAT,) = SDXLFamily.capabilities.preview_latents


class SDXLStepPipeline:
    """Drives one loaded stack, prompt to image. Requests of one size share a forward."""

    _dit_modules = ["unet"]
    _encoder_modules: list[str] = []
    _vae_modules: list[str] = []
    _resident_modules: list[str] = []

    def __init__(
        self,
        *,
        unet: nn.Module,
        adapters: AdapterBank,
        text_encoder: ClipPromptEncoder,
        vae: AutoencoderKLVAE,
        placement: Placement,
        swap: OffloadSwap,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
        serial_phases: bool = False,
        refiner: RefinerStage | None = None,
        preview_format: str = PREVIEW_FORMAT,
    ) -> None:
        self._preview_format = preview_format  # SDXL's latents, or SD 1.x's
        self.unet = unet
        self.refiner = refiner  # the refiner checkpoint's UNet and encoder (None: none)
        self.adapters = adapters  # each row's LoRA stack on the UNet, per row of a forward
        self.embeddings = EmbeddingVectors(text_encoder)  # the prompts' embedding files
        self.text_encoder = text_encoder
        self.vae = vae
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        self.scheduler_config = dict(scheduler_config)
        self.scheduler_config.update(getattr(unet, PREDICTION_ATTR, None) or {})
        self.model_key = model_key
        self.serial_phases = serial_phases
        config = cast(Any, unet).config
        self.in_channels = int(config.in_channels)
        self.latent_channels = int(config.out_channels)  # an inpaint UNet takes more in
        self.sizes = config.addition_embed_type == "text_time"  # SDXL's size conditioning

    def request(self, **kwargs: Any) -> SDXLRequest:
        return new_request(self.model_key, **kwargs)

    # -- step protocol ---------------------------------------------------------------------------

    def prepare_encode(self, state: SDXLRequest, /) -> SDXLRequest:
        with torch.inference_mode():
            self._prepare(state)
        return state

    def _prepare(self, state: SDXLRequest) -> None:
        h, w = state.height // LATENT_FACTOR, state.width // LATENT_FACTOR
        shape = (1, self.latent_channels, h, w)
        # KSampler's noise: the whole latent batch drawn at once from the seed, on the CPU.
        noise = seeded_noise(state, shape).to(self.device)
        generator: torch.Generator | None = None  # an image's: its encode's, then its noise's
        start = None
        if state.start is not None:
            start = cast(torch.Tensor, state.start.value).to(self.device, torch.float32)
        # diffusers' inpaint at full strength starts from the noise alone.
        from_noise = state.mask is not None and state.strength == 1.0
        if state.image is not None:
            # diffusers' img2img: the posterior sampled from the seed's generator, then the
            # noise drawn from the same generator. Its inpaint pipeline skips that encode when
            # nothing reads it: a 9-channel UNet at full strength (no blend, no image start).
            generator = torch.Generator("cpu").manual_seed(state.seed)
            if not (from_noise and self.in_channels == INPAINT_CHANNELS):
                start = self._encode_image(state, generator)
            noise = torch.randn(shape, generator=generator, dtype=torch.float32).to(self.device)
        # The LoRA files load here, off the step loop, and a bad one fails this request alone.
        self.adapters.check(state.loras)
        text_loras = tuple(replace(use, strength=use.text_strength) for use in state.loras)
        embeddings = {e.name: self.embeddings.get(e) for e in state.embeddings}
        if state.refiner_switch is not None:
            if self.refiner is None:
                raise InvalidRequest("a refiner switch without a refiner checkpoint loaded")
            self.refiner.encode(state, embeddings)
        encode = self.text_encoder.encode_at
        if state.positive is None:
            state.positive = encode(state.prompt, state.clip_skip, text_loras, embeddings)
        if state.cfg and state.negative is None:
            state.negative = encode(state.negative_prompt, state.clip_skip, text_loras, embeddings)
        schedule = DiscreteSchedule.create(
            self.scheduler_config,
            state.steps,
            sampler=state.sampler,
            schedule=state.schedule,
            prediction=state.prediction,
            zsnr=state.zsnr,
            denoise=state.denoise,
            skip=0 if state.image is None else img2img_start(state.steps, state.strength),
            seed=state.seed,
            row=state.batch_index,
            refiner_switch=state.refiner_switch,
            hires=None if state.hires is None else (state.hires.steps, state.hires.denoise),
        )
        state.schedule_state = schedule
        state.refiner_from = schedule.refiner_from
        if state.on_refiner:  # the switch falls before the first step: the refiner runs all
            enter_refiner(state)
        if self.in_channels == INPAINT_CHANNELS:
            if state.image is None or state.mask is None or generator is None:
                raise InvalidRequest(
                    "this checkpoint is an inpaint model (9 input channels): wire the image to "
                    "inpaint and its mask"
                )
            image = rgb_at(state.image, state.width, state.height)
            state.inpaint = InpaintChannels.of(self.vae, image, state.mask, generator, shape)
        elif state.mask is not None and start is not None:
            state.inpaint = InpaintBlend.of(state.mask, start, noise, schedule, state.sampler)
        if from_noise:
            state.latents = Latents(schedule.start_from_noise(noise), shape)
        else:
            state.latents = Latents(schedule.start(noise, start), shape)

    def _encode_image(self, state: SDXLRequest, generator: torch.Generator) -> torch.Tensor:
        source = rgb_at(cast(Image.Image, state.image), state.width, state.height)
        encoded = cast(torch.Tensor, self.vae.encode(source, generator).value)
        return encoded.to(self.device, torch.float32)

    def denoise_step(self, states: Sequence[SDXLRequest], /) -> list[torch.Tensor]:
        with torch.inference_mode():
            return self._denoise(states)

    def _denoise(self, states: Sequence[SDXLRequest]) -> list[torch.Tensor]:
        rows: list[tuple[SDXLRequest, Conditioning]] = [(s, _cond(s.positive)) for s in states]
        guided = [i for i, s in enumerate(states) if s.cfg]
        rows += [(states[i], _cond(states[i].negative)) for i in guided]
        out = self._forward(rows)
        preds: list[torch.Tensor] = []
        negatives = dict(zip(guided, out[len(states) :], strict=True))
        for i, s in enumerate(states):
            cond = out[i]
            s.uncond = None
            if i in negatives:
                uncond = negatives[i]
                cond = uncond + (cond - uncond) * s.guidance
                # A CFG++ sampler steps along the unconditional prediction too.
                s.uncond = uncond.unsqueeze(0) if s.cfg_pp else None
            preds.append(cond.unsqueeze(0))
        return preds

    def _forward(self, rows: Sequence[tuple[SDXLRequest, Conditioning]]) -> torch.Tensor:
        # Every row of a forward is on one UNet: the refiner's past the switch (`batch_key`).
        refining = rows[0][0].on_refiner
        unet = cast(RefinerStage, self.refiner).unet if refining else self.unet
        dtype = next(unet.parameters()).dtype
        xs: list[torch.Tensor] = []
        timesteps: list[float] = []
        contexts: list[torch.Tensor] = []
        pooled: list[torch.Tensor] = []
        sizes: list[list[float]] = []
        for state, conditioning in rows:
            schedule, latents = _prepared(state)
            x = schedule.model_input(state.step_index, cast(torch.Tensor, latents.value))
            if isinstance(state.inpaint, InpaintChannels):
                x = state.inpaint.model_input(x)
            xs.append(x)
            timesteps.append(schedule.timesteps[state.step_index])
            value = cast(ClipConditioning, conditioning.value)
            contexts.append(value.hidden)
            if self.sizes:
                if value.pooled is None:
                    raise InvalidRequest("an SDXL UNet needs a pooled prompt embedding")
                pooled.append(value.pooled)
                if refining:
                    sizes.append(refiner_sizes(state, value))
                else:
                    sizes.append([state.height, state.width, 0, 0, state.height, state.width])
        sample = torch.cat(xs).to(self.device, dtype)
        timestep = torch.tensor(timesteps, dtype=torch.float32, device=self.device)
        context = torch.cat(_same_length(contexts)).to(self.device, dtype)
        extra: dict[str, Any] = {}
        if self.sizes:
            extra["added_cond_kwargs"] = {
                "text_embeds": torch.cat(pooled).to(self.device, dtype),
                "time_ids": torch.tensor(sizes, dtype=dtype, device=self.device),
            }
        stacks = [self._unet_stack(state.loras) for state, _c in rows]
        adapted = nullcontext() if refining else self.adapters.forward(stacks)
        with self.swap.use(unet, self.placement), adapted:
            out = cast(Any, unet)(sample, timestep, context, return_dict=False, **extra)[0]
        return cast(torch.Tensor, out).to(torch.float32)

    def _unet_stack(self, loras: LoraStack) -> LoraStack:
        """The LoRAs of a stack with UNet layers (a text-encoder-only file adds nothing here)."""
        return tuple(u for u in loras if u.strength != 0.0 and self.adapters.weights(u).layers)

    def step_scheduler(self, state: SDXLRequest, noise_pred: Any, /) -> None:
        schedule, latents = _prepared(state)
        with torch.inference_mode():
            x = cast(torch.Tensor, latents.value)
            x = schedule.step(cast(torch.Tensor, noise_pred), x, state.uncond)
            state.uncond = None
            if isinstance(state.inpaint, InpaintBlend):
                x = state.inpaint.blend(schedule, state.step_index + 1, x)
        state.latents = Latents(x, latents.shape)
        state.step_index += 1
        if state.step_index == state.refiner_from:
            enter_refiner(state)
        if state.step_index == schedule.hires_from:
            enter_hires(state, schedule)

    # -- previews (components.step.SupportsPreview) ------------------------------------------------

    def preview_format(self, state: SDXLRequest, /) -> str:
        return self._preview_format

    def preview_latents(self, state: SDXLRequest, noise_pred: Any, /) -> torch.Tensor:
        schedule, latents = _prepared(state)
        with torch.inference_mode():
            x = cast(torch.Tensor, latents.value)
            return schedule.x0(state.step_index, cast(torch.Tensor, noise_pred), x)

    # -- decode ------------------------------------------------------------------------------------

    def post_latents(self, state: SDXLRequest, /) -> Latents:
        _schedule, latents = _prepared(state)
        _release(state)
        return latents

    def post_decode(self, state: SDXLRequest, /) -> Image.Image:
        _schedule, latents = _prepared(state)
        with torch.inference_mode():
            image = cast(Image.Image, self.vae.decode(latents))
        _release(state)
        return image

    def decode_key(self, state: SDXLRequest, /) -> Hashable | None:
        _schedule, latents = _prepared(state)
        value = cast(torch.Tensor, latents.value)
        return (tuple(value.shape), str(value.dtype), str(value.device))

    def decode_pixels(self, state: SDXLRequest, /) -> int:
        return state.width * state.height

    def post_decode_many(self, states: Sequence[SDXLRequest], /) -> list[Image.Image]:
        latents = [_prepared(s)[1] for s in states]
        with torch.inference_mode():
            images = self.vae.decode_many(latents)
        for s in states:
            _release(s)
        return images


def _cond(conditioning: Conditioning | None) -> Conditioning:
    if conditioning is None:
        raise RuntimeError("prepare_encode has not encoded this request's prompts")
    return conditioning


def _same_length(contexts: list[torch.Tensor]) -> list[torch.Tensor]:
    """Prompts of different window counts in one batch: each repeated to their least common
    length, as ComfyUI batches them (attention over a repeated sequence is the same)."""
    lengths = {c.shape[1] for c in contexts}
    if len(lengths) == 1:
        return contexts
    common = math.lcm(*lengths)
    return [c.repeat(1, common // c.shape[1], 1) for c in contexts]


def _prepared(state: SDXLRequest) -> tuple[DiscreteSchedule, Latents]:
    if state.schedule_state is None or state.latents is None:
        raise RuntimeError("prepare_encode has not run for this request")
    return cast(DiscreteSchedule, state.schedule_state), state.latents


def _release(state: SDXLRequest) -> None:
    """Drop the request's tensors once it is done: the state object may outlive the render."""
    state.latents = state.positive = state.negative = state.start = state.inpaint = None
    state.uncond = None
    state.refiner_positive = state.refiner_negative = None
