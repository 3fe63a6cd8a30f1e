"""Qwen-Image as a step pipeline (spec 003): the four calls the batched sampler drives.

`prepare_encode` encodes the prompts (with the reference images, for an edit), encodes the
references with the VAE, draws the noise and builds the request's private schedule;
`denoise_step` runs one transformer forward for a batch of requests (positives, then the
negatives of the guided ones); `step_scheduler` advances one request (a CFG++ sampler along the
negative's prediction too); `post_decode` decodes it.
The arithmetic mirrors diffusers' `QwenImagePipeline` and `QwenImageEditPlusPipeline` (true
classifier-free guidance with its norm rescale included), so the pixels match.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import torch
from PIL import Image

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.flow.samplers import numpy_flow_spacing
from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.diffusion.stepcache import rows as step_rows
from inline_core.diffusion.stepcache.backend import StepCacheBackend
from inline_core.diffusion.stepcache.rows import RowCache
from inline_core.families.qwen_image import split_plan
from inline_core.families.qwen_image.denoiser import QwenImageDenoiser
from inline_core.families.qwen_image.encoder import QwenPromptEncoder
from inline_core.families.qwen_image.family import QwenImageFamily
from inline_core.families.qwen_image.request import (
    LATENT_FACTOR,
    QwenImageRequest,
    new_request,
)
from inline_core.families.qwen_image.vae import QwenImageVAE, pack, unpack

# Its latents' preview format (`diffusion/preview/formats.py`), as its family declares it.
(PREVIEW_FORMAT,) = QwenImageFamily.capabilities.preview_latents


def schedule_config(config: Mapping[str, Any], shift: float | None) -> dict[str, Any]:
    """The scheduler config a request samples with: the model's, or a fixed `shift` in place of
    its dynamic one (ComfyUI's `ModelSamplingAuraFlow`)."""
    if shift is None:
        return dict(config)
    return {**config, "use_dynamic_shifting": False, "shift": shift, "shift_terminal": None}


class QwenImageStepPipeline:
    """Drives one loaded Qwen-Image stack, prompt (and references) to image."""

    _dit_modules = ["denoiser.transformer"]
    _encoder_modules = ["text_encoder.model"]
    _vae_modules = ["vae.autoencoder"]
    _resident_modules: list[str] = []

    def __init__(
        self,
        *,
        text_encoder: QwenPromptEncoder,
        denoiser: QwenImageDenoiser,
        vae: QwenImageVAE,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
        edit: bool,
        serial_phases: bool = False,
    ) -> None:
        self.text_encoder = text_encoder
        self.denoiser = denoiser
        self.vae = vae
        self.scheduler_config = dict(scheduler_config)
        self.model_key = model_key
        self.edit = edit  # an edit model: requests come with reference images
        self.serial_phases = serial_phases

    @property
    def latent_factor(self) -> int:
        return LATENT_FACTOR

    def request(self, **kwargs: Any) -> QwenImageRequest:
        """A new request state bound to this pipeline's model (validates sizes and images)."""
        return new_request(self.model_key, self.edit, **kwargs)

    # -- step cache (components.step.SupportsCacheDiTBackend) -----------------------------------

    def adopt_cache_dit_backend(self, backend: StepCacheBackend, /) -> None:
        self.denoiser.adopt_step_cache(backend)

    # -- worker-group split (components.step.SupportsContextPlan, SupportsSplitNotice) ----------

    def context_plan(self, degrees: Mapping[str, int], /) -> Mapping[str, Any]:
        return split_plan.context_plan()

    def split_by(self, engine: str, degrees: Mapping[str, int], /) -> None:
        """Pads, shards and masks around the plan (`split_plan.py`)."""
        if engine != "cache-dit":
            raise ValueError(f"Qwen-Image splits with cache-dit, not {engine}")
        split_plan.pad_for_split(self.denoiser.transformer, degrees)

    # -- step protocol ---------------------------------------------------------------------------

    def prepare_encode(self, state: QwenImageRequest, /) -> QwenImageRequest:
        with torch.inference_mode():
            self._prepare(state)
        return state

    def _prepare(self, state: QwenImageRequest) -> None:
        device = self.denoiser.device
        self.denoiser.adapters.check(state.loras)  # loads them here, off the step loop
        state.cache = step_rows.request_cache(state.step_cache)
        images = [cast(Image.Image, image).convert("RGB") for image in state.images]
        state.positive = self._encode(state.prompt, images)
        if state.cfg:
            state.negative = self._encode(state.negative_prompt, images)
        dtype = cast(torch.Tensor, state.positive.value).dtype
        if images:
            refs = [self.vae.encode_reference(image, dtype) for image in images]
            state.references = torch.cat(refs, dim=1).to(device)
        generator = torch.Generator("cpu").manual_seed(state.seed)
        h, w = state.latent_size
        noise = torch.randn(
            (1, 1, self.vae.latent_channels, 2 * h, 2 * w), generator=generator, dtype=dtype
        )
        state.latents = Latents(pack(noise.transpose(1, 2)).to(device), (1, h * w, 64))
        state.schedule = FlowMatchSchedule.create(
            schedule_config(self.scheduler_config, state.shift),
            state.steps,
            h * w,
            device,
            sampler=state.sampler,
            schedule=state.sigma_schedule,
            spacing=numpy_flow_spacing,
            seed=state.seed,
        )

    def _encode(self, prompt: str, images: Sequence[Image.Image]) -> Conditioning:
        if images:
            return self.text_encoder.encode_edit(prompt, images)
        return self.text_encoder.encode(prompt)

    def denoise_step(self, states: Sequence[QwenImageRequest], /) -> list[torch.Tensor]:
        with torch.inference_mode():
            return self._denoise(states)

    def _denoise(self, states: Sequence[QwenImageRequest]) -> list[torch.Tensor]:
        inputs: list[torch.Tensor] = []
        timesteps: list[torch.Tensor] = []
        conds: list[Conditioning] = []
        loras = [s.loras for s in states]
        caches: list[RowCache | None] = []  # each row's step cache: its request's, per branch
        for s in states:
            schedule, lat = _prepared(s)
            inputs.append(_model_input(s, lat))
            timesteps.append(schedule.model_timestep(s.step_index))
            conds.append(cast(Conditioning, s.positive))
            caches.append(step_rows.branch_row(s.cache, "positive"))
        guided = [i for i, s in enumerate(states) if s.cfg]
        for i in guided:  # negatives follow all positives
            inputs.append(inputs[i])
            timesteps.append(timesteps[i])
            conds.append(cast(Conditioning, states[i].negative))
            loras.append(states[i].loras)
            caches.append(step_rows.branch_row(states[i].cache, "negative"))
        shapes = states[0].image_shapes
        out = self.denoiser.predict(inputs, timesteps, conds, shapes, loras, caches)
        negatives = dict(zip(guided, out[len(states) :], strict=True))
        preds: list[torch.Tensor] = []
        for i, s in enumerate(states):
            tokens = cast(torch.Tensor, _prepared(s)[1].value).shape[1]
            pred = out[i : i + 1, :tokens]
            s.uncond = None
            if i in negatives:
                negative = negatives[i][None, :tokens]
                pred = _true_cfg(pred, negative, s.guidance)
                # A CFG++ sampler steps along the unconditional prediction too.
                s.uncond = negative if s.cfg_pp else None
            preds.append(pred)
        return preds

    def step_scheduler(self, state: QwenImageRequest, noise_pred: Any, /) -> None:
        schedule, lat = _prepared(state)
        with torch.inference_mode():
            latents = cast(torch.Tensor, lat.value)
            pred = cast(torch.Tensor, noise_pred).to(latents.dtype)
            state.latents = schedule.step(state.step_index, pred, lat, state.uncond)
        state.uncond = None
        state.step_index += 1

    # -- previews (components.step.SupportsPreview) ------------------------------------------------

    def preview_format(self, state: QwenImageRequest, /) -> str:
        return PREVIEW_FORMAT

    def preview_latents(self, state: QwenImageRequest, noise_pred: Any, /) -> torch.Tensor:
        """The x0 estimate as one frame of Wan 2.1 latents, `(1, 16, 1, h, w)`, normalised as
        the preview factors take them."""
        schedule, lat = _prepared(state)
        with torch.inference_mode():
            x0 = schedule.x0_estimate(state.step_index, noise_pred, lat)
            return unpack(x0, state.height, state.width)

    # -- decode ------------------------------------------------------------------------------------

    def post_decode(self, state: QwenImageRequest, /) -> Image.Image:
        return self.post_decode_many([state])[0]

    def decode_key(self, state: QwenImageRequest, /) -> Hashable | None:
        """Requests of one size decode in one VAE call."""
        return (state.width, state.height)

    def decode_pixels(self, state: QwenImageRequest, /) -> int:
        return state.width * state.height

    def post_decode_many(self, states: Sequence[QwenImageRequest], /) -> list[Image.Image]:
        """`post_decode` of each state, in one VAE call; the states are released only once it
        succeeded, so a failed call can be retried one by one."""
        tokens = [cast(torch.Tensor, _prepared(s)[1].value) for s in states]
        first = states[0]
        with torch.inference_mode():
            images = self.vae.decode_many(tokens, first.height, first.width)
        for s in states:
            _release(s)
        return images


def _prepared(state: QwenImageRequest) -> tuple[FlowMatchSchedule, Latents]:
    if state.schedule is None or state.latents is None:
        raise RuntimeError("prepare_encode has not run for this request")
    return state.schedule, state.latents


def _model_input(state: QwenImageRequest, lat: Latents) -> torch.Tensor:
    """The row the transformer sees: the latents, then the packed references (an edit)."""
    latents = cast(torch.Tensor, lat.value)
    if state.references is None:
        return latents
    return torch.cat([latents, cast(torch.Tensor, state.references).to(latents.dtype)], dim=1)


def _true_cfg(pos: torch.Tensor, neg: torch.Tensor, scale: float) -> torch.Tensor:
    """`neg + scale * (pos - neg)`, rescaled to the positive prediction's norm per token."""
    combined = neg + scale * (pos - neg)
    cond_norm = _norm(pos)
    return combined * (cond_norm / _norm(combined))


def _norm(x: torch.Tensor) -> torch.Tensor:
    """The 2-norm over the last dimension, kept (`torch.norm(x, dim=-1, keepdim=True)`)."""
    return cast(torch.Tensor, cast(Any, torch).norm(x, dim=-1, keepdim=True))


def _release(state: QwenImageRequest) -> None:
    """Drop the request's tensors once it is done: the state object may outlive the render."""
    state.latents = state.positive = state.negative = state.uncond = None
    state.references = None
    step_rows.release(state.cache)
