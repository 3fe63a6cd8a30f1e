"""SkyReels-V2 diffusion forcing as a step pipeline (spec 003), with the chunk-boundary protocol:
the arithmetic of diffusers' `SkyReelsV2DiffusionForcingPipeline`, per request.

`prepare_encode` encodes the prompts (UMT5, 512 tokens) and a first frame (image to video, as
`SkyReelsV2DiffusionForcingImageToVideoPipeline` does: its latent frame is the first chunk's clean
prefix) or the end of a video to extend (`extend.py`), plans the chunks and their schedules
(`schedule.py`), and draws the first chunk's noise from the request's own generator (each later
chunk draws its own from it, in turn, as diffusers does). `denoise_step` runs one transformer
forward over the windows of a batch of requests of one window shape and causal block size, each
frame at its own timestep (`enable_diffusion_forcing`); `step_scheduler` steps the frames the
schedule updates, each run of frames that steps together with its own sampler (its history and
noise its own: `diffusion/sigma/staggered.py`), as diffusers steps one scheduler per frame. The
sampler and schedule are the node's (`diffusion/flow/unipc_model.py`); empty, the model's own
UniPC on its own table, diffusers' arithmetic. When a chunk's last iteration is done the state
is at a boundary: the loop applies the interactions queued for it
(`apply_interaction_at_chunk_boundary`: a new prompt, negative prompt or guidance), and
`prepare_next_chunk` appends the finished chunk to the video's latents and starts the next from
the last `overlap` frames. `post_decode` decodes the video's latents with the Wan VAE, chunk by
chunk (`on_chunk`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.components.step import ChunkMediaSpec
from inline_core.diffusion.encoders.padded_t5 import PaddedT5Encoder
from inline_core.diffusion.flow.unipc_model import UniPCModelWalk, unipc_model_walk
from inline_core.diffusion.placement import OffloadSwap, PlacementLike, torch_dtype
from inline_core.diffusion.sigma.noise import RowNoise, row_generator
from inline_core.diffusion.sigma.staggered import StaggeredSteppers
from inline_core.diffusion.vae.pixels import to_pixels
from inline_core.diffusion.vae.wan_vae import DecodeSession, WanVAE
from inline_core.families.skyreels.chunks import TEMPORAL_FACTOR, Chunk
from inline_core.families.skyreels.extend import video_pixels
from inline_core.families.skyreels.request import SPATIAL_FACTOR, SkyReelsRequest, new_request
from inline_core.families.skyreels.schedule import ChunkSchedule, chunk_schedule
from inline_core.families.wan.first_frame import image_pixels
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS
from inline_core.runtime.interactions import InteractionInbox
from inline_core.runtime.video import Frames, Video

# diffusers' fps conditioning: 16 fps is the first embedding, any other rate the second.
FPS_16 = 16


def fps_class(fps: int) -> int:
    """The fps embedding a rate takes. A forward passes one for all its rows: diffusers'
    diffusion-forcing forward repeats the fps projection per frame without its batch, so only
    one embedding broadcasts over a batch (the batch key keeps rows of one class together)."""
    return 0 if fps == FPS_16 else 1


def video_frames(first: int, count: int) -> tuple[int, int]:
    """The video frames of latent frames [first, first + count): the first latent frame decodes
    to one frame, each later one to four."""
    start = 0 if first == 0 else 1 + (first - 1) * TEMPORAL_FACTOR
    end = 1 + (first + count - 1) * TEMPORAL_FACTOR
    return start, end - start


class SkyReelsStepPipeline:
    """Drives one loaded SkyReels-V2 diffusion-forcing stack, prompt to video, chunk by chunk."""

    _dit_modules = ["transformer"]
    _encoder_modules = ["text_encoder.model"]
    _vae_modules = ["vae.autoencoder"]
    _resident_modules: list[str] = []
    supports_chunk_step_grouping = True

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

    @property
    def latent_channels(self) -> int:
        return int(cast(Any, self.transformer).config.in_channels)

    def request(self, **kwargs: Any) -> SkyReelsRequest:
        return new_request(self.model_key, **kwargs)

    def walk(self, state: SkyReelsRequest) -> UniPCModelWalk:
        """What each frame's sampler walks: the request's sampler and schedule (empty: the
        model's own), on the scheduler config's table shifted by the request's shift."""
        config = dict(self.scheduler_config)
        if state.shift is not None:
            config["flow_shift"] = state.shift
        sampler, schedule = state.sampler or None, state.sigma_schedule or None
        # diffusers' pipeline writes each frame's step into the latents it stepped (in place).
        return unipc_model_walk(config, state.steps, self.device, sampler, schedule, in_place=True)

    # -- step protocol ---------------------------------------------------------------------------

    def prepare_encode(self, state: SkyReelsRequest, /) -> SkyReelsRequest:
        with torch.inference_mode():
            if state.positive is None:
                state.positive = self.text_encoder.encode(state.prompt)
            if state.cfg and state.negative is None:
                state.negative = self.text_encoder.encode(state.negative_prompt)
            if state.image is not None and state.condition is None:
                pixels = image_pixels(state.image, state.width, state.height, SPATIAL_FACTOR)
                state.condition = self.vae.encode(pixels).to(self.device)
            if state.extend is not None and state.condition is None:
                self._encode_extended(state)
            walk = state.walk = self.walk(state)
            timesteps = walk.timesteps(walk.call_sigmas(), self.device)
            state.schedules = [
                chunk_schedule(
                    c.frames, timesteps, state.ar_step, c.prefix, state.causal_block_size
                )
                for c in state.plan
            ]
            state.iterations = [s.iterations for s in state.schedules]
            state.generator = torch.Generator("cpu").manual_seed(state.seed)
            state.sampler_noise = RowNoise([row_generator(state.seed)])
            if state.inbox is None:
                state.inbox = InteractionInbox(len(state.plan))
            self._start_chunk(state, 0)
            state.prepared = True
        return state

    def _encode_extended(self, state: SkyReelsRequest) -> None:
        """The given video's frames as the video out's first ones, and the latent frames of its
        last `overlap` the first chunk starts from."""
        pixels = video_pixels(cast(Frames, state.extend), state.width, state.height)
        state.lead = to_pixels(pixels, self.vae.chunk_value_range)
        overlap = cast(int, state.overlap)
        latents = self.vae.encode(pixels[:, :, -overlap:]).to(self.device)
        state.condition = latents[:, :, : state.plan[0].prefix]

    def _start_chunk(self, state: SkyReelsRequest, index: int) -> None:
        """The chunk's noise (its prefix frames the video's last ones), its frames' samplers."""
        chunk = state.plan[index]
        h, w = state.latent_size
        shape = (1, self.latent_channels, chunk.frames, h, w)
        noise = torch.randn(shape, generator=state.generator, dtype=torch.float32)
        latents = noise.to(self.device)
        if chunk.prefix and index == 0:  # the image's or the extended video's latent frames
            latents[:, :, : chunk.prefix] = cast(torch.Tensor, state.condition).to(self.dtype)
        elif chunk.prefix:
            video = cast(torch.Tensor, state.video_latents)
            prefix = video[:, :, -chunk.kept_from :][:, :, : chunk.prefix]
            latents[:, :, : chunk.prefix] = prefix.to(self.dtype)
        state.latents = latents
        walk, noise = cast(UniPCModelWalk, state.walk), cast(RowNoise, state.sampler_noise)
        spans = cast(ChunkSchedule, state.schedules[index]).spans
        state.steppers = StaggeredSteppers(spans, lambda: walk.stepper(noise), axis=2)
        state.chunk = index
        state.iteration = 0
        state.boundary = False

    def _schedule(self, state: SkyReelsRequest) -> ChunkSchedule:
        if not state.prepared and not state.schedules:
            raise RuntimeError("prepare_encode has not run for this request")
        return cast(ChunkSchedule, state.schedules[state.chunk])

    def _model_input(self, state: SkyReelsRequest) -> tuple[torch.Tensor, torch.Tensor]:
        schedule = self._schedule(state)
        start, end = schedule.interval(state.iteration)
        latents = cast(torch.Tensor, state.latents)[:, :, start:end]
        timestep = schedule.matrix[state.iteration][start:end].unsqueeze(0)
        return latents.to(self.dtype), timestep

    def denoise_step(self, states: Sequence[SkyReelsRequest], /) -> list[torch.Tensor]:
        if any(s.boundary for s in states):
            raise RuntimeError("a request at a chunk boundary: prepare_next_chunk has not run")
        if len({fps_class(s.fps) for s in states}) != 1:
            raise RuntimeError("one forward over rows of two fps embeddings")
        blocks = {s.causal_block_size for s in states}
        if len(blocks) != 1:
            raise RuntimeError(f"one forward over causal block sizes {sorted(blocks)}")
        with torch.inference_mode():
            rows = [(s, cast(Conditioning, s.positive)) for s in states]
            rows += [(s, cast(Conditioning, s.negative)) for s in states if s.cfg]
            inputs = {id(s): self._model_input(s) for s in states}
            model = cast(Any, self.transformer)
            if int(model.config.num_frame_per_block) != blocks.copy().pop():
                model._set_ar_attention(blocks.pop())  # the causal mask's block size
            with self.swap.use(self.transformer, self.placement):
                out = cast(
                    torch.Tensor,
                    model(
                        hidden_states=torch.cat([inputs[id(s)][0] for s, _c in rows]),
                        timestep=torch.cat([inputs[id(s)][1] for s, _c in rows]),
                        encoder_hidden_states=torch.stack(
                            [cast(torch.Tensor, c.value) for _s, c in rows]
                        ).to(self.device, self.dtype),
                        enable_diffusion_forcing=True,
                        fps=[fps_class(states[0].fps)],
                        return_dict=False,
                    )[0],
                )
            negatives = iter(out[len(states) :])
            preds: list[torch.Tensor] = []
            for i, s in enumerate(states):
                pred = out[i : i + 1]
                if s.cfg:
                    uncond = next(negatives).unsqueeze(0)
                    pred = uncond + s.guidance * (pred - uncond)
                    # A CFG++ sampler steps along the unconditional prediction too.
                    s.uncond = uncond if s.sampler in CFG_PP_SAMPLERS else None
                preds.append(pred)
            return preds

    def step_scheduler(self, state: SkyReelsRequest, noise_pred: Any, /) -> None:
        schedule = self._schedule(state)
        start, _end = schedule.interval(state.iteration)
        steppers = cast(StaggeredSteppers, state.steppers)
        uncond, state.uncond = state.uncond, None
        with torch.inference_mode():
            steppers.advance(
                cast(torch.Tensor, state.latents),
                cast(torch.Tensor, noise_pred),
                schedule.update[state.iteration],
                start,
                uncond,
            )
        state.iteration += 1
        state.step_index += 1
        if state.iteration == schedule.iterations:
            self._finish_chunk(state)

    def _finish_chunk(self, state: SkyReelsRequest) -> None:
        chunk = state.plan[state.chunk]
        latents = cast(torch.Tensor, state.latents)
        if state.video_latents is None:
            state.video_latents = latents
        else:
            state.video_latents = torch.cat(
                [cast(torch.Tensor, state.video_latents), latents[:, :, chunk.kept_from :]], dim=2
            )
        state.latents = state.steppers = None
        state.boundary = state.chunk + 1 < len(state.plan)
        if state.boundary and state.on_chunk is not None:  # streamed: its frames now
            self._decode_kept(state, chunk)

    # -- the chunk-boundary protocol (components.step.SupportsChunkBoundary) -------------------

    def at_chunk_boundary(self, state: SkyReelsRequest, /) -> bool:
        return state.boundary

    def apply_interaction_at_chunk_boundary(self, state: SkyReelsRequest, /) -> None:
        inbox = cast(InteractionInbox, state.inbox)
        prompt = None
        for interaction in inbox.take(state.chunk + 1):  # in order: the last of each field wins
            if interaction.guidance is not None:
                state.guidance = interaction.guidance
            if interaction.prompt is not None:
                prompt = state.prompt = interaction.prompt
            if interaction.negative_prompt is not None:
                state.negative_prompt = interaction.negative_prompt
                state.negative = None
        with torch.inference_mode():  # each prompt that changed encoded once, however often
            if prompt is not None:
                state.positive = self.text_encoder.encode(prompt)
            if state.cfg and state.negative is None:
                state.negative = self.text_encoder.encode(state.negative_prompt)

    def prepare_next_chunk(self, state: SkyReelsRequest, /) -> None:
        if state.boundary:
            with torch.inference_mode():
                self._start_chunk(state, state.chunk + 1)

    def peek_chunk_media(self, state: SkyReelsRequest, /) -> ChunkMediaSpec:
        chunk: Chunk = state.plan[state.chunk]
        first, count = video_frames(chunk.first, chunk.kept)
        return ChunkMediaSpec(
            chunk=state.chunk,
            chunks=len(state.plan),
            first_frame=state.lead_frames + first,
            frames=count,
            latent_frames=chunk.frames,
            fps=state.fps,
        )

    # -- output ------------------------------------------------------------------------------------

    def post_latents(self, state: SkyReelsRequest, /) -> Latents:
        """The video's latents, undecoded (`components.step.SupportsLatentOutput`)."""
        value = state.video_latents
        if value is None or not state.done:
            raise RuntimeError("the render has not finished its chunks")
        state.video_latents = state.latents = state.generator = state.sampler_noise = None
        state.walk = None
        state.positive = state.negative = state.condition = None
        return Latents(value, tuple(value.shape))

    def _decode_kept(self, state: SkyReelsRequest, chunk: Chunk) -> None:
        """Decode the frames `chunk` adds to the video (the decoder's cache kept for the next
        chunk's), into the video's frames, handing them to `on_chunk` as they decode."""
        video = cast(torch.Tensor, state.video_latents)
        self._decode(state, video[:, :, chunk.first : chunk.first + chunk.kept])

    def _decode(self, state: SkyReelsRequest, latents: torch.Tensor) -> None:
        if state.decode is None:
            state.decode = DecodeSession(self.vae)
        session = cast(DecodeSession, state.decode)
        for piece in session.decode(Latents(latents, tuple(latents.shape))):
            pixels = to_pixels(piece, self.vae.chunk_value_range)
            if state.video is None:
                self._start_video(state, pixels.shape[1:])
            video = cast(Frames, state.video)
            done, count = state.decoded_frames, pixels.shape[0]
            video[done : done + count] = pixels
            state.decoded_frames += count
            if state.on_chunk is not None:
                state.on_chunk(done, video[done : done + count], len(video))

    def _start_video(self, state: SkyReelsRequest, frame_shape: tuple[int, ...]) -> None:
        """The video's frames, the extended video's first (handed to `on_chunk` at once)."""
        total = state.lead_frames + state.frames
        state.video = video = np.empty((total, *frame_shape), dtype=np.uint8)
        if state.lead is not None:
            lead = cast(Frames, state.lead)
            video[: len(lead)] = lead
            state.decoded_frames = len(lead)
            state.lead = None
            if state.on_chunk is not None:
                state.on_chunk(0, video[: len(lead)], total)

    def post_decode(self, state: SkyReelsRequest, /) -> Video:
        """The video: the frames not decoded yet (all of them, or the last chunk's where each
        chunk was decoded as it finished), after those that were."""
        session = cast(DecodeSession | None, state.decode)
        done = 0 if session is None else session.decoded
        latents = cast(torch.Tensor, self.post_latents(state).value)
        self._decode(state, latents[:, :, done:])
        video, count = state.video, state.decoded_frames
        total = state.lead_frames + state.frames
        state.video = state.decode = state.extend = None
        if video is None or count != total:
            raise RuntimeError(f"the video has {count} frames of {total}")
        return Video(cast(Frames, video), state.fps, state.format)
