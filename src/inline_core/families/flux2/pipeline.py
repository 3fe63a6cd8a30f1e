"""FLUX.2 klein as a step pipeline (spec 003): the arithmetic of diffusers' `Flux2KleinPipeline`,
per request, so the pixels match.

`prepare_encode` encodes the prompt (and the empty prompt of a guided base model), draws the
noise, encodes the reference images with the VAE and builds the request's private schedule
(FLUX.2's empirical shift `mu` for its token count and steps); `denoise_step` runs one forward
for requests of one latent shape and one set of reference shapes: each row is its latents, then
its reference images' latents, with one set of positions (text, latents at time 0, reference
`i` at time 10 + 10i); `step_scheduler` steps one request; `post_decode` decodes it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.bank import AdapterBank, Fetch
from inline_core.diffusion.adapters.fusing import CopyStore
from inline_core.diffusion.encoders.chat_prompt import ChatPromptEncoder
from inline_core.diffusion.flow.samplers import numpy_flow_spacing
from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.diffusion.placement import OffloadSwap, PlacementLike, torch_dtype
from inline_core.errors import InvalidRequest
from inline_core.families.flux2.lora import read_lora
from inline_core.families.flux2.request import (
    MAX_REFERENCE_PIXELS,
    PIXELS_PER_TOKEN,
    Flux2Request,
    new_request,
)
from inline_core.families.flux2.vae import Flux2VAE

REFERENCE_TIME = 10  # reference image i sits at time 10 + 10 i of the positions


def empirical_mu(image_seq_len: int, num_steps: int) -> float:
    """FLUX.2's shift for an image of `image_seq_len` tokens sampled in `num_steps` (diffusers'
    `compute_empirical_mu`, BFL's fit)."""
    a1, b1 = 8.73809524e-05, 1.89833333
    a2, b2 = 0.00016927, 0.45666666
    if image_seq_len > 4300:
        return float(a2 * image_seq_len + b2)
    m_200 = a2 * image_seq_len + b2
    m_10 = a1 * image_seq_len + b1
    a = (m_200 - m_10) / 190.0
    return float(a * num_steps + (m_200 - 200.0 * a))


def grid_ids(h: int, w: int, t: int = 0) -> torch.Tensor:
    """(h*w, 4) positions (t, row, column, 0) of a token grid."""
    return torch.cartesian_prod(
        torch.tensor([t]), torch.arange(h), torch.arange(w), torch.arange(1)
    )


def text_ids(length: int) -> torch.Tensor:
    return torch.cartesian_prod(
        torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(length)
    )


def pack(latents: torch.Tensor) -> torch.Tensor:
    """(1, C, h, w) -> (1, h*w, C)."""
    b, c, h, w = latents.shape
    return latents.reshape(b, c, h * w).permute(0, 2, 1)


def unpack(packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
    b, _tokens, c = packed.shape
    return packed.permute(0, 2, 1).reshape(b, c, h, w)


class Flux2DenoisePipeline:
    """The transformer and its schedule: requests come with their conditioning and leave as
    latents."""

    _dit_modules = ["transformer"]
    _encoder_modules: list[str] = []
    _vae_modules: list[str] = []
    _resident_modules: list[str] = []

    def __init__(
        self,
        *,
        transformer: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
        serial_phases: bool = False,
        adapter_cache: Fetch | None = None,
        fused_copies: CopyStore | None = None,
    ) -> None:
        self.transformer = transformer
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        self.dtype = torch_dtype(placement.dtype)
        self.scheduler_config = dict(scheduler_config)
        self.model_key = model_key
        self.serial_phases = serial_phases
        self.channels = int(cast(Any, transformer).config.in_channels)
        # Each request's LoRA stack, added to its own rows of every forward.
        self.adapters = AdapterBank.placed(
            transformer, read_lora, placement, adapter_cache, model_key, fused_copies
        )

    def request(self, **kwargs: Any) -> Flux2Request:
        return new_request(self.model_key, **kwargs)

    # -- what the full pipeline adds ---------------------------------------------------------------

    def _encode_prompts(self, state: Flux2Request) -> None:
        if state.positive is None or (state.cfg and state.negative is None):
            raise InvalidRequest("a request for the denoiser alone needs its prompts encoded")

    def _encode_references(self, state: Flux2Request) -> list[torch.Tensor]:
        if state.reference_images:
            raise InvalidRequest("the denoiser alone has no VAE to encode reference images with")
        return []

    # -- step protocol ---------------------------------------------------------------------------

    def prepare_encode(self, state: Flux2Request, /) -> Flux2Request:
        with torch.inference_mode():
            self._prepare(state)
        return state

    def _prepare(self, state: Flux2Request) -> None:
        # The LoRA files load here, off the step loop, and a bad one fails this request alone.
        self.adapters.check(state.loras)
        self._encode_prompts(state)
        dtype = cast(torch.Tensor, cast(Conditioning, state.positive).value).dtype
        h, w = state.latent_size
        generator = torch.Generator("cpu").manual_seed(state.seed)
        # Drawn as the pipeline draws it: the whole latent batch at once, in the prompt's dtype.
        drawn = torch.randn(
            (state.batch_size, self.channels, h, w), generator=generator, dtype=dtype
        )
        noise = pack(drawn[state.batch_index : state.batch_index + 1]).to(self.device)
        references = self._encode_references(state)
        if references:
            state.reference_shapes = tuple((r.shape[2], r.shape[3]) for r in references)
            state.references = torch.cat([pack(r) for r in references], dim=1).to(self.device)
        state.schedule = FlowMatchSchedule.create(
            self.scheduler_config,
            state.steps,
            h * w,
            self.device,
            sampler=state.sampler,
            schedule=state.sigma_schedule,
            spacing=numpy_flow_spacing,
            seed=state.seed,
            row=state.batch_index,
            mu=empirical_mu(h * w, state.steps),
        )
        state.latents = Latents(noise.to(torch.float32), tuple(noise.shape))

    def denoise_step(self, states: Sequence[Flux2Request], /) -> list[torch.Tensor]:
        with torch.inference_mode():
            rows: list[tuple[Flux2Request, Conditioning]] = [
                (s, cast(Conditioning, s.positive)) for s in states
            ]
            rows += [(s, cast(Conditioning, s.negative)) for s in states if s.cfg]
            out = self._forward(rows)
            negatives = iter(out[len(states) :])
            preds: list[torch.Tensor] = []
            for i, s in enumerate(states):
                pred = out[i : i + 1].float()
                if s.cfg:
                    neg = next(negatives).unsqueeze(0).float()
                    pred = neg + s.guidance * (pred - neg)
                preds.append(pred)
            return preds

    def _forward(self, rows: list[tuple[Flux2Request, Conditioning]]) -> torch.Tensor:
        first = rows[0][0]
        h, w = first.latent_size
        tokens = h * w
        hidden = [cast(Latents, s.latents).value for s, _c in rows]
        if first.references is not None:
            hidden = [
                torch.cat([cast(torch.Tensor, x), cast(torch.Tensor, s.references)], dim=1)
                for x, (s, _c) in zip(hidden, rows, strict=True)
            ]
        ids = [grid_ids(h, w)]
        for i, (rh, rw) in enumerate(first.reference_shapes):
            ids.append(grid_ids(rh, rw, REFERENCE_TIME + REFERENCE_TIME * i))
        timestep = torch.cat(
            [cast(FlowMatchSchedule, s.schedule).model_timestep(s.step_index) for s, _c in rows]
        )
        text = torch.stack([cast(torch.Tensor, c.value) for _s, c in rows])
        stacks = [s.loras for s, _c in rows]
        with self.swap.use(self.transformer, self.placement), self.adapters.forward(stacks):
            out = cast(
                torch.Tensor,
                self.transformer(
                    hidden_states=torch.cat(cast(list[torch.Tensor], hidden)).to(self.dtype),
                    timestep=timestep.to(self.device, self.dtype),
                    guidance=None,
                    encoder_hidden_states=text.to(self.device, self.dtype),
                    txt_ids=text_ids(text.shape[1]).to(self.device),
                    img_ids=torch.cat(ids).to(self.device),
                    return_dict=False,
                )[0],
            )
        return out[:, :tokens]

    def step_scheduler(self, state: Flux2Request, noise_pred: Any, /) -> None:
        schedule, lat = _prepared(state)
        with torch.inference_mode():
            state.latents = schedule.step(state.step_index, noise_pred, lat)
        state.step_index += 1

    def post_latents(self, state: Flux2Request, /) -> Latents:
        """The final latents as the VAE's normalised patchified grid, (1, C, h, w)."""
        _schedule, lat = _prepared(state)
        h, w = state.latent_size
        value = unpack(cast(torch.Tensor, lat.value), h, w)
        _release(state)
        return Latents(value, tuple(value.shape))

    def post_decode(self, state: Flux2Request, /) -> Image.Image | Latents:
        return self.post_latents(state)


class Flux2StepPipeline(Flux2DenoisePipeline):
    """Drives one loaded FLUX.2 klein stack, prompt (and reference images) to image."""

    _encoder_modules = ["text_encoder.model"]
    _vae_modules = ["vae.autoencoder"]

    def __init__(self, *, text_encoder: ChatPromptEncoder, vae: Flux2VAE, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.text_encoder = text_encoder
        self.vae = vae

    def _encode_prompts(self, state: Flux2Request) -> None:
        if state.positive is None:
            state.positive = self.text_encoder.encode(state.prompt)
        if state.cfg and state.negative is None:
            state.negative = self.text_encoder.encode("")  # the pipeline's negative prompt

    def _encode_references(self, state: Flux2Request) -> list[torch.Tensor]:
        return [self.vae.encode_pixels(self._reference_pixels(i)) for i in state.reference_images]

    def _reference_pixels(self, image: Any) -> torch.Tensor:
        """A reference image as the pipeline prepares it: scaled down to at most 1024x1024
        pixels, cropped to multiples of 16."""
        from diffusers.pipelines.flux2.image_processor import Flux2ImageProcessor

        processor = cast(Any, Flux2ImageProcessor(vae_scale_factor=PIXELS_PER_TOKEN))
        img = cast(Image.Image, image)
        width, height = img.size
        if width * height > MAX_REFERENCE_PIXELS:
            img = processor._resize_to_target_area(img, MAX_REFERENCE_PIXELS)
            width, height = img.size
        width = (width // PIXELS_PER_TOKEN) * PIXELS_PER_TOKEN
        height = (height // PIXELS_PER_TOKEN) * PIXELS_PER_TOKEN
        return cast(
            torch.Tensor,
            processor.preprocess(img, height=height, width=width, resize_mode="crop"),
        )

    def post_decode(self, state: Flux2Request, /) -> Image.Image:
        latents = self.post_latents(state)
        with torch.inference_mode():
            return self.vae.decode(latents)


def _prepared(state: Flux2Request) -> tuple[FlowMatchSchedule, Latents]:
    if state.schedule is None or state.latents is None:
        raise RuntimeError("prepare_encode has not run for this request")
    return cast(FlowMatchSchedule, state.schedule), state.latents


def _release(state: Flux2Request) -> None:
    """Drop the request's tensors once it is done: the state object may outlive the render."""
    state.latents = state.positive = state.negative = state.references = None


__all__ = ["Flux2DenoisePipeline", "Flux2StepPipeline", "empirical_mu", "np"]
