"""Wan as a step pipeline (spec 003): the arithmetic of diffusers' `WanPipeline` (and, for Wan 2.2
TI2V with an image, `WanImageToVideoPipeline`), per request.

`prepare_encode` encodes the prompts (UMT5, padded to 512 tokens), draws the noise and gives the
request its own schedule (`schedule.py`: its sampler on the sigma library; by default diffusers'
UniPC over its own table); `denoise_step` runs one
transformer forward over a batch of requests of one latent shape (their positives, then the
negatives of those with guidance); `step_scheduler` advances one request; `post_decode` decodes
it, latent frame by latent frame, handing each chunk of frames to the request's `on_chunk` as it
is decoded. A TI2V model
(`expand_timesteps`) takes its timesteps per latent token, and an image as its first latent frame
(`first_frame.py`); its text-to-video and image-to-video requests share forwards. A model with 36
channels in (Wan 2.2 A14B i2v) takes the image's latents and a mask as channels. A Wan 2.2 A14B
pair (`transformer_2`, the low-noise expert) runs each step on the expert its timestep falls to,
as diffusers does (at or above `boundary_ratio` x the training timesteps: the high-noise one), or
from the first model call of the request's `switch_step` on; a request's `batch_key` names its
expert, so a forward never mixes them, and each expert adds its own rows' LoRAs (`loras`,
`loras_2`). A step preview is the x0 estimate of a request's latents (`preview_latents`), in its
VAE's latent format (`wan21`, or `wan22` for the 5B): a video previews its first frame.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.bank import AdapterBank, Fetch
from inline_core.diffusion.adapters.fusing import CopyStore
from inline_core.diffusion.encoders.padded_t5 import PaddedT5Encoder
from inline_core.diffusion.flow.schedule import FlowMatchSchedule, flow_x0
from inline_core.diffusion.libs import to_floats
from inline_core.diffusion.placement import OffloadSwap, PlacementLike, torch_dtype
from inline_core.diffusion.stepcache import rows as step_rows
from inline_core.diffusion.stepcache.backend import StepCacheBackend, cached_forward
from inline_core.diffusion.vae.pixels import gather_chunks
from inline_core.diffusion.vae.wan_vae import WanVAE
from inline_core.errors import InvalidRequest
from inline_core.families.wan import first_frame
from inline_core.families.wan.family import PREVIEW_LATENTS
from inline_core.families.wan.image_encoder import image_embeds
from inline_core.families.wan.lora import read_lora
from inline_core.families.wan.request import WanRequest, new_request
from inline_core.families.wan.schedule import boundary_call, switch_call, wan_schedule
from inline_core.runtime.video import Video


class WanStepPipeline:
    """Drives one loaded Wan stack, prompt to video. Requests of the same pipeline and latent
    shape share a forward."""

    _dit_modules = ["transformer"]
    _encoder_modules = ["text_encoder.model"]
    _vae_modules = ["vae.autoencoder"]
    _resident_modules: list[str] = []

    def __init__(
        self,
        *,
        text_encoder: PaddedT5Encoder,
        transformer: nn.Module,
        vae: WanVAE,
        placement: PlacementLike,
        swap: OffloadSwap,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
        serial_phases: bool = False,
        expand_timesteps: bool = False,
        transformer_2: nn.Module | None = None,
        image_encoder: nn.Module | None = None,
        image_processor: Any = None,
        encoder_placement: PlacementLike | None = None,
        adapter_cache: Fetch | None = None,
        fused_copies: CopyStore | None = None,
    ) -> None:
        self.text_encoder = text_encoder
        self.transformer = transformer
        self.transformer_2 = transformer_2  # the low-noise expert of a pair (None: one model)
        if transformer_2 is not None:  # a split shards both experts
            self._dit_modules = ["transformer", "transformer_2"]
        # Wan 2.1 i2v: the CLIP vision encoder its image embedder takes (None: no embedder).
        self.image_encoder = image_encoder
        self.image_processor = image_processor
        self.encoder_placement = encoder_placement or placement
        self.vae = vae
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        self.dtype = torch_dtype(placement.dtype)
        self.scheduler_config = dict(scheduler_config)
        self.model_key = model_key
        self.serial_phases = serial_phases  # with CPU offload, encode/decode run between steps
        self.expand_timesteps = expand_timesteps  # Wan 2.2 TI2V: per-token timesteps
        # Each request's LoRA stack, added to its own rows of every forward; a pair's experts
        # each hook their own rows (a file's weights, loaded once, serve both: same shapes), and
        # each may fuse its own copy of a held stack.
        self.adapters = AdapterBank.placed(
            transformer, read_lora, placement, adapter_cache, model_key, fused_copies
        )
        self.adapters_2 = (
            None
            if transformer_2 is None
            else AdapterBank.placed(
                transformer_2,
                read_lora,
                placement,
                adapter_cache,
                model_key,
                fused_copies,
                copy_scope=(model_key, "transformer_2"),
            )
        )
        # The step cache adopted on each expert (engine/assemble.py): each caches its own steps.
        self.step_caches: list[StepCacheBackend] = []

    @property
    def latent_channels(self) -> int:
        return int(cast(Any, self.transformer).config.out_channels)

    @property
    def channel_image(self) -> bool:
        """The image enters as input channels beside the latents (36 in, 16 out)."""
        return int(cast(Any, self.transformer).config.in_channels) != self.latent_channels

    def adopt_cache_dit_backend(self, backend: StepCacheBackend, /) -> None:
        """The per-request step cache on one of its transformers (components.step): a pair
        adopts one on each expert."""
        low = backend.transformer is self.transformer_2 and self.adapters_2 is not None
        bank = cast(AdapterBank, self.adapters_2) if low else self.adapters
        backend.add_row_scope(bank.rows)  # a sub-batch's rows keep their own LoRAs
        if not any(b is backend for b in self.step_caches):
            self.step_caches.append(backend)

    def step_cache_of(self, model: nn.Module) -> StepCacheBackend | None:
        """The step cache adopted on `model` (None: none)."""
        return next((b for b in self.step_caches if b.transformer is model), None)

    def request(self, **kwargs: Any) -> WanRequest:
        kwargs.setdefault("spatial_factor", self.vae.spatial_factor)
        state = new_request(self.model_key, **kwargs)
        if state.image is not None and not (self.expand_timesteps or self.channel_image):
            raise InvalidRequest("this Wan model is text-to-video only: it takes no image")
        if state.image is None and self.channel_image:
            raise InvalidRequest("this Wan model is image-to-video only: it needs an image")
        pair = self.transformer_2 is not None
        if pair != (state.boundary_ratio is not None):
            raise InvalidRequest(
                "a two-expert Wan model needs the request's boundary_ratio"
                if pair
                else "boundary_ratio is for two-expert models (Wan 2.2 A14B) only"
            )
        return state

    def new_schedule(self, state: WanRequest) -> FlowMatchSchedule:
        """The request's sampler over its sigmas (`schedule.py`), at its own shift if it sets
        one."""
        config = dict(self.scheduler_config)
        if state.shift is not None:
            config["flow_shift"] = state.shift
        return wan_schedule(
            config,
            state.steps,
            self.device,
            sampler=state.sampler,
            schedule=state.sigma_schedule,
            seed=state.seed,
        )

    # -- step protocol ---------------------------------------------------------------------------

    def prepare_encode(self, state: WanRequest, /) -> WanRequest:
        with torch.inference_mode():
            # The LoRA files load here, off the step loop, and a bad one fails this request alone.
            self.adapters.check(state.loras)
            if self.adapters_2 is not None:
                self.adapters_2.check(state.loras_2)
            if state.positive is None:
                state.positive = self.text_encoder.encode(state.prompt)
            if state.needs_negative and state.negative is None:
                state.negative = self.text_encoder.encode(state.negative_prompt)
            generator = torch.Generator("cpu").manual_seed(state.seed)
            shape = (1, self.latent_channels, *state.latent_shape)
            noise = torch.randn(shape, generator=generator, dtype=torch.float32).to(self.device)
            state.latents = Latents(noise, shape)
            if state.image is not None:
                pixels = first_frame.image_pixels(
                    state.image, state.width, state.height, state.spatial_factor
                )
                if self.channel_image:
                    video = self.vae.encode(first_frame.video_pixels(pixels, state.frames))
                    state.condition = first_frame.channel_condition(video.to(self.device))
                    if self.image_encoder is not None:
                        state.image_embeds = image_embeds(
                            self.image_encoder,
                            self.image_processor,
                            state.image,
                            self.encoder_placement,
                            self.swap,
                        )
                else:
                    state.condition = self.vae.encode(pixels).to(self.device)
            schedule = state.schedule = self.new_schedule(state)
            if state.switch_step is not None:
                state.switch_call = switch_call(schedule, state.switch_step)
            elif state.boundary_ratio is not None:
                timesteps = to_floats(schedule.timesteps)  # one copy, no syncs
                state.switch_call = boundary_call(timesteps, state.boundary_ratio)
            state.cache = step_rows.request_cache(state.step_cache)
            state.prepared = True
        return state

    def _mask(self, state: WanRequest) -> torch.Tensor:
        if state.condition is None:
            return first_frame.all_frames_mask(state.latent_shape, self.device)
        return first_frame.first_frame_mask(state.latent_shape, self.device)

    def _model_input(self, state: WanRequest) -> tuple[torch.Tensor, torch.Tensor]:
        """One row's latents and timestep as the transformer takes them."""
        latents = cast(torch.Tensor, _prepared(state).value)
        t = _timestep(state)
        if not self.expand_timesteps:
            if state.condition is not None:  # the image's channels beside the latents
                latents = torch.cat([latents, state.condition.to(latents.dtype)], dim=1)
            return latents, t.expand(1)
        mask = self._mask(state)
        if state.condition is not None:
            latents = first_frame.with_first_frame(latents, state.condition, mask)
        return latents, first_frame.token_timesteps(mask, t)

    def expert_model(self, states: Sequence[WanRequest]) -> nn.Module:
        """The transformer this forward runs: the one expert every row is on."""
        experts = {s.expert for s in states}
        if len(experts) != 1:
            raise RuntimeError(f"one forward over rows on experts {sorted(experts)}")
        if experts == {1}:
            if self.transformer_2 is None:
                raise RuntimeError("a request on the low-noise expert of a one-expert model")
            return self.transformer_2
        return self.transformer

    def denoise_step(self, states: Sequence[WanRequest], /) -> list[torch.Tensor]:
        with torch.inference_mode():
            model = self.expert_model(states)
            rows = [(s, cast(Conditioning, s.positive)) for s in states]
            rows += [(s, cast(Conditioning, s.negative)) for s in states if s.cfg]
            caches = [step_rows.branch_row(s.cache, "positive") for s in states]
            caches += [step_rows.branch_row(s.cache, "negative") for s in states if s.cfg]
            out = self._forward(model, rows, caches)
            negatives = iter(out[len(states) :])
            preds: list[torch.Tensor] = []
            for i, s in enumerate(states):
                pred = out[i : i + 1]
                s.uncond = None
                if s.cfg:
                    uncond = next(negatives).unsqueeze(0)
                    pred = uncond + s.current_guidance * (pred - uncond)
                    s.uncond = uncond if s.cfg_pp else None  # CFG++ steps along it too
                preds.append(pred)
            return preds

    def _forward(
        self,
        model: nn.Module,
        rows: list[tuple[WanRequest, Conditioning]],
        caches: Sequence[step_rows.RowCache | None],
    ) -> torch.Tensor:
        inputs = {id(s): self._model_input(s) for s, _c in rows}
        hidden = torch.cat([inputs[id(s)][0] for s, _c in rows])
        timestep = torch.cat([inputs[id(s)][1] for s, _c in rows])
        text = torch.stack([cast(torch.Tensor, c.value) for _s, c in rows])
        extra: dict[str, torch.Tensor] = {}
        if self.image_encoder is not None:  # each row's own image, negatives included
            views = torch.cat([cast(torch.Tensor, s.image_embeds) for s, _c in rows])
            extra["encoder_hidden_states_image"] = views.to(self.device, self.dtype)
        # A negative row gets its request's stack too; a pair's low-noise expert, its own.
        low = model is self.transformer_2
        stacks = [s.loras_2 if low else s.loras for s, _c in rows]
        bank = self.adapters_2 if low and self.adapters_2 is not None else self.adapters
        # Each expert caches its own steps: a row's residuals are its expert's (a row moving to
        # the other expert computes its first step there, `RowCache.owner`).
        cached = cached_forward(self.step_cache_of(model), model, caches)
        with self.swap.use(model, self.placement), bank.forward(stacks), cached:
            return cast(
                torch.Tensor,
                model(
                    hidden_states=hidden.to(self.dtype),
                    timestep=timestep,
                    encoder_hidden_states=text.to(self.device, self.dtype),
                    return_dict=False,
                    **extra,
                )[0],
            )

    def step_scheduler(self, state: WanRequest, noise_pred: Any, /) -> None:
        latents = _prepared(state)
        with torch.inference_mode():
            state.latents = _schedule(state).step(
                state.step_index, noise_pred, latents, state.uncond
            )
        state.uncond = None
        state.step_index += 1

    # -- previews (components.step.SupportsPreview) ------------------------------------------------

    def preview_format(self, state: WanRequest, /) -> str:
        return PREVIEW_LATENTS[self.vae.latent_channels]

    def preview_latents(self, state: WanRequest, noise_pred: Any, /) -> torch.Tensor:
        """The x0 estimate at the level the model saw (its sigma, held on the host: no sync), a
        new tensor. On TI2V image-to-video the first latent frame is the start image
        itself, so the estimate starts at the first frame the model makes."""
        latents = cast(torch.Tensor, _prepared(state).value)
        sigma = float(_schedule(state).levels[state.step_index])
        with torch.inference_mode():
            x0 = flow_x0(latents, sigma, cast(torch.Tensor, noise_pred))
            if state.condition is None or not self.expand_timesteps:
                return x0
            if x0.shape[2] > 1:
                return x0[:, :, 1:]
            return first_frame.with_first_frame(x0, state.condition, self._mask(state))

    def post_latents(self, state: WanRequest, /) -> Latents:
        """The final latents, undecoded (`components.step.SupportsLatentOutput`)."""
        latents = _prepared(state)
        if state.condition is not None and self.expand_timesteps:  # the image's frame, clean
            value = first_frame.with_first_frame(
                cast(torch.Tensor, latents.value), state.condition, self._mask(state)
            )
            latents = Latents(value, latents.shape)
        # The state may outlive the render: drop its tensors (the sampler keeps past outputs).
        state.latents = state.positive = state.negative = state.schedule = state.uncond = None
        state.condition = state.image_embeds = None
        step_rows.release(state.cache)
        return latents

    def post_decode(self, state: WanRequest, /) -> Video:
        """The video, chunk by chunk into one array of the render's frames (each chunk's are
        handed to `on_chunk` as a view of it: the frames are held once, never joined)."""
        latents = self.post_latents(state)
        chunks = self.vae.decode_chunks(latents)
        video = gather_chunks(chunks, state.frames, self.vae.chunk_value_range, state.on_chunk)
        return Video(video, state.fps, state.format)


def _prepared(state: WanRequest) -> Latents:
    if state.schedule is None or state.latents is None:
        raise RuntimeError("prepare_encode has not run for this request")
    return state.latents


def _schedule(state: WanRequest) -> FlowMatchSchedule:
    return cast(FlowMatchSchedule, state.schedule)


def _timestep(state: WanRequest) -> torch.Tensor:
    return _schedule(state).model_timestep(state.step_index)
