"""Z-Image as a step pipeline (spec 003): the four calls the batched sampler drives.

`prepare_encode` draws the noise, encodes the prompts and builds the request's private schedule;
`denoise_step` runs one transformer forward for a batch of requests (each with its own prompt,
size, timestep and step count); `step_scheduler` advances one request; `post_decode` decodes it.
The arithmetic mirrors diffusers' `ZImagePipeline` / `ZImageImg2ImgPipeline` so the pixels match.

Two pipelines share that arithmetic. `ZImageDenoisePipeline` is the transformer and its schedule
alone: the low-level `sample` node hands it prompts already encoded (`encode/text`) and gets latents
back (for `vae/decode`), and may pick a sampler, sigma schedule, ComfyUI `denoise` and starting
latents. `ZImageStepPipeline` adds the text encoder and the VAE: the `alibaba/z-image-turbo` node.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import torch
from PIL import Image

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.diffusion.encoders.chat_prompt import ChatPromptEncoder
from inline_core.diffusion.flow.noise_mask import NoiseMask
from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.diffusion.flow.start import starting_latents
from inline_core.diffusion.libs import vector_norm
from inline_core.diffusion.stepcache import rows as step_rows
from inline_core.diffusion.stepcache.backend import StepCacheBackend
from inline_core.diffusion.stepcache.rows import RowCache
from inline_core.diffusion.vae.autoencoder_kl import AutoencoderKLVAE
from inline_core.errors import InvalidRequest
from inline_core.families.zimage import controlnet, xdit
from inline_core.families.zimage.control import RowControl
from inline_core.families.zimage.control_files import split_refusal
from inline_core.families.zimage.controlnet import ControlUse
from inline_core.families.zimage.denoiser import ZImageDenoiser
from inline_core.families.zimage.family import ZImageFamily
from inline_core.families.zimage.inpaint import (
    InpaintBlend,
    control_context,
    inpaint_context,
    latent_size,
    mask_pixels,
    padded_context,
)
from inline_core.families.zimage.request import LATENT_FACTOR, ZImageRequest, new_request
from inline_core.families.zimage.xdit import XDIT_MODEL
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS

# Its latents' preview format (`diffusion/preview/formats.py`), as its family declares it.
(PREVIEW_FORMAT,) = ZImageFamily.capabilities.preview_latents


def model_time(timesteps: torch.Tensor) -> torch.Tensor:
    """The timestep as Z-Image's transformer takes it: `(1000 - t) / 1000`."""
    return (1000 - timesteps) / 1000


class ZImageDenoisePipeline:
    """The transformer and its schedule: requests come with their conditioning and leave as
    latents. Requests of the same pipeline may share a forward."""

    _dit_modules = ["denoiser.transformer"]
    _encoder_modules: list[str] = []
    _vae_modules: list[str] = []
    _resident_modules: list[str] = []
    xdit_model = XDIT_MODEL

    def __init__(
        self,
        *,
        denoiser: ZImageDenoiser,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
        serial_phases: bool = False,
    ) -> None:
        self.denoiser = denoiser
        self.scheduler_config = dict(scheduler_config)
        self.model_key = model_key
        # With CPU offload, encode/decode swap modules on the device: run them between steps.
        self.serial_phases = serial_phases

    @property
    def latent_factor(self) -> int:
        return LATENT_FACTOR

    # -- xDiT (components.step.SupportsXDiTSplit) ------------------------------------------------

    def xdit_transformer(self, dit: Any, /) -> Any:
        return xdit.xdit_transformer(dit)

    def xdit_pipeline(self, transformer: Any, vae: Any, /) -> Any:
        return xdit.xdit_pipeline(transformer, vae)

    # -- step cache (components.step.SupportsCacheDiTBackend) -----------------------------------

    def adopt_cache_dit_backend(self, backend: StepCacheBackend, /) -> None:
        self.denoiser.adopt_step_cache(backend)

    def request(self, **kwargs: Any) -> ZImageRequest:
        """A new request state bound to this pipeline's model (validates sizes and strength)."""
        return new_request(self.model_key, self.latent_factor, **kwargs)

    # -- what the full pipeline adds ---------------------------------------------------------------

    def _encode_prompts(self, state: ZImageRequest) -> None:
        if state.positive is None or (state.cfg and state.negative is None):
            raise InvalidRequest("a request for the denoiser alone needs its prompts encoded")

    def _encode_image(self, image: Image.Image, generator: torch.Generator) -> torch.Tensor:
        raise InvalidRequest("the denoiser alone has no VAE to encode an image with")

    def _control_context(self, state: ZImageRequest) -> torch.Tensor:
        """The control model's input from latents encoded upstream (`sample`'s control)."""
        if state.control_latents is None:
            raise InvalidRequest("the denoiser alone has no VAE to encode a control image with")
        use = cast(ControlUse, state.control)
        in_dim = self.denoiser.control.in_dim(use)
        latents = cast(torch.Tensor, state.control_latents.value)
        if state.control_inpaint is None:
            return padded_context(latents, in_dim)
        if not controlnet.takes_inpaint({"control_in_dim": in_dim}, latents.shape[1]):
            # Refused at submit; here only for a file replaced by a 1.x one since.
            raise InvalidRequest(controlnet.no_inpaint(use.name))
        inpaint = cast(torch.Tensor, state.control_inpaint.value).to(latents.device)
        return padded_context(inpaint_context(latents, state.control_mask, inpaint), in_dim)

    def _latent_mask(self, state: ZImageRequest, shape: tuple[int, ...]) -> torch.Tensor:
        raise InvalidRequest("the denoiser alone cannot read an inpaint mask")

    # -- step protocol ---------------------------------------------------------------------------

    def prepare_encode(self, state: ZImageRequest, /) -> ZImageRequest:
        with torch.inference_mode():
            self._prepare(state)
        return state

    def _prepare(self, state: ZImageRequest) -> None:
        device = self.denoiser.device
        # The LoRA files load here, off the step loop, and a bad one fails this request alone.
        self.denoiser.adapters.check(state.loras)
        state.cache = step_rows.request_cache(state.step_cache)
        generator = torch.Generator("cpu").manual_seed(state.seed)
        h = 2 * (state.height // (self.latent_factor * 2))
        w = 2 * (state.width // (self.latent_factor * 2))
        shape = (1, self.denoiser.in_channels, h, w)
        noise: torch.Tensor | None = None
        if state.image is None:
            # Drawn first, before anything else consumes the generator (as the pipeline does);
            # a latent batch draws all its noise at once and each request takes its own slice.
            drawn = torch.randn(
                (state.batch_size, *shape[1:]), generator=generator, dtype=torch.float32
            )
            noise = drawn[state.batch_index : state.batch_index + 1].to(device)
        self._encode_prompts(state)
        strength = state.strength if state.image is not None else None
        schedule = FlowMatchSchedule.create(
            self.scheduler_config,
            state.steps,
            (h // 2) * (w // 2),
            device,
            strength,
            sampler=state.sampler,
            schedule=state.sigma_schedule,
            denoise=state.denoise,
            model_time=model_time,
            seed=state.seed,
            row=state.batch_index,
            window=state.window,
            shift=state.model_shift,
        )
        state.schedule = schedule
        if state.control is not None:  # its model loads here too, off the step loop
            _refuse_split(state)
            state.control_context = self._control_context(state).to(device)
        if noise is not None:
            start = None
            if state.start is not None:
                start = cast(torch.Tensor, state.start.value).to(device, torch.float32)
            noised = starting_latents(
                schedule, noise, start, add_noise=state.add_noise, start_step=state.start_step
            )
            state.latents = Latents(noised, shape)
            if state.noise_mask is not None:
                kept = torch.zeros_like(noise) if start is None else start
                mask = cast(torch.Tensor, state.noise_mask)
                state.masked = NoiseMask.at_latents(mask, kept, noise)
            return
        source = cast(Image.Image, state.image).convert("RGB")
        if source.size != (state.width, state.height):
            source = source.resize((state.width, state.height), Image.Resampling.LANCZOS)
        encoded = self._encode_image(source, generator).to(device)
        # img2img draws its noise after the VAE sampled the posterior, in the prompt's dtype.
        noise_dtype = cast(torch.Tensor, cast(Conditioning, state.positive).value).dtype
        noise = torch.randn(shape, generator=generator, dtype=noise_dtype).to(device)
        start = schedule.scale_noise(encoded.to(noise_dtype), noise)
        state.latents = Latents(start, shape)
        if state.mask is not None:
            mask = self._latent_mask(state, shape).to(device, noise_dtype)
            state.inpaint = InpaintBlend(mask, encoded.to(noise_dtype), noise)

    def denoise_step(self, states: Sequence[ZImageRequest], /) -> list[torch.Tensor]:
        with torch.inference_mode():
            return self._denoise(states)

    def _denoise(self, states: Sequence[ZImageRequest]) -> list[torch.Tensor]:
        latents: list[Latents] = []
        timesteps: list[torch.Tensor] = []
        conds: list[Conditioning] = []
        loras: list[LoraStack] = []  # each row's stack: a negative row gets its request's
        caches: list[RowCache | None] = []  # each row's step cache: its request's, per branch
        controls: list[RowControl | None] = []  # and its control, as diffusers repeats it
        guided: list[int] = []  # indexes into `states` that also run their negative prompt
        seen = [_model_input(s) for s in states]  # a noise mask's kept part noised (noise_mask)
        for i, s in enumerate(states):
            schedule, _lat = _prepared(s)
            latents.append(seen[i])
            timesteps.append(schedule.model_timestep(s.step_index))
            conds.append(cast(Conditioning, s.positive))
            loras.append(s.loras)
            caches.append(step_rows.branch_row(s.cache, "positive"))
            controls.append(_row_control(s))
            if s.guidance_at(s.step_index) > 0:
                guided.append(i)
        # Negatives follow all positives, as in the pipeline's `prompt_embeds + negative_embeds`.
        for i in guided:
            s = states[i]
            latents.append(seen[i])
            timesteps.append(cast(FlowMatchSchedule, s.schedule).model_timestep(s.step_index))
            conds.append(cast(Conditioning, s.negative))
            loras.append(s.loras)
            controls.append(_row_control(s))
            caches.append(step_rows.branch_row(s.cache, "negative"))
        out = self.denoiser.predict(latents, timesteps, conds, loras, controls, caches=caches)
        negatives = dict(zip(guided, out[len(states) :], strict=True))
        preds: list[torch.Tensor] = []
        for i, s in enumerate(states):
            pos = out[i].float()
            if i in negatives:
                pred = _guide(
                    pos, negatives[i].float(), s.guidance_at(s.step_index), s.cfg_normalization
                )
            else:
                pred = pos
            velocity = -pred.unsqueeze(0).squeeze(2)
            uncond = None
            if i in negatives and s.sampler in CFG_PP_SAMPLERS:
                uncond = -negatives[i].float().unsqueeze(0).squeeze(2)
            if s.masked is not None:
                schedule, lat = _prepared(s)
                masked = cast(NoiseMask, s.masked)
                velocity = masked.prediction(schedule, s.step_index, lat, seen[i], velocity)
                if uncond is not None:
                    uncond = masked.unconditional(schedule, s.step_index, lat, seen[i], uncond)
            s.uncond = uncond  # a CFG++ sampler's step reads it (`step_scheduler`)
            preds.append(velocity)
        return preds

    def step_scheduler(self, state: ZImageRequest, noise_pred: Any, /) -> None:
        schedule, lat = _prepared(state)
        with torch.inference_mode():
            state.latents = schedule.step(state.step_index, noise_pred, lat, state.uncond)
            state.uncond = None
            if state.inpaint is not None:
                blend = cast(InpaintBlend, state.inpaint)
                state.latents = blend.blend(schedule, state.step_index, state.latents)
        state.step_index += 1

    # -- previews (components.step.SupportsPreview) ------------------------------------------------

    def preview_format(self, state: ZImageRequest, /) -> str:
        return PREVIEW_FORMAT

    def preview_latents(self, state: ZImageRequest, noise_pred: Any, /) -> torch.Tensor:
        schedule, lat = _prepared(state)
        with torch.inference_mode():
            return schedule.x0_estimate(state.step_index, noise_pred, lat)

    def post_latents(self, state: ZImageRequest, /) -> Latents:
        """The final latents, undecoded (`components.step.SupportsLatentOutput`)."""
        schedule, lat = _prepared(state)
        _release(state)
        if state.leftover_noise:  # handed on with its noise, as ComfyUI hands it on
            value = schedule.handed_on(cast(torch.Tensor, lat.value))
            return Latents(value, lat.shape)
        return lat

    def post_decode(self, state: ZImageRequest, /) -> Image.Image | Latents:
        """The final latents (the full pipeline decodes them into an image)."""
        return self.post_latents(state)


class ZImageStepPipeline(ZImageDenoisePipeline):
    """Drives one loaded Z-Image stack, prompt to image."""

    _encoder_modules = ["text_encoder.model"]
    _vae_modules = ["vae.autoencoder"]

    def __init__(
        self,
        *,
        text_encoder: ChatPromptEncoder,
        denoiser: ZImageDenoiser,
        vae: AutoencoderKLVAE,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
        serial_phases: bool = False,
    ) -> None:
        super().__init__(
            denoiser=denoiser,
            scheduler_config=scheduler_config,
            model_key=model_key,
            serial_phases=serial_phases,
        )
        self.text_encoder = text_encoder
        self.vae = vae

    @property
    def latent_factor(self) -> int:
        return self.vae.spatial_factor

    # -- encode and decode -----------------------------------------------------------------------

    def _encode_prompts(self, state: ZImageRequest) -> None:
        if state.positive is None:
            state.positive = self.text_encoder.encode(state.prompt)
        if state.cfg and state.negative is None:
            state.negative = self.text_encoder.encode(state.negative_prompt)

    def _encode_image(self, image: Image.Image, generator: torch.Generator) -> torch.Tensor:
        return cast(torch.Tensor, self.vae.encode(image, generator).value)

    def _control_context(self, state: ZImageRequest) -> torch.Tensor:
        if state.control_latents is not None:
            return super()._control_context(state)
        use = cast(ControlUse, state.control)
        in_dim = self.denoiser.control.in_dim(use)
        masked = None
        if state.control_source is not None and state.mask is not None:
            if not controlnet.takes_inpaint({"control_in_dim": in_dim}, self.vae.latent_channels):
                raise InvalidRequest(
                    f"controlnet/{use.name} takes no inpaint mask: wire the image to inpaint "
                    "as an img2img image instead"
                )
            masked = (state.control_source, state.mask)
        return control_context(
            self.vae, state.control_image, state.width, state.height, in_dim, masked
        )

    def _latent_mask(self, state: ZImageRequest, shape: tuple[int, ...]) -> torch.Tensor:
        pixels = mask_pixels(state.mask, state.width, state.height, self.vae.pixel_multiple)
        return latent_size(pixels, shape)

    def post_decode(self, state: ZImageRequest, /) -> Image.Image:
        _schedule, lat = _prepared(state)
        with torch.inference_mode():
            image = cast(Image.Image, self.vae.decode(lat))
        _release(state)
        return image

    # -- batched decode (components.step.SupportsBatchedDecode) -----------------------------------

    def decode_key(self, state: ZImageRequest, /) -> Hashable | None:
        """Latents of one shape and dtype decode in one VAE call."""
        cls = type(self)
        if (
            cls.post_decode is not ZImageStepPipeline.post_decode
            and cls.post_decode_many is ZImageStepPipeline.post_decode_many
        ):
            return None  # a subclass changed `post_decode` only: decode one by one, its way
        _schedule, lat = _prepared(state)
        value = cast(torch.Tensor, lat.value)
        return (tuple(value.shape), str(value.dtype), str(value.device))

    def decode_pixels(self, state: ZImageRequest, /) -> int:
        return state.width * state.height

    def post_decode_many(self, states: Sequence[ZImageRequest], /) -> list[Image.Image]:
        """`post_decode` of each state, in one VAE call; the states are released only once it
        succeeded, so a failed call can be retried one by one."""
        latents = [_prepared(s)[1] for s in states]
        with torch.inference_mode():
            images = self.vae.decode_many(latents)
        for s in states:
            _release(s)
        return images


def _prepared(state: ZImageRequest) -> tuple[FlowMatchSchedule, Latents]:
    if state.schedule is None or state.latents is None:
        raise RuntimeError("prepare_encode has not run for this request")
    return state.schedule, state.latents


def _release(state: ZImageRequest) -> None:
    """Drop the request's tensors once it is done: the state object may outlive the render."""
    state.latents = state.positive = state.negative = state.start = None
    step_rows.release(state.cache)
    state.control_context = state.inpaint = state.masked = state.uncond = None


def _refuse_split(state: ZImageRequest) -> None:
    """A rank's guard behind the refusal at submit (`ZImageFamily.unsplittable`)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        raise InvalidRequest(split_refusal(cast(ControlUse, state.control).name))


def _model_input(state: ZImageRequest) -> Latents:
    """The latents the model sees for `state` this step."""
    schedule, lat = _prepared(state)
    if state.masked is None:
        return lat
    return cast(NoiseMask, state.masked).model_input(schedule, state.step_index, lat)


def _row_control(state: ZImageRequest) -> RowControl | None:
    if state.control is None:
        return None
    return RowControl(state.control, cast(torch.Tensor, state.control_context))


def _guide(
    pos: torch.Tensor, neg: torch.Tensor, scale: float, normalization: float
) -> torch.Tensor:
    """Z-Image's guidance: `pos + scale * (pos - neg)`, optionally norm-capped."""
    pred = pos + scale * (pos - neg)
    if normalization > 0.0:
        ori_norm = vector_norm(pos)
        new_norm = vector_norm(pred)
        max_norm = ori_norm * normalization
        if new_norm > max_norm:
            pred = pred * (max_norm / new_norm)
    return pred
