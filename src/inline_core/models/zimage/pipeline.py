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
from dataclasses import dataclass
from typing import Any, cast

import torch
from PIL import Image

from inline_core.components.diffusers_zimage.denoiser import ZImageDenoiser
from inline_core.components.diffusers_zimage.libs import vector_norm
from inline_core.components.diffusers_zimage.scheduler import FlowMatchSchedule, img2img_start
from inline_core.components.diffusers_zimage.text_encoder import QwenPromptEncoder
from inline_core.components.diffusers_zimage.vae import FluxVAE
from inline_core.components.interfaces import Conditioning, Latents
from inline_core.errors import InvalidRequest
from inline_core.models.zimage.wire import request_kwargs, request_to_remote
from inline_core.parallel.remote import PipelineSpec, RemoteRequest

# Pixels per latent cell along a side: Z-Image's FLUX VAE downsamples by 8.
LATENT_FACTOR = 8


@dataclass(eq=False)
class ZImageRequest:
    """One render's state (implements `components.step.StepState`)."""

    prompt: str
    width: int
    height: int
    steps: int
    guidance: float
    seed: int
    negative_prompt: str = ""
    image: Image.Image | None = None  # img2img source; resized to width x height
    strength: float = 0.6
    cfg_truncation: float = 1.0
    cfg_normalization: float = 0.0
    # How the `sample` node renders (the defaults are the Z-Image node's own render):
    sampler: str = "euler"
    sigma_schedule: str = "simple"
    denoise: float = 1.0  # ComfyUI's: run the last `steps` of a `steps / denoise` schedule
    start: Latents | None = None  # latents to start from (noised to the first sigma), else noise
    batch_size: int = 1  # a latent batch's noise is drawn at once, as diffusers draws it
    batch_index: int = 0
    model_key: Hashable = ""  # set by the pipeline: which denoiser, dtype and device
    step_index: int = 0
    schedule: FlowMatchSchedule | None = None
    latents: Latents | None = None
    positive: Conditioning | None = None
    negative: Conditioning | None = None

    @property
    def cfg(self) -> bool:
        return self.guidance > 0

    @property
    def step_count(self) -> int:
        if self.schedule is not None:
            return self.schedule.step_count
        if self.image is None:
            return self.steps
        return self.steps - img2img_start(self.steps, self.strength)

    @property
    def done(self) -> bool:
        return self.schedule is not None and self.step_index >= self.step_count

    @property
    def batch_key(self) -> Hashable:
        return ("zimage", self.model_key, self.cfg)

    @property
    def image_tokens(self) -> int:
        return (self.height // 16) * (self.width // 16)

    @property
    def tokens(self) -> int:
        # With guidance a request puts two sequences (positive and negative) into the forward.
        return self.image_tokens * (2 if self.cfg else 1)

    def guidance_at(self, index: int) -> float:
        """The guidance scale of step `index` (0 past the CFG truncation point)."""
        if not self.cfg or self.schedule is None:
            return 0.0
        if self.cfg_truncation <= 1 and self.schedule.t_norms[index] > self.cfg_truncation:
            return 0.0
        return self.guidance


class ZImageDenoisePipeline:
    """The transformer and its schedule: requests come with their conditioning and leave as
    latents. Requests of the same pipeline may share a forward."""

    _dit_modules = ["denoiser.transformer"]
    _encoder_modules: list[str] = []
    _vae_modules: list[str] = []
    _resident_modules: list[str] = []

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

    def request(self, **kwargs: Any) -> ZImageRequest:
        """A new request state bound to this pipeline's model (validates sizes and strength)."""
        return new_request(self.model_key, self.latent_factor, **kwargs)

    # -- what the full pipeline adds ---------------------------------------------------------------

    def _encode_prompts(self, state: ZImageRequest) -> None:
        if state.positive is None or (state.cfg and state.negative is None):
            raise InvalidRequest("a request for the denoiser alone needs its prompts encoded")

    def _encode_image(self, image: Image.Image, generator: torch.Generator) -> torch.Tensor:
        raise InvalidRequest("the denoiser alone has no VAE to encode an image with")

    # -- step protocol ---------------------------------------------------------------------------

    def prepare_encode(self, state: ZImageRequest, /) -> ZImageRequest:
        with torch.inference_mode():
            self._prepare(state)
        return state

    def _prepare(self, state: ZImageRequest) -> None:
        device = self.denoiser.device
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
        )
        state.schedule = schedule
        if noise is not None:
            if state.start is not None:
                start = cast(torch.Tensor, state.start.value).to(device, torch.float32)
                noise = schedule.noised(start, noise)
            state.latents = Latents(noise, shape)
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

    def denoise_step(self, states: Sequence[ZImageRequest], /) -> list[torch.Tensor]:
        with torch.inference_mode():
            return self._denoise(states)

    def _denoise(self, states: Sequence[ZImageRequest]) -> list[torch.Tensor]:
        latents: list[Latents] = []
        timesteps: list[torch.Tensor] = []
        conds: list[Conditioning] = []
        guided: list[int] = []  # indexes into `states` that also run their negative prompt
        for i, s in enumerate(states):
            schedule, lat = _prepared(s)
            latents.append(lat)
            timesteps.append(schedule.model_timestep(s.step_index))
            conds.append(cast(Conditioning, s.positive))
            if s.guidance_at(s.step_index) > 0:
                guided.append(i)
        # Negatives follow all positives, as in the pipeline's `prompt_embeds + negative_embeds`.
        for i in guided:
            s = states[i]
            latents.append(cast(Latents, s.latents))
            timesteps.append(cast(FlowMatchSchedule, s.schedule).model_timestep(s.step_index))
            conds.append(cast(Conditioning, s.negative))
        out = self.denoiser.predict(latents, timesteps, conds)
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
            preds.append(-pred.unsqueeze(0).squeeze(2))
        return preds

    def step_scheduler(self, state: ZImageRequest, noise_pred: Any, /) -> None:
        schedule, lat = _prepared(state)
        with torch.inference_mode():
            state.latents = schedule.step(state.step_index, noise_pred, lat)
        state.step_index += 1

    def post_decode(self, state: ZImageRequest, /) -> Image.Image | Latents:
        """The final latents (the full pipeline decodes them into an image)."""
        _schedule, lat = _prepared(state)
        _release(state)
        return lat


class ZImageStepPipeline(ZImageDenoisePipeline):
    """Drives one loaded Z-Image stack, prompt to image."""

    _encoder_modules = ["text_encoder.model"]
    _vae_modules = ["vae.autoencoder"]

    def __init__(
        self,
        *,
        text_encoder: QwenPromptEncoder,
        denoiser: ZImageDenoiser,
        vae: FluxVAE,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
        serial_phases: bool = False,
        remote: PipelineSpec | None = None,
    ) -> None:
        super().__init__(
            denoiser=denoiser,
            scheduler_config=scheduler_config,
            model_key=model_key,
            serial_phases=serial_phases,
        )
        self.text_encoder = text_encoder
        self.vae = vae
        # How a worker group's ranks rebuild this pipeline (None: not built from files).
        self.remote = remote

    @property
    def latent_factor(self) -> int:
        return self.vae.spatial_factor

    # -- worker group (parallel.remote.RemotePipeline) -------------------------------------------

    def remote_spec(self) -> PipelineSpec:
        if self.remote is None:
            raise InvalidRequest(
                "this Z-Image pipeline was not loaded from model files, so a worker group "
                "cannot rebuild it"
            )
        return self.remote

    def remote_request(self, state: ZImageRequest, /) -> RemoteRequest:
        return request_to_remote(state)

    def state_from_remote(self, request: RemoteRequest, /) -> ZImageRequest:
        return self.request(**request_kwargs(request))

    # -- encode and decode -----------------------------------------------------------------------

    def _encode_prompts(self, state: ZImageRequest) -> None:
        if state.positive is None:
            state.positive = self.text_encoder.encode(state.prompt)
        if state.cfg and state.negative is None:
            state.negative = self.text_encoder.encode(state.negative_prompt)

    def _encode_image(self, image: Image.Image, generator: torch.Generator) -> torch.Tensor:
        return cast(torch.Tensor, self.vae.encode(image, generator).value)

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


def new_request(model_key: Hashable, spatial_factor: int, **kwargs: Any) -> ZImageRequest:
    """A request state for a model whose VAE has `spatial_factor` (validates size and strength)."""
    state = ZImageRequest(**kwargs, model_key=model_key)
    multiple = spatial_factor * 2  # the transformer patchifies latents 2x2
    if state.width % multiple or state.height % multiple:
        raise InvalidRequest(f"width and height must be multiples of {multiple}")
    if not 0 <= state.batch_index < state.batch_size:
        raise InvalidRequest(
            f"batch index {state.batch_index} is outside 0..{state.batch_size - 1}"
        )
    if state.step_count < 1:
        raise InvalidRequest(
            f"strength {state.strength} leaves no step to run out of {state.steps}; "
            "raise the strength or the steps"
        )
    return state


def _prepared(state: ZImageRequest) -> tuple[FlowMatchSchedule, Latents]:
    if state.schedule is None or state.latents is None:
        raise RuntimeError("prepare_encode has not run for this request")
    return state.schedule, state.latents


def _release(state: ZImageRequest) -> None:
    """Drop the request's tensors once it is done: the state object may outlive the render."""
    state.latents = state.positive = state.negative = state.start = None


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
