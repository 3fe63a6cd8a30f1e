"""LTX-2 as a step pipeline (spec 003): the arithmetic of diffusers' `LTX2Pipeline`, per request.

`prepare_encode` encodes the prompts (Gemma 3: every layer's hidden states, left-padded, then the
text connectors: one context for the video stream, one for the soundtrack), draws the video noise
and then the audio noise from the request's seed (diffusers' order), and gives the request its
own schedules (one per stream, shifted by the video's token count: the sigma library's sampler
and sigma schedule the request names; euler on `simple` is diffusers' own arithmetic);
`denoise_step` runs one transformer forward over a batch of requests of one video shape (their
positives, then the negatives of those that guide), both streams at once, and guides each stream
as diffusers does (on the x0 estimates; `guidance` the video's, `audio_guidance` the
soundtrack's); `step_scheduler` advances both streams of one request (a two-call sampler such as
heun makes more model calls than steps: `step_count`); `post_decode` decodes the video (the
LTX-2 video VAE) and the soundtrack (the audio VAE's mel spectrogram, then the vocoder) into one
`Video` with its `Audio`.

Image to video (`LTX2ImageToVideoPipeline`): the image, re-compressed as H.264 at the model's
conditioning CRF (diffusers' `apply_image_conditioning_crf`: 33 for LTX-2.0 to 2.3's Gemma 3)
and stretched to width x height (bilinear), is encoded as the first latent frame, which stays
clean: its tokens see timestep 0 and the scheduler never moves them. Text and image requests of
one shape share a forward (every row then takes per-token timesteps).

LTX-2.5 (`ltx25.py`): the same, but for its video decoder, a diffusion model of its own
(`ltx25_decode.py`), which draws its noise from the request's generator after the latents'.

Not run here (diffusers' further guidance terms, off in this node): spatio-temporal guidance,
modality-isolation guidance and guidance rescale.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from inline_core.components.interfaces import Latents
from inline_core.diffusion.adapters.bank import AdapterBank, Fetch
from inline_core.diffusion.adapters.fusing import CopyStore
from inline_core.diffusion.flow.samplers import numpy_flow_spacing
from inline_core.diffusion.flow.schedule import FlowMatchSchedule, flow_x0
from inline_core.diffusion.libs import module
from inline_core.diffusion.placement import (
    OffloadSwap,
    PlacementLike,
    home_device,
    torch_dtype,
)
from inline_core.diffusion.stepcache import rows as step_rows
from inline_core.diffusion.stepcache.backend import StepCacheBackend, cached_forward
from inline_core.diffusion.vae.pixels import gather_chunks
from inline_core.families.ltx2.decode import ChunkedVideoDecode
from inline_core.families.ltx2.family import PREVIEW_LATENTS
from inline_core.families.ltx2.lora import read_lora
from inline_core.families.ltx2.ltx25_decode import DiffusionVideoDecode, load_decoder
from inline_core.families.ltx2.request import LTX2Request, new_request
from inline_core.families.ltx2.upsampler_load import load_upsampler
from inline_core.runtime.video import Audio, Video


@dataclass(frozen=True)
class Prompt:
    """One prompt through the text encoder and the connectors: each stream's context and mask."""

    video: torch.Tensor  # (1, tokens, width)
    audio: torch.Tensor
    mask: torch.Tensor  # (1, tokens)


@dataclass(frozen=True)
class Factors:
    """How the video and audio VAEs compress, read from the loaded models."""

    spatial: int
    temporal: int
    audio_per_second: float  # latent audio frames a second
    mel_bins: int  # latent mel bins
    audio_channels: int


class LTX2StepPipeline:
    """Drives one loaded LTX-2 stack, prompt to video with sound. Requests of the same pipeline
    and video shape share a forward."""

    _dit_modules = ["transformer"]
    _encoder_modules = ["text_encoder", "connectors"]
    _vae_modules = ["vae", "audio_vae", "vocoder"]
    _resident_modules: list[str] = []

    def __init__(
        self,
        *,
        text_encoder: nn.Module,
        tokenizer: Any,
        connectors: nn.Module,
        transformer: nn.Module,
        vae: nn.Module,
        audio_vae: nn.Module,
        vocoder: nn.Module,
        placement: PlacementLike,
        encoder_placement: PlacementLike,
        vae_placement: PlacementLike,
        swap: OffloadSwap,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
        adapter_cache: Fetch | None = None,
        fused_copies: CopyStore | None = None,
    ) -> None:
        self.text_encoder = text_encoder
        self.tokenizer = tokenizer
        self.connectors = connectors
        self.transformer = transformer
        self.vae = vae
        self.audio_vae = audio_vae
        self.vocoder = vocoder
        # The two-stage path's latent upsamplers, by folder, loaded on first use.
        self.upsamplers: dict[str, nn.Module] = {}
        self.decoders: dict[str, nn.Module] = {}  # LTX-2.5's diffusion decoders, likewise
        self.placement = placement
        self.encoder_placement = encoder_placement
        self.vae_placement = vae_placement
        self.swap = swap
        self.device = torch.device(placement.device)
        self.dtype = torch_dtype(placement.dtype)
        self.scheduler_config = dict(scheduler_config)
        self.model_key = model_key
        self.factors = factors_of(vae, audio_vae)
        self.video_decode = ChunkedVideoDecode(vae)  # temporal chunks, each as it decodes
        model = cast(Any, transformer)
        # LTX-2.3's cross-attention modulation reads the other stream's sigma (diffusers'
        # `use_cross_timestep`: on for 2.3 and later, off for 2.0's models).
        self.cross_timestep = bool(getattr(model, "prompt_modulation", False))
        # Each request's LoRA stack, added to its own rows of every forward (negatives too).
        self.adapters = AdapterBank.placed(
            transformer, read_lora, placement, adapter_cache, model_key, fused_copies
        )
        self.step_cache: StepCacheBackend | None = None  # adopted by engine/assemble.py

    @property
    def latent_channels(self) -> int:
        return int(cast(Any, self.transformer).config.in_channels)

    def adopt_cache_dit_backend(self, backend: StepCacheBackend, /) -> None:
        """The per-request step cache on its transformer (components.step): each row of a
        forward caches with its request's settings, its LoRAs kept on a sub-batch's rows."""
        backend.add_row_scope(self.adapters.rows)
        self.step_cache = backend

    def split_by(self, engine: str, degrees: Mapping[str, int], /) -> None:
        """Under cache-dit's context parallelism (components.step.SupportsSplitNotice): its
        LTX2 plan replaces the attention processor class's call with one that reads the
        processor's `_cp_config`, but cache-dit 1.5 hands that only to the attention classes it
        knows, and LTX-2's are not among them: the transformer's get its config here, and the
        text connectors' (the same class, never split) none. Without it the first prompt or
        forward fails."""
        if engine != "cache-dit":
            return
        config = getattr(self.transformer, "_cp_config", None)
        for model, given in ((self.transformer, config), (self.connectors, None)):
            for layer in model.modules():
                processor = getattr(layer, "processor", None)
                if processor is not None and getattr(processor, "_cp_config", None) is None:
                    processor._cp_config = given

    def request(self, **kwargs: Any) -> LTX2Request:
        kwargs.setdefault("spatial_factor", self.factors.spatial)
        kwargs.setdefault("temporal_factor", self.factors.temporal)
        kwargs.setdefault("max_prompt_tokens", int(self.tokenizer.model_max_length))
        return new_request(self.model_key, **kwargs)

    # -- prompts -----------------------------------------------------------------------------------

    def encode(self, prompt: str, tokens: int) -> Prompt:
        """Gemma's hidden states of every layer, stacked as diffusers stacks them, through the
        connectors (left padding, as LTX2Pipeline pads)."""
        tokenizer = self.tokenizer
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        text = tokenizer(
            [prompt.strip()],
            padding="max_length",
            max_length=tokens,
            truncation=True,
            add_special_tokens=True,
            return_tensors="pt",
        )
        device = torch.device(self.encoder_placement.device)
        ids = text.input_ids.to(device)
        mask = text.attention_mask.to(device)
        with self.swap.use(self.text_encoder, self.encoder_placement):
            out = self.text_encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            states = torch.stack(out.hidden_states, dim=-1).flatten(2, 3)
        with self.swap.use(self.connectors, self.encoder_placement):
            video, audio, connector_mask = self.connectors(
                states.to(torch_dtype(self.encoder_placement.dtype)), mask, padding_side="left"
            )
        return Prompt(video.to(self.device), audio.to(self.device), connector_mask.to(self.device))

    # -- step protocol ---------------------------------------------------------------------------

    def prepare_encode(self, state: LTX2Request, /) -> LTX2Request:
        with torch.inference_mode():
            # The LoRA files load here, off the step loop, and a bad one fails this request alone.
            self.adapters.check(state.loras)
            if state.positive is None:
                state.positive = self.encode(state.prompt, state.max_prompt_tokens)
            if state.cfg and state.negative is None:
                state.negative = self.encode(state.negative_prompt, state.max_prompt_tokens)
            f, h, w = state.latent_shape
            generator = torch.Generator("cpu").manual_seed(state.seed)
            video = torch.randn(
                (1, self.latent_channels, f, h, w), generator=generator, dtype=torch.float32
            )
            if state.image is not None:
                state.condition = self.first_frame(state)
                video[:, :, :1] = state.condition
            state.latents = pack_video(video).to(self.device)
            state.audio_frames = round(state.frames / state.fps * self.factors.audio_per_second)
            audio = torch.randn(
                (1, self.factors.audio_channels, state.audio_frames, self.factors.mel_bins),
                generator=generator,
                dtype=torch.float32,
            )
            state.audio_latents = pack_audio(audio).to(self.device)
            if state.diffusion_decoder:  # LTX-2.5's decoder draws next (ltx25_decode.py)
                state.decode_noise = generator.get_state()
            tokens = int(state.latents.shape[1])
            state.schedule = self.new_schedule(state, tokens, 0)
            state.audio_schedule = self.new_schedule(state, tokens, 1)
            state.cache = step_rows.request_cache(state.step_cache)
            state.prepared = True
        return state

    def first_frame(self, state: LTX2Request) -> torch.Tensor:
        """The image's latent frame, normalized: (1, C, 1, H, W) on the CPU, float32."""
        ltx2 = module("diffusers.pipelines.ltx2.utils")
        crf = int(ltx2.resolve_default_image_crf(self.text_encoder))
        image = state.image.convert("RGB")
        if crf:
            image = module("PIL.Image").fromarray(
                ltx2.apply_image_conditioning_crf(np.asarray(image), crf)
            )
        processor = module("diffusers.video_processor").VideoProcessor(
            vae_scale_factor=self.factors.spatial, resample="bilinear"
        )
        _f, h, w = state.latent_shape  # with `upscale`, the first pass's half size
        size = {"height": h * self.factors.spatial, "width": w * self.factors.spatial}
        pixels = processor.preprocess(image, **size)
        vae = cast(Any, self.vae)
        dtype = torch_dtype(self.vae_placement.dtype)
        with self.swap.use(self.vae, self.vae_placement):
            encoded = vae.encode(pixels.unsqueeze(2).to(self.vae_placement.device, dtype))
        latents = encoded.latent_dist.mode().float().cpu()
        mean = vae.latents_mean.view(1, -1, 1, 1, 1).to(latents.dtype).cpu()
        std = vae.latents_std.view(1, -1, 1, 1, 1).to(latents.dtype).cpu()
        return (latents - mean) / std

    def new_schedule(self, state: LTX2Request, tokens: int, row: int) -> FlowMatchSchedule:
        """One stream's schedule: the request's sampler and sigma schedule on the model's flow
        table, shifted by the video's token count (`simple`: LTX2Pipeline's own sigmas). `row`
        keeps the two streams' sampler noise apart (an ancestral or SDE sampler's)."""
        if state.first_sigmas:
            return self.given_schedule(state, state.first_sigmas, state.sampler, tokens, row)
        config = self.scheduler_config
        return FlowMatchSchedule.create(
            config,
            state.steps,
            tokens,
            self.device,
            sampler=state.sampler,
            schedule=state.sigma_schedule,
            model_time=_raw_time,
            spacing=numpy_flow_spacing,
            seed=state.seed,
            row=row,
            mu=token_shift(tokens, config),
        )

    def denoise_step(
        self, states: Sequence[LTX2Request], /
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        with torch.inference_mode():
            rows = [(s, cast(Prompt, s.positive)) for s in states]
            rows += [(s, cast(Prompt, s.negative)) for s in states if s.cfg]
            caches = [step_rows.branch_row(s.cache, "positive") for s in states]
            caches += [step_rows.branch_row(s.cache, "negative") for s in states if s.cfg]
            video, audio = self._forward(rows, caches)
            negatives = iter(range(len(states), len(rows)))
            preds: list[tuple[torch.Tensor, torch.Tensor]] = []
            for i, s in enumerate(states):
                j = next(negatives) if s.cfg else None
                sigma = _schedule(s).levels[s.schedule_index]
                v = guided(video, i, j, s.video_scale, s.latents, sigma)
                a = guided(audio, i, j, s.audio_scale, s.audio_latents, sigma)
                preds.append((v, a))
                # A CFG++ sampler steps each stream along its own unconditional output too.
                s.uncond = None
                if s.cfg_pp and j is not None:
                    s.uncond = (video[j : j + 1].float(), audio[j : j + 1].float())
            return preds

    def _forward(
        self,
        rows: list[tuple[LTX2Request, Prompt]],
        caches: Sequence[step_rows.RowCache | None],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        first = rows[0][0]
        f, h, w = first.latent_shape
        model = cast(Any, self.transformer)
        count = len(rows)
        hidden = torch.cat([cast(torch.Tensor, s.latents) for s, _p in rows]).to(self.dtype)
        audio = torch.cat([cast(torch.Tensor, s.audio_latents) for s, _p in rows]).to(self.dtype)
        timestep = torch.cat([_timestep(s) for s, _p in rows])
        video_timestep = timestep
        if any(s.condition is not None for s, _p in rows):  # a first frame's tokens at 0
            video_timestep = torch.cat([self._token_timesteps(s) for s, _p in rows])
        video_coords = model.rope.prepare_video_coords(count, f, h, w, self.device, fps=first.fps)
        audio_coords = model.audio_rope.prepare_audio_coords(count, first.audio_frames, self.device)
        mask = torch.cat([p.mask for _s, p in rows])
        stacks = [s.loras for s, _p in rows]
        cached = cached_forward(self.step_cache, self.transformer, caches)
        with self.swap.use(self.transformer, self.placement), self.adapters.forward(stacks), cached:
            out = model(
                hidden_states=hidden,
                audio_hidden_states=audio,
                encoder_hidden_states=torch.cat([p.video for _s, p in rows]).to(self.dtype),
                audio_encoder_hidden_states=torch.cat([p.audio for _s, p in rows]).to(self.dtype),
                timestep=video_timestep,
                audio_timestep=timestep,
                sigma=timestep,
                encoder_attention_mask=mask,
                audio_encoder_attention_mask=mask,
                num_frames=f,
                height=h,
                width=w,
                fps=float(first.fps),
                audio_num_frames=first.audio_frames,
                video_coords=video_coords,
                audio_coords=audio_coords,
                isolate_modalities=False,
                spatio_temporal_guidance_blocks=None,
                perturbation_mask=None,
                use_cross_timestep=self.cross_timestep,
                return_dict=False,
            )
        return cast(torch.Tensor, out[0]), cast(torch.Tensor, out[1])

    def _token_timesteps(self, state: LTX2Request) -> torch.Tensor:
        """(1, tokens): the step's timestep, 0 on a first frame given as an image."""
        f, h, w = state.latent_shape
        t = _timestep(state).view(1, 1).expand(1, f * h * w).clone()
        if state.condition is not None:
            t[:, : h * w] = 0
        return t

    def step_scheduler(self, state: LTX2Request, noise_pred: Any, /) -> None:
        video, audio = cast(tuple[torch.Tensor, torch.Tensor], noise_pred)
        index = state.schedule_index
        uncond = cast(tuple[Any, Any], state.uncond or (None, None))
        state.uncond = None
        with torch.inference_mode():
            latents = cast(torch.Tensor, state.latents)
            stepped = _advance(_schedule(state), index, video, latents, uncond[0])
            if state.condition is not None:  # the image's frame stays as it was
                _f, h, w = state.latent_shape
                stepped[:, : h * w] = latents[:, : h * w]
            state.latents = stepped
            audio_latents = cast(torch.Tensor, state.audio_latents)
            state.audio_latents = _advance(
                state.audio_schedule, index, audio, audio_latents, uncond[1]
            )
        state.step_index += 1
        if state.upscale and not state.refining and state.step_index == state.first_pass_steps:
            self.refine(state)

    # -- the two-stage path -------------------------------------------------------------------

    def refine(self, state: LTX2Request) -> None:
        """After the first pass, as diffusers' `LTX2LatentUpsamplePipeline` and a second
        `LTX2Pipeline` call: the video's latents, denormalized, through the latent upsampler
        (twice the width and height) and normalized again; both streams then noised back to the
        refining pass's first sigma with fresh noise from the request's seed (the video's drawn
        first, each in its packed shape) and stepped through its sigmas, unshifted, with its
        guidance and its LoRAs (the distilled LoRA) on the request's rows. LTX-2.5's diffusion
        decoder draws its noise next from that generator."""
        upsampler_module = self.upsampler_at(state.upsampler)
        vae = cast(Any, self.vae)
        f, h, w = state.latent_shape
        with torch.inference_mode():
            video = unpack_video(cast(torch.Tensor, state.latents), f, h, w).float()
            mean = vae.latents_mean.view(1, -1, 1, 1, 1).to(video.device, video.dtype)
            std = vae.latents_std.view(1, -1, 1, 1, 1).to(video.device, video.dtype)
            scale = float(vae.config.scaling_factor)
            upsampler = cast(Any, upsampler_module)
            dtype = torch_dtype(self.vae_placement.dtype)
            with self.swap.use(upsampler_module, self.vae_placement):
                raw = (video * std / scale + mean).to(self.vae_placement.device, dtype)
                larger = cast(torch.Tensor, upsampler(raw)).float().to(video.device)
            state.refining, state.refine_start = True, state.step_index
            larger = (larger - mean) * scale / std
            generator = torch.Generator("cpu").manual_seed(state.seed)
            sigma = float(state.refine_sigmas[0])
            state.latents = self.renoised(state, larger, sigma, generator).to(self.device)
            audio = cast(torch.Tensor, state.audio_latents)
            audio_noise = torch.randn(tuple(audio.shape), generator=generator, dtype=torch.float32)
            state.audio_latents = sigma * audio_noise.to(audio.device) + (1 - sigma) * audio
            if state.diffusion_decoder:  # LTX-2.5's decoder draws next, from this generator
                state.decode_noise = generator.get_state()
            tokens = int(state.latents.shape[1])
            state.schedule = self.refine_schedule(state, tokens, 0)
            state.audio_schedule = self.refine_schedule(state, tokens, 1)
            state.loras = state.refine_loras
            self.adapters.check(state.loras)
            if state.cfg and state.negative is None:
                state.negative = self.encode(state.negative_prompt, state.max_prompt_tokens)
            step_rows.release(state.cache)  # residuals of the first pass's shape
            state.cache = step_rows.request_cache(state.step_cache)

    def renoised(
        self, state: LTX2Request, larger: torch.Tensor, sigma: float, generator: torch.Generator
    ) -> torch.Tensor:
        """The upsampled latents (B, C, F, H, W), packed and noised to `sigma`: text to video
        as `LTX2Pipeline` draws it (in the packed shape); image to video as
        `LTX2ImageToVideoPipeline` does (in the unpacked shape), its upsampled first frame kept
        clean as the refining pass's condition."""
        if state.condition is None:
            latents = pack_video(larger)
            noise = torch.randn(tuple(latents.shape), generator=generator, dtype=torch.float32)
            return sigma * noise.to(latents.device) + (1 - sigma) * latents
        noise = torch.randn(tuple(larger.shape), generator=generator, dtype=torch.float32)
        level = torch.full((1, 1, larger.shape[2], 1, 1), sigma, dtype=larger.dtype)
        level[:, :, :1] = 0.0
        level = level.to(larger.device)
        state.condition = larger[:, :, :1].cpu()
        return pack_video(level * noise.to(larger.device) + (1 - level) * larger)

    def upsampler_at(self, where: str) -> nn.Module:
        """The latent upsampler at `where` (a diffusers folder or Lightricks' file), loaded
        once, kept with the VAEs."""
        found = self.upsamplers.get(where)
        if found is None:
            dtype = torch_dtype(self.vae_placement.storage or self.vae_placement.dtype)
            loaded = load_upsampler(Path(where), dtype)
            found = loaded.to(home_device(self.vae_placement)).eval()
            self.upsamplers[where] = found
        return found

    def decoder_at(self, where: str) -> nn.Module:
        """LTX-2.5's diffusion decoder in folder `where`, loaded once, kept with the VAEs."""
        found = self.decoders.get(where)
        if found is None:
            dtype = torch_dtype(self.vae_placement.storage or self.vae_placement.dtype)
            found = load_decoder(Path(where), dtype).to(home_device(self.vae_placement))
            self.decoders[where] = found
        return found

    def refine_schedule(self, state: LTX2Request, tokens: int, row: int) -> FlowMatchSchedule:
        sampler = state.refine_sampler or state.sampler
        return self.given_schedule(state, state.refine_sigmas, sampler, tokens, row)

    def given_schedule(
        self, state: LTX2Request, sigmas: Sequence[float], sampler: str, tokens: int, row: int
    ) -> FlowMatchSchedule:
        """Sigmas as given (the refining pass's, or the node's `sigmas`): the model's scheduler
        without its shift."""
        config = {**self.scheduler_config, "use_dynamic_shifting": False, "shift_terminal": None}
        return FlowMatchSchedule.create(
            config,
            len(sigmas),
            tokens,
            self.device,
            sampler=sampler,
            model_time=_raw_time,
            spacing=lambda _steps: list(sigmas),
            seed=state.seed,
            row=row,
            mu=token_shift(tokens, config),
        )

    # -- previews (components.step.SupportsPreview) ------------------------------------------------

    def preview_format(self, state: LTX2Request, /) -> str:
        return PREVIEW_LATENTS

    def preview_latents(self, state: LTX2Request, noise_pred: Any, /) -> torch.Tensor:
        """The video's x0 estimate at the level the model saw (held on the host: no sync), a
        new (1, C, F, H, W) tensor; the soundtrack is not previewed. On image to video the first
        latent frame is the image itself, so the estimate starts at the first frame the model
        makes."""
        video = cast(tuple[torch.Tensor, torch.Tensor], noise_pred)[0]
        sigma = float(_schedule(state).levels[state.schedule_index])
        with torch.inference_mode():
            x0 = flow_x0(cast(torch.Tensor, state.latents), sigma, video)
            f, h, w = state.latent_shape
            frames = unpack_video(x0, f, h, w)
            if state.condition is not None and f > 1:
                return frames[:, :, 1:]
            return frames

    # -- decode ------------------------------------------------------------------------------------

    def post_latents(self, state: LTX2Request, /) -> tuple[torch.Tensor, torch.Tensor]:
        """The final latents, unpacked and denormalized: the video's (1, C, F, H, W), the
        soundtrack's (1, C, L, M)."""
        if state.latents is None or state.audio_latents is None:
            raise RuntimeError("prepare_encode has not run for this request")
        f, h, w = state.latent_shape
        vae, audio_vae = cast(Any, self.vae), cast(Any, self.audio_vae)
        video = unpack_video(state.latents, f, h, w)
        mean = vae.latents_mean.view(1, -1, 1, 1, 1).to(video.device, video.dtype)
        std = vae.latents_std.view(1, -1, 1, 1, 1).to(video.device, video.dtype)
        video = video * std / float(vae.config.scaling_factor) + mean
        audio_mean = audio_vae.latents_mean.to(state.audio_latents.device)
        audio_std = audio_vae.latents_std.to(state.audio_latents.device)
        audio = state.audio_latents * audio_std.to(state.audio_latents.dtype) + audio_mean.to(
            state.audio_latents.dtype
        )
        audio = unpack_audio(audio, self.factors.mel_bins)
        state.latents = state.audio_latents = state.positive = state.negative = None
        state.condition = state.image = None
        state.schedule = state.audio_schedule = state.uncond = None
        step_rows.release(state.cache)
        return video, audio

    def post_decode(self, state: LTX2Request, /) -> Video:
        """The video and its soundtrack. The sound decodes first (the audio VAE and the vocoder
        are small), so a stream carries it from the video's first chunk (`on_audio`); then the
        video, chunk by chunk (`decode.py`), into one array of the render's frames, each
        chunk's handed to `on_chunk` as a view of it as it is decoded."""
        video_latents, audio_latents = self.post_latents(state)
        dtype = torch_dtype(self.vae_placement.dtype)
        device = self.vae_placement.device
        with torch.inference_mode():
            with self.swap.use(self.audio_vae, self.vae_placement):
                mel = cast(Any, self.audio_vae).decode(
                    audio_latents.to(device, dtype), return_dict=False
                )[0]
            with self.swap.use(self.vocoder, self.vae_placement):
                wave = cast(torch.Tensor, self.vocoder(mel))
            rate = int(cast(Any, self.vocoder).config.output_sampling_rate)
            audio = Audio(wave[0].float().cpu().numpy(), rate)
            if state.on_audio is not None:
                state.on_audio(audio)
            decode: ChunkedVideoDecode | DiffusionVideoDecode = self.video_decode
            decoder = self.vae
            if state.diffusion_decoder:
                decoder = self.decoder_at(state.diffusion_decoder)
                decode = DiffusionVideoDecode(decoder, state.decode_noise)
            with self.swap.use(decoder, self.vae_placement):
                chunks = decode.decode_chunks(video_latents.to(device, dtype))
                frames = gather_chunks(
                    chunks, state.frames, decode.chunk_value_range, state.on_chunk
                )
        return Video(frames, state.fps, state.format, audio=audio)


def factors_of(vae: nn.Module, audio_vae: nn.Module) -> Factors:
    video, audio = cast(Any, vae), cast(Any, audio_vae)
    config = audio.config
    per_second = (
        config.sample_rate / config.mel_hop_length / float(audio.temporal_compression_ratio)
    )
    return Factors(
        spatial=int(video.spatial_compression_ratio),
        temporal=int(video.temporal_compression_ratio),
        audio_per_second=float(per_second),
        mel_bins=int(config.mel_bins) // int(audio.mel_compression_ratio),
        audio_channels=int(config.latent_channels),
    )


def token_shift(tokens: int, config: Mapping[str, Any]) -> float:
    """The schedule's shift `mu` for a video of `tokens` tokens (diffusers' `calculate_shift`)."""
    base_len = float(config.get("base_image_seq_len", 1024))
    max_len = float(config.get("max_image_seq_len", 4096))
    base, top = float(config.get("base_shift", 0.95)), float(config.get("max_shift", 2.05))
    slope = (top - base) / (max_len - base_len)
    return tokens * slope + (base - slope * base_len)


def guided(
    out: torch.Tensor,
    row: int,
    negative_row: int | None,
    scale: float,
    latents: Any,
    sigma: torch.Tensor,
) -> torch.Tensor:
    """One stream's velocity for the sampler, guided as LTX2Pipeline guides it: on the x0
    estimates (classifier-free guidance where the request has a negative row), then back to a
    velocity; the same round trip without guidance, as diffusers makes it either way."""
    x = cast(torch.Tensor, latents)
    sigma = sigma.to(x.device)
    x0 = x - out[row : row + 1].float() * sigma
    if negative_row is not None:
        x0_negative = x - out[negative_row : negative_row + 1].float() * sigma
        x0 = x0 + (scale - 1) * (x0 - x0_negative)
    return (x - x0) / sigma


def pack_video(latents: torch.Tensor) -> torch.Tensor:
    """(B, C, F, H, W) -> (B, F*H*W, C): one token per latent pixel (patch size 1)."""
    return latents.flatten(2).transpose(1, 2)


def unpack_video(tokens: torch.Tensor, f: int, h: int, w: int) -> torch.Tensor:
    return tokens.transpose(1, 2).reshape(tokens.shape[0], -1, f, h, w)


def pack_audio(latents: torch.Tensor) -> torch.Tensor:
    """(B, C, L, M) -> (B, L, C*M): one token per latent audio frame."""
    return latents.transpose(1, 2).flatten(2, 3)


def unpack_audio(tokens: torch.Tensor, mel_bins: int) -> torch.Tensor:
    batch, length = tokens.shape[0], tokens.shape[1]
    return tokens.reshape(batch, length, -1, mel_bins).transpose(1, 2)


def _raw_time(timesteps: torch.Tensor) -> torch.Tensor:
    """LTX-2's transformer takes the scheduler's timestep as it is (sigma x 1000)."""
    return timesteps


def _schedule(state: LTX2Request) -> FlowMatchSchedule:
    if state.schedule is None:
        raise RuntimeError("prepare_encode has not run for this request")
    return cast(FlowMatchSchedule, state.schedule)


def _timestep(state: LTX2Request) -> torch.Tensor:
    """(1,): the model's timestep at the request's current call."""
    return _schedule(state).model_timestep(state.schedule_index)


def _advance(
    schedule: FlowMatchSchedule,
    index: int,
    velocity: torch.Tensor,
    latents: torch.Tensor,
    uncond: torch.Tensor | None = None,
) -> torch.Tensor:
    """`uncond`: the stream's unconditional output, which a CFG++ sampler steps along."""
    shape = tuple(latents.shape)
    stepped = schedule.step(index, velocity, Latents(latents, shape), uncond)
    return cast(torch.Tensor, stepped.value)
